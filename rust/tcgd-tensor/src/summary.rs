//! Native summaries of a tensor's raw host bytes.

use rayon::prelude::*;
use serde::Serialize;

use crate::decode::{check_whole, decode_complex_exact, decode_real_exact, SummaryError};
use crate::dtype::DType;
use crate::json::{float, opt_float};
use crate::moments::{lane_sum, Moments, LANES};

/// Counts and statistics of a value: `finite_count + nan_count + pos_inf_count +
/// neg_inf_count == numel`, `zero_count` is part of `finite_count`; `min`, `max`, `mean`,
/// `std` (population) and `l2_norm` cover the finite elements in float64 and are `None`
/// when there is none (`l2_norm` is then 0). `minimum` and `maximum` are `min` and `max`.
///
/// In JSON (reports, `to_json`) the fields keep these names, and non-finite floats are the
/// strings `"nan"`, `"inf"` and `"-inf"`.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "TensorValueSummary",
        module = "torch_cudagraph_debug._native",
        frozen,
        eq,
        get_all,
        from_py_object
    )
)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TensorSummary {
    pub numel: u64,
    pub finite_count: u64,
    pub nan_count: u64,
    pub pos_inf_count: u64,
    pub neg_inf_count: u64,
    pub zero_count: u64,
    #[serde(serialize_with = "opt_float")]
    pub min: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub max: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub mean: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub std: Option<f64>,
    #[serde(serialize_with = "float")]
    pub l2_norm: f64,
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
    /// max(|min|, |max|) over the finite values; `None` when none is finite.
    pub fn abs_max(&self) -> Option<f64> {
        match (self.min, self.max) {
            (Some(a), Some(b)) => Some(a.abs().max(b.abs())),
            (Some(v), None) | (None, Some(v)) => Some(v.abs()),
            (None, None) => None,
        }
    }

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
            finite_count: counts.finite,
            nan_count: counts.nan,
            pos_inf_count: counts.pos_inf,
            neg_inf_count: counts.neg_inf,
            zero_count: counts.zero,
            min: any.then_some(min),
            max: any.then_some(max),
            mean,
            std,
            l2_norm: l2,
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
    } else if let Some(narrow) = NarrowFloat::of(dtype) {
        let mut staged = [0.0f32; BLOCK];
        for src in bytes.chunks(BLOCK * itemsize) {
            let values = narrow.block(src, &mut staged);
            acc = acc.merge(narrow_block(values));
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

/// The floats whose every value is exactly a float32 and whose squares and sums stay far
/// inside float64's range: their blocks are classified in float32 and their moments
/// summed unscaled in one pass ([`narrow_float_block`]), with the same results, bit for
/// bit, as the general path's decoding to float64 and scaled passes.
#[derive(Clone, Copy)]
enum NarrowFloat {
    Float32,
    Float16,
    BFloat16,
}

impl NarrowFloat {
    fn of(dtype: DType) -> Option<NarrowFloat> {
        match dtype {
            DType::Float32 => Some(NarrowFloat::Float32),
            DType::Float16 => Some(NarrowFloat::Float16),
            DType::BFloat16 => Some(NarrowFloat::BFloat16),
            _ => None,
        }
    }

    /// The block `src` as float32 values: float32 bytes read in place when aligned (a
    /// tensor's storage always is), anything else decoded into `staged`.
    #[inline(always)]
    fn block<'a>(self, src: &'a [u8], staged: &'a mut [f32; BLOCK]) -> &'a [f32] {
        match self {
            NarrowFloat::Float32 => {
                // SAFETY: every bit pattern is a valid f32; `align_to` only yields the
                // aligned middle part.
                let (head, middle, tail) = unsafe { src.align_to::<f32>() };
                if cfg!(target_endian = "little") && head.is_empty() && tail.is_empty() {
                    return middle;
                }
                let out = &mut staged[..src.len() / 4];
                for (o, c) in out.iter_mut().zip(src.chunks_exact(4)) {
                    *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
                out
            }
            NarrowFloat::BFloat16 => {
                let out = &mut staged[..src.len() / 2];
                for (o, c) in out.iter_mut().zip(src.chunks_exact(2)) {
                    *o = f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16);
                }
                out
            }
            NarrowFloat::Float16 => {
                let out = &mut staged[..src.len() / 2];
                let mut halves = [half::f16::ZERO; BLOCK];
                let halves = &mut halves[..out.len()];
                for (h, c) in halves.iter_mut().zip(src.chunks_exact(2)) {
                    *h = half::f16::from_bits(u16::from_le_bytes([c[0], c[1]]));
                }
                use half::slice::HalfFloatSliceExt;
                halves.convert_to_f32_slice(out);
                out
            }
        }
    }
}

/// [`narrow_float_block`] with the CPU's vector instructions where it has them.
#[inline(always)]
fn narrow_block(values: &[f32]) -> Partial {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe {
            finite_float_block_avx2(values).unwrap_or_else(|| narrow_float_block_avx2(values))
        };
    }
    narrow_float_block(values)
}

/// The float64 sums of the first pass, as vectors: the sum of lanes 0-3 and of lanes 4-7,
/// then the sums of squares of the same.
#[cfg(target_arch = "x86_64")]
type Sums = [std::arch::x86_64::__m256d; 4];

/// Adds eight float32 values (lanes 0-7), widened to float64, and their squares to `sums`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn add_sums(sums: &mut Sums, values: std::arch::x86_64::__m256) {
    use std::arch::x86_64::*;
    let lo = _mm256_cvtps_pd(_mm256_castps256_ps128(values));
    let hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(values));
    sums[0] = _mm256_add_pd(sums[0], lo);
    sums[1] = _mm256_add_pd(sums[1], hi);
    sums[2] = _mm256_add_pd(sums[2], _mm256_mul_pd(lo, lo));
    sums[3] = _mm256_add_pd(sums[3], _mm256_mul_pd(hi, hi));
}

/// [`narrow_float_block_avx2`] for a block whose every element is finite (the usual
/// case), or `None` when one is not: with nothing to exclude, the counts other than zeros
/// and the selects before the extremes and sums fall away. The same sums, in the same
/// lanes, as the general block.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn finite_float_block_avx2(values: &[f32]) -> Option<Partial> {
    use std::arch::x86_64::*;

    let chunks = values.chunks_exact(LANES);
    let tail = chunks.remainder();
    let inf = _mm256_set1_ps(f32::INFINITY);
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFF_FFFF));
    let (mut not_finite, mut zero) = (_mm256_setzero_ps(), _mm256_setzero_si256());
    let (mut min, mut max) = (inf, _mm256_set1_ps(f32::NEG_INFINITY));
    let mut sums = [_mm256_setzero_pd(); 4];
    for c in chunks.clone() {
        _mm_prefetch::<_MM_HINT_T0>(c.as_ptr().wrapping_add(PREFETCH_AHEAD).cast());
        let x = _mm256_loadu_ps(c.as_ptr());
        // NaN compares unordered: `!(|x| < inf)` holds for NaN and both infinities.
        let bad = _mm256_cmp_ps::<_CMP_NLT_UQ>(_mm256_and_ps(x, abs_mask), inf);
        not_finite = _mm256_or_ps(not_finite, bad);
        let is_zero = _mm256_cmp_ps::<_CMP_EQ_OQ>(x, _mm256_setzero_ps());
        zero = _mm256_sub_epi32(zero, _mm256_castps_si256(is_zero));
        min = _mm256_min_ps(x, min);
        max = _mm256_max_ps(x, max);
        add_sums(&mut sums, x);
    }
    if _mm256_movemask_ps(not_finite) != 0 || tail.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut lanes = NarrowLanes::default();
    _mm256_storeu_si256(lanes.zero.as_mut_ptr().cast(), zero);
    let mean = lanes.first_pass_done(tail, values.len(), [min, max], sums);

    let mean_v = _mm256_set1_pd(mean);
    let (mut m2_lo, mut m2_hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    for c in chunks {
        let x = _mm256_loadu_ps(c.as_ptr());
        let d_lo = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)), mean_v);
        let d_hi = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x)), mean_v);
        m2_lo = _mm256_add_pd(m2_lo, _mm256_mul_pd(d_lo, d_lo));
        m2_hi = _mm256_add_pd(m2_hi, _mm256_mul_pd(d_hi, d_hi));
    }
    _mm256_storeu_pd(lanes.m2.as_mut_ptr(), m2_lo);
    _mm256_storeu_pd(lanes.m2[4..].as_mut_ptr(), m2_hi);
    for (i, &x) in tail.iter().enumerate() {
        lanes.deviate(i, x, mean);
    }
    Some(lanes.finish(values.len(), mean))
}

/// How far ahead of the element it reads the vector code asks for the cache line, in
/// float32 elements (2 KiB).
#[cfg(target_arch = "x86_64")]
const PREFETCH_AHEAD: usize = 512;

/// [`narrow_float_block`] written with AVX2 instructions, because the compiler leaves
/// the portable loop scalar (it mixes float32 lanes with float64 sums). The same
/// operations in the same lanes: eight float32 lanes for the counts and extremes, two
/// vectors of four float64 lanes for each sum, no fused multiply-add; the tail goes
/// through the portable code's lane arrays. Equal, bit for bit, to the portable block.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn narrow_float_block_avx2(values: &[f32]) -> Partial {
    use std::arch::x86_64::*;

    let chunks = values.chunks_exact(LANES);
    let tail = chunks.remainder();
    let inf = _mm256_set1_ps(f32::INFINITY);
    let neg_inf_v = _mm256_set1_ps(f32::NEG_INFINITY);
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFF_FFFF));
    let zero_v = _mm256_setzero_ps();
    let (mut nan, mut pos_inf, mut neg_inf, mut zero) = (
        _mm256_setzero_si256(),
        _mm256_setzero_si256(),
        _mm256_setzero_si256(),
        _mm256_setzero_si256(),
    );
    let (mut min, mut max) = (inf, neg_inf_v);
    let mut sums = [_mm256_setzero_pd(); 4];
    // A comparison's mask is -1 where it holds: subtracting it counts.
    let count = |acc: __m256i, mask: __m256| _mm256_sub_epi32(acc, _mm256_castps_si256(mask));
    for c in chunks.clone() {
        // Ask for the bytes a block ahead: the loop's arithmetic keeps too few loads in
        // flight to hide a value that is not in the cache yet (the usual case: a probe
        // reads what the model has just written past its caches).
        _mm_prefetch::<_MM_HINT_T0>(c.as_ptr().wrapping_add(PREFETCH_AHEAD).cast());
        let x = _mm256_loadu_ps(c.as_ptr());
        nan = count(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x));
        pos_inf = count(pos_inf, _mm256_cmp_ps::<_CMP_EQ_OQ>(x, inf));
        neg_inf = count(neg_inf, _mm256_cmp_ps::<_CMP_EQ_OQ>(x, neg_inf_v));
        zero = count(zero, _mm256_cmp_ps::<_CMP_EQ_OQ>(x, zero_v));
        let finite = _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_and_ps(x, abs_mask), inf);
        // min_ps(a, b) is `a < b ? a : b`, the portable code's select.
        min = _mm256_min_ps(_mm256_blendv_ps(inf, x, finite), min);
        max = _mm256_max_ps(_mm256_blendv_ps(neg_inf_v, x, finite), max);
        let y = _mm256_and_ps(x, finite);
        add_sums(&mut sums, y);
    }
    let mut lanes = NarrowLanes::default();
    _mm256_storeu_si256(lanes.nan.as_mut_ptr().cast(), nan);
    _mm256_storeu_si256(lanes.pos_inf.as_mut_ptr().cast(), pos_inf);
    _mm256_storeu_si256(lanes.neg_inf.as_mut_ptr().cast(), neg_inf);
    _mm256_storeu_si256(lanes.zero.as_mut_ptr().cast(), zero);
    let mean = lanes.first_pass_done(tail, values.len(), [min, max], sums);

    let mean_v = _mm256_set1_pd(mean);
    let inf_d = _mm256_set1_pd(f64::INFINITY);
    let abs_mask_d = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFF_FFFF_FFFF_FFFF));
    let (mut m2_lo, mut m2_hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let deviation = |x: __m256d| {
        let finite = _mm256_cmp_pd::<_CMP_LT_OQ>(_mm256_and_pd(x, abs_mask_d), inf_d);
        let d = _mm256_and_pd(_mm256_sub_pd(x, mean_v), finite);
        _mm256_mul_pd(d, d)
    };
    for c in chunks {
        let x = _mm256_loadu_ps(c.as_ptr());
        m2_lo = _mm256_add_pd(m2_lo, deviation(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
        m2_hi = _mm256_add_pd(
            m2_hi,
            deviation(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x))),
        );
    }
    _mm256_storeu_pd(lanes.m2.as_mut_ptr(), m2_lo);
    _mm256_storeu_pd(lanes.m2[4..].as_mut_ptr(), m2_hi);
    for (i, &x) in tail.iter().enumerate() {
        lanes.deviate(i, x, mean);
    }
    lanes.finish(values.len(), mean)
}

/// The lanes of a narrow-float block's two passes, as the portable code keeps them and
/// the vector code leaves them for its tail.
struct NarrowLanes {
    nan: [u32; LANES],
    pos_inf: [u32; LANES],
    neg_inf: [u32; LANES],
    zero: [u32; LANES],
    min: [f32; LANES],
    max: [f32; LANES],
    sum: [f64; LANES],
    ssq: [f64; LANES],
    m2: [f64; LANES],
}

impl Default for NarrowLanes {
    fn default() -> NarrowLanes {
        NarrowLanes {
            nan: [0; LANES],
            pos_inf: [0; LANES],
            neg_inf: [0; LANES],
            zero: [0; LANES],
            min: [f32::INFINITY; LANES],
            max: [f32::NEG_INFINITY; LANES],
            sum: [0.0; LANES],
            ssq: [0.0; LANES],
            m2: [0.0; LANES],
        }
    }
}

impl NarrowLanes {
    /// Takes the vector code's extremes and sums of the first pass into the lanes, runs
    /// the tail through the portable pass and returns the block's mean.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn first_pass_done(
        &mut self,
        tail: &[f32],
        numel: usize,
        [min, max]: [std::arch::x86_64::__m256; 2],
        [sum_lo, sum_hi, ssq_lo, ssq_hi]: Sums,
    ) -> f64 {
        use std::arch::x86_64::*;
        _mm256_storeu_ps(self.min.as_mut_ptr(), min);
        _mm256_storeu_ps(self.max.as_mut_ptr(), max);
        _mm256_storeu_pd(self.sum.as_mut_ptr(), sum_lo);
        _mm256_storeu_pd(self.sum[4..].as_mut_ptr(), sum_hi);
        _mm256_storeu_pd(self.ssq.as_mut_ptr(), ssq_lo);
        _mm256_storeu_pd(self.ssq[4..].as_mut_ptr(), ssq_hi);
        for (i, &x) in tail.iter().enumerate() {
            self.scan(i, x);
        }
        self.mean(numel)
    }

    /// The first pass over one element in lane `i`.
    #[inline(always)]
    fn scan(&mut self, i: usize, x: f32) {
        self.nan[i] += u32::from(x.is_nan());
        self.pos_inf[i] += u32::from(x == f32::INFINITY);
        self.neg_inf[i] += u32::from(x == f32::NEG_INFINITY);
        self.zero[i] += u32::from(x == 0.0);
        let finite = x.is_finite();
        let lo = if finite { x } else { f32::INFINITY };
        let hi = if finite { x } else { f32::NEG_INFINITY };
        self.min[i] = if lo < self.min[i] { lo } else { self.min[i] };
        self.max[i] = if hi > self.max[i] { hi } else { self.max[i] };
        let y = if finite { f64::from(x) } else { 0.0 };
        self.sum[i] += y;
        self.ssq[i] += y * y;
    }

    /// The second pass over one element in lane `i`.
    #[inline(always)]
    fn deviate(&mut self, i: usize, x: f32, mean: f64) {
        let d = if x.is_finite() {
            f64::from(x) - mean
        } else {
            0.0
        };
        self.m2[i] += d * d;
    }

    fn finite(&self, numel: usize) -> u64 {
        numel as u64 - lanes_count(self.nan) - lanes_count(self.pos_inf) - lanes_count(self.neg_inf)
    }

    /// The block's mean of finite values, after the first pass (0 when none is finite).
    fn mean(&self, numel: usize) -> f64 {
        let finite = self.finite(numel);
        if finite > 0 {
            lane_sum(self.sum) / finite as f64
        } else {
            0.0
        }
    }

    fn finish(&self, numel: usize, mean: f64) -> Partial {
        let finite = self.finite(numel);
        // Folded as the general path folds, so a signed zero comes out the same.
        let min = self
            .min
            .into_iter()
            .fold(f32::INFINITY, |a, b| if b < a { b } else { a });
        let max = self
            .max
            .into_iter()
            .fold(f32::NEG_INFINITY, |a, b| if b > a { b } else { a });
        let (min, max) = (f64::from(min), f64::from(max));
        let max_abs = if finite > 0 { (-min).max(max) } else { 0.0 };
        Partial {
            counts: ElementCounts {
                numel: numel as u64,
                nan: lanes_count(self.nan),
                pos_inf: lanes_count(self.pos_inf),
                neg_inf: lanes_count(self.neg_inf),
                zero: lanes_count(self.zero),
                finite,
            },
            min,
            max,
            moments: Moments::from_unscaled(
                finite,
                max_abs,
                mean,
                lane_sum(self.m2),
                lane_sum(self.ssq),
            ),
        }
    }
}

fn lanes_count(lanes: [u32; LANES]) -> u64 {
    lanes.iter().map(|&c| u64::from(c)).sum()
}

/// [`real_block`] and the moments of [`Moments::of_finite`] for float32 values, in two
/// passes over the block instead of four: the classification, extremes, sum and sum of
/// squares together (extremes and counts in float32, where they are exact; sums in
/// float64, in the same lanes and order as the general path), then the squared
/// deviations from the block's mean.
#[inline(always)]
fn narrow_float_block(values: &[f32]) -> Partial {
    let mut lanes = NarrowLanes::default();
    let chunks = values.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks.clone() {
        for (i, &x) in c.iter().enumerate() {
            lanes.scan(i, x);
        }
    }
    for (i, &x) in tail.iter().enumerate() {
        lanes.scan(i, x);
    }
    let mean = lanes.mean(values.len());
    for c in chunks {
        for (i, &x) in c.iter().enumerate() {
            lanes.deviate(i, x, mean);
        }
    }
    for (i, &x) in tail.iter().enumerate() {
        lanes.deviate(i, x, mean);
    }
    lanes.finish(values.len(), mean)
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

    /// The general path over any real dtype: decoded to float64 and reduced block by
    /// block with the scaled moments.
    fn general_path(dtype: DType, bytes: &[u8]) -> Partial {
        let itemsize = dtype.itemsize();
        let mut values = [0.0f64; BLOCK];
        let mut acc = Partial::default();
        for src in bytes.chunks(BLOCK * itemsize) {
            let values = &mut values[..src.len() / itemsize];
            decode_real_exact(dtype, src, values);
            acc = acc.merge(real_block(values));
        }
        acc
    }

    #[test]
    fn narrow_floats_sum_exactly_as_the_general_path() {
        // Every magnitude float32 holds, subnormals and signed zeros included, the
        // specials, a block with nothing finite, an all-zero block and a short tail.
        let mut xs: Vec<f32> = (0..5000)
            .map(|i| {
                let m = ((i * 7919 % 2003) as f32 - 1001.0) / 997.0;
                m * 2f32.powi(i % 270 - 140)
            })
            .collect();
        xs[3] = f32::NAN;
        xs[40] = f32::INFINITY;
        xs[41] = f32::NEG_INFINITY;
        xs[600] = -0.0;
        xs[601] = 0.0;
        xs[602] = f32::from_bits(1);
        xs[603] = f32::MAX;
        xs[604] = -f32::MAX;
        for x in &mut xs[1024..1536] {
            *x = f32::NAN;
        }
        for x in &mut xs[1536..2048] {
            *x = 0.0;
        }
        let f32s: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
        let bf16s: Vec<u8> = xs
            .iter()
            .flat_map(|x| half::bf16::from_f32(*x).to_le_bytes())
            .collect();
        let f16s: Vec<u8> = xs
            .iter()
            .flat_map(|x| half::f16::from_f32(*x).to_le_bytes())
            .collect();
        // A misaligned float32 block goes through the staging copy.
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&f32s);
        for (dtype, bytes) in [
            (DType::Float32, &f32s[..]),
            (DType::Float32, &shifted[1..]),
            (DType::BFloat16, &bf16s[..]),
            (DType::Float16, &f16s[..]),
        ] {
            let general = general_path(dtype, bytes);
            assert_eq!(summarize_serial_portable(dtype, bytes), general, "{dtype}");
            assert_eq!(summarize_serial(dtype, bytes), general, "{dtype}");
            let summary = general.finish();
            assert_eq!(summary.nan_count, 513, "{dtype}");
            assert!(summary.std.unwrap() > 0.0);
        }
        // The vector block against the portable one, at every tail length.
        for len in [0, 1, 7, 8, 9, 63, 511, 512] {
            for start in [0, 600, 1024, 1536, 4000] {
                let block = &xs[start..start + len];
                let (vector, portable) = (narrow_block(block), narrow_float_block(block));
                assert_eq!(vector, portable, "{start}+{len}");
            }
        }
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        a == b || (a - b).abs() <= rel * a.abs().max(b.abs())
    }

    fn assert_summaries_close(a: &TensorSummary, b: &TensorSummary, rel: f64) {
        assert_eq!(
            (
                a.numel,
                a.finite_count,
                a.nan_count,
                a.pos_inf_count,
                a.neg_inf_count,
                a.zero_count
            ),
            (
                b.numel,
                b.finite_count,
                b.nan_count,
                b.pos_inf_count,
                b.neg_inf_count,
                b.zero_count
            )
        );
        assert_eq!(a.min, b.min);
        assert_eq!(a.max, b.max);
        let pairs = [
            (a.mean.unwrap(), b.mean.unwrap()),
            (a.std.unwrap(), b.std.unwrap()),
            (a.l2_norm, b.l2_norm),
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
        assert_eq!(serial.nan_count, 30);
        assert_eq!(serial.zero_count, 30);
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
        assert!(s.l2_norm > 0.0);
        assert_eq!(s.min, Some(0.0));
        assert_eq!(s.max, Some(tiny * 2.0));
    }
}
