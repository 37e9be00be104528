//! Comparison options and results as Python sees them: frozen classes over the Rust model
//! of tcgd-compare. Options are checked once, when made; results are built from the
//! [`Comparison`] the engine returned, and their getters read its values (no JSON between
//! the engine and Python objects; `to_dict()` and `to_json()` are the JSON report).

use std::sync::Arc;

use pyo3::exceptions::{PyIndexError, PyKeyError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyTuple};
use serde::Serialize;
use tcgd_compare::{
    CompareError, CompareOptions, Comparison, ComparisonKind, Counts, Divergence, FirstMismatch,
    GroupMember, Issue, Kind, MemberPoint, Metrics, ObservationComparison, ObservationSide,
    PointComparison, PointRef, RankComparison, RunGroup, Scalar, SeriesPoint, Status, Subject,
    TensorSummary,
};

pub(crate) use crate::classes::serde_to_py;
use crate::errors::{guard, BindResult, BindingError};

mod comparisons;
mod group;
mod leaves;
mod observations;
mod options;
mod points;
pub(crate) use comparisons::*;
pub(crate) use group::*;
pub(crate) use leaves::*;
pub(crate) use observations::*;
pub(crate) use options::*;
pub(crate) use points::*;

// ------------------------------------------------------------------------------ helpers

fn tuple<'py, T: IntoPyObject<'py>>(
    py: Python<'py>,
    items: impl IntoIterator<Item = T>,
) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, items.into_iter().collect::<Vec<_>>())
}

fn py_repr(value: &Bound<'_, PyAny>) -> String {
    value
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "an unprintable value".to_owned())
}

fn quoted(s: &str) -> String {
    format!("{s:?}").replace('"', "'")
}

/// An invalid option: `InvalidInputError` with `option` and `reason` attributes.
fn invalid_option(option: &str, reason: String) -> BindingError {
    BindingError::InvalidOption {
        option: option.to_owned(),
        reason,
    }
}

/// The names every enumeration of comparisons accepts or reports, for the Python facade's
/// `Literal` types: `{alias: (names...)}`.
fn literal_names() -> Vec<(&'static str, Vec<&'static str>)> {
    use tcgd_compare::{DtypePolicy, LayoutPolicy, Mode};
    vec![
        (
            "ComparisonMode",
            Mode::ALL.iter().map(|m| m.as_str()).collect(),
        ),
        (
            "ComparisonStatus",
            Status::ALL.iter().map(|s| s.as_str()).collect(),
        ),
        (
            "DTypePolicy",
            DtypePolicy::ALL.iter().map(|d| d.as_str()).collect(),
        ),
        (
            "LayoutPolicy",
            LayoutPolicy::ALL.iter().map(|l| l.as_str()).collect(),
        ),
        (
            "ObservationComparisonKind",
            Kind::ALL.iter().map(|k| k.as_str()).collect(),
        ),
    ]
}

/// `{alias: (names...)}` of the comparison enumerations (`ComparisonMode`,
/// `ComparisonStatus`, `DTypePolicy`, `LayoutPolicy`, `ObservationComparisonKind`).
#[pyfunction]
pub(crate) fn comparison_literals(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for (alias, names) in literal_names() {
        d.set_item(alias, tuple(py, names)?)?;
    }
    Ok(d)
}
