//! One observation pair compared: metrics, first mismatch, per-status counts.

use serde::Serialize;
use tcgd_tensor::DType;

use super::*;

/// The first element (row-major) that did not match: its flat index, coordinate and both
/// values (integers exact).
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "FirstMismatch",
        module = "torch_cudagraph_debug._native",
        frozen,
        eq,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FirstMismatch {
    /// Position in the row-major flattened value.
    pub index: u64,
    pub coordinate: Vec<u64>,
    pub reference: Scalar,
    pub candidate: Scalar,
}

/// Element-wise metrics of one pair. Error metrics cover the elements where both values
/// are finite (`finite_pairs`); they are `None` when there is none.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "ComparisonMetrics",
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        eq,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// `float64`, `complex128` or `integer`: the type values were compared in.
    pub compared_as: &'static str,
    pub total: u64,
    pub mismatch_count: u64,
    #[serde(serialize_with = "float")]
    pub mismatch_fraction: f64,
    /// Elements where both values are finite: the error metrics cover these.
    pub finite_pairs: u64,
    #[serde(serialize_with = "opt_float")]
    pub max_abs_error: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub max_rel_error: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub mean_abs_error: Option<f64>,
    pub first_mismatch: Option<FirstMismatch>,
    #[serde(serialize_with = "opt_float")]
    pub cosine_similarity: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub relative_l2_error: Option<f64>,
    /// Root mean square of `c - r` (complex: of the modulus): the error torch's own
    /// accuracy checks weigh against a float64 reference.
    #[serde(serialize_with = "opt_float")]
    pub rmse: Option<f64>,
    pub max_ulp_distance: Option<u64>,
    pub nan_introduced: u64,
    pub inf_introduced: u64,
}

/// One side of an observation pair, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObservationSide {
    pub order: i64,
    pub dtype: String,
    pub shape: Vec<i64>,
    pub stride: Vec<i64>,
    pub source_device: String,
    pub payload: String,
    pub digest: Option<String>,
    pub summary: Option<TensorSummary>,
    pub site: Option<SiteLocation>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObservationComparison {
    /// Position in execution order within its point comparison.
    pub position: usize,
    pub name: String,
    pub invocation_index: i64,
    pub status: Status,
    pub kind: Kind,
    /// One sentence saying why.
    pub reason: String,
    pub reference: Option<ObservationSide>,
    pub candidate: Option<ObservationSide>,
    pub metrics: Option<Metrics>,
}

impl ObservationComparison {
    /// `name[invocation]`, e.g. `encoder[0]`.
    pub fn label(&self) -> String {
        format!("{}[{}]", self.name, self.invocation_index)
    }

    pub fn dtype(&self) -> Option<DType> {
        self.reference
            .as_ref()
            .or(self.candidate.as_ref())
            .and_then(|s| DType::from_torch_name(&s.dtype).ok())
    }

    pub fn site(&self) -> Option<&SiteLocation> {
        self.reference
            .as_ref()
            .and_then(|s| s.site.as_ref())
            .or_else(|| self.candidate.as_ref().and_then(|s| s.site.as_ref()))
    }

    /// How bad this comparison is, for ranking: status first, then the share of the value
    /// that differs (a missing or incomparable value counts as all of it), then the
    /// largest absolute and relative errors.
    pub fn severity(&self) -> (Status, f64, f64, f64) {
        let share = match (&self.metrics, self.status) {
            (_, Status::Match) => 0.0,
            (Some(m), _) if self.kind == Kind::Values => m.mismatch_fraction,
            _ => 1.0,
        };
        let (abs, rel) = self.metrics.as_ref().map_or((0.0, 0.0), |m| {
            (
                m.max_abs_error.unwrap_or(0.0),
                m.max_rel_error.unwrap_or(0.0),
            )
        });
        (self.status, share, nan_low(abs), nan_low(rel))
    }
}

pub(crate) fn nan_low(x: f64) -> f64 {
    if x.is_nan() {
        f64::NEG_INFINITY
    } else {
        x
    }
}

/// How many comparisons of each status.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "ComparisonCounts",
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        eq,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub total: usize,
    pub r#match: usize,
    pub mismatch: usize,
    pub inconclusive: usize,
}

impl Counts {
    pub fn add(&mut self, status: Status) {
        self.total += 1;
        match status {
            Status::Match => self.r#match += 1,
            Status::Mismatch => self.mismatch += 1,
            Status::Inconclusive => self.inconclusive += 1,
        }
    }

    pub fn merge(&mut self, other: &Counts) {
        self.total += other.total;
        self.r#match += other.r#match;
        self.mismatch += other.mismatch;
        self.inconclusive += other.inconclusive;
    }

    /// `12 observations: 10 match, 2 mismatch, 0 inconclusive`.
    pub fn describe(&self, noun: &str) -> String {
        format!(
            "{} {noun}{}: {} match, {} mismatch, {} inconclusive",
            self.total,
            if self.total == 1 { "" } else { "s" },
            self.r#match,
            self.mismatch,
            self.inconclusive
        )
    }
}
