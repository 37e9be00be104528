//! `summarize` against a straightforward reference computed here: counts by
//! classification, two-pass mean and variance over the finite values.

use half::f16;
use proptest::prelude::*;
use tcgd_tensor::{summarize, DType, TensorSummary};

const MAX_LEN: usize = 5000;
const REL: f64 = 1e-9;

fn reference(values: &[f64]) -> TensorSummary {
    let finite: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let n = finite.len() as f64;
    let mean = (!finite.is_empty()).then(|| finite.iter().sum::<f64>() / n);
    let std = mean.map(|m| (finite.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n).sqrt());
    TensorSummary {
        numel: values.len() as u64,
        finite_count: finite.len() as u64,
        nan_count: values.iter().filter(|x| x.is_nan()).count() as u64,
        pos_inf_count: values.iter().filter(|&&x| x == f64::INFINITY).count() as u64,
        neg_inf_count: values.iter().filter(|&&x| x == f64::NEG_INFINITY).count() as u64,
        zero_count: values.iter().filter(|&&x| x == 0.0).count() as u64,
        min: finite.iter().copied().reduce(f64::min),
        max: finite.iter().copied().reduce(f64::max),
        mean,
        std,
        l2_norm: finite.iter().map(|x| x * x).sum::<f64>().sqrt(),
    }
}

/// Moments are compared relative to themselves, with a floor tied to the largest
/// magnitude: where the mean cancels to ~0 no summation order can do better.
fn check(got: &TensorSummary, want: &TensorSummary) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        (
            got.numel,
            got.finite_count,
            got.nan_count,
            got.pos_inf_count,
            got.neg_inf_count,
            got.zero_count
        ),
        (
            want.numel,
            want.finite_count,
            want.nan_count,
            want.pos_inf_count,
            want.neg_inf_count,
            want.zero_count
        )
    );
    prop_assert_eq!(got.min, want.min);
    prop_assert_eq!(got.max, want.max);
    let max_abs = match (want.min, want.max) {
        (Some(lo), Some(hi)) => lo.abs().max(hi.abs()),
        _ => 0.0,
    };
    for (name, g, w) in [("mean", got.mean, want.mean), ("std", got.std, want.std)] {
        match (g, w) {
            (Some(g), Some(w)) => {
                let tol = REL * w.abs().max(1e-3 * max_abs);
                prop_assert!(
                    (g - w).abs() <= tol,
                    "{}: {} vs {} (tol {})",
                    name,
                    g,
                    w,
                    tol
                );
            }
            (g, w) => prop_assert_eq!(g, w, "{}", name),
        }
    }
    prop_assert!(
        (got.l2_norm - want.l2_norm).abs() <= REL * want.l2_norm,
        "l2: {} vs {}",
        got.l2_norm,
        want.l2_norm
    );
    Ok(())
}

/// Mostly ordinary values, some spanning many binades, with NaN, ±inf and
/// signed zeros at random positions.
fn float_value() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => -1e6..1e6f64,
        3 => (1.0..2.0f64, -100..100i32, any::<bool>())
            .prop_map(|(m, e, neg)| if neg { -m } else { m } * 2f64.powi(e)),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(0.0),
        1 => Just(-0.0),
    ]
}

/// Cases where most elements are excluded, so empty and single-finite inputs occur.
fn specials_heavy() -> impl Strategy<Value = f64> {
    prop_oneof![
        1 => -10.0..10.0f64,
        3 => Just(f64::NAN),
        2 => Just(f64::INFINITY),
        2 => Just(f64::NEG_INFINITY),
        1 => Just(-0.0),
    ]
}

fn le_bytes<T: Copy, const N: usize>(xs: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    xs.iter().flat_map(|&x| to(x)).collect()
}

macro_rules! int_property {
    ($name:ident, $t:ty, $dtype:expr) => {
        proptest! {
            #[test]
            fn $name(xs in prop::collection::vec(any::<$t>(), 0..MAX_LEN)) {
                let got = summarize($dtype, &le_bytes(&xs, <$t>::to_le_bytes)).unwrap();
                let values: Vec<f64> = xs.iter().map(|&x| x as f64).collect();
                check(&got, &reference(&values))?;
                prop_assert_eq!(got.finite_count, got.numel);
            }
        }
    };
}

int_property!(int8_matches_reference, i8, DType::Int8);
int_property!(int16_matches_reference, i16, DType::Int16);
int_property!(int32_matches_reference, i32, DType::Int32);
int_property!(int64_matches_reference, i64, DType::Int64);
int_property!(uint8_matches_reference, u8, DType::UInt8);
int_property!(uint16_matches_reference, u16, DType::UInt16);
int_property!(uint32_matches_reference, u32, DType::UInt32);
int_property!(uint64_matches_reference, u64, DType::UInt64);

proptest! {
    #[test]
    fn float64_matches_reference(xs in prop::collection::vec(float_value(), 0..MAX_LEN)) {
        let got = summarize(DType::Float64, &le_bytes(&xs, f64::to_le_bytes)).unwrap();
        check(&got, &reference(&xs))?;
    }

    #[test]
    fn float64_mostly_specials_matches_reference(
        xs in prop::collection::vec(specials_heavy(), 0..MAX_LEN)
    ) {
        let got = summarize(DType::Float64, &le_bytes(&xs, f64::to_le_bytes)).unwrap();
        check(&got, &reference(&xs))?;
    }

    #[test]
    fn float32_matches_reference(xs in prop::collection::vec(float_value(), 0..MAX_LEN)) {
        let xs: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
        let got = summarize(DType::Float32, &le_bytes(&xs, f32::to_le_bytes)).unwrap();
        let values: Vec<f64> = xs.iter().map(|&x| f64::from(x)).collect();
        check(&got, &reference(&values))?;
    }

    /// Raw bit patterns reach every encoding: subnormals, NaN payloads, ±inf.
    #[test]
    fn float16_matches_reference(bits in prop::collection::vec(any::<u16>(), 0..MAX_LEN)) {
        let got = summarize(DType::Float16, &le_bytes(&bits, u16::to_le_bytes)).unwrap();
        let values: Vec<f64> = bits.iter().map(|&b| f16::from_bits(b).to_f64()).collect();
        check(&got, &reference(&values))?;
    }

    #[test]
    fn bfloat16_matches_reference(bits in prop::collection::vec(any::<u16>(), 0..MAX_LEN)) {
        let got = summarize(DType::BFloat16, &le_bytes(&bits, u16::to_le_bytes)).unwrap();
        // bfloat16 is the upper half of a float32.
        let values: Vec<f64> =
            bits.iter().map(|&b| f64::from(f32::from_bits(u32::from(b) << 16))).collect();
        check(&got, &reference(&values))?;
    }

    #[test]
    fn bool_matches_reference(xs in prop::collection::vec(any::<bool>(), 0..MAX_LEN)) {
        let bytes: Vec<u8> = xs.iter().map(|&b| u8::from(b)).collect();
        let got = summarize(DType::Bool, &bytes).unwrap();
        let values: Vec<f64> = xs.iter().map(|&b| f64::from(u8::from(b))).collect();
        check(&got, &reference(&values))?;
    }

    /// Complex64 by magnitude: classification from the parts, moments over |z|.
    #[test]
    fn complex64_matches_reference(
        parts in prop::collection::vec((float_value(), float_value()), 0..MAX_LEN)
    ) {
        let parts: Vec<(f32, f32)> = parts.iter().map(|&(r, i)| (r as f32, i as f32)).collect();
        let bytes: Vec<u8> = parts
            .iter()
            .flat_map(|&(r, i)| r.to_le_bytes().into_iter().chain(i.to_le_bytes()))
            .collect();
        let got = summarize(DType::Complex64, &bytes).unwrap();
        let mags: Vec<f64> = parts
            .iter()
            .map(|&(r, i)| {
                let (r, i) = (f64::from(r), f64::from(i));
                if r.is_nan() || i.is_nan() {
                    f64::NAN
                } else if r.is_infinite() || i.is_infinite() {
                    f64::INFINITY
                } else {
                    r.hypot(i)
                }
            })
            .collect();
        let mut want = reference(&mags);
        want.zero_count = parts.iter().filter(|&&(r, i)| r == 0.0 && i == 0.0).count() as u64;
        check(&got, &want)?;
        prop_assert_eq!(got.neg_inf_count, 0);
    }
}
