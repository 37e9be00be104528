//! When two values count as close: the one rule behind tensor comparisons (the comparison
//! engine's kernels) and a probe's check action, as torch.isclose states it with the
//! reference as `other`: `|c - r| <= atol + rtol * |r|`.

/// The per-element test. Exact comparison is the same rule with a negative `atol` and a
/// zero `rtol`: the tolerance branch is then unreachable, leaving `==` and the NaN rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CloseRule {
    pub atol: f64,
    pub rtol: f64,
    /// NaN is close to NaN (and to nothing else either way).
    pub equal_nan: bool,
}

impl CloseRule {
    /// Only equal values (and NaN with NaN under `equal_nan`) are close.
    pub const fn exact(equal_nan: bool) -> CloseRule {
        CloseRule {
            atol: -1.0,
            rtol: 0.0,
            equal_nan,
        }
    }

    /// Whether candidate `c` is close to reference `r`. The tolerance base is `|r|` where
    /// both values are finite, else 0: that keeps the tolerance finite, so an infinite or
    /// NaN difference never passes (torch.isclose requires a finite difference for the
    /// same reason), while equal infinities pass as equal.
    #[inline(always)]
    pub fn real_close(self, c: f64, r: f64) -> bool {
        let finite = (c.abs() < f64::INFINITY) & (r.abs() < f64::INFINITY);
        let base = if finite { r.abs() } else { 0.0 };
        self.real_close_with::<true>(c, r, base)
    }

    /// The test with the tolerance base given (vectorised callers compute it lane-wise);
    /// `NAN = false` drops the NaN rule, for callers that pass it only when `equal_nan` is
    /// off.
    #[inline(always)]
    pub fn real_close_with<const NAN: bool>(self, c: f64, r: f64, base: f64) -> bool {
        let d = (c - r).abs();
        (c == r)
            | (d <= self.atol + self.rtol * base)
            | (NAN & self.equal_nan & c.is_nan() & r.is_nan())
    }

    /// Complex values `(re, im)`: the distance and the base are moduli; a NaN in either
    /// part makes the value NaN.
    #[inline(always)]
    pub fn complex_close(self, c: (f64, f64), r: (f64, f64)) -> bool {
        let d = (c.0 - r.0).hypot(c.1 - r.1);
        let c_nan = c.0.is_nan() || c.1.is_nan();
        let r_nan = r.0.is_nan() || r.1.is_nan();
        (c.0 == r.0 && c.1 == r.1)
            || (d <= self.atol + self.rtol * r.0.hypot(r.1) && d < f64::INFINITY)
            || (self.equal_nan && c_nan && r_nan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: CloseRule = CloseRule {
        atol: 1e-8,
        rtol: 1e-5,
        equal_nan: false,
    };

    #[test]
    fn the_tolerance_scales_with_the_reference() {
        assert!(RULE.real_close(100.0 + 9e-4, 100.0));
        assert!(!RULE.real_close(100.0 + 2e-3, 100.0));
        // Not symmetric: the base is the reference's magnitude.
        assert!(RULE.real_close(1.0, 1.0 + 1e-5));
    }

    #[test]
    fn non_finite_values_are_close_only_when_equal() {
        assert!(RULE.real_close(f64::INFINITY, f64::INFINITY));
        assert!(!RULE.real_close(f64::INFINITY, f64::NEG_INFINITY));
        assert!(!RULE.real_close(f64::INFINITY, 1e308));
        assert!(!RULE.real_close(f64::NAN, f64::NAN));
        let nan_equal = CloseRule {
            equal_nan: true,
            ..RULE
        };
        assert!(nan_equal.real_close(f64::NAN, f64::NAN));
        assert!(!nan_equal.real_close(f64::NAN, 1.0));
        assert!(nan_equal.complex_close((f64::NAN, 0.0), (0.0, f64::NAN)));
        assert!(!RULE.complex_close((f64::INFINITY, 0.0), (1.0, 0.0)));
        assert!(RULE.complex_close((f64::INFINITY, 0.0), (f64::INFINITY, 0.0)));
    }

    #[test]
    fn exact_is_equality() {
        let exact = CloseRule::exact(false);
        assert!(exact.real_close(0.5, 0.5));
        assert!(!exact.real_close(0.5, 0.5 + f64::EPSILON));
        assert!(exact.complex_close((1.0, 2.0), (1.0, 2.0)));
    }
}
