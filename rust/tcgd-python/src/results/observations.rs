//! An observation's comparison and what describes where it stands: point infos, subjects,
//! counts, series points, divergences.

use super::*;

/// The verdict on one `(name, invocation_index)` pair: `status`, `kind` (how it was
/// reached), `reason` (why, in one sentence), both descriptors (`None` on the side the key
/// is missing from) and, when both full payloads were compared, the metrics. Its values
/// are converted once, when the comparison is read.
#[pyclass(
    name = "TensorObservationComparison",
    module = "torch_cudagraph_debug._native",
    frozen,
    eq,
    skip_from_py_object
)]
pub struct PyObservationComparison {
    /// Position in execution order within its point comparison.
    #[pyo3(get)]
    position: usize,
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    invocation_index: i64,
    /// `(name, invocation_index)`: the stable key observations are aligned by.
    #[pyo3(get)]
    key: (String, i64),
    #[pyo3(get)]
    status: &'static str,
    #[pyo3(get)]
    ok: bool,
    /// Whether the pair did not match (`status != "match"`).
    #[pyo3(get)]
    changed: bool,
    /// `reference_only`, `candidate_only`, `metadata`, `digest`, `values` or `summary`.
    #[pyo3(get)]
    kind: &'static str,
    #[pyo3(get)]
    reason: String,
    #[pyo3(get)]
    reference: Option<Py<PySide>>,
    #[pyo3(get)]
    candidate: Option<Py<PySide>>,
    #[pyo3(get)]
    metrics: Option<Py<Metrics>>,
    #[pyo3(get)]
    mismatch_count: Option<u64>,
    /// Elements compared (`None` unless both full payloads were).
    #[pyo3(get)]
    total_count: Option<u64>,
    #[pyo3(get)]
    mismatch_fraction: Option<f64>,
    #[pyo3(get)]
    max_abs_error: Option<f64>,
    /// The largest `|c - r| / |r|`; `max_relative_error` is the same.
    #[pyo3(get)]
    max_rel_error: Option<f64>,
    #[pyo3(get)]
    max_relative_error: Option<f64>,
    #[pyo3(get)]
    mean_abs_error: Option<f64>,
    #[pyo3(get)]
    first_mismatch: Option<Py<FirstMismatch>>,
    /// The coordinate of the first mismatching element, row-major order.
    #[pyo3(get)]
    first_mismatch_index: Option<Py<PyTuple>>,
    /// The first mismatching element's values (`int`, `float` or `complex`).
    #[pyo3(get)]
    reference_value: Option<Py<PyAny>>,
    #[pyo3(get)]
    candidate_value: Option<Py<PyAny>>,
    inner: ObservationComparison,
}

impl PartialEq for PyObservationComparison {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner
    }
}

impl PyObservationComparison {
    pub(crate) fn of(py: Python<'_>, o: &ObservationComparison) -> PyResult<Self> {
        let m = o.metrics.as_ref();
        let first = m.and_then(|m| m.first_mismatch.as_ref());
        let value = |s: &Scalar| s.into_pyobject(py).map(Bound::unbind);
        Ok(PyObservationComparison {
            position: o.position,
            name: o.name.clone(),
            invocation_index: o.invocation_index,
            key: (o.name.clone(), o.invocation_index),
            status: o.status.as_str(),
            ok: o.status == Status::Match,
            changed: o.status != Status::Match,
            kind: o.kind.as_str(),
            reason: o.reason.clone(),
            reference: o
                .reference
                .clone()
                .map(|s| Py::new(py, PySide::from(s)))
                .transpose()?,
            candidate: o
                .candidate
                .clone()
                .map(|s| Py::new(py, PySide::from(s)))
                .transpose()?,
            metrics: m.map(|m| Py::new(py, m.clone())).transpose()?,
            mismatch_count: m.map(|m| m.mismatch_count),
            total_count: m.map(|m| m.total),
            mismatch_fraction: m.map(|m| m.mismatch_fraction),
            max_abs_error: m.and_then(|m| m.max_abs_error),
            max_rel_error: m.and_then(|m| m.max_rel_error),
            max_relative_error: m.and_then(|m| m.max_rel_error),
            mean_abs_error: m.and_then(|m| m.mean_abs_error),
            first_mismatch: first.map(|f| Py::new(py, f.clone())).transpose()?,
            first_mismatch_index: first
                .map(|f| tuple(py, f.coordinate.iter().copied()).map(Bound::unbind))
                .transpose()?,
            reference_value: first.map(|f| value(&f.reference)).transpose()?,
            candidate_value: first.map(|f| value(&f.candidate)).transpose()?,
            inner: o.clone(),
        })
    }
}

#[pymethods]
impl PyObservationComparison {
    /// The comparison as report.json holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner)
    }

    /// The comparison as its line of observations.csv (without the rank and point
    /// columns).
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::classes::csv_row_dict(
            py,
            tcgd_compare::report::csv::OBSERVATION_COLUMNS,
            tcgd_compare::report::csv::observation_cells(&self.inner),
        )
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &["name", "invocation_index", "status", "kind", "reason"],
        )
    }
}
