//! Number formatting shared by the text, HTML and CSV reports, so the three never disagree
//! about how a value reads.

use tcgd_tensor::DType;

/// A metric, four significant digits, like C's `%.4g`: `0.0001234`, `1.5`, `1e-05`,
/// `1.235e+07`. Non-finite values read `nan`, `inf`, `-inf`.
pub fn general(x: f64) -> String {
    if let Some(s) = non_finite(x) {
        return s.to_owned();
    }
    if x == 0.0 {
        return "0".to_owned();
    }
    // `{:.3e}` rounds to four significant digits first, so the exponent it prints is the
    // one of the rounded value (9.99995 becomes 1.000e1, not 9.999e0).
    let sci = format!("{x:.3e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..4).contains(&exponent) {
        let decimals = usize::try_from(3 - exponent).unwrap_or(0);
        trim_zeros(&format!("{x:.decimals$}"))
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim_zeros(mantissa), exponent.abs())
    }
}

/// An element value at the precision of its dtype: the shortest text that reads back to
/// the same value in that dtype (float32 and narrower print as float32).
pub fn element(x: f64, dtype: DType) -> String {
    if let Some(s) = non_finite(x) {
        return s.to_owned();
    }
    let narrow = dtype != DType::Float64 && dtype != DType::Complex128;
    let magnitude = x.abs();
    let plain = magnitude == 0.0 || (1e-4..1e16).contains(&magnitude);
    match (narrow, plain) {
        (true, true) => format!("{}", x as f32),
        (true, false) => format!("{:e}", x as f32),
        (false, true) => format!("{x}"),
        (false, false) => format!("{x:e}"),
    }
}

fn non_finite(x: f64) -> Option<&'static str> {
    if x.is_nan() {
        Some("nan")
    } else if x == f64::INFINITY {
        Some("inf")
    } else if x == f64::NEG_INFINITY {
        Some("-inf")
    } else {
        None
    }
}

fn trim_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s.to_owned()
    }
}

/// `[2, 3]`, the way torch prints a size.
pub fn dims(values: &[i64]) -> String {
    let inner: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    format!("[{}]", inner.join(", "))
}

/// `(0, 3)`: a coordinate, as a Python tuple reads.
pub fn coordinate(values: &[u64]) -> String {
    match values {
        [one] => format!("({one},)"),
        _ => {
            let inner: Vec<String> = values.iter().map(|v| v.to_string()).collect();
            format!("({})", inner.join(", "))
        }
    }
}

/// A percentage with enough digits to tell "none" and "all" from "almost".
pub fn fraction(x: f64) -> String {
    if x == 0.0 {
        "0%".to_owned()
    } else if x == 1.0 {
        "100%".to_owned()
    } else if x < 0.0001 {
        format!("{}%", general(x * 100.0))
    } else {
        let s = format!("{:.2}", x * 100.0);
        // 99.999% must not print as 100.00%, nor 0.001% as 0.00%.
        match s.as_str() {
            "100.00" => "99.99%".to_owned(),
            "0.00" => "0.01%".to_owned(),
            _ => format!("{}%", trim_zeros(&s)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn general_matches_percent_g() {
        let cases = [
            (0.0, "0"),
            (1.0, "1"),
            (1.5, "1.5"),
            (1e-5, "1e-05"),
            (1e-8, "1e-08"),
            (0.0001234, "0.0001234"),
            (12345678.0, "1.235e+07"),
            (9.99995, "10"),
            (1234.0, "1234"),
            (12346.0, "1.235e+04"),
            (-0.5, "-0.5"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
            (3.0e-300, "3e-300"),
        ];
        for (x, want) in cases {
            assert_eq!(general(x), want, "{x}");
        }
    }

    #[test]
    fn elements_read_back_at_their_precision() {
        assert_eq!(element(f64::from(0.1f32), DType::Float32), "0.1");
        assert_eq!(element(0.1, DType::Float64), "0.1");
        assert_eq!(element(-0.0, DType::Float32), "-0");
        assert_eq!(element(1e-30, DType::Float64), "1e-30");
        assert_eq!(element(3.0, DType::Int64), "3");
        assert_eq!(element(f64::INFINITY, DType::Float16), "inf");
    }

    #[test]
    fn fractions_never_round_to_the_extremes() {
        assert_eq!(fraction(0.0), "0%");
        assert_eq!(fraction(1.0), "100%");
        assert_eq!(fraction(0.25), "25%");
        assert_eq!(fraction(0.999_999), "99.99%");
        assert_eq!(fraction(0.000_05), "0.005%");
        assert_eq!(fraction(0.000_100_1), "0.01%");
        assert_eq!(coordinate(&[3]), "(3,)");
        assert_eq!(coordinate(&[0, 3]), "(0, 3)");
        assert_eq!(dims(&[2, 3]), "[2, 3]");
    }
}
