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

// ------------------------------------------------------------------------- real values

/// Compares elements `start..end` of a real pair.
fn real_task(
    reference: Values<'_>,
    candidate: Values<'_>,
    start: usize,
    end: usize,
    rule: Rule,
    ulp: Option<UlpFormat>,
) -> Result<Acc, CompareError> {
    // Squares of float32 and narrower values, and of integers, stay far inside the range of
    // f64; only float64 sources need the largest magnitude, to rescale norm sums.
    let track = reference.dtype == DType::Float64 || candidate.dtype == DType::Float64;
    let simd = Simd::detect();
    match (track, rule.equal_nan) {
        (true, true) => {
            real_task_body::<true, true>(reference, candidate, start, end, rule, ulp, simd)
        }
        (true, false) => {
            real_task_body::<true, false>(reference, candidate, start, end, rule, ulp, simd)
        }
        (false, true) => {
            real_task_body::<false, true>(reference, candidate, start, end, rule, ulp, simd)
        }
        (false, false) => {
            real_task_body::<false, false>(reference, candidate, start, end, rule, ulp, simd)
        }
    }
}

/// Which implementation of the hot loop this CPU can run. Both give bit-identical results:
/// the AVX2 loop performs the same IEEE operations, lane for lane, as the portable one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Simd {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Simd {
    fn detect() -> Simd {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                return Simd::Avx2;
            }
        }
        Simd::Portable
    }
}

fn real_task_body<const MAG: bool, const NAN: bool>(
    reference: Values<'_>,
    candidate: Values<'_>,
    start: usize,
    end: usize,
    rule: Rule,
    ulp: Option<UlpFormat>,
    simd: Simd,
) -> Result<Acc, CompareError> {
    let mut acc = Acc::default();
    let mut c = [0.0f64; BLOCK];
    let mut r = [0.0f64; BLOCK];
    let mut at = start;
    while at < end {
        let stop = (at + BLOCK).min(end);
        let len = stop - at;
        let (cb, rb) = (candidate.range(at, stop), reference.range(at, stop));
        decode_real(candidate.dtype, cb, &mut c[..len]).map_err(decode_error)?;
        decode_real(reference.dtype, rb, &mut r[..len]).map_err(decode_error)?;
        let mismatches = real_block::<MAG, NAN>(&c[..len], &r[..len], rule, &mut acc, simd);
        if mismatches > 0 && acc.first.is_none() {
            acc.first = (0..len)
                .find(|&i| !rule.real_close(c[i], r[i]))
                .map(|i| (at + i) as u64);
        }
        if let Some(format) = ulp {
            // The block's bytes were just decoded, so they are still in L1 cache.
            acc.max_ulp = acc.max_ulp.max(format.max_distance(cb, rb, simd));
        }
        at = stop;
    }
    Ok(acc)
}

/// Per-lane accumulators of one block. Lane `l` takes the elements `i` with `i % LANES ==
/// l` of the whole groups of `LANES`; the remainder goes to lane 0. Counts are f64 (exact:
/// a block has at most BLOCK elements) so no mask crosses to the integer unit.
#[derive(Default)]
struct Lanes {
    mism: [f64; LANES],
    fin: [f64; LANES],
    sum: [f64; LANES],
    max_abs: [f64; LANES],
    max_rel: [f64; LANES],
    dot: [f64; LANES],
    rsq: [f64; LANES],
    csq: [f64; LANES],
    dsq: [f64; LANES],
    mag: [f64; LANES],
}

impl Lanes {
    /// One element into lane `l`: the reference definition the vector loop reproduces.
    #[inline(always)]
    fn step<const MAG: bool, const NAN: bool>(&mut self, l: usize, a: f64, b: f64, rule: Rule) {
        let finite = (a.abs() < f64::INFINITY) & (b.abs() < f64::INFINITY);
        // Non-finite pairs enter the sums as zeros.
        let (fa, fb) = if finite { (a, b) } else { (0.0, 0.0) };
        let e = (fa - fb).abs();
        let close = rule.real_close_with::<NAN>(a, b, fb.abs());
        self.mism[l] += if close { 0.0 } else { 1.0 };
        self.fin[l] += if finite { 1.0 } else { 0.0 };
        self.sum[l] += e;
        self.max_abs[l] = if e > self.max_abs[l] {
            e
        } else {
            self.max_abs[l]
        };
        // x / 0 is +inf as wanted; 0 / 0 (equal zeros, or a non-finite pair) is NaN, which
        // the comparison never selects.
        let rel = e / fb.abs();
        self.max_rel[l] = if rel > self.max_rel[l] {
            rel
        } else {
            self.max_rel[l]
        };
        self.dot[l] += fa * fb;
        self.rsq[l] += fb * fb;
        self.csq[l] += fa * fa;
        self.dsq[l] += e * e;
        if MAG {
            let m = if fa.abs() > fb.abs() {
                fa.abs()
            } else {
                fb.abs()
            };
            self.mag[l] = if m > self.mag[l] { m } else { self.mag[l] };
        }
    }

    fn portable<const MAG: bool, const NAN: bool>(&mut self, c: &[f64], r: &[f64], rule: Rule) {
        for (cc, rr) in c.chunks_exact(LANES).zip(r.chunks_exact(LANES)) {
            for l in 0..LANES {
                self.step::<MAG, NAN>(l, cc[l], rr[l], rule);
            }
        }
    }

    /// The same as [`Lanes::portable`], four lanes per AVX2 register.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn avx2<const MAG: bool, const NAN: bool>(&mut self, c: &[f64], r: &[f64], rule: Rule) {
        use std::arch::x86_64::*;
        // SAFETY (whole body): the caller guarantees AVX2; every load and store below goes
        // through an unaligned intrinsic on a slice of exactly four f64 (checked by
        // `chunks_exact`) or on a `[f64; 4]` array.
        unsafe {
            let abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFF_FFFF_FFFF_FFFF));
            let inf = _mm256_set1_pd(f64::INFINITY);
            let one = _mm256_set1_pd(1.0);
            let atol = _mm256_set1_pd(rule.atol);
            let rtol = _mm256_set1_pd(rule.rtol);
            let load = |x: &[f64; LANES]| _mm256_loadu_pd(x.as_ptr());
            let (mut mism, mut fin, mut sum) = (load(&self.mism), load(&self.fin), load(&self.sum));
            let (mut max_abs, mut max_rel) = (load(&self.max_abs), load(&self.max_rel));
            let (mut dot, mut rsq) = (load(&self.dot), load(&self.rsq));
            let (mut csq, mut dsq, mut mag) = (load(&self.csq), load(&self.dsq), load(&self.mag));
            for (cc, rr) in c.chunks_exact(LANES).zip(r.chunks_exact(LANES)) {
                let a = _mm256_loadu_pd(cc.as_ptr());
                let b = _mm256_loadu_pd(rr.as_ptr());
                let finite = _mm256_and_pd(
                    _mm256_cmp_pd::<_CMP_LT_OQ>(_mm256_and_pd(a, abs_mask), inf),
                    _mm256_cmp_pd::<_CMP_LT_OQ>(_mm256_and_pd(b, abs_mask), inf),
                );
                let fa = _mm256_and_pd(a, finite);
                let fb = _mm256_and_pd(b, finite);
                let base = _mm256_and_pd(fb, abs_mask);
                let e = _mm256_and_pd(_mm256_sub_pd(fa, fb), abs_mask);
                let d = _mm256_and_pd(_mm256_sub_pd(a, b), abs_mask);
                let tol = _mm256_add_pd(atol, _mm256_mul_pd(rtol, base));
                let mut close = _mm256_or_pd(
                    _mm256_cmp_pd::<_CMP_EQ_OQ>(a, b),
                    _mm256_cmp_pd::<_CMP_LE_OQ>(d, tol),
                );
                if NAN && rule.equal_nan {
                    close = _mm256_or_pd(
                        close,
                        _mm256_and_pd(
                            _mm256_cmp_pd::<_CMP_UNORD_Q>(a, a),
                            _mm256_cmp_pd::<_CMP_UNORD_Q>(b, b),
                        ),
                    );
                }
                mism = _mm256_add_pd(mism, _mm256_andnot_pd(close, one));
                fin = _mm256_add_pd(fin, _mm256_and_pd(finite, one));
                sum = _mm256_add_pd(sum, e);
                max_abs = _mm256_blendv_pd(max_abs, e, _mm256_cmp_pd::<_CMP_GT_OQ>(e, max_abs));
                let rel = _mm256_div_pd(e, base);
                max_rel = _mm256_blendv_pd(max_rel, rel, _mm256_cmp_pd::<_CMP_GT_OQ>(rel, max_rel));
                dot = _mm256_add_pd(dot, _mm256_mul_pd(fa, fb));
                rsq = _mm256_add_pd(rsq, _mm256_mul_pd(fb, fb));
                csq = _mm256_add_pd(csq, _mm256_mul_pd(fa, fa));
                dsq = _mm256_add_pd(dsq, _mm256_mul_pd(e, e));
                if MAG {
                    let ma = _mm256_and_pd(fa, abs_mask);
                    let m = _mm256_blendv_pd(base, ma, _mm256_cmp_pd::<_CMP_GT_OQ>(ma, base));
                    mag = _mm256_blendv_pd(mag, m, _mm256_cmp_pd::<_CMP_GT_OQ>(m, mag));
                }
            }
            let store = |v: __m256d, x: &mut [f64; LANES]| _mm256_storeu_pd(x.as_mut_ptr(), v);
            store(mism, &mut self.mism);
            store(fin, &mut self.fin);
            store(sum, &mut self.sum);
            store(max_abs, &mut self.max_abs);
            store(max_rel, &mut self.max_rel);
            store(dot, &mut self.dot);
            store(rsq, &mut self.rsq);
            store(csq, &mut self.csq);
            store(dsq, &mut self.dsq);
            store(mag, &mut self.mag);
        }
    }
}

/// One block of decoded values into `acc`; returns the block's mismatches.
fn real_block<const MAG: bool, const NAN: bool>(
    c: &[f64],
    r: &[f64],
    rule: Rule,
    acc: &mut Acc,
    simd: Simd,
) -> u64 {
    let mut lanes = Lanes::default();
    let split = c.len() - c.len() % LANES;
    match simd {
        // SAFETY: `Simd::Avx2` is only ever the result of detecting AVX2 on this CPU.
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 => unsafe { lanes.avx2::<MAG, NAN>(&c[..split], &r[..split], rule) },
        Simd::Portable => lanes.portable::<MAG, NAN>(&c[..split], &r[..split], rule),
    }
    for i in split..c.len() {
        lanes.step::<MAG, NAN>(0, c[i], r[i], rule);
    }

    let mut block_mismatches = 0;
    let mut block_finite = 0;
    for l in 0..LANES {
        block_mismatches += lanes.mism[l] as u64;
        block_finite += lanes.fin[l] as u64;
        acc.sum_abs += lanes.sum[l];
        acc.max_abs = acc.max_abs.max(lanes.max_abs[l]);
        acc.max_rel = acc.max_rel.max(lanes.max_rel[l]);
        acc.dot += lanes.dot[l];
        acc.ref_sq += lanes.rsq[l];
        acc.cand_sq += lanes.csq[l];
        acc.diff_sq += lanes.dsq[l];
        acc.max_mag = acc.max_mag.max(lanes.mag[l]);
    }
    acc.finite_pairs += block_finite;
    if block_finite < c.len() as u64 {
        // Non-finite values are rare: count the ones the candidate introduced only in
        // blocks that have any, off the hot loop.
        for (&a, &b) in c.iter().zip(r) {
            acc.nan_introduced += u64::from(a.is_nan() && !b.is_nan());
            acc.inf_introduced += u64::from(a.is_infinite() && !b.is_infinite());
        }
    }
    acc.mismatches += block_mismatches;
    block_mismatches
}

// ---------------------------------------------------------------------- integer values

fn integer_task(
    reference: Values<'_>,
    candidate: Values<'_>,
    start: usize,
    end: usize,
) -> Result<Acc, CompareError> {
    let wide = |d: DType| d.itemsize() == 8;
    if !wide(reference.dtype) && !wide(candidate.dtype) {
        // Up to 32 bits every value is exact in f64, so the float loop (exact rule) is
        // exact too, and much faster than going through i128.
        let rule = Rule {
            atol: -1.0,
            rtol: 0.0,
            equal_nan: false,
        };
        return real_task(reference, candidate, start, end, rule, None);
    }
    let mut acc = Acc::default();
    for i in start..end {
        let (Some(c), Some(r)) = (
            integer_at(candidate.dtype, candidate.bytes, i),
            integer_at(reference.dtype, reference.bytes, i),
        ) else {
            return Err(CompareError::InvalidInput(format!(
                "element {i} of an integer payload is out of range"
            )));
        };
        let e = c.abs_diff(r) as f64;
        if c != r {
            acc.mismatches += 1;
            acc.first.get_or_insert(i as u64);
        }
        let (cf, rf) = (c as f64, r as f64);
        acc.finite_pairs += 1;
        acc.sum_abs += e;
        acc.max_abs = acc.max_abs.max(e);
        let rel = if r != 0 {
            e / rf.abs()
        } else if e > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        acc.max_rel = acc.max_rel.max(rel);
        acc.dot += cf * rf;
        acc.ref_sq += rf * rf;
        acc.cand_sq += cf * cf;
        acc.diff_sq += e * e;
        acc.max_mag = acc.max_mag.max(cf.abs()).max(rf.abs());
    }
    Ok(acc)
}

// ---------------------------------------------------------------------- complex values

fn decode_as_complex(
    values: Values<'_>,
    start: usize,
    end: usize,
    out: &mut [(f64, f64)],
) -> Result<(), CompareError> {
    if values.dtype.is_complex() {
        decode_complex(values.dtype, values.range(start, end), out).map_err(decode_error)?;
    } else {
        let mut real = [0.0f64; BLOCK];
        let real = &mut real[..out.len()];
        decode_real(values.dtype, values.range(start, end), real).map_err(decode_error)?;
        for (o, &x) in out.iter_mut().zip(real.iter()) {
            *o = (x, 0.0);
        }
    }
    Ok(())
}

fn complex_task(
    reference: Values<'_>,
    candidate: Values<'_>,
    start: usize,
    end: usize,
    rule: Rule,
) -> Result<Acc, CompareError> {
    let mut acc = Acc::default();
    let mut c = [(0.0f64, 0.0f64); BLOCK];
    let mut r = [(0.0f64, 0.0f64); BLOCK];
    let mut at = start;
    while at < end {
        let stop = (at + BLOCK).min(end);
        let len = stop - at;
        decode_as_complex(candidate, at, stop, &mut c[..len])?;
        decode_as_complex(reference, at, stop, &mut r[..len])?;
        for i in 0..len {
            let (a, b) = (c[i], r[i]);
            if !rule.complex_close(a, b) {
                acc.mismatches += 1;
                acc.first.get_or_insert((at + i) as u64);
            }
            let a_nan = a.0.is_nan() || a.1.is_nan();
            let b_nan = b.0.is_nan() || b.1.is_nan();
            let a_inf = !a_nan && (a.0.is_infinite() || a.1.is_infinite());
            let b_inf = !b_nan && (b.0.is_infinite() || b.1.is_infinite());
            acc.nan_introduced += u64::from(a_nan && !b_nan);
            acc.inf_introduced += u64::from(a_inf && !b_inf);
            if a_nan || b_nan || a_inf || b_inf {
                continue;
            }
            let e = (a.0 - b.0).hypot(a.1 - b.1);
            let (ma, mb) = (a.0.hypot(a.1), b.0.hypot(b.1));
            acc.finite_pairs += 1;
            acc.sum_abs += e;
            acc.max_abs = acc.max_abs.max(e);
            let rel = if mb > 0.0 {
                e / mb
            } else if e > 0.0 {
                f64::INFINITY
            } else {
                0.0
            };
            acc.max_rel = acc.max_rel.max(rel);
            // Re<c, r> with the Hermitian inner product: 1 for equal vectors.
            acc.dot += a.0 * b.0 + a.1 * b.1;
            acc.ref_sq += b.0 * b.0 + b.1 * b.1;
            acc.cand_sq += a.0 * a.0 + a.1 * a.1;
            acc.diff_sq += e * e;
            acc.max_mag = acc.max_mag.max(ma).max(mb);
        }
        at = stop;
    }
    Ok(acc)
}

// ------------------------------------------------------------------ rescaled norm sums

/// Recomputes the summed metrics with both sides scaled by one power of two, for values
/// whose squares leave the range of `f64`. Cosine and relative L2 do not depend on a
/// common scale; the mean error is scaled back.
fn rescaled_norms(
    reference: Values<'_>,
    candidate: Values<'_>,
    domain: Domain,
    acc: &mut Acc,
) -> Result<(), CompareError> {
    let exponent = acc.max_mag.log2().floor() as i32;
    let scale = 2f64.powi((-exponent).clamp(-1000, 1000));
    let n = reference.len();
    let tasks = n.div_ceil(TASK);
    let partials: Vec<[f64; 5]> = (0..tasks)
        .into_par_iter()
        .map(|t| {
            let (start, end) = (t * TASK, ((t + 1) * TASK).min(n));
            let mut sums = [0.0f64; 5];
            let mut c = [(0.0f64, 0.0f64); BLOCK];
            let mut r = [(0.0f64, 0.0f64); BLOCK];
            let mut at = start;
            while at < end {
                let stop = (at + BLOCK).min(end);
                let len = stop - at;
                if domain == Domain::Complex {
                    decode_as_complex(candidate, at, stop, &mut c[..len])?;
                    decode_as_complex(reference, at, stop, &mut r[..len])?;
                } else {
                    let mut cr = [0.0f64; BLOCK];
                    let mut rr = [0.0f64; BLOCK];
                    decode_real(candidate.dtype, candidate.range(at, stop), &mut cr[..len])
                        .map_err(decode_error)?;
                    decode_real(reference.dtype, reference.range(at, stop), &mut rr[..len])
                        .map_err(decode_error)?;
                    for i in 0..len {
                        c[i] = (cr[i], 0.0);
                        r[i] = (rr[i], 0.0);
                    }
                }
                for i in 0..len {
                    let finite = c[i].0.is_finite()
                        && c[i].1.is_finite()
                        && r[i].0.is_finite()
                        && r[i].1.is_finite();
                    if !finite {
                        continue;
                    }
                    let a = (c[i].0 * scale, c[i].1 * scale);
                    let b = (r[i].0 * scale, r[i].1 * scale);
                    let e = (a.0 - b.0).hypot(a.1 - b.1);
                    sums[0] += e;
                    sums[1] += a.0 * b.0 + a.1 * b.1;
                    sums[2] += b.0 * b.0 + b.1 * b.1;
                    sums[3] += a.0 * a.0 + a.1 * a.1;
                    sums[4] += e * e;
                }
                at = stop;
            }
            Ok(sums)
        })
        .collect::<Result<_, CompareError>>()?;
    let mut sums = [0.0f64; 5];
    for p in &partials {
        for (s, v) in sums.iter_mut().zip(p) {
            *s += v;
        }
    }
    acc.sum_abs = sums[0] / scale;
    acc.dot = sums[1];
    acc.ref_sq = sums[2];
    acc.cand_sq = sums[3];
    acc.diff_sq = sums[4];
    Ok(())
}

// ------------------------------------------------------------------------ ULP distance

/// A floating-point bit layout: ULP distance is the number of representable values
/// between two finite values, counted on the sign-magnitude bit patterns (so `-0.0` and
/// `0.0` are 0 apart and the smallest values of opposite sign are 2 apart).
#[derive(Debug, Clone, Copy)]
struct UlpFormat {
    bytes: usize,
    /// The sign bit; 0 for an unsigned format (float8_e8m0fnu).
    sign: u64,
    /// Magnitudes at or above this are infinities or NaNs.
    limit: u64,
    /// "fnuz" formats: the negative-zero pattern is their only NaN.
    negative_zero_is_nan: bool,
}

impl UlpFormat {
    /// The layout of a float dtype, or of the parts of a complex one; `None` otherwise.
    fn of(dtype: DType) -> Option<UlpFormat> {
        let f = |bytes, sign, limit, negative_zero_is_nan| {
            Some(UlpFormat {
                bytes,
                sign,
                limit,
                negative_zero_is_nan,
            })
        };
        match dtype {
            DType::Float64 | DType::Complex128 => f(8, 1 << 63, 0x7FF0_0000_0000_0000, false),
            DType::Float32 | DType::Complex64 => f(4, 1 << 31, 0x7F80_0000, false),
            DType::Float16 | DType::Complex32 => f(2, 1 << 15, 0x7C00, false),
            DType::BFloat16 => f(2, 1 << 15, 0x7F80, false),
            // e4m3fn has no infinity: 0x7F / 0xFF are its NaNs.
            DType::Float8E4M3Fn => f(1, 0x80, 0x7F, false),
            DType::Float8E5M2 => f(1, 0x80, 0x7C, false),
            DType::Float8E4M3Fnuz | DType::Float8E5M2Fnuz => f(1, 0x80, 0x80, true),
            DType::Float8E8M0Fnu => f(1, 0, 0xFF, false),
            _ => None,
        }
    }

    /// The largest distance over element pairs of `c` and `r` (same length), counting only
    /// pairs where both values are finite.
    fn max_distance(self, c: &[u8], r: &[u8], simd: Simd) -> u64 {
        match simd {
            // SAFETY: `Simd::Avx2` is only ever the result of detecting AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => unsafe { self.max_distance_avx2(c, r) },
            Simd::Portable => self.max_distance_with(c, r),
        }
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn max_distance_avx2(self, c: &[u8], r: &[u8]) -> u64 {
        self.max_distance_with(c, r)
    }

    #[inline(always)]
    fn max_distance_with(self, c: &[u8], r: &[u8]) -> u64 {
        match self.bytes {
            1 => u64::from(self.max_narrow::<1>(c, r)),
            2 => u64::from(self.max_narrow::<2>(c, r)),
            4 => u64::from(self.max_narrow::<4>(c, r)),
            _ => self.max_wide(c, r),
        }
    }

    /// Up to 32-bit formats: distances fit in u32 (at most twice the largest finite
    /// magnitude), which keeps the loop in 32-bit vector lanes.
    #[inline(always)]
    fn max_narrow<const N: usize>(self, c: &[u8], r: &[u8]) -> u32 {
        let sign = self.sign as u32;
        let limit = self.limit as u32;
        let magnitude = if sign == 0 {
            u32::MAX >> (32 - 8 * N)
        } else {
            sign - 1
        };
        let word = |bytes: &[u8]| {
            let mut w = [0u8; 4];
            w[..N].copy_from_slice(bytes);
            u32::from_le_bytes(w)
        };
        let mut best = 0u32;
        for (x, y) in c.chunks_exact(N).zip(r.chunks_exact(N)) {
            let (a, b) = (word(x), word(y));
            let (ma, mb) = (a & magnitude, b & magnitude);
            let (sa, sb) = (a & sign, b & sign);
            let nan_zero =
                self.negative_zero_is_nan & (((sa != 0) & (ma == 0)) | ((sb != 0) & (mb == 0)));
            let finite = (ma < limit) & (mb < limit) & !nan_zero;
            let d = if sa != sb { ma + mb } else { ma.abs_diff(mb) };
            best = best.max(if finite { d } else { 0 });
        }
        best
    }

    #[inline(always)]
    fn max_wide(self, c: &[u8], r: &[u8]) -> u64 {
        let magnitude = self.sign - 1;
        let mut best = 0u64;
        for (x, y) in c.chunks_exact(8).zip(r.chunks_exact(8)) {
            let mut wa = [0u8; 8];
            let mut wb = [0u8; 8];
            wa.copy_from_slice(x);
            wb.copy_from_slice(y);
            let (a, b) = (u64::from_le_bytes(wa), u64::from_le_bytes(wb));
            let (ma, mb) = (a & magnitude, b & magnitude);
            let finite = (ma < self.limit) & (mb < self.limit);
            let d = if (a ^ b) & self.sign != 0 {
                ma + mb
            } else {
                ma.abs_diff(mb)
            };
            best = best.max(if finite { d } else { 0 });
        }
        best
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
