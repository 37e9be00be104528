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
    metrics: Option<Py<PyMetrics>>,
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
    first_mismatch: Option<Py<PyFirstMismatch>>,
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
        let value = |s: &Scalar| scalar(py, s).map(Bound::unbind);
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
            metrics: m
                .map(|m| Py::new(py, PyMetrics::from(m.clone())))
                .transpose()?,
            mismatch_count: m.map(|m| m.mismatch_count),
            total_count: m.map(|m| m.total),
            mismatch_fraction: m.map(|m| m.mismatch_fraction),
            max_abs_error: m.and_then(|m| m.max_abs_error),
            max_rel_error: m.and_then(|m| m.max_rel_error),
            max_relative_error: m.and_then(|m| m.max_rel_error),
            mean_abs_error: m.and_then(|m| m.mean_abs_error),
            first_mismatch: first
                .map(|f| Py::new(py, PyFirstMismatch::from(f.clone())))
                .transpose()?,
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

    fn __repr__(&self) -> String {
        format!(
            "TensorObservationComparison(name={:?}, invocation_index={}, status={:?}, \
             kind={:?}, reason={:?})",
            self.name, self.invocation_index, self.status, self.kind, self.reason
        )
    }
}

frozen_class! {
    /// Which point (or snapshot) one side of a point comparison is.
    #[pyclass(name = "PointInfo", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PyPointInfo(PointRef);
    |p, py| {
        label: Option<String> => p.label.clone();
        index: Option<i64> => p.index;
        replay_index: Option<i64> => p.replay_index;
        snapshot_index: Option<i64> => p.snapshot_index;
        timestamp: Option<String> => p.timestamp.clone();
    }
    eq;
    to_dict(serde);
    {
        fn __repr__(&self) -> String {
            format!("PointInfo({})", self.inner.display())
        }
    }
}

frozen_class! {
    /// What one side of a run, series or group comparison is.
    #[pyclass(name = "ComparisonSubject", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PySubject(Subject);
    |s, py| {
        /// `snapshot`, `point`, `run` or `run_group`.
        kind: String => s.kind.clone();
        name: Option<String> => s.name.clone();
        path: Option<String> => s.path.clone();
        run_id: Option<String> => s.run_id.clone();
        rank: Option<i64> => s.rank;
        world_size: Option<i64> => s.world_size;
        complete: Option<bool> => s.complete;
        points: Option<usize> => s.points;
        detail: Option<String> => s.detail.clone();
    }
    eq;
    to_dict(serde);
    {
        fn __repr__(&self) -> String {
            format!("ComparisonSubject({})", self.inner.display())
        }
    }
}

frozen_class! {
    /// How many comparisons of each status.
    #[pyclass(name = "ComparisonCounts", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PyCounts(Counts);
    |c, py| {
        total: usize => c.total;
        r#match: usize => c.matched;
        mismatch: usize => c.mismatched;
        inconclusive: usize => c.inconclusive;
    }
    eq;
    to_dict(serde);
    repr(total, r#match, mismatch, inconclusive);
}

frozen_class! {
    /// A point of a series: its position in `point_comparisons` and its identity in the
    /// run.
    #[pyclass(name = "SeriesPointRef", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PySeriesPoint(SeriesPoint);
    |p, py| {
        point: usize => p.point;
        label: Option<String> => p.label.clone();
        index: Option<i64> => p.index;
        replay_index: Option<i64> => p.replay_index;
    }
    eq;
    repr(point, label, replay_index);
}

frozen_class! {
    /// When one observation of the reference point stopped matching across a series.
    #[pyclass(name = "SeriesDivergence", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PyDivergence(Divergence);
    |d, py| {
        name: String => d.name.clone();
        invocation_index: i64 => d.invocation_index;
        /// The worst status over the series.
        status: &'static str => d.status.as_str();
        first_mismatch: Option<PySeriesPoint> => d.first_mismatch.clone().map(PySeriesPoint::from);
        first_inconclusive: Option<PySeriesPoint> =>
            d.first_inconclusive.clone().map(PySeriesPoint::from);
        mismatched_points: usize => d.mismatched_points;
        /// The largest `max_abs_error` over the series.
        max_abs_error: Option<f64> => d.max_abs_error;
    }
    eq;
    repr(name, invocation_index, status, mismatched_points);
}
