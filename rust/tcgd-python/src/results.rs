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
    PointComparison, PointRef, RankComparison, RunGroup, Scalar, SeriesPoint, SiteView, Status,
    Subject, SummaryView,
};

use crate::errors::{guard, BindResult, BindingError};

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

/// Any serialisable part of a comparison as a plain dict, exactly as report.json holds it.
fn to_py_dict<'py, T: Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(value)
        .map_err(|e| BindingError::Internal(format!("cannot encode the result: {e}")))?;
    json_to_py(py, &value)
}

fn tuple<'py, T: IntoPyObject<'py>>(
    py: Python<'py>,
    items: impl IntoIterator<Item = T, IntoIter: ExactSizeIterator>,
) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, items)
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

// ------------------------------------------------------------------------------ options

/// How values are compared. Every option is checked when the options are made; a bad
/// value raises `InvalidInputError` whose `option` and `reason` say which and why.
/// Defaults (those of the Rust engine, the one place they are written): mode="allclose",
/// rtol=1e-5, atol=1e-8, equal_nan=False, dtype_policy="strict", layout_policy="strict",
/// limit=20.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorComparisonOptions",
    frozen,
    skip_from_py_object
)]
#[derive(Clone)]
pub struct PyOptions {
    pub(crate) inner: CompareOptions,
}

impl PyOptions {
    /// The options a comparison function was given: `None` for the defaults, else a
    /// `TensorComparisonOptions`.
    pub(crate) fn of(value: Option<&Bound<'_, PyAny>>) -> BindResult<CompareOptions> {
        match value.filter(|v| !v.is_none()) {
            None => Ok(CompareOptions::default()),
            Some(v) => v
                .cast::<PyOptions>()
                .map(|o| o.get().inner.clone())
                .map_err(|_| {
                    BindingError::InvalidInput(format!(
                        "options must be a TensorComparisonOptions, got {}",
                        py_repr(v)
                    ))
                }),
        }
    }
}

/// An argument given and not `None`.
fn given<'py>(v: Option<&Bound<'py, PyAny>>) -> Option<Bound<'py, PyAny>> {
    v.filter(|v| !v.is_none()).cloned()
}

fn name_option(option: &str, value: &Bound<'_, PyAny>) -> BindResult<String> {
    value
        .extract::<String>()
        .map_err(|_| invalid_option(option, format!("must be a string, got {}", py_repr(value))))
}

fn number_option(option: &str, value: &Bound<'_, PyAny>) -> BindResult<f64> {
    let refused = || invalid_option(option, format!("must be a number, got {}", py_repr(value)));
    if value.cast::<PyBool>().is_ok() {
        return Err(refused());
    }
    value.extract::<f64>().map_err(|_| refused())
}

#[pymethods]
impl PyOptions {
    #[new]
    #[pyo3(signature = (
        mode=None, rtol=None, atol=None, equal_nan=None, dtype_policy=None,
        layout_policy=None, limit=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        mode: Option<&Bound<'_, PyAny>>,
        rtol: Option<&Bound<'_, PyAny>>,
        atol: Option<&Bound<'_, PyAny>>,
        equal_nan: Option<&Bound<'_, PyAny>>,
        dtype_policy: Option<&Bound<'_, PyAny>>,
        layout_policy: Option<&Bound<'_, PyAny>>,
        limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyOptions> {
        guard(py, || {
            let d = CompareOptions::default();
            let mode = match given(mode) {
                Some(v) => name_option("mode", &v)?,
                None => d.mode.as_str().to_owned(),
            };
            let rtol = match given(rtol) {
                Some(v) => number_option("rtol", &v)?,
                None => d.rtol,
            };
            let atol = match given(atol) {
                Some(v) => number_option("atol", &v)?,
                None => d.atol,
            };
            let equal_nan = match given(equal_nan) {
                Some(v) => v.cast::<PyBool>().map(|b| b.is_true()).map_err(|_| {
                    invalid_option("equal_nan", format!("must be a bool, got {}", py_repr(&v)))
                })?,
                None => d.equal_nan,
            };
            let dtype_policy = match given(dtype_policy) {
                Some(v) => name_option("dtype_policy", &v)?,
                None => d.dtype_policy.as_str().to_owned(),
            };
            let layout_policy = match given(layout_policy) {
                Some(v) => name_option("layout_policy", &v)?,
                None => d.layout_policy.as_str().to_owned(),
            };
            let limit = match given(limit) {
                Some(v) => match v.cast::<PyBool>() {
                    Ok(_) => None,
                    Err(_) => v.extract::<usize>().ok(),
                }
                .ok_or_else(|| {
                    invalid_option(
                        "limit",
                        format!("must be an integer >= 0, got {}", py_repr(&v)),
                    )
                })?,
                None => d.limit,
            };
            let inner = CompareOptions::from_names(
                &mode,
                rtol,
                atol,
                equal_nan,
                &dtype_policy,
                &layout_policy,
                limit,
            )
            .map_err(|e| match e {
                CompareError::InvalidOption { option, reason } => invalid_option(&option, reason),
                other => other.into(),
            })?;
            Ok(PyOptions { inner })
        })
    }

    /// `"allclose"` or `"exact"`.
    #[getter]
    fn mode(&self) -> &'static str {
        self.inner.mode.as_str()
    }
    #[getter]
    fn rtol(&self) -> f64 {
        self.inner.rtol
    }
    #[getter]
    fn atol(&self) -> f64 {
        self.inner.atol
    }
    #[getter]
    fn equal_nan(&self) -> bool {
        self.inner.equal_nan
    }
    /// `"strict"` or `"promote"`.
    #[getter]
    fn dtype_policy(&self) -> &'static str {
        self.inner.dtype_policy.as_str()
    }
    /// `"strict"` or `"ignore"`.
    #[getter]
    fn layout_policy(&self) -> &'static str {
        self.inner.layout_policy.as_str()
    }
    /// Rows per table in text and HTML reports (JSON and CSV are complete).
    #[getter]
    fn limit(&self) -> usize {
        self.inner.limit
    }

    /// Every option by name, as a comparison's JSON report holds them under `options`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_dict(py, &self.inner)
    }

    /// These options with the given ones changed, checked like new options.
    #[pyo3(signature = (**changes))]
    fn replace(&self, py: Python<'_>, changes: Option<&Bound<'_, PyDict>>) -> PyResult<PyOptions> {
        let kwargs = self.to_dict(py)?.cast_into::<PyDict>()?;
        if let Some(changes) = changes {
            for (k, v) in changes.iter() {
                if !kwargs.contains(&k)? {
                    return Err(BindingError::InvalidInput(format!(
                        "TensorComparisonOptions has no option {}",
                        py_repr(&k)
                    ))
                    .into());
                }
                kwargs.set_item(k, v)?;
            }
        }
        let class = py.get_type::<PyOptions>();
        let made = class.call((), Some(&kwargs))?.cast_into::<PyOptions>()?;
        Ok(made.get().clone())
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let o = &slf.get().inner;
        let args = (
            o.mode.as_str(),
            o.rtol,
            o.atol,
            o.equal_nan,
            o.dtype_policy.as_str(),
            o.layout_policy.as_str(),
            o.limit,
        )
            .into_pyobject(py)?;
        (slf.get_type(), args).into_pyobject(py)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyOptions>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let o = &self.inner;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            o.mode.as_str(),
            o.rtol.to_bits(),
            o.atol.to_bits(),
            o.equal_nan,
            o.dtype_policy.as_str(),
            o.layout_policy.as_str(),
            o.limit,
        )
            .hash(&mut h);
        h.finish()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let o = &self.inner;
        let float = |x: f64| py_repr(&PyFloat::new(py, x).into_any());
        format!(
            "TensorComparisonOptions(mode='{}', rtol={}, atol={}, equal_nan={}, \
             dtype_policy='{}', layout_policy='{}', limit={})",
            o.mode.as_str(),
            float(o.rtol),
            float(o.atol),
            if o.equal_nan { "True" } else { "False" },
            o.dtype_policy.as_str(),
            o.layout_policy.as_str(),
            o.limit
        )
    }
}

// -------------------------------------------------------------------------------- leaves

/// Counts and statistics of a value: `finite_count + nan_count + pos_inf_count +
/// neg_inf_count == numel`, `zero_count` is part of `finite_count`; `min`, `max`, `mean`,
/// `std` (population) and `l2_norm` cover the finite elements in float64 and are `None`
/// when there is none (`l2_norm` is then 0).
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorValueSummary",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyValueSummary {
    inner: SummaryView,
}

#[pymethods]
impl PyValueSummary {
    #[new]
    #[pyo3(signature = (
        *, numel, finite_count, nan_count, pos_inf_count, neg_inf_count, zero_count,
        min=None, max=None, mean=None, std=None, l2_norm=0.0
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        numel: u64,
        finite_count: u64,
        nan_count: u64,
        pos_inf_count: u64,
        neg_inf_count: u64,
        zero_count: u64,
        min: Option<f64>,
        max: Option<f64>,
        mean: Option<f64>,
        std: Option<f64>,
        l2_norm: f64,
    ) -> PyResult<PyValueSummary> {
        let counted = [finite_count, nan_count, pos_inf_count, neg_inf_count]
            .iter()
            .try_fold(0u64, |acc, &n| acc.checked_add(n));
        if counted != Some(numel) || zero_count > finite_count {
            return Err(BindingError::InvalidInput(format!(
                "a TensorValueSummary needs finite_count + nan_count + pos_inf_count + \
                 neg_inf_count == numel and zero_count <= finite_count, got numel={numel}, \
                 finite_count={finite_count}, nan_count={nan_count}, \
                 pos_inf_count={pos_inf_count}, neg_inf_count={neg_inf_count}, \
                 zero_count={zero_count}"
            ))
            .into());
        }
        Ok(PyValueSummary {
            inner: SummaryView {
                numel,
                finite: finite_count,
                nan: nan_count,
                posinf: pos_inf_count,
                neginf: neg_inf_count,
                zero: zero_count,
                min,
                max,
                mean,
                std,
                l2: l2_norm,
            },
        })
    }

    #[getter]
    fn numel(&self) -> u64 {
        self.inner.numel
    }
    #[getter]
    fn finite_count(&self) -> u64 {
        self.inner.finite
    }
    #[getter]
    fn nan_count(&self) -> u64 {
        self.inner.nan
    }
    #[getter]
    fn pos_inf_count(&self) -> u64 {
        self.inner.posinf
    }
    #[getter]
    fn neg_inf_count(&self) -> u64 {
        self.inner.neginf
    }
    #[getter]
    fn zero_count(&self) -> u64 {
        self.inner.zero
    }
    #[getter]
    fn min(&self) -> Option<f64> {
        self.inner.min
    }
    #[getter]
    fn max(&self) -> Option<f64> {
        self.inner.max
    }
    #[getter]
    fn mean(&self) -> Option<f64> {
        self.inner.mean
    }
    #[getter]
    fn std(&self) -> Option<f64> {
        self.inner.std
    }
    #[getter]
    fn l2_norm(&self) -> f64 {
        self.inner.l2
    }

    /// The fields by their names here (report.json keeps its own, shorter names).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.inner;
        let d = PyDict::new(py);
        d.set_item("numel", s.numel)?;
        d.set_item("finite_count", s.finite)?;
        d.set_item("nan_count", s.nan)?;
        d.set_item("pos_inf_count", s.posinf)?;
        d.set_item("neg_inf_count", s.neginf)?;
        d.set_item("zero_count", s.zero)?;
        d.set_item("min", s.min)?;
        d.set_item("max", s.max)?;
        d.set_item("mean", s.mean)?;
        d.set_item("std", s.std)?;
        d.set_item("l2_norm", s.l2)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let s = &self.inner;
        let f = |x: Option<f64>| x.map_or_else(|| "None".to_owned(), |v| format!("{v:?}"));
        format!(
            "TensorValueSummary(numel={}, finite_count={}, nan_count={}, pos_inf_count={}, \
             neg_inf_count={}, zero_count={}, min={}, max={}, mean={}, std={}, l2_norm={:?})",
            s.numel,
            s.finite,
            s.nan,
            s.posinf,
            s.neginf,
            s.zero,
            f(s.min),
            f(s.max),
            f(s.mean),
            f(s.std),
            s.l2
        )
    }
}

/// Where a compared value came from when a compile pass placed its probe.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "ObservationSite",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PySite {
    inner: SiteView,
}

#[pymethods]
impl PySite {
    #[getter]
    fn site_id(&self) -> Option<String> {
        self.inner.site_id.clone()
    }
    #[getter]
    fn graph_kind(&self) -> Option<String> {
        self.inner.graph_kind.clone()
    }
    #[getter]
    fn node_name(&self) -> Option<String> {
        self.inner.node_name.clone()
    }
    #[getter]
    fn aten_op(&self) -> Option<String> {
        self.inner.aten_op.clone()
    }
    #[getter]
    fn module_path(&self) -> Option<String> {
        self.inner.module_path.clone()
    }
    #[getter]
    fn source_location(&self) -> Option<String> {
        self.inner.source_location.clone()
    }
    #[getter]
    fn compile_id(&self) -> Option<String> {
        self.inner.compile_id.clone()
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_dict(py, &self.inner)
    }
    fn __repr__(&self) -> String {
        format!(
            "ObservationSite({})",
            self.inner.describe().unwrap_or_default()
        )
    }
}

/// One side of a compared pair, as it was recorded (the observation's descriptor).
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "ObservationSide",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PySide {
    inner: ObservationSide,
}

#[pymethods]
impl PySide {
    #[getter]
    fn order(&self) -> i64 {
        self.inner.order
    }
    #[getter]
    fn dtype(&self) -> String {
        self.inner.dtype.clone()
    }
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.inner.shape.iter().copied())
    }
    #[getter]
    fn stride<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.inner.stride.iter().copied())
    }
    #[getter]
    fn source_device(&self) -> String {
        self.inner.source_device.clone()
    }
    /// `"full"` or `"summary"`.
    #[getter]
    fn payload(&self) -> String {
        self.inner.payload.clone()
    }
    #[getter]
    fn digest(&self) -> Option<String> {
        self.inner.digest.clone()
    }
    #[getter]
    fn summary(&self) -> Option<PyValueSummary> {
        self.inner.summary.map(|inner| PyValueSummary { inner })
    }
    #[getter]
    fn site(&self) -> Option<PySite> {
        self.inner.site.clone().map(|inner| PySite { inner })
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_dict(py, &self.inner)
    }
    fn __repr__(&self) -> String {
        let s = &self.inner;
        format!(
            "ObservationSide(order={}, dtype='{}', shape={:?}, stride={:?}, payload='{}')",
            s.order, s.dtype, s.shape, s.stride, s.payload
        )
    }
}

/// The first element (row-major) that did not match: its flat index, coordinate and both
/// values (integers exact).
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "FirstMismatch",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyFirstMismatch {
    inner: FirstMismatch,
}

#[pymethods]
impl PyFirstMismatch {
    #[getter]
    fn index(&self) -> u64 {
        self.inner.index
    }
    #[getter]
    fn coordinate<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.inner.coordinate.iter().copied())
    }
    #[getter]
    fn reference<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        scalar(py, &self.inner.reference)
    }
    #[getter]
    fn candidate<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        scalar(py, &self.inner.candidate)
    }
    fn __repr__(&self) -> String {
        format!(
            "FirstMismatch(index={}, coordinate={:?})",
            self.inner.index, self.inner.coordinate
        )
    }
}

/// Element-wise metrics of one pair. Error metrics cover the elements where both values
/// are finite (`finite_pairs`); they are `None` when there is none.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "ComparisonMetrics",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyMetrics {
    inner: Metrics,
}

#[pymethods]
impl PyMetrics {
    /// `"float64"`, `"complex128"` or `"integer"`: the type values were compared in.
    #[getter]
    fn compared_as(&self) -> &'static str {
        self.inner.compared_as
    }
    #[getter]
    fn total(&self) -> u64 {
        self.inner.total
    }
    #[getter]
    fn mismatch_count(&self) -> u64 {
        self.inner.mismatch_count
    }
    #[getter]
    fn mismatch_fraction(&self) -> f64 {
        self.inner.mismatch_fraction
    }
    #[getter]
    fn finite_pairs(&self) -> u64 {
        self.inner.finite_pairs
    }
    #[getter]
    fn max_abs_error(&self) -> Option<f64> {
        self.inner.max_abs_error
    }
    #[getter]
    fn max_rel_error(&self) -> Option<f64> {
        self.inner.max_rel_error
    }
    #[getter]
    fn mean_abs_error(&self) -> Option<f64> {
        self.inner.mean_abs_error
    }
    #[getter]
    fn first_mismatch(&self) -> Option<PyFirstMismatch> {
        self.inner
            .first_mismatch
            .clone()
            .map(|inner| PyFirstMismatch { inner })
    }
    #[getter]
    fn cosine_similarity(&self) -> Option<f64> {
        self.inner.cosine_similarity
    }
    #[getter]
    fn relative_l2_error(&self) -> Option<f64> {
        self.inner.relative_l2_error
    }
    #[getter]
    fn max_ulp_distance(&self) -> Option<u64> {
        self.inner.max_ulp_distance
    }
    #[getter]
    fn nan_introduced(&self) -> u64 {
        self.inner.nan_introduced
    }
    #[getter]
    fn inf_introduced(&self) -> u64 {
        self.inner.inf_introduced
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_dict(py, &self.inner)
    }
    fn __repr__(&self) -> String {
        let m = &self.inner;
        format!(
            "ComparisonMetrics(mismatch_count={}, total={}, max_abs_error={:?})",
            m.mismatch_count, m.total, m.max_abs_error
        )
    }
}

/// The verdict on one `(name, invocation_index)` pair: `status`, `kind` (how it was
/// reached), `reason` (why, in one sentence), both descriptors (`None` on the side the key
/// is missing from) and, when both full payloads were compared, the metrics.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorObservationComparison",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyObservationComparison {
    inner: ObservationComparison,
}

impl PyObservationComparison {
    fn metric<T>(&self, f: impl Fn(&Metrics) -> T) -> Option<T> {
        self.inner.metrics.as_ref().map(f)
    }
}

#[pymethods]
impl PyObservationComparison {
    /// Position in execution order within its point comparison.
    #[getter]
    fn position(&self) -> usize {
        self.inner.position
    }
    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }
    #[getter]
    fn invocation_index(&self) -> i64 {
        self.inner.invocation_index
    }
    /// `(name, invocation_index)`: the stable key observations are aligned by.
    #[getter]
    fn key(&self) -> (String, i64) {
        (self.inner.name.clone(), self.inner.invocation_index)
    }
    #[getter]
    fn status(&self) -> &'static str {
        self.inner.status.as_str()
    }
    #[getter]
    fn ok(&self) -> bool {
        self.inner.status == Status::Match
    }
    /// `reference_only`, `candidate_only`, `metadata`, `digest`, `values` or `summary`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind.as_str()
    }
    #[getter]
    fn reason(&self) -> String {
        self.inner.reason.clone()
    }
    #[getter]
    fn reference(&self) -> Option<PySide> {
        self.inner.reference.clone().map(|inner| PySide { inner })
    }
    #[getter]
    fn candidate(&self) -> Option<PySide> {
        self.inner.candidate.clone().map(|inner| PySide { inner })
    }
    #[getter]
    fn metrics(&self) -> Option<PyMetrics> {
        self.inner.metrics.clone().map(|inner| PyMetrics { inner })
    }
    #[getter]
    fn mismatch_count(&self) -> Option<u64> {
        self.metric(|m| m.mismatch_count)
    }
    #[getter]
    fn mismatch_fraction(&self) -> Option<f64> {
        self.metric(|m| m.mismatch_fraction)
    }
    #[getter]
    fn max_abs_error(&self) -> Option<f64> {
        self.metric(|m| m.max_abs_error).flatten()
    }
    #[getter]
    fn max_rel_error(&self) -> Option<f64> {
        self.metric(|m| m.max_rel_error).flatten()
    }
    #[getter]
    fn mean_abs_error(&self) -> Option<f64> {
        self.metric(|m| m.mean_abs_error).flatten()
    }
    #[getter]
    fn first_mismatch(&self) -> Option<PyFirstMismatch> {
        self.metric(|m| m.first_mismatch.clone())
            .flatten()
            .map(|inner| PyFirstMismatch { inner })
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_dict(py, &self.inner)
    }
    fn __repr__(&self) -> String {
        format!(
            "TensorObservationComparison(name={}, invocation_index={}, status='{}', \
             kind='{}', reason={})",
            quoted(&self.inner.name),
            self.inner.invocation_index,
            self.inner.status.as_str(),
            self.inner.kind.as_str(),
            quoted(&self.inner.reason)
        )
    }
}

/// Which point (or snapshot) one side of a point comparison is.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "PointInfo",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyPointInfo {
    inner: PointRef,
}

#[pymethods]
impl PyPointInfo {
    #[getter]
    fn label(&self) -> Option<String> {
        self.inner.label.clone()
    }
    #[getter]
    fn index(&self) -> Option<i64> {
        self.inner.index
    }
    #[getter]
    fn replay_index(&self) -> Option<i64> {
        self.inner.replay_index
    }
    #[getter]
    fn snapshot_index(&self) -> Option<i64> {
        self.inner.snapshot_index
    }
    #[getter]
    fn timestamp(&self) -> Option<String> {
        self.inner.timestamp.clone()
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_dict(py, &self.inner)
    }
    fn __repr__(&self) -> String {
        format!("PointInfo({})", self.inner.display())
    }
}

/// What one side of a run, series or group comparison is.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "ComparisonSubject",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PySubject {
    inner: Subject,
}

#[pymethods]
impl PySubject {
    /// `snapshot`, `point`, `run` or `run_group`.
    #[getter]
    fn kind(&self) -> String {
        self.inner.kind.clone()
    }
    #[getter]
    fn name(&self) -> Option<String> {
        self.inner.name.clone()
    }
    #[getter]
    fn path(&self) -> Option<String> {
        self.inner.path.clone()
    }
    #[getter]
    fn run_id(&self) -> Option<String> {
        self.inner.run_id.clone()
    }
    #[getter]
    fn rank(&self) -> Option<i64> {
        self.inner.rank
    }
    #[getter]
    fn world_size(&self) -> Option<i64> {
        self.inner.world_size
    }
    #[getter]
    fn complete(&self) -> Option<bool> {
        self.inner.complete
    }
    #[getter]
    fn points(&self) -> Option<usize> {
        self.inner.points
    }
    #[getter]
    fn detail(&self) -> Option<String> {
        self.inner.detail.clone()
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_dict(py, &self.inner)
    }
    fn __repr__(&self) -> String {
        format!("ComparisonSubject({})", self.inner.display())
    }
}

/// How many comparisons of each status.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "ComparisonCounts",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyCounts {
    inner: Counts,
}

#[pymethods]
impl PyCounts {
    #[getter]
    fn total(&self) -> usize {
        self.inner.total
    }
    #[getter(r#match)]
    fn matched(&self) -> usize {
        self.inner.matched
    }
    #[getter]
    fn mismatch(&self) -> usize {
        self.inner.mismatched
    }
    #[getter]
    fn inconclusive(&self) -> usize {
        self.inner.inconclusive
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_dict(py, &self.inner)
    }
    fn __repr__(&self) -> String {
        let c = &self.inner;
        format!(
            "ComparisonCounts(total={}, match={}, mismatch={}, inconclusive={})",
            c.total, c.matched, c.mismatched, c.inconclusive
        )
    }
}

/// A point of a series: its position in `point_comparisons` and its identity in the run.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "SeriesPointRef",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PySeriesPoint {
    inner: SeriesPoint,
}

#[pymethods]
impl PySeriesPoint {
    #[getter]
    fn point(&self) -> usize {
        self.inner.point
    }
    #[getter]
    fn label(&self) -> Option<String> {
        self.inner.label.clone()
    }
    #[getter]
    fn index(&self) -> Option<i64> {
        self.inner.index
    }
    #[getter]
    fn replay_index(&self) -> Option<i64> {
        self.inner.replay_index
    }
    fn __repr__(&self) -> String {
        format!(
            "SeriesPointRef(point={}, label={:?}, replay_index={:?})",
            self.inner.point, self.inner.label, self.inner.replay_index
        )
    }
}

fn series_point(p: &Option<SeriesPoint>) -> Option<PySeriesPoint> {
    p.clone().map(|inner| PySeriesPoint { inner })
}

/// When one observation of the reference point stopped matching across a series.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "SeriesDivergence",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyDivergence {
    inner: Divergence,
}

#[pymethods]
impl PyDivergence {
    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }
    #[getter]
    fn invocation_index(&self) -> i64 {
        self.inner.invocation_index
    }
    /// The worst status over the series.
    #[getter]
    fn status(&self) -> &'static str {
        self.inner.status.as_str()
    }
    #[getter]
    fn first_mismatch(&self) -> Option<PySeriesPoint> {
        series_point(&self.inner.first_mismatch)
    }
    #[getter]
    fn first_inconclusive(&self) -> Option<PySeriesPoint> {
        series_point(&self.inner.first_inconclusive)
    }
    #[getter]
    fn mismatched_points(&self) -> usize {
        self.inner.mismatched_points
    }
    /// The largest `max_abs_error` over the series.
    #[getter]
    fn max_abs_error(&self) -> Option<f64> {
        self.inner.max_abs_error
    }
    fn __repr__(&self) -> String {
        format!(
            "SeriesDivergence(name={}, invocation_index={}, status='{}', mismatched_points={})",
            quoted(&self.inner.name),
            self.inner.invocation_index,
            self.inner.status.as_str(),
            self.inner.mismatched_points
        )
    }
}

// ------------------------------------------------------------------------ point views

/// What a nested point comparison names as its sides in its own reports.
fn point_subject(p: Option<&PointRef>) -> Subject {
    let mut facts = Vec::new();
    if let Some(p) = p {
        if let Some(s) = p.snapshot_index {
            facts.push(format!("snapshot {s}"));
        } else if let Some(i) = p.index {
            facts.push(format!("point {i}"));
        }
        if let Some(r) = p.replay_index {
            facts.push(format!("replay {r}"));
        }
    }
    Subject {
        kind: if p.is_some_and(|p| p.snapshot_index.is_some()) {
            "snapshot".into()
        } else {
            "point".into()
        },
        name: p.and_then(|p| p.label.clone()),
        detail: (!facts.is_empty()).then(|| facts.join(", ")),
        ..Subject::default()
    }
}

/// One point pair of a larger comparison as a comparison of its own: the pair, the
/// options, and the warnings of the whole.
fn point_view(whole: &Comparison, p: &PointComparison) -> PyPointComparison {
    let c = Comparison::new(
        ComparisonKind::Points,
        whole.options.clone(),
        point_subject(p.reference.as_ref()),
        point_subject(p.candidate.as_ref()),
        vec![p.clone()],
        Vec::new(),
        whole.warnings.clone(),
    );
    PyPointComparison { c: Arc::new(c) }
}

fn find_point(points: &[PointComparison], position: usize) -> Option<&PointComparison> {
    points.iter().find(|p| p.position == position)
}

fn observations_of<'py>(py: Python<'py>, c: &Comparison) -> PyResult<Bound<'py, PyTuple>> {
    tuple(
        py,
        c.observations()
            .into_iter()
            .map(|(_, _, o)| PyObservationComparison { inner: o.clone() }),
    )
}

fn single(c: &Comparison) -> PyResult<&PointComparison> {
    c.points.first().ok_or_else(|| {
        BindingError::Internal("a point comparison without its point pair".into()).into()
    })
}

// ------------------------------------------------------------------------------ issues

/// The first problem in execution order. `scope` is `observation` (then `observation`
/// is set), `point` (a point recorded on one side only) or `rank` (a rank missing from a
/// group). Unpacks as `(label, issue)`: the label of the point it is at, and the
/// observation comparison (or, for a point or rank issue, this issue itself).
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "ComparisonIssue",
    frozen
)]
pub struct PyIssue {
    inner: Issue,
    label: Option<String>,
    point: Option<Py<PyPointComparison>>,
    observation: Option<Py<PyObservationComparison>>,
}

fn issue_of(py: Python<'_>, c: &Comparison) -> PyResult<Option<PyIssue>> {
    let Some(issue) = c.first_issue.clone() else {
        return Ok(None);
    };
    let (whole, points): (&Comparison, &[PointComparison]) = match issue.rank {
        None => (c, &c.points),
        Some(rank) => match c
            .ranks
            .iter()
            .find(|r| r.rank == rank)
            .and_then(|r| r.comparison.as_deref())
        {
            Some(inner) => (inner, &inner.points),
            None => (c, &[]),
        },
    };
    let point = issue.point.and_then(|i| find_point(points, i));
    let observation = point.and_then(|p| {
        issue
            .observation
            .and_then(|i| p.observations.iter().find(|o| o.position == i))
    });
    // A series compares one reference point with each candidate point: the candidate
    // names where the issue is. Otherwise the reference does, unless the point is only in
    // the candidate.
    let label = point.and_then(|p| {
        let sides = if whole.kind == ComparisonKind::PointSeries {
            [p.candidate.as_ref(), p.reference.as_ref()]
        } else {
            [p.reference.as_ref(), p.candidate.as_ref()]
        };
        sides
            .into_iter()
            .flatten()
            .next()
            .map(|r| r.label.clone().unwrap_or_else(|| r.display()))
    });
    Ok(Some(PyIssue {
        label,
        point: point
            .map(|p| Py::new(py, point_view(whole, p)))
            .transpose()?,
        observation: observation
            .map(|o| Py::new(py, PyObservationComparison { inner: o.clone() }))
            .transpose()?,
        inner: issue,
    }))
}

#[pymethods]
impl PyIssue {
    #[getter]
    fn scope(&self) -> &'static str {
        self.inner.scope
    }
    #[getter]
    fn status(&self) -> &'static str {
        self.inner.status.as_str()
    }
    #[getter]
    fn rank(&self) -> Option<i64> {
        self.inner.rank
    }
    /// The label of the point the issue is at (`None` for a missing rank).
    #[getter]
    fn label(&self) -> Option<String> {
        self.label.clone()
    }
    #[getter]
    fn point(&self, py: Python<'_>) -> Option<Py<PyPointComparison>> {
        self.point.as_ref().map(|p| p.clone_ref(py))
    }
    #[getter]
    fn observation(&self, py: Python<'_>) -> Option<Py<PyObservationComparison>> {
        self.observation.as_ref().map(|o| o.clone_ref(py))
    }
    #[getter]
    fn description(&self) -> String {
        self.inner.description.clone()
    }
    fn __len__(&self) -> usize {
        2
    }
    fn __getitem__<'py>(slf: &Bound<'py, Self>, index: isize) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        match index {
            0 | -2 => Ok(slf.get().label.clone().into_pyobject(py)?.into_any()),
            1 | -1 => Ok(match &slf.get().observation {
                Some(o) => o.clone_ref(py).into_bound(py).into_any(),
                None => slf.clone().into_any(),
            }),
            _ => Err(PyIndexError::new_err("an issue unpacks as (label, issue)")),
        }
    }
    fn __repr__(&self) -> String {
        format!(
            "ComparisonIssue(scope='{}', status='{}', description={})",
            self.inner.scope,
            self.inner.status.as_str(),
            quoted(&self.inner.description)
        )
    }
}

// ----------------------------------------------------------------------------- results

fn failed(py: Python<'_>, message: String) -> PyErr {
    match py
        .import("torch_cudagraph_debug.errors")
        .and_then(|m| m.getattr("ComparisonFailedError"))
        .and_then(|class| class.call1((message,)))
    {
        Ok(error) => PyErr::from_value(error),
        Err(e) => e,
    }
}

fn paths(py: Python<'_>, written: Vec<std::path::PathBuf>) -> PyResult<Vec<Bound<'_, PyAny>>> {
    let path = py.import("pathlib")?.getattr("Path")?;
    written.into_iter().map(|p| path.call1((p,))).collect()
}

/// The aggregate methods every comparison result has, over its field `c`. A macro because
/// pyo3 classes have one method table each; `$extra` holds a class's own methods.
macro_rules! comparison_result {
    ($class:ident, $title:literal, { $($extra:tt)* }) => {
        #[pymethods]
        impl $class {
            /// `snapshots`, `points`, `runs`, `point_series` or `run_groups`.
            #[getter]
            fn kind(&self) -> &'static str {
                self.c.kind.as_str()
            }
            /// `match`, `mismatch` or `inconclusive` (mismatch > inconclusive > match).
            #[getter]
            fn status(&self) -> &'static str {
                self.c.status.as_str()
            }
            #[getter]
            fn ok(&self) -> bool {
                self.c.ok
            }
            #[getter]
            fn conclusive(&self) -> bool {
                self.c.conclusive
            }
            #[getter]
            fn options(&self) -> PyOptions {
                PyOptions { inner: self.c.options.clone() }
            }
            /// Observation comparisons by status, over every point (and rank).
            #[getter]
            fn counts(&self) -> PyCounts {
                PyCounts { inner: self.c.counts }
            }
            /// Point comparisons by status, over every rank.
            #[getter]
            fn point_counts(&self) -> PyCounts {
                PyCounts { inner: self.c.point_counts }
            }
            #[getter]
            fn warnings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                tuple(py, self.c.warnings.iter())
            }
            /// The first problem in execution order, or `None` when everything matched.
            #[getter]
            fn first_issue(&self, py: Python<'_>) -> PyResult<Option<PyIssue>> {
                issue_of(py, &self.c)
            }
            /// Every observation comparison, in execution order (points, then ranks).
            #[getter]
            fn observations<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                observations_of(py, &self.c)
            }
            /// The `n` worst observation comparisons (all when `None`), worst first: by
            /// status, then the share of elements that differ, then the largest absolute
            /// and relative errors; ties keep execution order.
            #[pyo3(signature = (n=None))]
            fn worst_observation_comparisons(
                &self,
                n: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<Vec<PyObservationComparison>> {
                let n = match n.filter(|n| !n.is_none()) {
                    None => None,
                    Some(v) => Some(
                        v.cast::<PyBool>()
                            .err()
                            .and_then(|_| v.extract::<usize>().ok())
                            .ok_or_else(|| {
                                BindingError::InvalidInput(format!(
                                    "n must be None or an integer >= 0, got {}",
                                    py_repr(v)
                                ))
                            })?,
                    ),
                };
                Ok(self
                    .c
                    .worst(n)
                    .into_iter()
                    .map(|(_, _, o)| PyObservationComparison { inner: o.clone() })
                    .collect())
            }
            /// Raises `ComparisonFailedError` unless the status is `match` (an
            /// inconclusive comparison proves nothing, so it fails too).
            fn assert_ok(&self, py: Python<'_>) -> PyResult<()> {
                if self.c.ok {
                    return Ok(());
                }
                let n = &self.c.counts;
                Err(failed(
                    py,
                    format!(
                        "{}: {} ({} of {} observations mismatch, {} inconclusive); first \
                         issue: {}",
                        self.c.kind.title(),
                        self.c.status.as_str(),
                        n.mismatched,
                        n.total,
                        n.inconclusive,
                        self.c
                            .first_issue
                            .as_ref()
                            .map_or("none", |i| i.description.as_str())
                    ),
                ))
            }
            /// The text report. `include_unchanged=False` leaves out the rows of matching
            /// ranks, points and observations; `limit` (default: the options') caps rows
            /// per table.
            #[pyo3(signature = (include_unchanged=true, limit=None))]
            fn to_text(
                &self,
                py: Python<'_>,
                include_unchanged: bool,
                limit: Option<usize>,
            ) -> PyResult<String> {
                guard(py, || {
                    Ok(tcgd_compare::report::to_text_with(
                        &self.c,
                        limit,
                        Some(include_unchanged),
                    ))
                })
            }
            /// A standalone HTML report (charts as inline SVG, no script), rows chosen as
            /// `to_text` chooses them.
            #[pyo3(signature = (include_unchanged=true, limit=None))]
            fn to_html(
                &self,
                py: Python<'_>,
                include_unchanged: bool,
                limit: Option<usize>,
            ) -> PyResult<String> {
                guard(py, || {
                    Ok(tcgd_compare::report::to_html_with(
                        &self.c,
                        limit,
                        Some(include_unchanged),
                    ))
                })
            }
            /// The complete comparison (the content of report.json); non-finite floats
            /// are the strings "nan", "inf" and "-inf".
            fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                to_py_dict(py, &*self.c)
            }
            /// report.json's text.
            fn to_json(&self, py: Python<'_>) -> PyResult<String> {
                guard(py, || {
                    tcgd_compare::report::to_json(&self.c).map_err(BindingError::from)
                })
            }
            /// `{file name: CSV text}` for each table that applies.
            fn csv_tables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                let tables = PyDict::new(py);
                for (name, text) in tcgd_compare::report::csv_tables(&self.c) {
                    tables.set_item(name, text)?;
                }
                Ok(tables)
            }
            /// Writes report.txt, report.json, report.html and the CSV tables into
            /// `directory` and returns their paths. A directory that already holds
            /// anything needs `overwrite=True`, which replaces only the files this method
            /// writes.
            #[pyo3(signature = (directory, overwrite=false, *, include_unchanged=true, limit=None))]
            fn write<'py>(
                &self,
                py: Python<'py>,
                directory: std::path::PathBuf,
                overwrite: bool,
                include_unchanged: bool,
                limit: Option<usize>,
            ) -> PyResult<Vec<Bound<'py, PyAny>>> {
                let written = guard(py, || {
                    let c = Arc::clone(&self.c);
                    py.detach(move || {
                        tcgd_compare::report::write_with(
                            &c,
                            &directory,
                            overwrite,
                            limit,
                            Some(include_unchanged),
                        )
                    })
                    .map_err(BindingError::from)
                })?;
                paths(py, written)
            }
            fn __str__(&self) -> String {
                tcgd_compare::report::to_text_with(&self.c, None, Some(true))
            }
            fn __repr__(&self) -> String {
                let n = &self.c.counts;
                format!(
                    "{}(status='{}', observations={}, mismatch={}, inconclusive={})",
                    $title,
                    self.c.status.as_str(),
                    n.total,
                    n.mismatched,
                    n.inconclusive
                )
            }

            $($extra)*
        }
    };
}

/// The methods of a single point pair's result (snapshots or points).
macro_rules! point_result {
    ($class:ident, $title:literal) => {
        comparison_result!($class, $title, {
            /// The reference point or snapshot (`None` for a point recorded only in the
            /// candidate, within a run comparison).
            #[getter]
            fn reference(&self) -> PyResult<Option<PyPointInfo>> {
                Ok(single(&self.c)?
                    .reference
                    .clone()
                    .map(|inner| PyPointInfo { inner }))
            }
            #[getter]
            fn candidate(&self) -> PyResult<Option<PyPointInfo>> {
                Ok(single(&self.c)?
                    .candidate
                    .clone()
                    .map(|inner| PyPointInfo { inner }))
            }
            /// Position among the point comparisons of the comparison it belongs to.
            #[getter]
            fn position(&self) -> PyResult<usize> {
                Ok(single(&self.c)?.position)
            }
            /// Why a one-sided point could not be compared; `None` otherwise.
            #[getter]
            fn reason(&self) -> PyResult<Option<String>> {
                Ok(single(&self.c)?.reason.clone())
            }
            /// Reference order, then candidate-only keys.
            #[getter]
            fn observation_comparisons<'py>(
                &self,
                py: Python<'py>,
            ) -> PyResult<Bound<'py, PyTuple>> {
                observations_of(py, &self.c)
            }
            /// `{(name, invocation_index): TensorObservationComparison}`.
            #[getter]
            fn by_key<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                let d = PyDict::new(py);
                for o in &single(&self.c)?.observations {
                    d.set_item(
                        (o.name.clone(), o.invocation_index),
                        PyObservationComparison { inner: o.clone() },
                    )?;
                }
                Ok(d)
            }
            /// The comparison of observation `(name, invocation_index)`.
            #[pyo3(signature = (name, invocation_index=0))]
            fn observation(
                &self,
                name: &str,
                invocation_index: i64,
            ) -> PyResult<PyObservationComparison> {
                let point = single(&self.c)?;
                point
                    .observations
                    .iter()
                    .find(|o| o.name == name && o.invocation_index == invocation_index)
                    .map(|o| PyObservationComparison { inner: o.clone() })
                    .ok_or_else(|| {
                        let keys: Vec<String> = point
                            .observations
                            .iter()
                            .map(|o| format!("({}, {})", quoted(&o.name), o.invocation_index))
                            .collect();
                        PyKeyError::new_err(format!(
                            "no observation ({}, {invocation_index}) in this comparison; \
                             keys: [{}]",
                            quoted(name),
                            keys.join(", ")
                        ))
                    })
            }
            /// This comparison, as the one point pair of `point_comparisons`.
            #[getter]
            fn points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                let p = single(&self.c)?;
                tuple(py, [point_view(&self.c, p)])
            }
        });
    };
}

/// Two probe snapshots compared observation by observation.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorSnapshotComparison",
    frozen
)]
pub struct PySnapshotComparison {
    c: Arc<Comparison>,
}
point_result!(PySnapshotComparison, "TensorSnapshotComparison");

/// Two points compared observation by observation; also each point pair of a run,
/// series or group comparison.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorPointComparison",
    frozen
)]
pub struct PyPointComparison {
    c: Arc<Comparison>,
}
point_result!(PyPointComparison, "TensorPointComparison");

fn point_views<'py>(py: Python<'py>, c: &Comparison) -> PyResult<Bound<'py, PyTuple>> {
    tuple(py, c.points.iter().map(|p| point_view(c, p)))
}

fn point_by_label(c: &Comparison, label: &str) -> PyResult<PyPointComparison> {
    c.points
        .iter()
        .find(|p| {
            p.reference
                .as_ref()
                .or(p.candidate.as_ref())
                .is_some_and(|r| r.label.as_deref() == Some(label))
        })
        .map(|p| point_view(c, p))
        .ok_or_else(|| PyKeyError::new_err(format!("no compared point labelled {}", quoted(label))))
}

/// Two runs compared point by point.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorRunComparison",
    frozen
)]
pub struct PyRunComparison {
    c: Arc<Comparison>,
}
comparison_result!(PyRunComparison, "TensorRunComparison", {
    #[getter]
    fn reference(&self) -> PySubject {
        PySubject {
            inner: self.c.reference.clone(),
        }
    }
    #[getter]
    fn candidate(&self) -> PySubject {
        PySubject {
            inner: self.c.candidate.clone(),
        }
    }
    /// One comparison per point pair, in alignment order (one-sided points included).
    #[getter]
    fn point_comparisons<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        point_views(py, &self.c)
    }
    #[getter]
    fn points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        point_views(py, &self.c)
    }
    /// The point comparison whose reference (or, one-sided, candidate) is `label`.
    fn point(&self, label: &str) -> PyResult<PyPointComparison> {
        point_by_label(&self.c, label)
    }
});

/// One reference point against every point of a run.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorPointSeriesComparison",
    frozen
)]
pub struct PySeriesComparison {
    c: Arc<Comparison>,
}
comparison_result!(PySeriesComparison, "TensorPointSeriesComparison", {
    #[getter]
    fn reference(&self) -> PySubject {
        PySubject {
            inner: self.c.reference.clone(),
        }
    }
    #[getter]
    fn candidate(&self) -> PySubject {
        PySubject {
            inner: self.c.candidate.clone(),
        }
    }
    #[getter]
    fn point_comparisons<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        point_views(py, &self.c)
    }
    #[getter]
    fn points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        point_views(py, &self.c)
    }
    fn point(&self, label: &str) -> PyResult<PyPointComparison> {
        self.c
            .points
            .iter()
            .find(|p| {
                p.candidate
                    .as_ref()
                    .is_some_and(|r| r.label.as_deref() == Some(label))
            })
            .map(|p| point_view(&self.c, p))
            .ok_or_else(|| {
                PyKeyError::new_err(format!("no compared point labelled {}", quoted(label)))
            })
    }
    /// The first point at which any observation mismatched.
    #[getter]
    fn first_divergence(&self) -> Option<PySeriesPoint> {
        self.c
            .series
            .as_ref()
            .and_then(|s| series_point(&s.first_divergence))
    }
    /// Per observation of the reference point, in its order: when it stopped matching.
    #[getter]
    fn divergence<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let items: Vec<PyDivergence> = self
            .c
            .series
            .iter()
            .flat_map(|s| s.observations.iter())
            .map(|d| PyDivergence { inner: d.clone() })
            .collect();
        tuple(py, items)
    }
    #[pyo3(signature = (name, invocation_index=0))]
    fn divergence_of(&self, name: &str, invocation_index: i64) -> PyResult<PyDivergence> {
        self.c
            .series
            .iter()
            .flat_map(|s| s.observations.iter())
            .find(|d| d.name == name && d.invocation_index == invocation_index)
            .map(|d| PyDivergence { inner: d.clone() })
            .ok_or_else(|| {
                PyKeyError::new_err(format!(
                    "no observation ({}, {invocation_index}) in this series",
                    quoted(name)
                ))
            })
    }
});

/// One rank of a run group comparison: the rank, its run comparison (`None` for a rank
/// present on one side only) and the status derived from it.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorRankRunComparison",
    frozen
)]
pub struct PyRankComparison {
    rank: i64,
    status: Status,
    reason: Option<String>,
    comparison: Option<Arc<Comparison>>,
}

impl PyRankComparison {
    fn new(r: &RankComparison) -> PyRankComparison {
        PyRankComparison {
            rank: r.rank,
            status: r.status,
            reason: r.reason.clone(),
            comparison: r.comparison.as_ref().map(|c| Arc::new((**c).clone())),
        }
    }
}

#[pymethods]
impl PyRankComparison {
    #[getter]
    fn rank(&self) -> i64 {
        self.rank
    }
    #[getter]
    fn status(&self) -> &'static str {
        self.status.as_str()
    }
    #[getter]
    fn ok(&self) -> bool {
        self.status == Status::Match
    }
    /// Why the rank could not be compared (missing on one side).
    #[getter]
    fn reason(&self) -> Option<String> {
        self.reason.clone()
    }
    #[getter]
    fn comparison(&self) -> Option<PyRunComparison> {
        self.comparison
            .as_ref()
            .map(|c| PyRunComparison { c: Arc::clone(c) })
    }
    /// The rank's point comparisons; empty for a one-sided rank.
    #[getter]
    fn points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        match &self.comparison {
            Some(c) => point_views(py, c),
            None => Ok(PyTuple::empty(py)),
        }
    }
    #[getter]
    fn counts(&self) -> Option<PyCounts> {
        self.comparison
            .as_ref()
            .map(|c| PyCounts { inner: c.counts })
    }
    fn __repr__(&self) -> String {
        format!(
            "TensorRankRunComparison(rank={}, status='{}')",
            self.rank,
            self.status.as_str()
        )
    }
}

/// Two run groups compared rank by rank.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorRunGroupComparison",
    frozen
)]
pub struct PyGroupComparison {
    c: Arc<Comparison>,
}
comparison_result!(PyGroupComparison, "TensorRunGroupComparison", {
    #[getter]
    fn reference(&self) -> PySubject {
        PySubject {
            inner: self.c.reference.clone(),
        }
    }
    #[getter]
    fn candidate(&self) -> PySubject {
        PySubject {
            inner: self.c.candidate.clone(),
        }
    }
    /// One entry per rank of either group, ascending.
    #[getter]
    fn rank_comparisons<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.c.ranks.iter().map(PyRankComparison::new))
    }
    #[getter]
    fn ranks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.c.ranks.iter().map(PyRankComparison::new))
    }
    /// Ranks with a run in one group only.
    #[getter]
    fn one_sided_ranks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(
            py,
            self.c
                .ranks
                .iter()
                .filter(|r| r.comparison.is_none())
                .map(|r| r.rank)
                .collect::<Vec<_>>(),
        )
    }
    fn rank(&self, rank: i64) -> PyResult<PyRankComparison> {
        self.c
            .ranks
            .iter()
            .find(|r| r.rank == rank)
            .map(PyRankComparison::new)
            .ok_or_else(|| PyKeyError::new_err(format!("no rank {rank} in this comparison")))
    }
});

// ------------------------------------------------------------------------ group summary

/// One rank's point in a group summary: where it is, how many observations it holds, and
/// how many of them kept their bytes (`full`) or a summary only.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorRankPointSummary",
    frozen
)]
pub struct PyRankPoint {
    rank: i64,
    point: MemberPoint,
}

#[pymethods]
impl PyRankPoint {
    #[getter]
    fn rank(&self) -> i64 {
        self.rank
    }
    #[getter]
    fn point_index(&self) -> i64 {
        self.point.index
    }
    #[getter]
    fn label(&self) -> String {
        self.point.label.clone()
    }
    /// `None` for a point recorded eagerly.
    #[getter]
    fn replay_index(&self) -> Option<i64> {
        self.point.replay_index
    }
    #[getter]
    fn observation_count(&self) -> i64 {
        self.point.observations
    }
    #[getter]
    fn full_payload_count(&self) -> u64 {
        self.point.full
    }
    #[getter]
    fn summary_payload_count(&self) -> u64 {
        self.point.summary
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyRankPoint>()
            .is_ok_and(|o| o.get().rank == self.rank && o.get().point == self.point)
    }
    fn __repr__(&self) -> String {
        format!(
            "TensorRankPointSummary(rank={}, point_index={}, label={}, observation_count={}, \
             full_payload_count={}, summary_payload_count={})",
            self.rank,
            self.point.index,
            quoted(&self.point.label),
            self.point.observations,
            self.point.full,
            self.point.summary
        )
    }
}

/// One rank's run in a group: where it is stored, whether it finished, and its points.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorRunGroupMember",
    frozen
)]
pub struct PyGroupMember {
    inner: GroupMember,
}

#[pymethods]
impl PyGroupMember {
    #[getter]
    fn rank(&self) -> i64 {
        self.inner.rank
    }
    /// The job root holding the run; `name` picks it there.
    #[getter]
    fn path(&self) -> String {
        self.inner.path.display().to_string()
    }
    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }
    #[getter]
    fn run_id(&self) -> String {
        self.inner.run_id.clone()
    }
    #[getter]
    fn complete(&self) -> bool {
        self.inner.complete
    }
    #[getter]
    fn world_size(&self) -> Option<i64> {
        self.inner.world_size
    }
    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.inner.labels.iter())
    }
    /// One `TensorRankPointSummary` per point, in order.
    #[getter]
    fn points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let rank = self.inner.rank;
        tuple(
            py,
            self.inner
                .points
                .iter()
                .map(|p| PyRankPoint {
                    rank,
                    point: p.clone(),
                })
                .collect::<Vec<_>>(),
        )
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyGroupMember>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }
    fn __repr__(&self) -> String {
        format!(
            "TensorRunGroupMember(rank={}, path={}, name={}, complete={}, points={})",
            self.inner.rank,
            quoted(&self.inner.path.display().to_string()),
            quoted(&self.inner.name),
            if self.inner.complete { "True" } else { "False" },
            self.inner.points.len()
        )
    }
}

/// A run group as loaded natively: what `TensorRunGroup` holds, and what comparisons and
/// summaries of it use without loading it again.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "RunGroupInfo",
    frozen
)]
pub struct PyGroupInfo {
    inner: Arc<RunGroup>,
}

impl PyGroupInfo {
    pub(crate) fn new(group: RunGroup) -> PyGroupInfo {
        PyGroupInfo {
            inner: Arc::new(group),
        }
    }

    pub(crate) fn shared(&self) -> Arc<RunGroup> {
        Arc::clone(&self.inner)
    }
}

#[pymethods]
impl PyGroupInfo {
    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }
    #[getter]
    fn root(&self) -> Option<String> {
        self.inner.root.as_ref().map(|r| r.display().to_string())
    }
    /// The largest world size any member declares (at least the member count).
    #[getter]
    fn world_size(&self) -> i64 {
        self.inner.world_size
    }
    /// By rank, ascending.
    #[getter]
    fn members<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(
            py,
            self.inner
                .members
                .iter()
                .map(|m| PyGroupMember { inner: m.clone() })
                .collect::<Vec<_>>(),
        )
    }
    #[getter]
    fn missing_ranks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.inner.missing_ranks.iter().copied())
    }
    /// Every rank below the world size has a run and every run finished.
    #[getter]
    fn complete(&self) -> bool {
        self.inner.complete
    }
    #[getter]
    fn warnings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.inner.warnings.iter())
    }
    /// The summary of this group; `group` is the Python object it describes.
    fn summary(&self, group: Py<PyAny>) -> PyGroupSummary {
        PyGroupSummary {
            group,
            inner: Arc::clone(&self.inner),
        }
    }
}

/// A run group at a glance: the group, one row per rank and point, and the group's
/// warnings; rendered like a comparison (`summary.txt`, `.json`, `.html` and
/// `rank_points.csv`).
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorRunGroupSummary",
    frozen
)]
pub struct PyGroupSummary {
    group: Py<PyAny>,
    inner: Arc<RunGroup>,
}

impl PyGroupSummary {
    fn limit(limit: Option<usize>) -> usize {
        limit.unwrap_or(CompareOptions::default().limit)
    }
}

#[pymethods]
impl PyGroupSummary {
    /// The `TensorRunGroup` summarised.
    #[getter]
    fn group(&self, py: Python<'_>) -> Py<PyAny> {
        self.group.clone_ref(py)
    }
    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }
    #[getter]
    fn world_size(&self) -> i64 {
        self.inner.world_size
    }
    #[getter]
    fn complete(&self) -> bool {
        self.inner.complete
    }
    #[getter]
    fn ranks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(
            py,
            self.inner
                .members
                .iter()
                .map(|m| m.rank)
                .collect::<Vec<_>>(),
        )
    }
    #[getter]
    fn missing_ranks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.inner.missing_ranks.iter().copied())
    }
    #[getter]
    fn warnings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.inner.warnings.iter())
    }
    /// Ranks ascending, then points in order.
    #[getter]
    fn rank_points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let rows: Vec<PyRankPoint> = tcgd_compare::report::group::rank_points(&self.inner)
            .into_iter()
            .map(|(m, p)| PyRankPoint {
                rank: m.rank,
                point: p.clone(),
            })
            .collect();
        tuple(py, rows)
    }
    /// `limit` (default 20) caps the rows per table.
    #[pyo3(signature = (limit=None))]
    fn to_text(&self, limit: Option<usize>) -> String {
        tcgd_compare::report::group::to_text(&self.inner, Self::limit(limit))
    }
    #[pyo3(signature = (limit=None))]
    fn to_html(&self, limit: Option<usize>) -> String {
        tcgd_compare::report::group::to_html(&self.inner, Self::limit(limit))
    }
    /// The group (members with their points, missing ranks, warnings) and `rank_points`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let value =
            tcgd_compare::report::group::to_value(&self.inner).map_err(BindingError::from)?;
        json_to_py(py, &value)
    }
    fn to_json(&self) -> PyResult<String> {
        Ok(tcgd_compare::report::group::to_json(&self.inner).map_err(BindingError::from)?)
    }
    fn csv_tables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let tables = PyDict::new(py);
        tables.set_item(
            "rank_points.csv",
            tcgd_compare::report::group::rank_points_csv(&self.inner),
        )?;
        Ok(tables)
    }
    /// Writes summary.txt, summary.json, summary.html and rank_points.csv into
    /// `directory`; a directory that holds anything needs `overwrite=True`.
    #[pyo3(signature = (directory, overwrite=false, *, limit=None))]
    fn write<'py>(
        &self,
        py: Python<'py>,
        directory: std::path::PathBuf,
        overwrite: bool,
        limit: Option<usize>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let group = Arc::clone(&self.inner);
        let written = py
            .detach(move || {
                tcgd_compare::report::group::write(
                    &group,
                    &directory,
                    overwrite,
                    Self::limit(limit),
                )
            })
            .map_err(BindingError::from)?;
        paths(py, written)
    }
    fn __str__(&self) -> String {
        self.to_text(None)
    }
    fn __repr__(&self) -> String {
        format!(
            "TensorRunGroupSummary(name={}, ranks={}, world_size={}, complete={})",
            quoted(&self.inner.name),
            self.inner.members.len(),
            self.inner.world_size,
            if self.inner.complete { "True" } else { "False" }
        )
    }
}

/// The result class of a finished comparison, by its kind.
pub(crate) fn result(py: Python<'_>, c: Comparison) -> PyResult<Py<PyAny>> {
    let c = Arc::new(c);
    Ok(match c.kind {
        ComparisonKind::Snapshots => Py::new(py, PySnapshotComparison { c })?.into_any(),
        ComparisonKind::Points => Py::new(py, PyPointComparison { c })?.into_any(),
        ComparisonKind::Runs => Py::new(py, PyRunComparison { c })?.into_any(),
        ComparisonKind::PointSeries => Py::new(py, PySeriesComparison { c })?.into_any(),
        ComparisonKind::RunGroups => Py::new(py, PyGroupComparison { c })?.into_any(),
    })
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
    m.add_class::<PyOptions>()?;
    m.add_class::<PyValueSummary>()?;
    m.add_class::<PySite>()?;
    m.add_class::<PySide>()?;
    m.add_class::<PyFirstMismatch>()?;
    m.add_class::<PyMetrics>()?;
    m.add_class::<PyObservationComparison>()?;
    m.add_class::<PyPointInfo>()?;
    m.add_class::<PySubject>()?;
    m.add_class::<PyCounts>()?;
    m.add_class::<PyIssue>()?;
    m.add_class::<PySeriesPoint>()?;
    m.add_class::<PyDivergence>()?;
    m.add_class::<PyRankComparison>()?;
    m.add_class::<PySnapshotComparison>()?;
    m.add_class::<PyPointComparison>()?;
    m.add_class::<PyRunComparison>()?;
    m.add_class::<PySeriesComparison>()?;
    m.add_class::<PyGroupComparison>()?;
    m.add_class::<PyRankPoint>()?;
    m.add_class::<PyGroupSummary>()?;
    m.add_class::<PyGroupMember>()?;
    m.add_class::<PyGroupInfo>()?;
    m.add_function(wrap_pyfunction!(comparison_literals, m)?)?;
    Ok(())
}
