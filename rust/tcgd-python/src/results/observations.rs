//! An observation's comparison and what describes where it stands: point infos, subjects,
//! counts, series points, divergences.

use super::*;

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
    pub(super) inner: ObservationComparison,
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
        serde_to_py(py, &self.inner)
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
    pub(super) inner: PointRef,
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
        serde_to_py(py, &self.inner)
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
    pub(super) inner: Subject,
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
        serde_to_py(py, &self.inner)
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
    pub(super) inner: Counts,
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
        serde_to_py(py, &self.inner)
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
    pub(super) inner: SeriesPoint,
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

pub(super) fn series_point(p: &Option<SeriesPoint>) -> Option<PySeriesPoint> {
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
    pub(super) inner: Divergence,
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
