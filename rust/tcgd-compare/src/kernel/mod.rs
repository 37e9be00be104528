//! Element-wise comparison of two payloads: per-element verdicts and the metrics built on
//! them, in parallel over fixed-size tasks.
//!
//! Semantics (docs/comparison.md has the user-facing version):
//! - Values are decoded exactly to `f64` (complex: `(f64, f64)`), and the tolerance test
//!   is evaluated in `f64`, like `torch.isclose(candidate.double(), reference.double())`:
//!   close when `c == r`, or when `|c - r|` is finite and `<= atol + rtol * |r|`, or when
//!   both are NaN and `equal_nan` is set. The reference is `other` in torch's terms.
//! - Exact mode is value equality (`-0.0 == 0.0`; NaN equal only with `equal_nan`).
//! - Integers and bool always compare exactly, in either mode, over their whole range.
//! - Error metrics cover the elements where both values are finite.
//!
//! Determinism: tasks have a fixed size and partial results are merged in task order, so
//! the same inputs give bit-identical metrics however rayon schedules the tasks.

use rayon::prelude::*;
use tcgd_tensor::decode::{decode_complex, decode_real, integer_at, DECODE_CHUNK};
use tcgd_tensor::DType;

use crate::error::CompareError;
use crate::model::{FirstMismatch, Metrics, Scalar};
use crate::options::{CompareOptions, Mode};

mod complex;
mod integer;
mod norms;
mod real;
mod ulp;
use complex::*;
use integer::*;
use norms::*;
use real::*;
use ulp::*;

/// Elements decoded at a time: two `f64` buffers of this size stay in L1 cache.
const BLOCK: usize = DECODE_CHUNK;
/// Elements per parallel task: large enough that scheduling is noise, small enough that
/// two cores stay busy to the end of a 64 MiB tensor.
const TASK: usize = 1 << 18;
/// Independent accumulators per block loop, so the compiler can keep them in vector lanes
/// (floating-point sums are not reassociated otherwise). Four: one AVX2 register each, so
/// the dozen accumulators stay in registers instead of spilling.
const LANES: usize = 4;
/// Norm sums are rescaled when magnitudes leave this range, where squares would overflow
/// or underflow `f64`.
const NORM_SAFE_MAX: f64 = 1e150;
const NORM_SAFE_MIN: f64 = 1e-150;

/// How values of a dtype pair are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Domain {
    /// At least one side is a real floating type (the other may be an integer under
    /// `dtype_policy="promote"`).
    Real,
    /// Both sides are integers or bool: exact comparison.
    Integer,
    /// At least one side is complex; a real side has imaginary part zero.
    Complex,
}

impl Domain {
    pub(crate) fn of(a: DType, b: DType) -> Domain {
        let integral = |d: DType| !d.is_floating_point() && !d.is_complex();
        if a.is_complex() || b.is_complex() {
            Domain::Complex
        } else if integral(a) && integral(b) {
            Domain::Integer
        } else {
            Domain::Real
        }
    }

    fn compared_as(self) -> &'static str {
        match self {
            Domain::Real => "float64",
            Domain::Integer => "integer",
            Domain::Complex => "complex128",
        }
    }
}

/// The per-element test, with exact mode folded in: a negative `atol` and zero `rtol`
/// make the tolerance branch unreachable, leaving `==` and the NaN rule.
#[derive(Debug, Clone, Copy)]
struct Rule {
    atol: f64,
    rtol: f64,
    equal_nan: bool,
}

impl Rule {
    fn new(options: &CompareOptions, domain: Domain) -> Rule {
        let exact = options.mode == Mode::Exact || domain == Domain::Integer;
        Rule {
            atol: if exact { -1.0 } else { options.atol },
            rtol: if exact { 0.0 } else { options.rtol },
            equal_nan: options.equal_nan,
        }
    }

    /// `|r|` where both values are finite, else 0: the tolerance base. Zeroing it for a
    /// non-finite pair keeps the tolerance finite, so an infinite or NaN difference can
    /// never pass (torch.isclose requires a finite difference for the same reason).
    #[inline(always)]
    fn real_close(self, c: f64, r: f64) -> bool {
        let finite = (c.abs() < f64::INFINITY) & (r.abs() < f64::INFINITY);
        let base = if finite { r.abs() } else { 0.0 };
        self.real_close_with::<true>(c, r, base)
    }

    /// The test itself; `NAN = false` drops the NaN rule (callers pass it only when
    /// `equal_nan` is off).
    #[inline(always)]
    fn real_close_with<const NAN: bool>(self, c: f64, r: f64, base: f64) -> bool {
        let d = (c - r).abs();
        (c == r)
            | (d <= self.atol + self.rtol * base)
            | (NAN & self.equal_nan & c.is_nan() & r.is_nan())
    }

    #[inline(always)]
    fn complex_close(self, c: (f64, f64), r: (f64, f64)) -> bool {
        let d = (c.0 - r.0).hypot(c.1 - r.1);
        let c_nan = c.0.is_nan() || c.1.is_nan();
        let r_nan = r.0.is_nan() || r.1.is_nan();
        (c.0 == r.0 && c.1 == r.1)
            || (d <= self.atol + self.rtol * r.0.hypot(r.1) && d < f64::INFINITY)
            || (self.equal_nan && c_nan && r_nan)
    }
}

/// Partial results of one task; merged in task order.
#[derive(Debug, Clone, Default)]
struct Acc {
    mismatches: u64,
    first: Option<u64>,
    finite_pairs: u64,
    sum_abs: f64,
    max_abs: f64,
    max_rel: f64,
    dot: f64,
    ref_sq: f64,
    cand_sq: f64,
    diff_sq: f64,
    max_mag: f64,
    nan_introduced: u64,
    inf_introduced: u64,
    max_ulp: u64,
}

impl Acc {
    fn merge(&mut self, o: &Acc) {
        self.mismatches += o.mismatches;
        self.first = match (self.first, o.first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.finite_pairs += o.finite_pairs;
        self.sum_abs += o.sum_abs;
        self.max_abs = self.max_abs.max(o.max_abs);
        self.max_rel = self.max_rel.max(o.max_rel);
        self.dot += o.dot;
        self.ref_sq += o.ref_sq;
        self.cand_sq += o.cand_sq;
        self.diff_sq += o.diff_sq;
        self.max_mag = self.max_mag.max(o.max_mag);
        self.nan_introduced += o.nan_introduced;
        self.inf_introduced += o.inf_introduced;
        self.max_ulp = self.max_ulp.max(o.max_ulp);
    }

    fn norms_need_rescale(&self) -> bool {
        let sums = [
            self.sum_abs,
            self.dot,
            self.ref_sq,
            self.cand_sq,
            self.diff_sq,
        ];
        sums.iter().any(|s| !s.is_finite())
            || self.max_mag > NORM_SAFE_MAX
            || (self.max_mag > 0.0 && self.max_mag < NORM_SAFE_MIN)
    }
}

/// One side of a pair: its dtype and its contiguous little-endian bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Values<'a> {
    pub dtype: DType,
    pub bytes: &'a [u8],
}

impl Values<'_> {
    fn len(&self) -> usize {
        self.bytes.len() / self.dtype.itemsize()
    }

    fn range(&self, start: usize, end: usize) -> &[u8] {
        let size = self.dtype.itemsize();
        &self.bytes[start * size..end * size]
    }
}

fn decode_error(e: tcgd_tensor::DecodeError) -> CompareError {
    CompareError::InvalidInput(format!("cannot decode payload: {e}"))
}

/// Compares two payloads of the same number of elements. `shape` only turns the first
/// mismatch's flat index into a coordinate.
pub(crate) fn compare(
    reference: Values<'_>,
    candidate: Values<'_>,
    shape: &[i64],
    options: &CompareOptions,
) -> Result<Metrics, CompareError> {
    let n = reference.len();
    if candidate.len() != n
        || reference.bytes.len() % reference.dtype.itemsize() != 0
        || candidate.bytes.len() % candidate.dtype.itemsize() != 0
    {
        return Err(CompareError::InvalidInput(format!(
            "payloads of {} and {} bytes do not hold the same number of {} / {} elements",
            reference.bytes.len(),
            candidate.bytes.len(),
            reference.dtype,
            candidate.dtype
        )));
    }
    let domain = Domain::of(reference.dtype, candidate.dtype);
    let rule = Rule::new(options, domain);
    let ulp = (reference.dtype == candidate.dtype)
        .then(|| UlpFormat::of(reference.dtype))
        .flatten();

    let tasks = n.div_ceil(TASK);
    let partials: Vec<Acc> = (0..tasks)
        .into_par_iter()
        .map(|t| {
            let (start, end) = (t * TASK, ((t + 1) * TASK).min(n));
            match domain {
                Domain::Real => real_task(reference, candidate, start, end, rule, ulp),
                Domain::Integer => integer_task(reference, candidate, start, end),
                Domain::Complex => {
                    let mut acc = complex_task(reference, candidate, start, end, rule)?;
                    if let Some(format) = ulp {
                        acc.max_ulp = format.max_distance(
                            candidate.range(start, end),
                            reference.range(start, end),
                            Simd::detect(),
                        );
                    }
                    Ok(acc)
                }
            }
        })
        .collect::<Result<_, CompareError>>()?;
    let mut acc = Acc::default();
    for p in &partials {
        acc.merge(p);
    }
    if acc.norms_need_rescale() && domain != Domain::Integer {
        rescaled_norms(reference, candidate, domain, &mut acc)?;
    }

    let first_mismatch = match acc.first {
        Some(index) => Some(FirstMismatch {
            index,
            coordinate: unravel(index, shape),
            reference: scalar_at(reference, index, domain)?,
            candidate: scalar_at(candidate, index, domain)?,
        }),
        None => None,
    };
    let fp = acc.finite_pairs;
    let any = fp > 0;
    let (nr, nc) = (acc.ref_sq.sqrt(), acc.cand_sq.sqrt());
    let cosine = match (any, nr > 0.0, nc > 0.0) {
        (false, _, _) => None,
        (true, false, false) => Some(1.0),
        (true, true, true) => Some((acc.dot / nr / nc).clamp(-1.0, 1.0)),
        _ => None,
    };
    let relative_l2 = match (any, nr > 0.0) {
        (false, _) => None,
        (true, true) => Some(acc.diff_sq.sqrt() / nr),
        (true, false) if acc.diff_sq == 0.0 => Some(0.0),
        (true, false) => Some(f64::INFINITY),
    };
    Ok(Metrics {
        compared_as: domain.compared_as(),
        total: n as u64,
        mismatch_count: acc.mismatches,
        mismatch_fraction: if n == 0 {
            0.0
        } else {
            acc.mismatches as f64 / n as f64
        },
        finite_pairs: fp,
        max_abs_error: any.then_some(acc.max_abs),
        max_rel_error: any.then_some(acc.max_rel),
        mean_abs_error: any.then(|| acc.sum_abs / fp as f64),
        first_mismatch,
        cosine_similarity: cosine,
        relative_l2_error: relative_l2,
        max_ulp_distance: (ulp.is_some() && any).then_some(acc.max_ulp),
        nan_introduced: acc.nan_introduced,
        inf_introduced: acc.inf_introduced,
    })
}

/// Row-major coordinate of a flat index.
pub(crate) fn unravel(mut index: u64, shape: &[i64]) -> Vec<u64> {
    let mut coordinate = vec![0u64; shape.len()];
    for (c, &size) in coordinate.iter_mut().zip(shape).rev() {
        let size = u64::try_from(size).unwrap_or(0);
        if size > 0 {
            *c = index % size;
            index /= size;
        }
    }
    coordinate
}

/// The exact value of one element, in the form the domain compares it in.
fn scalar_at(values: Values<'_>, index: u64, domain: Domain) -> Result<Scalar, CompareError> {
    let i = usize::try_from(index)
        .map_err(|_| CompareError::InvalidInput(format!("element {index} is out of range")))?;
    if let Some(v) = integer_at(values.dtype, values.bytes, i) {
        return Ok(match domain {
            Domain::Complex => Scalar::Complex(v as f64, 0.0),
            Domain::Real => Scalar::Float(v as f64),
            Domain::Integer => Scalar::Int(v),
        });
    }
    let bytes = values.range(i, i + 1);
    if values.dtype.is_complex() {
        let mut out = [(0.0, 0.0)];
        decode_complex(values.dtype, bytes, &mut out).map_err(decode_error)?;
        Ok(Scalar::Complex(out[0].0, out[0].1))
    } else {
        let mut out = [0.0];
        decode_real(values.dtype, bytes, &mut out).map_err(decode_error)?;
        Ok(match domain {
            Domain::Complex => Scalar::Complex(out[0], 0.0),
            _ => Scalar::Float(out[0]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn run(dtype: DType, r: &[u8], c: &[u8], options: &CompareOptions) -> Metrics {
        let n = (r.len() / dtype.itemsize()) as i64;
        compare(
            Values { dtype, bytes: r },
            Values { dtype, bytes: c },
            &[n],
            options,
        )
        .unwrap()
    }

    #[test]
    fn allclose_follows_isclose_with_reference_as_other() {
        let o = CompareOptions::default();
        // |c - r| <= atol + rtol * |r|: the tolerance scales with the reference.
        let r = f32s(&[1000.0, 0.0, f32::INFINITY, f32::NAN, -0.0]);
        let c = f32s(&[1000.005, 1e-9, f32::INFINITY, f32::NAN, 0.0]);
        let m = run(DType::Float32, &r, &c, &o);
        assert_eq!(m.mismatch_count, 1, "{m:?}");
        let first = m.first_mismatch.unwrap();
        assert_eq!(first.index, 3);
        assert!(matches!(first.reference, Scalar::Float(x) if x.is_nan()));
        let nan_ok = CompareOptions {
            equal_nan: true,
            ..o.clone()
        };
        assert_eq!(run(DType::Float32, &r, &c, &nan_ok).mismatch_count, 0);
        // The tolerance scales with the reference: 0.8 is within half of 1.8, not of 1.0.
        let half = CompareOptions {
            rtol: 0.5,
            atol: 0.0,
            ..o.clone()
        };
        let (one, more) = (f32s(&[1.0]), f32s(&[1.8]));
        assert_eq!(run(DType::Float32, &one, &more, &half).mismatch_count, 1);
        assert_eq!(run(DType::Float32, &more, &one, &half).mismatch_count, 0);
        // Infinities: equal only to themselves, whatever the tolerance.
        let huge = CompareOptions {
            rtol: 1e300,
            ..o.clone()
        };
        let inf_r = f32s(&[f32::INFINITY, 1.0]);
        let inf_c = f32s(&[1.0, f32::INFINITY]);
        assert_eq!(run(DType::Float32, &inf_r, &inf_c, &huge).mismatch_count, 2);
    }

    #[test]
    fn exact_mode_is_value_equality() {
        let o = CompareOptions {
            mode: Mode::Exact,
            ..CompareOptions::default()
        };
        let r = f32s(&[1.0, -0.0, f32::NAN, 2.0]);
        let c = f32s(&[1.0, 0.0, f32::NAN, 2.000_000_2]);
        let m = run(DType::Float32, &r, &c, &o);
        assert_eq!(m.mismatch_count, 2);
        assert_eq!(m.first_mismatch.unwrap().index, 2);
        assert_eq!(m.max_ulp_distance, Some(1));
    }

    #[test]
    fn metrics_over_finite_pairs() {
        let r = f32s(&[1.0, 2.0, 4.0, f32::NAN, 0.0]);
        let c = f32s(&[1.0, 2.5, 3.0, 5.0, f32::NEG_INFINITY]);
        let m = run(DType::Float32, &r, &c, &CompareOptions::default());
        assert_eq!(m.total, 5);
        assert_eq!(m.mismatch_count, 4);
        assert_eq!(m.finite_pairs, 3);
        assert_eq!(m.max_abs_error, Some(1.0));
        assert_eq!(m.max_rel_error, Some(0.25));
        assert_eq!(m.mean_abs_error, Some(0.5));
        assert_eq!(m.nan_introduced, 0);
        assert_eq!(m.inf_introduced, 1);
        let dot = 1.0 + 5.0 + 12.0;
        let want = dot / (21f64.sqrt() * (1.0f64 + 6.25 + 9.0).sqrt());
        assert!((m.cosine_similarity.unwrap() - want).abs() < 1e-15);
        assert!((m.relative_l2_error.unwrap() - (1.25f64 / 21.0).sqrt()).abs() < 1e-15);
        let first = m.first_mismatch.unwrap();
        assert_eq!(
            (first.index, first.reference, first.candidate),
            (1, Scalar::Float(2.0), Scalar::Float(2.5))
        );
    }

    #[test]
    fn nan_introduced_counts_new_nans_only() {
        let r = f32s(&[f32::NAN, 1.0, 1.0]);
        let c = f32s(&[f32::NAN, f32::NAN, 1.0]);
        let m = run(DType::Float32, &r, &c, &CompareOptions::default());
        assert_eq!((m.nan_introduced, m.inf_introduced), (1, 0));
    }

    #[test]
    fn integers_are_exact_beyond_f64_precision() {
        let big = (1i64 << 60) + 1;
        let r: Vec<u8> = [big, 5].iter().flat_map(|v| v.to_le_bytes()).collect();
        let c: Vec<u8> = [big + 1, 5].iter().flat_map(|v| v.to_le_bytes()).collect();
        let loose = CompareOptions {
            rtol: 0.5,
            ..CompareOptions::default()
        };
        let m = run(DType::Int64, &r, &c, &loose);
        assert_eq!(m.mismatch_count, 1);
        assert_eq!(m.max_abs_error, Some(1.0));
        assert_eq!(m.compared_as, "integer");
        let first = m.first_mismatch.unwrap();
        assert_eq!(first.reference, Scalar::Int(i128::from(big)));
        assert_eq!(first.candidate, Scalar::Int(i128::from(big + 1)));
        // Small integers: tolerances never apply either.
        let m = run(
            DType::Int32,
            &7i32.to_le_bytes(),
            &8i32.to_le_bytes(),
            &loose,
        );
        assert_eq!(m.mismatch_count, 1);
    }

    #[test]
    fn promoted_pairs_compare_values() {
        let r = f32s(&[1.5, 2.0]);
        let c: Vec<u8> = [1.5f64, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let m = compare(
            Values {
                dtype: DType::Float32,
                bytes: &r,
            },
            Values {
                dtype: DType::Float64,
                bytes: &c,
            },
            &[2],
            &CompareOptions::default(),
        )
        .unwrap();
        assert_eq!(m.mismatch_count, 0);
        assert_eq!(m.max_ulp_distance, None);
        let ints: Vec<u8> = [3i64, 4].iter().flat_map(|v| v.to_le_bytes()).collect();
        let floats = f32s(&[3.0, 4.5]);
        let m = compare(
            Values {
                dtype: DType::Int64,
                bytes: &ints,
            },
            Values {
                dtype: DType::Float32,
                bytes: &floats,
            },
            &[2],
            &CompareOptions::default(),
        )
        .unwrap();
        assert_eq!((m.mismatch_count, m.compared_as), (1, "float64"));
    }

    #[test]
    fn complex_uses_modulus_and_either_part_nan() {
        let pack = |v: &[(f32, f32)]| -> Vec<u8> {
            v.iter()
                .flat_map(|(a, b)| a.to_le_bytes().into_iter().chain(b.to_le_bytes()))
                .collect()
        };
        let r = pack(&[(3.0, 4.0), (f32::NAN, 1.0), (1.0, 1.0)]);
        let c = pack(&[(3.0, 4.000_01), (1.0, f32::NAN), (1.0, 2.0)]);
        let o = CompareOptions {
            equal_nan: true,
            ..CompareOptions::default()
        };
        let m = run(DType::Complex64, &r, &c, &o);
        assert_eq!(m.mismatch_count, 1);
        assert_eq!(m.first_mismatch.unwrap().index, 2);
        assert_eq!(m.max_abs_error, Some(1.0));
    }

    #[test]
    fn ulp_distances_in_each_format() {
        let one = f16::from_f32(1.0).to_bits();
        let r: Vec<u8> = [one, 0x8000].iter().flat_map(|v| v.to_le_bytes()).collect();
        let c: Vec<u8> = [one + 3, 0x0001]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let m = run(DType::Float16, &r, &c, &CompareOptions::default());
        assert_eq!(m.max_ulp_distance, Some(3));
        // Opposite signs count through zero; infinities are excluded.
        let fmt = UlpFormat::of(DType::Float32).unwrap();
        assert_eq!(
            fmt.max_distance(
                &f32s(&[-f32::from_bits(1)]),
                &f32s(&[f32::from_bits(1)]),
                Simd::detect()
            ),
            2
        );
        assert_eq!(
            fmt.max_distance(&f32s(&[f32::INFINITY]), &f32s(&[1.0]), Simd::Portable),
            0
        );
        let e8 = UlpFormat::of(DType::Float8E8M0Fnu).unwrap();
        assert_eq!(e8.max_distance(&[10, 0xFF], &[7, 1], Simd::detect()), 3);
        let fnuz = UlpFormat::of(DType::Float8E4M3Fnuz).unwrap();
        assert_eq!(
            fnuz.max_distance(&[0x80, 0x81], &[0x01, 0x01], Simd::Portable),
            2
        );
    }

    #[test]
    fn parallel_tasks_match_sequential_and_find_the_first_mismatch() {
        let n = 3 * TASK + 17;
        let r: Vec<f32> = (0..n).map(|i| (i as f32).sin()).collect();
        let mut c = r.clone();
        c[2 * TASK + 5] += 1.0;
        c[TASK + 3] = f32::NAN;
        let m = run(
            DType::Float32,
            &f32s(&r),
            &f32s(&c),
            &CompareOptions::default(),
        );
        assert_eq!(m.mismatch_count, 2);
        assert_eq!(m.first_mismatch.as_ref().unwrap().index, (TASK + 3) as u64);
        assert_eq!(m.nan_introduced, 1);
        assert_eq!(m.finite_pairs, n as u64 - 1);
        let again = run(
            DType::Float32,
            &f32s(&r),
            &f32s(&c),
            &CompareOptions::default(),
        );
        assert_eq!(format!("{m:?}"), format!("{again:?}"));
    }

    #[test]
    fn extreme_magnitudes_keep_norms_finite() {
        let r: Vec<u8> = [1e300f64, -1e300]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let c: Vec<u8> = [1e300f64, 1e300]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let m = run(DType::Float64, &r, &c, &CompareOptions::default());
        assert_eq!(m.cosine_similarity, Some(0.0));
        assert!((m.relative_l2_error.unwrap() - 2f64.sqrt()).abs() < 1e-12);
        assert!((m.mean_abs_error.unwrap() - 1e300).abs() / 1e300 < 1e-12);
        let tiny: Vec<u8> = [1e-200f64, 2e-200]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let m = run(DType::Float64, &tiny, &tiny, &CompareOptions::default());
        assert!((m.cosine_similarity.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(m.relative_l2_error, Some(0.0));
    }

    #[test]
    fn vector_and_portable_loops_agree_bit_for_bit() {
        let specials = [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            1e300,
            1e-310,
        ];
        let n = 3 * BLOCK + 13;
        let r: Vec<f64> = (0..n)
            .map(|i| match i % 97 {
                k if k < specials.len() => specials[k],
                _ => (i as f64 * 0.37).sin() * 10f64.powi((i % 13) as i32 - 6),
            })
            .collect();
        let c: Vec<f64> = r
            .iter()
            .enumerate()
            .map(|(i, &x)| match i % 5 {
                0 => x * (1.0 + 1e-6),
                1 => specials[i % specials.len()],
                _ => x,
            })
            .collect();
        let bytes = |v: &[f64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
        let (rb, cb) = (bytes(&r), bytes(&c));
        let reference = Values {
            dtype: DType::Float64,
            bytes: &rb,
        };
        let candidate = Values {
            dtype: DType::Float64,
            bytes: &cb,
        };
        let ulp = UlpFormat::of(DType::Float64);
        for equal_nan in [false, true] {
            let rule = Rule {
                atol: 1e-8,
                rtol: 1e-5,
                equal_nan,
            };
            let run = |simd| {
                let acc = if equal_nan {
                    real_task_body::<true, true>(reference, candidate, 0, n, rule, ulp, simd)
                } else {
                    real_task_body::<true, false>(reference, candidate, 0, n, rule, ulp, simd)
                };
                format!("{:?}", acc.unwrap())
            };
            assert_eq!(run(Simd::Portable), run(Simd::detect()));
        }
    }

    #[test]
    fn unravel_is_row_major() {
        assert_eq!(unravel(5, &[2, 3]), vec![1, 2]);
        assert_eq!(unravel(0, &[]), Vec::<u64>::new());
        assert_eq!(unravel(7, &[2, 2, 2]), vec![1, 1, 1]);
    }
}
