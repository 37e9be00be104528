//! Mean, variance and sum of squares of finite values, kept relative to a
//! power-of-two scale so that neither huge nor tiny inputs overflow or underflow.
//!
//! A partial stores `mean`, `m2` (sum of squared deviations) and `ssq` (sum of
//! squares) for its values divided by `2^k`, where `2^k <= max|x| < 2^(k+1)`. Scaling
//! by a power of two is exact, every scaled value lies in (-2, 2), and partials merge
//! with Chan et al.'s pairwise update after rescaling to the larger `k`: the
//! LAPACK `nrm2` idea applied to all three moments.

/// Scale exponent of a partial whose values are all zero; below every real exponent
/// (the smallest subnormal is 2^-1074) so merging always prefers the other side.
const ZERO_K: i32 = -1100;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Moments {
    pub n: u64,
    k: i32,
    mean: f64,
    m2: f64,
    ssq: f64,
}

impl Moments {
    pub const EMPTY: Moments = Moments {
        n: 0,
        k: ZERO_K,
        mean: 0.0,
        m2: 0.0,
        ssq: 0.0,
    };

    /// The moments of `n_finite` values whose largest magnitude is `max_abs`, when that
    /// alone decides them (none, or all zero); `None` otherwise.
    #[inline(always)]
    fn without_spread(n_finite: u64, max_abs: f64) -> Option<Moments> {
        match (n_finite, max_abs == 0.0) {
            (0, _) => Some(Moments::EMPTY),
            (n, true) => Some(Moments {
                n,
                ..Moments::EMPTY
            }),
            _ => None,
        }
    }

    /// Two-pass moments of the finite entries of `values` (non-finite ones are
    /// skipped). `n_finite` and `max_abs` must describe exactly those entries; the
    /// caller has them already from its classification pass.
    ///
    /// `extra_k` says the values were pre-divided by `2^extra_k` (complex magnitudes
    /// that would otherwise overflow).
    #[inline(always)]
    pub fn of_finite(values: &[f64], n_finite: u64, max_abs: f64, extra_k: i32) -> Moments {
        if let Some(trivial) = Moments::without_spread(n_finite, max_abs) {
            return trivial;
        }
        let k = exponent(max_abs);
        let (a, b) = scale_down_factors(k);

        // Several accumulators per pass: float addition is not associative, so
        // the compiler only vectorises reductions that are spelled out in lanes.
        let mut sum = [0.0f64; LANES];
        let mut ssq = [0.0f64; LANES];
        let chunks = values.chunks_exact(LANES);
        let tail = chunks.remainder();
        for c in chunks {
            for i in 0..LANES {
                let y = if c[i].is_finite() { c[i] * a * b } else { 0.0 };
                sum[i] += y;
                ssq[i] += y * y;
            }
        }
        for (i, &x) in tail.iter().enumerate() {
            let y = if x.is_finite() { x * a * b } else { 0.0 };
            sum[i] += y;
            ssq[i] += y * y;
        }
        let mean = lane_sum(sum) / n_finite as f64;

        let mut m2 = [0.0f64; LANES];
        let chunks = values.chunks_exact(LANES);
        for c in chunks {
            for i in 0..LANES {
                let d = if c[i].is_finite() {
                    c[i] * a * b - mean
                } else {
                    0.0
                };
                m2[i] += d * d;
            }
        }
        for (i, &x) in tail.iter().enumerate() {
            let d = if x.is_finite() { x * a * b - mean } else { 0.0 };
            m2[i] += d * d;
        }

        Moments {
            n: n_finite,
            k: k + extra_k,
            mean,
            m2: lane_sum(m2),
            ssq: lane_sum(ssq),
        }
    }

    /// The moments of finite values accumulated without scaling (`mean`, `m2` and
    /// `ssq` of the values themselves), put on this type's scale. Exact, and so equal bit
    /// for bit to [`Moments::of_finite`] over the same values in the same lanes, whenever
    /// nothing under- or overflowed unscaled: true of every value a float32, float16 or
    /// bfloat16 can hold (their squares and sums lie far inside float64's range), because
    /// scaling by a power of two changes no rounding.
    pub fn from_unscaled(n_finite: u64, max_abs: f64, mean: f64, m2: f64, ssq: f64) -> Moments {
        if let Some(trivial) = Moments::without_spread(n_finite, max_abs) {
            return trivial;
        }
        let k = exponent(max_abs);
        let down = pow2(-k);
        let down2 = pow2(-2 * k);
        Moments {
            n: n_finite,
            k,
            mean: mean * down,
            m2: m2 * down2,
            ssq: ssq * down2,
        }
    }

    /// Chan et al.'s pairwise combination, done at the larger of the two scales.
    pub fn merge(self, other: Moments) -> Moments {
        if self.n == 0 {
            return other;
        }
        if other.n == 0 {
            return self;
        }
        let k = self.k.max(other.k);
        let ra = pow2(self.k - k);
        let rb = pow2(other.k - k);
        let (mean_a, mean_b) = (self.mean * ra, other.mean * rb);
        let n = self.n + other.n;
        let w = other.n as f64 / n as f64;
        let delta = mean_b - mean_a;
        Moments {
            n,
            k,
            mean: mean_a + delta * w,
            m2: self.m2 * ra * ra + other.m2 * rb * rb + delta * delta * (self.n as f64 * w),
            ssq: self.ssq * ra * ra + other.ssq * rb * rb,
        }
    }

    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| scale_up(self.mean, self.k))
    }

    /// Population standard deviation.
    pub fn std(&self) -> Option<f64> {
        (self.n > 0).then(|| scale_up((self.m2 / self.n as f64).sqrt(), self.k))
    }

    /// Euclidean norm.
    pub fn l2(&self) -> f64 {
        scale_up(self.ssq.sqrt(), self.k)
    }
}

pub(crate) const LANES: usize = 8;

/// Pairwise so the lane order, not just the lane count, is fixed.
pub(crate) fn lane_sum(l: [f64; LANES]) -> f64 {
    ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}

/// `floor(log2(x))` for finite positive `x`, subnormals included.
pub(crate) fn exponent(x: f64) -> i32 {
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7FF) as i32;
    if biased == 0 {
        let mantissa = bits & ((1u64 << 52) - 1);
        -1074 + (63 - mantissa.leading_zeros() as i32)
    } else {
        biased - 1023
    }
}

/// `2^e`, flushing to 0 below the subnormal range and to infinity above `f64::MAX`.
pub(crate) fn pow2(e: i32) -> f64 {
    if e > 1023 {
        f64::INFINITY
    } else if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else if e >= -1074 {
        f64::from_bits(1u64 << (e + 1074))
    } else {
        0.0
    }
}

/// Two factors whose product is `2^-k`, each representable: `2^-k` alone is not
/// when `2^k` is subnormal. Multiplying by them in turn is exact for values
/// below `2^(k+1)`, bar underflow of values negligible next to `2^k`.
fn scale_down_factors(k: i32) -> (f64, f64) {
    if k < -1023 {
        (pow2(537), pow2(-k - 537))
    } else {
        (pow2(-k), 1.0)
    }
}

/// `x * 2^k` with one rounding, even where `2^k` itself overflows.
fn scale_up(x: f64, k: i32) -> f64 {
    if k > 1023 {
        x * pow2(k - 1023) * pow2(1023)
    } else {
        x * pow2(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponent_and_pow2_cover_the_whole_range() {
        for e in -1074..=1023 {
            let p = pow2(e);
            assert!(p > 0.0 && p.is_finite(), "{e}");
            assert_eq!(exponent(p), e);
            if e < 1023 {
                let just_below_next = f64::from_bits(pow2(e + 1).to_bits() - 1);
                assert_eq!(exponent(just_below_next), e);
            }
        }
        assert_eq!(pow2(-1075), 0.0);
        assert_eq!(pow2(1024), f64::INFINITY);
        assert_eq!(exponent(f64::MAX), 1023);
        assert_eq!(exponent(3.0), 1);
        assert_eq!(exponent(0.75), -1);
    }

    #[test]
    fn scale_down_then_up_is_identity() {
        for k in [-1073, -1060, -1023, -1022, -5, 0, 7, 1000, 1023] {
            let (a, b) = scale_down_factors(k);
            let x = pow2(k) * 1.5;
            let y = x * a * b;
            assert_eq!(y, 1.5, "{k}");
            assert_eq!(scale_up(y, k), x, "{k}");
        }
        assert_eq!(scale_up(1.5, 1024), f64::INFINITY);
        assert_eq!(scale_up(0.75, 1024), 1.5 * pow2(1023));
    }
}
