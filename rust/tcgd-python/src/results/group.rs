//! A run group's summary: per rank and point, never summed across ranks.

use super::*;

/// One rank's point in a group summary: where it is, how many observations it holds,
/// and how many of them kept their bytes (`full`) or a summary only.
#[pyclass(
    name = "TensorRankPointSummary",
    module = "torch_cudagraph_debug._native",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(PartialEq, Serialize)]
pub struct PyRankPoint {
    #[pyo3(get)]
    rank: i64,
    #[pyo3(get)]
    point_index: i64,
    /// The point's label; `point_label` is the same.
    #[pyo3(get)]
    label: String,
    #[pyo3(get)]
    #[serde(skip)]
    point_label: String,
    /// `None` for a point recorded eagerly.
    #[pyo3(get)]
    replay_index: Option<i64>,
    #[pyo3(get)]
    observation_count: i64,
    #[pyo3(get)]
    full_payload_count: u64,
    #[pyo3(get)]
    summary_payload_count: u64,
}

impl PyRankPoint {
    fn new(rank: i64, p: &MemberPoint) -> PyRankPoint {
        PyRankPoint {
            rank,
            point_index: p.index,
            label: p.label.clone(),
            point_label: p.label.clone(),
            replay_index: p.replay_index,
            observation_count: p.observations,
            full_payload_count: p.full,
            summary_payload_count: p.summary,
        }
    }
}

#[pymethods]
impl PyRankPoint {
    /// The row as the group summary's rank_points table holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, self)
    }

    fn __repr__(&self) -> String {
        format!(
            "TensorRankPointSummary(rank={}, point_index={}, label={}, observation_count={}, \
             full_payload_count={}, summary_payload_count={})",
            self.rank,
            self.point_index,
            quoted(&self.label),
            self.observation_count,
            self.full_payload_count,
            self.summary_payload_count
        )
    }
}

/// One rank's run in a group: where it is stored, whether it finished, and its points.
#[pyclass(
    name = "TensorRunGroupMember",
    module = "torch_cudagraph_debug._native",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyGroupMember {
    pub(crate) inner: GroupMember,
}

impl From<GroupMember> for PyGroupMember {
    fn from(inner: GroupMember) -> Self {
        PyGroupMember { inner }
    }
}

#[pymethods]
impl PyGroupMember {
    #[getter]
    fn rank(&self) -> i64 {
        self.inner.run.rank
    }
    /// The job root holding the run; `name` picks it there.
    #[getter]
    fn path(&self) -> String {
        self.inner.run.path.display().to_string()
    }
    #[getter]
    fn name(&self) -> String {
        self.inner.run.name.clone()
    }
    #[getter]
    fn run_id(&self) -> String {
        self.inner.run.run_id.clone()
    }
    #[getter]
    fn complete(&self) -> bool {
        self.inner.run.complete
    }
    #[getter]
    fn world_size(&self) -> Option<i64> {
        self.inner.run.world_size
    }
    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.inner.run.labels.iter())
    }
    /// One `TensorRankPointSummary` per point, in order.
    #[getter]
    fn points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(
            py,
            self.inner
                .points
                .iter()
                .map(|p| PyRankPoint::new(self.inner.run.rank, p)),
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "TensorRunGroupMember(rank={}, path={}, name={}, complete={}, points={})",
            self.inner.run.rank,
            quoted(&self.inner.run.path.display().to_string()),
            quoted(&self.inner.run.name),
            if self.inner.run.complete {
                "True"
            } else {
                "False"
            },
            self.inner.points.len()
        )
    }
}

/// A run group as loaded natively: what `TensorRunGroup` holds, and what comparisons
/// and summaries of it use without loading it again.
#[pyclass(
    name = "RunGroupInfo",
    module = "torch_cudagraph_debug._native",
    frozen
)]
pub struct PyGroupInfo {
    pub(crate) inner: Arc<RunGroup>,
}

impl From<Arc<RunGroup>> for PyGroupInfo {
    fn from(inner: Arc<RunGroup>) -> Self {
        PyGroupInfo { inner }
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
            self.inner.members.iter().cloned().map(PyGroupMember::from),
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
            inner: self.shared(),
        }
    }
}

impl PyGroupInfo {
    pub(crate) fn shared(&self) -> Arc<RunGroup> {
        Arc::clone(&self.inner)
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
        tuple(py, self.inner.members.iter().map(|m| m.run.rank))
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
        tuple(
            py,
            tcgd_compare::report::group::rank_points(&self.inner)
                .into_iter()
                .map(|(m, p)| PyRankPoint::new(m.run.rank, p)),
        )
    }

    /// The `TensorRunGroup` summarised.
    #[getter]
    fn group(&self, py: Python<'_>) -> Py<PyAny> {
        self.group.clone_ref(py)
    }
    /// The reference's name for `group`.
    #[getter]
    pub(crate) fn run_group(&self, py: Python<'_>) -> Py<PyAny> {
        self.group.clone_ref(py)
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
        serde_to_py(py, &value)
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
    /// `output_dir` and returns `{format: path}`; a directory that holds anything needs
    /// `overwrite=True`.
    #[pyo3(signature = (output_dir, overwrite=false, *, limit=None))]
    fn write<'py>(
        &self,
        py: Python<'py>,
        output_dir: std::path::PathBuf,
        overwrite: bool,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let directory = output_dir;
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
        crate::classes::paths_by_format(py, written)
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

/// The result class of a finished comparison, by its kind; `subjects` are the two things
/// compared where the caller gave them as objects.
pub(crate) fn result(
    py: Python<'_>,
    c: Comparison,
    subjects: (Option<Py<PyAny>>, Option<Py<PyAny>>),
) -> PyResult<Py<PyAny>> {
    let c = Compared::new(Arc::new(c), subjects.0, subjects.1);
    comparison_object(py, c)
}
