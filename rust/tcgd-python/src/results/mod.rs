//! Comparison options and results as Python sees them: frozen classes over the Rust model
//! of tcgd-compare. Options are checked once, when made; results are built from the
//! [`Comparison`] the engine returned, and their getters read its values (no JSON between
//! the engine and Python objects; `to_dict()` and `to_json()` are the JSON report).

use std::sync::Arc;

use pyo3::exceptions::{PyIndexError, PyKeyError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyComplex, PyDict, PyFloat, PyList, PyTuple};
use serde::Serialize;
use tcgd_compare::{
    CompareError, CompareOptions, Comparison, ComparisonKind, Counts, Divergence, FirstMismatch,
    GroupMember, Issue, Kind, MemberPoint, Metrics, ObservationComparison, ObservationSide,
    PointComparison, PointRef, RankComparison, RunGroup, Scalar, SeriesPoint, SiteLocation, Status,
    Subject, TensorSummary,
};

use crate::classes::frozen_class;
use crate::errors::{guard, BindResult, BindingError};

mod comparisons;
mod group;
mod leaves;
mod observations;
mod options;
mod points;
mod sites;
pub(crate) use comparisons::*;
pub(crate) use group::*;
pub(crate) use leaves::*;
pub(crate) use observations::*;
pub(crate) use options::*;
pub(crate) use points::*;
pub(crate) use sites::*;

// ------------------------------------------------------------------------------ helpers

/// A JSON value as the Python value `json.loads` would give for it.
fn json_to_py<'py>(py: Python<'py>, value: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            (None, None) => PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any(),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, json_to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// Any serialisable result as plain Python values (dicts, lists, numbers, strings), exactly
/// as its JSON report holds it: the one way a native result (a report layer's JSON value
/// among them) becomes Python values.
pub(crate) fn serde_to_py<'py, T: Serialize>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(value)
        .map_err(|e| BindingError::Internal(format!("cannot encode the result: {e}")))?;
    json_to_py(py, &value)
}

fn tuple<'py, T: IntoPyObject<'py>>(
    py: Python<'py>,
    items: impl IntoIterator<Item = T>,
) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, items.into_iter().collect::<Vec<_>>())
}

fn scalar<'py>(py: Python<'py>, s: &Scalar) -> PyResult<Bound<'py, PyAny>> {
    Ok(match *s {
        Scalar::Int(v) => v.into_pyobject(py)?.into_any(),
        Scalar::Float(v) => PyFloat::new(py, v).into_any(),
        Scalar::Complex(re, im) => PyComplex::from_doubles(py, re, im).into_any(),
    })
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
fn comparison_literals(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for (alias, names) in literal_names() {
        d.set_item(alias, tuple(py, names)?)?;
    }
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SITE_COLUMNS", tuple(m.py(), SITE_COLUMNS)?)?;
    add_to_module!(
        m,
        [
            PyOptions,
            PyValueSummary,
            PySite,
            PyTensorSite,
            PySide,
            PyFirstMismatch,
            PyMetrics,
            PyObservationComparison,
            PyPointInfo,
            PySubject,
            PyCounts,
            PyIssue,
            PySeriesPoint,
            PyDivergence,
            PyRankComparison,
            PySnapshotComparison,
            PyPointComparison,
            PyRunComparison,
            PySeriesComparison,
            PyGroupComparison,
            PyRankPoint,
            PyGroupSummary,
            PyGroupMember,
            PyGroupInfo
        ],
        [comparison_literals]
    )
}
