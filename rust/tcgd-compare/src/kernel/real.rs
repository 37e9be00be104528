//! Real values: the element-wise verdicts and metrics of float payloads, vectorised over
//! lanes.

use super::*;

/// Compares the elements `range` of a real pair.
pub(super) fn real_task(
    reference: Values<'_>,
    candidate: Values<'_>,
    range: Range<usize>,
    rule: Rule,
    ulp: Option<UlpFormat>,
) -> Result<Acc, CompareError> {
    // Squares of float32 and narrower values, and of integers, stay far inside the range of
    // f64; only float64 sources need the largest magnitude, to rescale norm sums.
    let track = reference.dtype == DType::Float64 || candidate.dtype == DType::Float64;
    let simd = Simd::detect();
    match (track, rule.equal_nan) {
        (true, true) => real_task_body::<true, true>(reference, candidate, range, rule, ulp, simd),
        (true, false) => {
            real_task_body::<true, false>(reference, candidate, range, rule, ulp, simd)
        }
        (false, true) => {
            real_task_body::<false, true>(reference, candidate, range, rule, ulp, simd)
        }
        (false, false) => {
            real_task_body::<false, false>(reference, candidate, range, rule, ulp, simd)
        }
    }
}

/// Which implementation of the hot loop this CPU can run. Both give bit-identical results:
/// the AVX2 loop performs the same IEEE operations, lane for lane, as the portable one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Simd {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Simd {
    pub(super) fn detect() -> Simd {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                return Simd::Avx2;
            }
        }
        Simd::Portable
    }
}

pub(super) fn real_task_body<const MAG: bool, const NAN: bool>(
    reference: Values<'_>,
    candidate: Values<'_>,
    range: Range<usize>,
    rule: Rule,
    ulp: Option<UlpFormat>,
    simd: Simd,
) -> Result<Acc, CompareError> {
    let mut acc = Acc::default();
    let mut c = [0.0f64; BLOCK];
    let mut r = [0.0f64; BLOCK];
    for block in blocks(range) {
        let (at, len) = (block.start, block.len());
        let (cb, rb) = (
            candidate.range(at, block.end),
            reference.range(at, block.end),
        );
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
    }
    Ok(acc)
}

/// Per-lane accumulators of one block. Lane `l` takes the elements `i` with `i % LANES ==
/// l` of the whole groups of `LANES`; the remainder goes to lane 0. Counts are f64 (exact:
/// a block has at most BLOCK elements) so no mask crosses to the integer unit.
#[derive(Default)]
pub(super) struct Lanes {
    pub(super) mism: [f64; LANES],
    pub(super) fin: [f64; LANES],
    pub(super) sum: [f64; LANES],
    pub(super) max_abs: [f64; LANES],
    pub(super) max_rel: [f64; LANES],
    pub(super) dot: [f64; LANES],
    pub(super) rsq: [f64; LANES],
    pub(super) csq: [f64; LANES],
    pub(super) dsq: [f64; LANES],
    pub(super) mag: [f64; LANES],
}

impl Lanes {
    /// One element into lane `l`: the reference definition the vector loop reproduces.
    #[inline(always)]
    pub(super) fn step<const MAG: bool, const NAN: bool>(
        &mut self,
        l: usize,
        a: f64,
        b: f64,
        rule: Rule,
    ) {
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

    pub(super) fn portable<const MAG: bool, const NAN: bool>(
        &mut self,
        c: &[f64],
        r: &[f64],
        rule: Rule,
    ) {
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
pub(super) fn real_block<const MAG: bool, const NAN: bool>(
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
