//! Exact float8 decoding tables, generated at compile time from each format's
//! parameters so that no table entry is typed in by hand.

/// How a float8 format spends its encodings on NaN and infinity.
#[derive(Clone, Copy)]
enum Specials {
    /// OCP `*fn` formats: only exponent and mantissa all ones is NaN, no infinity.
    AllOnesNan,
    /// IEEE 754 style: exponent all ones is infinity (mantissa 0) or NaN.
    Ieee,
    /// `*fnuz` formats: the negative-zero encoding 0x80 is the only NaN.
    NegZeroNan,
    /// `e8m0fnu`: 0xFF is the only NaN, everything else is a power of two.
    MaxNan,
}

#[derive(Clone, Copy)]
struct Format {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    signed: bool,
    specials: Specials,
}

const E4M3FN: Format = Format {
    exp_bits: 4,
    man_bits: 3,
    bias: 7,
    signed: true,
    specials: Specials::AllOnesNan,
};
const E4M3FNUZ: Format = Format {
    exp_bits: 4,
    man_bits: 3,
    bias: 8,
    signed: true,
    specials: Specials::NegZeroNan,
};
const E5M2: Format = Format {
    exp_bits: 5,
    man_bits: 2,
    bias: 15,
    signed: true,
    specials: Specials::Ieee,
};
const E5M2FNUZ: Format = Format {
    exp_bits: 5,
    man_bits: 2,
    bias: 16,
    signed: true,
    specials: Specials::NegZeroNan,
};
const E8M0FNU: Format = Format {
    exp_bits: 8,
    man_bits: 0,
    bias: 127,
    signed: false,
    specials: Specials::MaxNan,
};

pub(crate) static F8_E4M3FN: [f64; 256] = table(E4M3FN);
pub(crate) static F8_E4M3FNUZ: [f64; 256] = table(E4M3FNUZ);
pub(crate) static F8_E5M2: [f64; 256] = table(E5M2);
pub(crate) static F8_E5M2FNUZ: [f64; 256] = table(E5M2FNUZ);
pub(crate) static F8_E8M0FNU: [f64; 256] = table(E8M0FNU);

/// 2^e for the exponents float8 can reach, all of which are normal in f64.
const fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

const fn decode(fmt: Format, byte: u8) -> f64 {
    let bits = byte as u32;
    let man_mask = (1u32 << fmt.man_bits) - 1;
    let exp_mask = (1u32 << fmt.exp_bits) - 1;
    let man = bits & man_mask;
    let exp = (bits >> fmt.man_bits) & exp_mask;
    let negative = fmt.signed && (bits >> (fmt.man_bits + fmt.exp_bits)) & 1 == 1;

    let nan = match fmt.specials {
        Specials::AllOnesNan => exp == exp_mask && man == man_mask,
        Specials::Ieee => exp == exp_mask && man != 0,
        Specials::NegZeroNan => byte == 0x80,
        Specials::MaxNan => byte == 0xFF,
    };
    if nan {
        return f64::NAN;
    }
    let magnitude = if matches!(fmt.specials, Specials::Ieee) && exp == exp_mask {
        f64::INFINITY
    } else if exp == 0 && fmt.man_bits > 0 {
        // Subnormal: no implicit leading one, exponent pinned at 1 - bias.
        man as f64 * pow2(1 - fmt.bias - fmt.man_bits as i32)
    } else {
        let implicit = 1u32 << fmt.man_bits;
        (implicit + man) as f64 * pow2(exp as i32 - fmt.bias - fmt.man_bits as i32)
    };
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

const fn table(fmt: Format) -> [f64; 256] {
    let mut out = [0.0; 256];
    let mut i = 0;
    while i < 256 {
        out[i] = decode(fmt, i as u8);
        i += 1;
    }
    out
}

/// The exact decoding table of a float8 dtype (one `f64` per byte value), for producers
/// that decode elsewhere (the device summary kernels) and must agree bit for bit.
pub fn float8_table(dtype: crate::DType) -> Option<&'static [f64; 256]> {
    use crate::DType;
    match dtype {
        DType::Float8E4M3Fn => Some(&F8_E4M3FN),
        DType::Float8E4M3Fnuz => Some(&F8_E4M3FNUZ),
        DType::Float8E5M2 => Some(&F8_E5M2),
        DType::Float8E5M2Fnuz => Some(&F8_E5M2FNUZ),
        DType::Float8E8M0Fnu => Some(&F8_E8M0FNU),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_bits_eq(name: &str, table: &[f64; 256], byte: u8, want: f64) {
        let got = table[byte as usize];
        assert!(
            got.to_bits() == want.to_bits(),
            "{name} 0x{byte:02X}: got {got:e}, want {want:e}"
        );
    }

    fn nans(table: &[f64; 256]) -> Vec<u8> {
        (0..=255u8)
            .filter(|&b| table[b as usize].is_nan())
            .collect()
    }

    fn infs(table: &[f64; 256]) -> Vec<u8> {
        (0..=255u8)
            .filter(|&b| table[b as usize].is_infinite())
            .collect()
    }

    fn max_finite(table: &[f64; 256]) -> f64 {
        table
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// What one format's table must hold: some exact decodings, every NaN and
    /// infinity encoding, and the largest finite value.
    struct Expected {
        name: &'static str,
        table: &'static [f64; 256],
        values: Vec<(u8, f64)>,
        nans: Vec<u8>,
        infs: Vec<u8>,
        max_finite: f64,
    }

    #[test]
    fn each_format_decodes_known_bytes_specials_and_range() {
        let formats = [
            Expected {
                name: "e4m3fn",
                table: &F8_E4M3FN,
                values: vec![
                    (0x00, 0.0),
                    (0x80, -0.0),
                    (0x01, 2f64.powi(-9)),
                    (0x07, 7.0 * 2f64.powi(-9)),
                    (0x08, 2f64.powi(-6)),
                    (0x38, 1.0),
                    (0x40, 2.0),
                    (0x7E, 448.0),
                    (0xFE, -448.0),
                    (0xC4, -3.0),
                ],
                nans: vec![0x7F, 0xFF],
                infs: vec![],
                max_finite: 448.0,
            },
            Expected {
                name: "e4m3fnuz",
                table: &F8_E4M3FNUZ,
                values: vec![
                    (0x00, 0.0),
                    (0x01, 2f64.powi(-10)),
                    (0x40, 1.0),
                    (0x7F, 240.0),
                    (0xFF, -240.0),
                ],
                nans: vec![0x80],
                infs: vec![],
                max_finite: 240.0,
            },
            Expected {
                name: "e5m2",
                table: &F8_E5M2,
                values: vec![
                    (0x00, 0.0),
                    (0x80, -0.0),
                    (0x01, 2f64.powi(-16)),
                    (0x3C, 1.0),
                    (0x7B, 57344.0),
                    (0xFB, -57344.0),
                    (0x7C, f64::INFINITY),
                    (0xFC, f64::NEG_INFINITY),
                ],
                nans: vec![0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF],
                infs: vec![0x7C, 0xFC],
                max_finite: 57344.0,
            },
            Expected {
                name: "e5m2fnuz",
                table: &F8_E5M2FNUZ,
                values: vec![
                    (0x00, 0.0),
                    (0x01, 2f64.powi(-17)),
                    (0x40, 1.0),
                    (0x7C, 32768.0),
                    (0x7F, 57344.0),
                    (0xFF, -57344.0),
                ],
                nans: vec![0x80],
                infs: vec![],
                max_finite: 57344.0,
            },
            Expected {
                name: "e8m0fnu",
                table: &F8_E8M0FNU,
                values: vec![
                    (0x7F, 1.0),
                    (0x80, 2.0),
                    (0x00, 2f64.powi(-127)),
                    (0xFE, 2f64.powi(127)),
                ],
                nans: vec![0xFF],
                infs: vec![],
                max_finite: 2f64.powi(127),
            },
        ];
        for f in &formats {
            for &(byte, want) in &f.values {
                assert_bits_eq(f.name, f.table, byte, want);
            }
            assert_eq!(nans(f.table), f.nans, "{} NaN encodings", f.name);
            assert_eq!(infs(f.table), f.infs, "{} infinity encodings", f.name);
            assert_eq!(max_finite(f.table), f.max_finite, "{} max finite", f.name);
        }
    }

    #[test]
    fn e5m2_agrees_with_binary16_top_byte() {
        // e5m2 is the top byte of an IEEE binary16, so the half crate is an
        // independent oracle for every encoding.
        for b in 0..=255u8 {
            let h = half::f16::from_bits(u16::from(b) << 8).to_f64();
            let got = F8_E5M2[b as usize];
            assert!(
                got.to_bits() == h.to_bits() || (got.is_nan() && h.is_nan()),
                "0x{b:02X}: {got} vs {h}"
            );
        }
    }

    #[test]
    fn e8m0fnu_is_positive_or_nan() {
        assert!(F8_E8M0FNU.iter().all(|v| v.is_nan() || *v > 0.0));
    }

    #[test]
    fn fnuz_formats_have_no_negative_zero() {
        for t in [&F8_E4M3FNUZ, &F8_E5M2FNUZ] {
            let zeros: Vec<u8> = (0..=255u8).filter(|&b| t[b as usize] == 0.0).collect();
            assert_eq!(zeros, vec![0x00]);
        }
    }
}
