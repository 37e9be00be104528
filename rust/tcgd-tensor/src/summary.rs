//! Native summaries of a tensor's raw host bytes.

use rayon::prelude::*;
use serde::Serialize;

use crate::decode::{check_whole, decode_complex_exact, decode_real_exact, SummaryError};
use crate::dtype::DType;
use crate::json::{float, opt_float};
use crate::moments::Moments;

/// Counts, extremes and moments of one tensor; see [`summarize`] for the exact
/// semantics of each field.
///
/// In JSON (reports, `to_json`) the infinity counts are named `posinf` and `neginf`, and
/// non-finite floats are strings ([`crate::json`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TensorSummary {
    pub numel: u64,
    pub finite: u64,
    pub nan: u64,
    #[serde(rename = "posinf")]
    pub pos_inf: u64,
    #[serde(rename = "neginf")]
    pub neg_inf: u64,
    pub zero: u64,
    #[serde(serialize_with = "opt_float")]
    pub min: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub max: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub mean: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub std: Option<f64>,
    #[serde(serialize_with = "float")]
    pub l2: f64,
}

/// How a tensor's elements split: each is counted in exactly one of `finite`, `nan`,
/// `pos_inf`, `neg_inf`; `zero` overlaps `finite`.
///
/// `repr(C)` in the order of the counts of the summary kernels' `Record` (tcgd-cuda's
/// `DeviceRecord`), which embeds this type.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ElementCounts {
    pub numel: u64,
    pub nan: u64,
    pub pos_inf: u64,
    pub neg_inf: u64,
    pub zero: u64,
    pub finite: u64,
}

impl ElementCounts {
    fn merge(self, o: ElementCounts) -> ElementCounts {
        ElementCounts {
            numel: self.numel + o.numel,
            nan: self.nan + o.nan,
            pos_inf: self.pos_inf + o.pos_inf,
            neg_inf: self.neg_inf + o.neg_inf,
            zero: self.zero + o.zero,
            finite: self.finite + o.finite,
        }
    }
}

impl TensorSummary {
    /// A summary from its element counts and what was accumulated over the finite
    /// elements. `min` and `max` are kept only when some element is finite: otherwise
    /// they are an accumulator's starting values, not data.
    pub fn from_parts(
        counts: ElementCounts,
        min: f64,
        max: f64,
        mean: Option<f64>,
        std: Option<f64>,
        l2: f64,
    ) -> TensorSummary {
        let any = counts.finite > 0;
        TensorSummary {
            numel: counts.numel,
            finite: counts.finite,
            nan: counts.nan,
            pos_inf: counts.pos_inf,
            neg_inf: counts.neg_inf,
            zero: counts.zero,
            min: any.then_some(min),
            max: any.then_some(max),
            mean,
            std,
            l2,
        }
    }
}

/// Elements decoded and reduced at a time: the two-pass moments re-read a block,
/// so it must stay in L1 cache.
const BLOCK: usize = 512;
/// Inputs up to this many elements are summarised on the calling thread; below it
/// rayon's scheduling costs more than it saves.
const PARALLEL_THRESHOLD: usize = 1 << 20;
/// Elements per rayon task for larger inputs.
const PARALLEL_CHUNK: usize = 1 << 18;

/// Summarises a contiguous, row-major tensor given as little-endian host bytes.
///
/// # Semantics
/// - `numel` is `bytes.len() / dtype.itemsize()`. Every element is counted in exactly
///   one of `finite`, `nan`, `pos_inf`, `neg_inf`; `zero` counts the elements equal
///   to zero (`+0.0` and `-0.0` alike) and overlaps `finite`.
/// - Elements are decoded exactly to `f64` (see [`crate::decode`]) and everything is
///   accumulated in `f64`. Integers and `bool` (0 or 1) are always finite; `int64`
///   and `uint64` beyond 2^53 round to the nearest `f64` first.
/// - `min`, `max`, `mean` and `std` cover the finite elements only: NaN and ±inf
///   are counted but excluded. They are `None` when no element is finite. `std` is
///   the population standard deviation (divides by n, i.e. `unbiased=False`).
/// - `l2` is `sqrt(sum of squares)` over the finite elements, 0.0 when there is none.
/// - Complex dtypes are summarised by magnitude `|z| = hypot(re, im)`. An element is
///   `nan` when either part is NaN, else `pos_inf` when either part is infinite
///   (`neg_inf` is always 0), else finite; `zero` when both parts are zero.
///   `min`/`max`/`mean`/`std` are over `|z|` of finite elements, and `l2` is
///   `sqrt(sum |z|^2)`, matching `torch.linalg.vector_norm`. `|z|` of a finite
///   element may exceed `f64::MAX`, in which case `max` is +inf.
/// - Empty input gives `numel` 0, all counts 0, `min`/`max`/`mean`/`std` `None`
///   and `l2` 0.0.
///
/// # Accuracy
/// Blocks of elements are reduced two-pass (mean first, then squared deviations)
/// and blocks are combined with Chan et al.'s pairwise update, never through a
/// running sum of squares. All three moments are carried relative to a
/// power-of-two scale, as LAPACK's `nrm2` does for the norm, so values near
/// `f64::MAX` do not overflow and subnormal values do not underflow. For float64
/// input the results agree with a careful two-pass computation to about 1e-12
/// relative (to `max|x|` where the mean cancels to near zero).
///
/// # Performance
/// Inputs above 2^20 elements are split into chunks summarised in parallel on the
/// rayon pool. Chunk partials are merged in input order, so the result does not
/// depend on the number of threads. Nothing is allocated per element.
///
/// # Errors
/// [`SummaryError::RaggedBytes`] when `bytes.len()` is not a multiple of the
/// itemsize.
pub fn summarize(dtype: DType, bytes: &[u8]) -> Result<TensorSummary, SummaryError> {
    check_whole(dtype, bytes)?;
    let partial = if bytes.len() / dtype.itemsize() > PARALLEL_THRESHOLD {
        summarize_chunked(dtype, bytes, PARALLEL_CHUNK)
    } else {
        summarize_serial(dtype, bytes)
    };
    Ok(partial.finish())
}

fn summarize_chunked(dtype: DType, bytes: &[u8], chunk_elems: usize) -> Partial {
    // Collected, not reduced by rayon, so the merge order is fixed by the input
    // rather than by how work happened to be stolen.
    let partials: Vec<Partial> = bytes
        .par_chunks(chunk_elems * dtype.itemsize())
        .map(|chunk| summarize_serial(dtype, chunk))
        .collect();
    partials
        .into_iter()
        .fold(Partial::default(), Partial::merge)
}

fn summarize_serial(dtype: DType, bytes: &[u8]) -> Partial {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { summarize_serial_avx2(dtype, bytes) };
    }
    summarize_serial_portable(dtype, bytes)
}

/// The same code compiled for AVX2: the lane loops of the block passes become 4-wide.
/// Only the vector width changes (the compiler fuses no multiply-add by itself), so the
/// sums are the same, operation for operation, as the portable build's.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn summarize_serial_avx2(dtype: DType, bytes: &[u8]) -> Partial {
    summarize_serial_portable(dtype, bytes)
}

#[inline(always)]
fn summarize_serial_portable(dtype: DType, bytes: &[u8]) -> Partial {
    let itemsize = dtype.itemsize();
    let mut acc = Partial::default();
    let mut values = [0.0f64; BLOCK];
    if dtype.is_complex() {
        let mut pairs = [(0.0f64, 0.0f64); BLOCK];
        for src in bytes.chunks(BLOCK * itemsize) {
            let n = src.len() / itemsize;
            decode_complex_exact(dtype, src, &mut pairs[..n]);
            acc = acc.merge(complex_block(&pairs[..n], &mut values[..n]));
        }
    } else {
        for src in bytes.chunks(BLOCK * itemsize) {
            let values = &mut values[..src.len() / itemsize];
            decode_real_exact(dtype, src, values);
            acc = acc.merge(real_block(values));
        }
    }
    acc
}

/// A summary under construction; `min`/`max` are ±inf while `finite` is 0.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Partial {
    counts: ElementCounts,
    min: f64,
    max: f64,
    moments: Moments,
}

impl Default for Partial {
    fn default() -> Partial {
        Partial {
            counts: ElementCounts::default(),
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            moments: Moments::EMPTY,
        }
    }
}

impl Partial {
    fn merge(self, o: Partial) -> Partial {
        Partial {
            counts: self.counts.merge(o.counts),
            min: if o.min < self.min { o.min } else { self.min },
            max: if o.max > self.max { o.max } else { self.max },
            moments: self.moments.merge(o.moments),
        }
    }

    fn finish(self) -> TensorSummary {
        TensorSummary::from_parts(
            self.counts,
            self.min,
            self.max,
            self.moments.mean(),
            self.moments.std(),
            self.moments.l2(),
        )
    }
}

const LANES: usize = 8;

#[inline(always)]
fn real_block(values: &[f64]) -> Partial {
    // Lane arrays let the compiler vectorise; integer counters stay exact.
    let mut nan = [0u64; LANES];
    let mut pos_inf = [0u64; LANES];
    let mut neg_inf = [0u64; LANES];
    let mut zero = [0u64; LANES];
    let mut min = [f64::INFINITY; LANES];
    let mut max = [f64::NEG_INFINITY; LANES];
    let mut scan = |i: usize, x: f64| {
        nan[i] += u64::from(x.is_nan());
        pos_inf[i] += u64::from(x == f64::INFINITY);
        neg_inf[i] += u64::from(x == f64::NEG_INFINITY);
        zero[i] += u64::from(x == 0.0);
        let finite = x.is_finite();
        let lo = if finite { x } else { f64::INFINITY };
        let hi = if finite { x } else { f64::NEG_INFINITY };
        min[i] = if lo < min[i] { lo } else { min[i] };
        max[i] = if hi > max[i] { hi } else { max[i] };
    };
    let chunks = values.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (i, &x) in c.iter().enumerate() {
            scan(i, x);
        }
    }
    for (i, &x) in tail.iter().enumerate() {
        scan(i, x);
    }

    let numel = values.len() as u64;
    let nan: u64 = nan.iter().sum();
    let pos_inf: u64 = pos_inf.iter().sum();
    let neg_inf: u64 = neg_inf.iter().sum();
    let finite = numel - nan - pos_inf - neg_inf;
    let min = min
        .into_iter()
        .fold(f64::INFINITY, |a, b| if b < a { b } else { a });
    let max = max
        .into_iter()
        .fold(f64::NEG_INFINITY, |a, b| if b > a { b } else { a });
    let max_abs = if finite > 0 { (-min).max(max) } else { 0.0 };
    Partial {
        counts: ElementCounts {
            numel,
            nan,
            pos_inf,
            neg_inf,
            zero: zero.iter().sum(),
            finite,
        },
        min,
        max,
        moments: Moments::of_finite(values, finite, max_abs, 0),
    }
}

/// Classifies by parts and reduces magnitudes, which are written into `mags`
/// (NaN for excluded elements) for the moment pass.
#[inline(always)]
fn complex_block(pairs: &[(f64, f64)], mags: &mut [f64]) -> Partial {
    let mut p = Partial::default();
    p.counts.numel = pairs.len() as u64;
    let mut overflow = false;
    for (&(re, im), mag) in pairs.iter().zip(mags.iter_mut()) {
        p.counts.zero += u64::from(re == 0.0 && im == 0.0);
        *mag = f64::NAN;
        if re.is_nan() || im.is_nan() {
            p.counts.nan += 1;
        } else if re.is_infinite() || im.is_infinite() {
            p.counts.pos_inf += 1;
        } else {
            let m = re.hypot(im);
            p.counts.finite += 1;
            p.min = p.min.min(m);
            p.max = p.max.max(m);
            overflow |= m == f64::INFINITY;
            *mag = m;
        }
    }
    let mut max_abs = if p.counts.finite > 0 { p.max } else { 0.0 };
    let mut extra_k = 0;
    if overflow {
        // Both parts finite yet |z| > f64::MAX: halving is exact for the parts
        // that matter and brings every magnitude back into range.
        extra_k = 1;
        max_abs = 0.0;
        for (&(re, im), mag) in pairs.iter().zip(mags.iter_mut()) {
            if !mag.is_nan() {
                *mag = (re * 0.5).hypot(im * 0.5);
                max_abs = max_abs.max(*mag);
            }
        }
    }
    p.moments = Moments::of_finite(mags, p.counts.finite, max_abs, extra_k);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f64_bytes(xs: &[f64]) -> Vec<u8> {
        xs.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn the_vector_build_sums_exactly_as_the_portable_one() {
        // Values of every magnitude, with NaN, infinities, zeros and a tail shorter than
        // a block, in each dtype family.
        let mut xs: Vec<f64> = (0..3001)
            .map(|i| ((i * 7919 % 2003) as f64 - 1001.0) * 10f64.powi(i % 17 - 8))
            .collect();
        xs[5] = f64::NAN;
        xs[77] = f64::INFINITY;
        xs[901] = f64::NEG_INFINITY;
        xs[1200] = 0.0;
        let f32s: Vec<u8> = xs.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect();
        let ints: Vec<u8> = xs
            .iter()
            .flat_map(|&x| (x.clamp(-1e9, 1e9) as i32).to_le_bytes())
            .collect();
        let complex: Vec<u8> = xs
            .chunks(2)
            .flat_map(|p| [p[0] as f32, p.get(1).copied().unwrap_or(1.0) as f32])
            .flat_map(f32::to_le_bytes)
            .collect();
        for (dtype, bytes) in [
            (DType::Float64, f64_bytes(&xs)),
            (DType::Float32, f32s),
            (DType::Int32, ints),
            (DType::Complex64, complex),
        ] {
            let portable = summarize_serial_portable(dtype, &bytes);
            assert_eq!(summarize_serial(dtype, &bytes), portable, "{dtype}");
            let summary = portable.finish();
            assert!(summary.numel > 0);
        }
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        a == b || (a - b).abs() <= rel * a.abs().max(b.abs())
    }

    fn assert_summaries_close(a: &TensorSummary, b: &TensorSummary, rel: f64) {
        assert_eq!(
            (a.numel, a.finite, a.nan, a.pos_inf, a.neg_inf, a.zero),
            (b.numel, b.finite, b.nan, b.pos_inf, b.neg_inf, b.zero)
        );
        assert_eq!(a.min, b.min);
        assert_eq!(a.max, b.max);
        let pairs = [
            (a.mean.unwrap(), b.mean.unwrap()),
            (a.std.unwrap(), b.std.unwrap()),
            (a.l2, b.l2),
        ];
        for (x, y) in pairs {
            assert!(close(x, y, rel), "{x} vs {y}\n{a:?}\n{b:?}");
        }
    }

    /// Deterministic values with a large offset, so a sum/sumsq formula would lose
    /// most digits of the variance; a few specials sprinkled in.
    fn awkward_values(n: usize) -> Vec<f64> {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        (0..n)
            .map(|i| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let u = (state >> 11) as f64 / (1u64 << 53) as f64;
                match i % 100_003 {
                    7 => f64::NAN,
                    11 => f64::INFINITY,
                    13 => f64::NEG_INFINITY,
                    17 => 0.0,
                    _ => 1e6 + (u - 0.5) * 3.0,
                }
            })
            .collect()
    }

    #[test]
    fn chunked_matches_unchunked_on_millions_of_elements() {
        let values = awkward_values(3_000_000 + 17);
        let bytes = f64_bytes(&values);
        let serial = summarize_serial(DType::Float64, &bytes).finish();
        for chunk in [PARALLEL_CHUNK, 100_003, BLOCK * 3 + 1] {
            let chunked = summarize_chunked(DType::Float64, &bytes, chunk).finish();
            assert_summaries_close(&serial, &chunked, 1e-12);
        }
        let public = summarize(DType::Float64, &bytes).unwrap();
        assert_summaries_close(&serial, &public, 1e-12);

        // And both against a careful two-pass reference.
        let finite: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        let n = finite.len() as f64;
        let mean = compensated_sum(finite.iter().copied()) / n;
        let var = finite.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        assert!(close(serial.mean.unwrap(), mean, 1e-12));
        assert!(close(serial.std.unwrap(), var.sqrt(), 1e-9));
        assert_eq!(serial.nan, 30);
        assert_eq!(serial.zero, 30);
    }

    /// Neumaier summation, so the reference itself is good to ~1 ulp.
    fn compensated_sum(xs: impl Iterator<Item = f64>) -> f64 {
        let (mut sum, mut comp) = (0.0f64, 0.0f64);
        for x in xs {
            let t = sum + x;
            comp += if sum.abs() >= x.abs() {
                (sum - t) + x
            } else {
                (x - t) + sum
            };
            sum = t;
        }
        sum + comp
    }

    #[test]
    fn result_is_independent_of_thread_count() {
        let bytes = f64_bytes(&awkward_values(1_500_000));
        let run = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| summarize(DType::Float64, &bytes).unwrap())
        };
        assert_eq!(run(1), run(3));
    }

    #[test]
    fn blocks_of_very_different_scale_merge_without_underflow() {
        let tiny = f64::from_bits(3); // subnormal
        let mut xs = vec![0.0; BLOCK];
        xs.extend(std::iter::repeat_n(tiny, BLOCK));
        xs.extend([tiny * 2.0; 7]);
        let s = summarize(DType::Float64, &f64_bytes(&xs)).unwrap();
        assert!(s.std.unwrap() > 0.0);
        assert!(s.l2 > 0.0);
        assert_eq!(s.min, Some(0.0));
        assert_eq!(s.max, Some(tiny * 2.0));
    }
}
