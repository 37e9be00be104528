//! Real divergence or rounding: a compiled value judged against the eager model run in
//! float64.
//!
//! Two low-precision executions of one model rarely agree bit for bit, so "the values
//! differ" says little. What matters is whether the compiled value is further from the
//! exact answer than eager's own rounding puts it. With a float64 run of the eager model
//! as ground truth, a site of a point is judged by the rule torch's accuracy checks apply
//! (`torch._dynamo.utils.same` with an `fp64_ref`):
//!
//! - eager and compiled agree within `tol` (`|c - e| <= tol + tol * |e|` per element): **close**;
//! - else the compiled error `rmse(fp64, compiled)` within
//!   `multiplier * rmse(fp64, eager) + tol / 10`: **rounding** (compiled is no worse than
//!   eager by more than the factor);
//! - else **diverges**. `multiplier` is 3 for float16 / bfloat16 values and for values of
//!   fewer than 1000 elements (noise dominates small tensors), 2 otherwise.
//!
//! Values that are NaN or infinite in the compiled run where the float64 run has finite
//! values, more often than in the eager run, diverge whatever the errors say.

use std::collections::HashMap;

use serde::Serialize;
use tcgd_tensor::DType;

use crate::compare::{compare_runs, PointMapping};
use crate::engine::Progress;
use crate::error::{CompareError, Result};
use crate::model::{Comparison, Metrics, ObservationComparison, Status};
use crate::options::{CompareOptions, DtypePolicy, LayoutPolicy};
use crate::run::RunData;

/// The rule's one parameter: the tolerance of the "close" test and of the additive term.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Float64Rule {
    pub tol: f64,
}

impl Default for Float64Rule {
    /// torch's default tolerance for `same()`.
    fn default() -> Self {
        Float64Rule { tol: 1e-4 }
    }
}

impl Float64Rule {
    pub fn new(tol: f64) -> Result<Float64Rule> {
        if !(tol.is_finite() && tol >= 0.0) {
            return Err(CompareError::InvalidOption {
                option: "tol".into(),
                reason: format!("must be a finite number >= 0, got {tol}"),
            });
        }
        Ok(Float64Rule { tol })
    }

    /// How many times eager's error the compiled error may be.
    pub fn multiplier(dtype: Option<DType>, numel: u64) -> f64 {
        let half = matches!(dtype, Some(DType::Float16 | DType::BFloat16));
        if half || numel < 1000 {
            3.0
        } else {
            2.0
        }
    }

    /// The largest compiled error that is still rounding.
    pub fn threshold(&self, eager_rmse: f64, dtype: Option<DType>, numel: u64) -> f64 {
        Self::multiplier(dtype, numel) * eager_rmse + self.tol / 10.0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccuracyVerdict {
    /// Eager and compiled agree within the rule's tolerance.
    Close,
    /// They differ, but the compiled error against float64 is within the factor of eager's.
    Rounding,
    /// The compiled value is further from float64 than eager's rounding explains.
    Diverges,
    /// A side is missing (or holds only a summary), so nothing can be said.
    Unjudged,
}

impl AccuracyVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            AccuracyVerdict::Close => "close",
            AccuracyVerdict::Rounding => "rounding",
            AccuracyVerdict::Diverges => "diverges",
            AccuracyVerdict::Unjudged => "unjudged",
        }
    }
}

/// One site of one point, judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteAccuracy {
    /// The point's label (points pair by label across the three runs).
    pub point: String,
    pub name: String,
    pub invocation_index: i64,
    /// The compiled value's dtype (the multiplier depends on it).
    pub dtype: Option<String>,
    pub numel: u64,
    /// `rmse(float64, eager)`.
    #[serde(serialize_with = "tcgd_tensor::json::opt_float")]
    pub eager_rmse: Option<f64>,
    /// `rmse(float64, compiled)`.
    #[serde(serialize_with = "tcgd_tensor::json::opt_float")]
    pub compiled_rmse: Option<f64>,
    /// `compiled_rmse / eager_rmse` (`inf` when eager is exact and compiled is not).
    #[serde(serialize_with = "tcgd_tensor::json::opt_float")]
    pub error_ratio: Option<f64>,
    pub multiplier: f64,
    /// `multiplier * eager_rmse + tol / 10`.
    #[serde(serialize_with = "tcgd_tensor::json::opt_float")]
    pub threshold: Option<f64>,
    pub verdict: AccuracyVerdict,
    /// One sentence saying why.
    pub reason: String,
}

type Key = (String, String, i64);

fn by_key(c: &Comparison) -> HashMap<Key, &ObservationComparison> {
    c.observations()
        .into_iter()
        .filter_map(|(_, p, o)| {
            let label = p
                .candidate
                .as_ref()
                .or(p.reference.as_ref())?
                .label
                .clone()?;
            Some(((label, o.name.clone(), o.invocation_index), o))
        })
        .collect()
}

fn non_finite_introduced(m: &Metrics) -> u64 {
    m.nan_introduced + m.inf_introduced
}

/// Judges every observation the compiled run shares with the float64 run, in the
/// compiled run's execution order. The three runs' points pair by label.
pub fn judge_against_float64(
    float64: &RunData,
    eager: &RunData,
    compiled: &RunData,
    rule: &Float64Rule,
    progress: &dyn Progress,
) -> Result<Vec<SiteAccuracy>> {
    let promote = CompareOptions {
        dtype_policy: DtypePolicy::Promote,
        layout_policy: LayoutPolicy::Ignore,
        ..CompareOptions::default()
    };
    let within_tol = CompareOptions {
        rtol: rule.tol,
        atol: rule.tol,
        ..promote.clone()
    };
    let eager_error = compare_runs(float64, eager, &PointMapping::ByLabel, &promote, progress)?;
    let compiled_error = compare_runs(
        float64,
        compiled,
        &PointMapping::ByLabel,
        &promote,
        progress,
    )?;
    let agreement = compare_runs(
        eager,
        compiled,
        &PointMapping::ByLabel,
        &within_tol,
        progress,
    )?;
    let (eager_error, agreement) = (by_key(&eager_error), by_key(&agreement));

    let mut out = Vec::new();
    for (_, point, o) in compiled_error.observations() {
        let Some(label) = point.candidate.as_ref().and_then(|p| p.label.clone()) else {
            continue; // a point the compiled run does not have
        };
        if o.candidate.is_none() {
            continue; // only in the float64 run: nothing compiled to judge
        }
        let key = (label, o.name.clone(), o.invocation_index);
        let dtype = o.candidate.as_ref().map(|s| s.dtype.clone());
        let dtype_of = dtype
            .as_deref()
            .and_then(|d| DType::from_torch_name(d).ok());
        let compiled_metrics = o.metrics.as_ref();
        let eager_metrics = eager_error.get(&key).and_then(|e| e.metrics.as_ref());
        let numel = compiled_metrics.map_or(0, |m| m.total);
        let multiplier = Float64Rule::multiplier(dtype_of, numel);
        let eager_rmse = eager_metrics.and_then(|m| m.rmse);
        let compiled_rmse = compiled_metrics.and_then(|m| m.rmse);
        let threshold = eager_rmse.map(|e| rule.threshold(e, dtype_of, numel));
        let close = agreement.get(&key).map(|a| a.status == Status::Match);
        let (verdict, reason) = match (compiled_metrics, eager_metrics, close) {
            (_, _, Some(true)) => (
                AccuracyVerdict::Close,
                format!("eager and compiled agree within tol {}", rule.tol),
            ),
            (None, _, _) | (_, None, _) | (_, _, None) => (
                AccuracyVerdict::Unjudged,
                "a side was not compared element by element against float64 (missing, or \
                 a summary only)"
                    .to_owned(),
            ),
            (Some(c), Some(e), Some(false))
                if non_finite_introduced(c) > non_finite_introduced(e) =>
            {
                (
                    AccuracyVerdict::Diverges,
                    format!(
                        "compiled has {} NaN/inf values where float64 is finite, eager {}",
                        non_finite_introduced(c),
                        non_finite_introduced(e)
                    ),
                )
            }
            (Some(_), Some(_), Some(false)) => match (compiled_rmse, eager_rmse, threshold) {
                (Some(c), Some(e), Some(t)) if c <= t => (
                    AccuracyVerdict::Rounding,
                    format!(
                        "compiled error {c:.3e} within {multiplier} x eager's {e:.3e} + tol/10"
                    ),
                ),
                (Some(c), Some(e), Some(_)) => (
                    AccuracyVerdict::Diverges,
                    format!(
                        "compiled error {c:.3e} exceeds {multiplier} x eager's {e:.3e} + tol/10"
                    ),
                ),
                _ => (
                    AccuracyVerdict::Unjudged,
                    "no finite element to measure an error on".to_owned(),
                ),
            },
        };
        let error_ratio = match (compiled_rmse, eager_rmse) {
            (Some(c), Some(e)) if e > 0.0 => Some(c / e),
            (Some(c), Some(_)) if c > 0.0 => Some(f64::INFINITY),
            (Some(_), Some(_)) => Some(1.0),
            _ => None,
        };
        out.push(SiteAccuracy {
            point: key.0,
            name: key.1,
            invocation_index: key.2,
            dtype,
            numel,
            eager_rmse,
            compiled_rmse,
            error_ratio,
            multiplier,
            threshold,
            verdict,
            reason,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiplier_follows_torch_same() {
        assert_eq!(Float64Rule::multiplier(Some(DType::BFloat16), 1 << 20), 3.0);
        assert_eq!(Float64Rule::multiplier(Some(DType::Float16), 1 << 20), 3.0);
        assert_eq!(Float64Rule::multiplier(Some(DType::Float32), 999), 3.0);
        assert_eq!(Float64Rule::multiplier(Some(DType::Float32), 1000), 2.0);
        let rule = Float64Rule::default();
        let t = rule.threshold(1e-3, Some(DType::Float32), 4096);
        assert!((t - (2e-3 + 1e-5)).abs() < 1e-15);
    }

    #[test]
    fn bad_tolerances_are_refused() {
        for tol in [f64::NAN, -1.0, f64::INFINITY] {
            assert!(Float64Rule::new(tol).is_err());
        }
        assert_eq!(Float64Rule::new(0.0).unwrap().tol, 0.0);
    }
}
