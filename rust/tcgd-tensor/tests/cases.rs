//! `summarize` on hand-picked inputs with known answers.

use half::{bf16, f16};
use tcgd_tensor::decode::{decode_real, for_each_real_chunk};
use tcgd_tensor::{summarize, DType, SummaryError, TensorSummary};

fn f64_bytes(xs: &[f64]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A summary's element counts: (numel, finite, nan, +inf, -inf, zero).
fn counts(s: &TensorSummary) -> (u64, u64, u64, u64, u64, u64) {
    (
        s.numel,
        s.finite_count,
        s.nan_count,
        s.pos_inf_count,
        s.neg_inf_count,
        s.zero_count,
    )
}

fn rel_eq(got: f64, want: f64, rel: f64) -> bool {
    got == want || (got - want).abs() <= rel * want.abs()
}

#[test]
fn empty_input() {
    for dtype in DType::ALL {
        let s = summarize(dtype, &[]).unwrap();
        assert_eq!(
            s,
            TensorSummary {
                numel: 0,
                finite_count: 0,
                nan_count: 0,
                pos_inf_count: 0,
                neg_inf_count: 0,
                zero_count: 0,
                min: None,
                max: None,
                mean: None,
                std: None,
                l2_norm: 0.0,
            },
            "{dtype}"
        );
    }
}

#[test]
fn ragged_bytes_are_rejected_with_the_numbers() {
    let err = summarize(DType::Float32, &[0u8; 10]).unwrap_err();
    let SummaryError::RaggedBytes {
        dtype,
        len,
        itemsize,
    } = err;
    assert_eq!((dtype, len, itemsize), (DType::Float32, 10, 4));
    let msg = err.to_string();
    for part in ["10", "float32", "4"] {
        assert!(msg.contains(part), "{msg}");
    }
    assert!(summarize(DType::Complex128, &[0u8; 24]).is_err());
    assert!(summarize(DType::Int8, &[0u8; 3]).is_ok());
}

#[test]
fn float_specials_are_counted_and_excluded() {
    let xs = [
        1.0,
        f64::NAN,
        -3.0,
        f64::INFINITY,
        0.0,
        -0.0,
        f64::NEG_INFINITY,
        f64::INFINITY,
    ];
    let s = summarize(DType::Float64, &f64_bytes(&xs)).unwrap();
    assert_eq!(counts(&s), (8, 4, 1, 2, 1, 2));
    assert_eq!((s.min, s.max), (Some(-3.0), Some(1.0)));
    assert_eq!(s.mean, Some(-0.5));
    // Deviations 1.5, -2.5, 0.5, 0.5: sum of squares 9, over 4.
    assert_eq!(s.std, Some(1.5));
    assert_eq!(s.l2_norm, 10f64.sqrt());

    let all_nan = summarize(DType::Float32, &f32::NAN.to_le_bytes().repeat(3)).unwrap();
    assert_eq!((all_nan.nan_count, all_nan.finite_count), (3, 0));
    assert_eq!(
        (all_nan.min, all_nan.max, all_nan.mean, all_nan.std),
        (None, None, None, None)
    );
    assert_eq!(all_nan.l2_norm, 0.0);
}

#[test]
fn integer_extremes() {
    let bytes: Vec<u8> = [i64::MIN, i64::MAX]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let s = summarize(DType::Int64, &bytes).unwrap();
    assert_eq!((s.finite_count, s.zero_count), (2, 0));
    assert_eq!(s.min, Some(-(2f64.powi(63))));
    assert_eq!(s.max, Some(2f64.powi(63)));
    assert_eq!(s.mean, Some(0.0));
    assert_eq!(s.std, Some(2f64.powi(63)));

    let bytes: Vec<u8> = [u64::MAX, 0, u64::MAX]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let s = summarize(DType::UInt64, &bytes).unwrap();
    assert_eq!((s.finite_count, s.zero_count), (3, 1));
    assert_eq!(s.max, Some(2f64.powi(64)));
    assert!(rel_eq(s.mean.unwrap(), 2.0 / 3.0 * 2f64.powi(64), 1e-15));
    assert!(rel_eq(s.l2_norm, 2f64.sqrt() * 2f64.powi(64), 1e-15));

    let s = summarize(DType::Int8, &[0x80, 0x7F, 0x00, 0xFF]).unwrap();
    assert_eq!((s.min, s.max, s.zero_count), (Some(-128.0), Some(127.0), 1));
    assert_eq!(s.mean, Some(-0.5));
    let s = summarize(DType::UInt8, &[0x80, 0x7F, 0x00, 0xFF]).unwrap();
    assert_eq!((s.min, s.max), (Some(0.0), Some(255.0)));
    assert_eq!(s.mean, Some(127.5));
}

#[test]
fn bool_is_zero_or_one() {
    let s = summarize(DType::Bool, &[1, 0, 1, 1]).unwrap();
    assert_eq!((s.finite_count, s.zero_count), (4, 1));
    assert_eq!((s.min, s.max), (Some(0.0), Some(1.0)));
    assert_eq!(s.mean, Some(0.75));
    assert!(rel_eq(s.std.unwrap(), 0.1875f64.sqrt(), 1e-15));
    assert_eq!(s.l2_norm, 3f64.sqrt());
}

#[test]
fn half_precision_specials() {
    let bits = [
        f16::NAN,
        f16::INFINITY,
        f16::NEG_INFINITY,
        f16::MAX,
        f16::MIN_POSITIVE_SUBNORMAL,
        f16::NEG_ZERO,
    ];
    let bytes: Vec<u8> = bits.iter().flat_map(|h| h.to_le_bytes()).collect();
    let s = summarize(DType::Float16, &bytes).unwrap();
    assert_eq!(
        (
            s.finite_count,
            s.nan_count,
            s.pos_inf_count,
            s.neg_inf_count,
            s.zero_count
        ),
        (3, 1, 1, 1, 1)
    );
    assert_eq!(s.max, Some(65504.0));
    assert_eq!(s.min, Some(-0.0));

    let bits = [bf16::NAN, bf16::MAX, bf16::MIN, bf16::NEG_INFINITY];
    let bytes: Vec<u8> = bits.iter().flat_map(|h| h.to_le_bytes()).collect();
    let s = summarize(DType::BFloat16, &bytes).unwrap();
    assert_eq!((s.finite_count, s.nan_count, s.neg_inf_count), (2, 1, 1));
    assert_eq!(s.max, Some(bf16::MAX.to_f64()));
    assert_eq!(s.mean, Some(0.0));
    assert_eq!(s.std, Some(bf16::MAX.to_f64()));
}

#[test]
fn float8_formats_summarise_through_their_tables() {
    // e4m3fn: 448, 2^-9, NaN, -0.
    let s = summarize(DType::Float8E4M3Fn, &[0x7E, 0x01, 0x7F, 0x80]).unwrap();
    assert_eq!(
        (s.finite_count, s.nan_count, s.pos_inf_count, s.zero_count),
        (3, 1, 0, 1)
    );
    assert_eq!((s.min, s.max), (Some(0.0), Some(448.0)));
    // e5m2: inf, 57344, -inf, NaN.
    let s = summarize(DType::Float8E5M2, &[0x7C, 0x7B, 0xFC, 0x7F]).unwrap();
    assert_eq!(
        (
            s.finite_count,
            s.nan_count,
            s.pos_inf_count,
            s.neg_inf_count
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(s.max, Some(57344.0));
    // fnuz: 0x80 is NaN, 0x7F is the largest normal.
    let s = summarize(DType::Float8E4M3Fnuz, &[0x7F, 0x80]).unwrap();
    assert_eq!((s.nan_count, s.max), (1, Some(240.0)));
    let s = summarize(DType::Float8E5M2Fnuz, &[0x7F, 0x80, 0x00]).unwrap();
    assert_eq!((s.nan_count, s.zero_count, s.max), (1, 1, Some(57344.0)));
    // e8m0fnu: no zero at all; 0x00 is 2^-127.
    let s = summarize(DType::Float8E8M0Fnu, &[0x7F, 0x00, 0xFF]).unwrap();
    assert_eq!((s.finite_count, s.nan_count, s.zero_count), (2, 1, 0));
    assert_eq!((s.min, s.max), (Some(2f64.powi(-127)), Some(1.0)));
}

fn complex128_bytes(zs: &[(f64, f64)]) -> Vec<u8> {
    zs.iter()
        .flat_map(|(r, i)| r.to_le_bytes().into_iter().chain(i.to_le_bytes()))
        .collect()
}

#[test]
fn complex_by_magnitude_with_nan_and_inf_parts() {
    let zs = [
        (3.0, 4.0),
        (f64::NAN, f64::INFINITY),
        (f64::NEG_INFINITY, 1.0),
        (0.0, -0.0),
        (-6.0, 8.0),
        (1.0, f64::NAN),
    ];
    let s = summarize(DType::Complex128, &complex128_bytes(&zs)).unwrap();
    assert_eq!(counts(&s), (6, 3, 2, 1, 0, 1));
    assert_eq!((s.min, s.max), (Some(0.0), Some(10.0)));
    assert_eq!(s.mean, Some(5.0));
    assert!(rel_eq(s.std.unwrap(), (50.0f64 / 3.0).sqrt(), 1e-15));
    assert_eq!(s.l2_norm, 125f64.sqrt());

    // complex32 is two float16 parts.
    let bytes: Vec<u8> = [3.0, -4.0, f64::INFINITY, 0.0]
        .iter()
        .flat_map(|&x| f16::from_f64(x).to_le_bytes())
        .collect();
    let s = summarize(DType::Complex32, &bytes).unwrap();
    assert_eq!((s.finite_count, s.pos_inf_count, s.max), (1, 1, Some(5.0)));

    let bytes: Vec<u8> = [-5.0f32, 12.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let s = summarize(DType::Complex64, &bytes).unwrap();
    assert_eq!((s.max, s.l2_norm), (Some(13.0), 13.0));
}

#[test]
fn complex_magnitudes_beyond_f64_max() {
    // |z| = MAX/1.2 * sqrt(2) ~ 1.18 MAX: both parts finite, magnitude not.
    let big = f64::MAX / 1.2;
    let s = summarize(
        DType::Complex128,
        &complex128_bytes(&[(big, big), (0.0, 0.0)]),
    )
    .unwrap();
    assert_eq!((s.finite_count, s.pos_inf_count, s.zero_count), (2, 0, 1));
    assert_eq!(s.max, Some(f64::INFINITY));
    assert_eq!(s.min, Some(0.0));
    // The moments are carried scaled, so mean and std (~0.59 MAX) stay finite.
    let half_mag = big * 2f64.sqrt() / 2.0;
    assert!(rel_eq(s.mean.unwrap(), half_mag, 1e-15));
    assert!(rel_eq(s.std.unwrap(), half_mag, 1e-15));
    assert_eq!(s.l2_norm, f64::INFINITY);

    let s = summarize(
        DType::Complex128,
        &complex128_bytes(&[(big, 0.0), (0.0, -big)]),
    )
    .unwrap();
    assert_eq!(s.mean, Some(big));
    assert_eq!(s.std, Some(0.0));
    assert_eq!(s.l2_norm, f64::INFINITY);
}

#[test]
fn l2_does_not_overflow_or_underflow() {
    let big = [f64::MAX, -f64::MAX / 2.0, f64::MAX / 4.0];
    let s = summarize(DType::Float64, &f64_bytes(&big)).unwrap();
    // sqrt(1 + 1/4 + 1/16) * MAX = sqrt(21)/4 * MAX > MAX, so it is +inf;
    // smaller norms must come out finite and exact.
    assert_eq!(s.l2_norm, f64::INFINITY);
    let s = summarize(
        DType::Float64,
        &f64_bytes(&[f64::MAX / 2.0, f64::MAX / 4.0]),
    )
    .unwrap();
    assert!(rel_eq(s.l2_norm, f64::MAX / 4.0 * 5f64.sqrt(), 1e-15));
    assert_eq!(s.mean, Some(f64::MAX * 0.375));
    assert!(rel_eq(s.std.unwrap(), f64::MAX / 8.0, 1e-15));

    let tiny = f64::from_bits(1); // 2^-1074, the smallest subnormal
    let s = summarize(DType::Float64, &f64_bytes(&[tiny; 4])).unwrap();
    assert_eq!(s.l2_norm, tiny * 2.0);
    assert_eq!(s.mean, Some(tiny));
    assert_eq!(s.std, Some(0.0));
    let s = summarize(
        DType::Float64,
        &f64_bytes(&[1e-300, -1e-300, 1e-300, -1e-300]),
    )
    .unwrap();
    assert!(rel_eq(s.l2_norm, 2e-300, 1e-15));
    assert!(rel_eq(s.std.unwrap(), 1e-300, 1e-15));
}

#[test]
fn moments_survive_a_large_offset() {
    // A sum/sumsq formula loses every digit of the variance here.
    let xs: Vec<f64> = (0..10_000).map(|i| 1e9 + f64::from(i % 2)).collect();
    let s = summarize(DType::Float64, &f64_bytes(&xs)).unwrap();
    assert!(rel_eq(s.mean.unwrap(), 1e9 + 0.5, 1e-15));
    assert!(rel_eq(s.std.unwrap(), 0.5, 1e-9));
}

#[test]
fn public_decoding_matches_summary_inputs() {
    let bytes = [0x7E, 0x01, 0x7F];
    let mut out = [0.0; 3];
    assert_eq!(decode_real(DType::Float8E4M3Fn, &bytes, &mut out), Ok(3));
    assert_eq!(&out[..2], &[448.0, 2f64.powi(-9)]);
    assert!(out[2].is_nan());
    let mut total = 0;
    for_each_real_chunk(DType::UInt8, &[7u8; 2000], |c| {
        assert!(c.iter().all(|&v| v == 7.0));
        total += c.len();
    })
    .unwrap();
    assert_eq!(total, 2000);
}
