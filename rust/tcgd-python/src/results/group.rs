//! A run group's summary: per rank and point, never summed across ranks.

use super::*;

/// One rank's point in a group summary: where it is, how many observations it holds, and
/// how many of them kept their bytes (`full`) or a summary only.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorRankPointSummary",
    frozen
)]
pub struct PyRankPoint {
    pub(super) rank: i64,
    pub(super) point: MemberPoint,
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
    pub(super) inner: GroupMember,
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
    pub(super) inner: Arc<RunGroup>,
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
    pub(super) group: Py<PyAny>,
    pub(super) inner: Arc<RunGroup>,
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
