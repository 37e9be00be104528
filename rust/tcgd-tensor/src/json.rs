//! Float values in JSON. JSON has no NaN or infinity: such values are written as the
//! strings `"nan"`, `"inf"` and `"-inf"` (documented in docs/comparison.md). Summaries and
//! every comparison result serialise their floats through these two functions.

use serde::Serializer;

pub fn float<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    if x.is_finite() {
        s.serialize_f64(*x)
    } else if x.is_nan() {
        s.serialize_str("nan")
    } else if *x > 0.0 {
        s.serialize_str("inf")
    } else {
        s.serialize_str("-inf")
    }
}

pub fn opt_float<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some(v) => float(v, s),
        None => s.serialize_none(),
    }
}
