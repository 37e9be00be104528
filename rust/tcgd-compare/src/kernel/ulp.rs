//! Distances in units in the last place, per float format.

use super::*;

/// A floating-point bit layout: ULP distance is the number of representable values
/// between two finite values, counted on the sign-magnitude bit patterns (so `-0.0` and
/// `0.0` are 0 apart and the smallest values of opposite sign are 2 apart).
#[derive(Debug, Clone, Copy)]
pub(super) struct UlpFormat {
    pub(super) bytes: usize,
    /// The sign bit; 0 for an unsigned format (float8_e8m0fnu).
    pub(super) sign: u64,
    /// Magnitudes at or above this are infinities or NaNs.
    pub(super) limit: u64,
    /// "fnuz" formats: the negative-zero pattern is their only NaN.
    pub(super) negative_zero_is_nan: bool,
}

impl UlpFormat {
    /// The layout of a float dtype, or of the parts of a complex one; `None` otherwise.
    pub(super) fn of(dtype: DType) -> Option<UlpFormat> {
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
    pub(super) fn max_distance(self, c: &[u8], r: &[u8], simd: Simd) -> u64 {
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
    pub(super) fn max_distance_with(self, c: &[u8], r: &[u8]) -> u64 {
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
    pub(super) fn max_narrow<const N: usize>(self, c: &[u8], r: &[u8]) -> u32 {
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
    pub(super) fn max_wide(self, c: &[u8], r: &[u8]) -> u64 {
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
