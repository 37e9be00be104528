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

use std::ops::Range;

use rayon::prelude::*;
use tcgd_tensor::decode::{decode_complex, decode_real, integer_at, DECODE_CHUNK};
use tcgd_tensor::{CloseRule as Rule, DType};

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

/// The per-element test ([`CloseRule`]), with exact mode (and integer values) folded in.
fn rule(options: &CompareOptions, domain: Domain) -> Rule {
    if options.mode == Mode::Exact || domain == Domain::Integer {
        Rule::exact(options.equal_nan)
    } else {
        Rule {
            atol: options.atol,
            rtol: options.rtol,
            equal_nan: options.equal_nan,
        }
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

/// `range` in blocks of at most [`BLOCK`] elements.
fn blocks(range: Range<usize>) -> impl Iterator<Item = Range<usize>> {
    let end = range.end;
    range
        .step_by(BLOCK)
        .map(move |start| start..(start + BLOCK).min(end))
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
    let rule = rule(options, domain);
    let ulp = (reference.dtype == candidate.dtype)
        .then(|| UlpFormat::of(reference.dtype))
        .flatten();

    let tasks = n.div_ceil(TASK);
    let partials: Vec<Acc> = (0..tasks)
        .into_par_iter()
        .map(|t| {
            let task = t * TASK..((t + 1) * TASK).min(n);
            match domain {
                Domain::Real => real_task(reference, candidate, task, rule, ulp),
                Domain::Integer => integer_task(reference, candidate, task),
                Domain::Complex => {
                    let mut acc = complex_task(reference, candidate, task.clone(), rule)?;
                    if let Some(format) = ulp {
                        acc.max_ulp = format.max_distance(
                            candidate.range(task.start, task.end),
                            reference.range(task.start, task.end),
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
    // The power of two the norm sums were taken at (1 unless they had to be rescaled).
    let norm_scale = if acc.norms_need_rescale() && domain != Domain::Integer {
        rescaled_norms(reference, candidate, &mut acc)?
    } else {
        1.0
    };

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
        rmse: any.then(|| (acc.diff_sq / fp as f64).sqrt() / norm_scale),
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
mod tests;
