//! Run groups: the native group built from opened runs, its summary, and the group phase
//! comparison, as frozen classes; their rows (plain value objects) are in [`rows`].

use std::collections::BTreeMap;

use pyo3::types::PyDict;
use tcgd_memory::group::{
    self as rg, GroupMember, GroupPhaseEndpoints, GroupPhaseOptions, PointRef,
};
use tcgd_memory::phases::PhaseLevel;
use tcgd_memory::report::{GROUP_PHASE_FILES, GROUP_SUMMARY_FILES};

use crate::results::serde_to_py;

use super::lifetimes::row_dicts;
use super::*;

mod rows;

pub use rows::*;

/// A point as Python names it: a label or a position.
#[derive(FromPyObject)]
pub(crate) enum PointArg {
    Index(i64),
    Label(String),
}

impl From<PointArg> for PointRef {
    fn from(p: PointArg) -> PointRef {
        match p {
            PointArg::Index(i) => PointRef::Index(i),
            PointArg::Label(l) => PointRef::Label(l),
        }
    }
}

/// The memory runs of a multi-rank job, checked as one group.
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryRunGroup {
    pub(crate) inner: rg::MemoryRunGroup,
}

impl From<rg::MemoryRunGroup> for MemoryRunGroup {
    fn from(inner: rg::MemoryRunGroup) -> Self {
        MemoryRunGroup { inner }
    }
}

#[pymethods]
impl MemoryRunGroup {
    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }
    #[getter]
    fn root(&self) -> Option<PathBuf> {
        self.inner.root.clone()
    }
    #[getter]
    fn group_id(&self) -> Option<String> {
        self.inner.group_id.clone()
    }
    #[getter]
    fn world_size(&self) -> Option<i64> {
        self.inner.world_size
    }
    #[getter]
    fn ranks(&self) -> Vec<i64> {
        self.inner.ranks()
    }
    #[getter]
    fn missing_ranks(&self) -> Vec<i64> {
        self.inner.missing_ranks.clone()
    }
    #[getter]
    fn complete(&self) -> bool {
        self.inner.complete
    }
    #[getter]
    fn labels(&self) -> Vec<String> {
        self.inner.labels.clone()
    }
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }

    /// A group from opened runs, `(job root, reader)` each.
    #[new]
    #[pyo3(signature = (runs, root = None))]
    fn new(
        py: Python<'_>,
        runs: Vec<(PathBuf, PyRef<'_, MemoryRunReader>)>,
        root: Option<PathBuf>,
    ) -> PyResult<Self> {
        guard(py, || {
            let members = runs
                .iter()
                .map(|(path, reader)| GroupMember::from_reader(path, &reader.inner))
                .collect::<Result<Vec<_>, _>>()?;
            let inner = py.detach(|| rg::MemoryRunGroup::build(root, members))?;
            Ok(MemoryRunGroup { inner })
        })
    }

    /// Where the memory runs under `root` are: `(job root, name, rank)` each, for the
    /// root itself and for each direct child directory that is a job root.
    #[staticmethod]
    fn discover(py: Python<'_>, root: PathBuf) -> PyResult<Vec<(PathBuf, String, i64)>> {
        guard(py, || {
            let found = py.detach(|| rg::discover(&root))?;
            Ok(found
                .into_iter()
                .map(|(p, s)| (p, s.name.unwrap_or_default(), s.rank.unwrap_or_default()))
                .collect())
        })
    }

    fn descriptor<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        descriptor(py, &self.inner)
    }

    /// Per-rank states of every point and their cross-rank extrema. `run_group` is
    /// what the summary's `run_group` gives (this native group when `None`).
    #[pyo3(signature = (run_group = None))]
    fn summary(
        slf: &Bound<'_, Self>,
        run_group: Option<Py<PyAny>>,
    ) -> PyResult<MemoryRunGroupSummary> {
        let py = slf.py();
        let group = &slf.get().inner;
        let inner = py.detach(|| group.summary());
        let run_group = run_group.unwrap_or_else(|| slf.clone().into_any().unbind());
        MemoryRunGroupSummary::of(py, inner, run_group)
    }
}

/// What identifies a group, as its reports' JSON holds it.
fn descriptor<'py>(py: Python<'py>, group: &rg::MemoryRunGroup) -> PyResult<Bound<'py, PyAny>> {
    serde_to_py(py, &tcgd_memory::report::group_descriptor_json(group))
}

// ---------------------------------------------------------------------- results

fn write_files<'py>(
    py: Python<'py>,
    output_dir: PathBuf,
    files: Vec<(String, String)>,
    own: &[&str],
    overwrite: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let written = guard(py, || {
        let own: Vec<String> = own.iter().map(|s| (*s).to_owned()).collect();
        py.detach(|| tcgd_report::write_report(&output_dir, &files, &own, overwrite))
            .map_err(BindingError::from)
    })?;
    crate::classes::paths_by_format(py, written)
}

fn check_display(limit: Option<i64>, stack_depth: Option<i64>) -> BindResult<()> {
    for (name, value) in [("limit", limit), ("stack_depth", stack_depth)] {
        if let Some(v) = value {
            if v < 1 {
                return Err(BindingError::InvalidInput(format!(
                    "{name} must be a positive integer or None, got {v}"
                )));
            }
        }
    }
    Ok(())
}

/// Objects of rows, as a tuple.
fn objects<'py, R, T>(
    py: Python<'py>,
    rows: &[R],
    of: impl Fn(&R) -> PyResult<T>,
) -> PyResult<Py<PyTuple>>
where
    T: Into<pyo3::PyClassInitializer<T>> + pyo3::PyClass,
{
    let bound = rows
        .iter()
        .map(|r| Bound::new(py, of(r)?))
        .collect::<PyResult<Vec<Bound<'py, T>>>>()?;
    Ok(PyTuple::new(py, bound)?.unbind())
}

/// Per-rank states of every point and their cross-rank extrema.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryRunGroupSummary {
    /// The group's descriptor, as the report's JSON holds it.
    #[pyo3(get)]
    group: Py<PyAny>,
    /// The group summarised.
    #[pyo3(get)]
    run_group: Py<PyAny>,
    /// `MemoryRankPointState` of every rank, point and scope.
    #[pyo3(get)]
    rank_points: Py<PyTuple>,
    /// `MemoryRankDevicePointState` of every rank, point and device.
    #[pyo3(get)]
    rank_devices: Py<PyTuple>,
    /// `MemoryRankPointAggregate` of every point, scope and byte metric.
    #[pyo3(get)]
    point_aggregates: Py<PyTuple>,
    #[pyo3(get)]
    warnings: Vec<String>,
    inner: rg::GroupSummary,
}

impl MemoryRunGroupSummary {
    fn of(py: Python<'_>, s: rg::GroupSummary, run_group: Py<PyAny>) -> PyResult<Self> {
        Ok(MemoryRunGroupSummary {
            group: descriptor(py, &s.group)?.unbind(),
            run_group,
            rank_points: objects(py, &s.rank_points, |r| Ok(MemoryRankPointState::of(r)))?,
            rank_devices: objects(py, &s.rank_devices, |r| {
                Ok(MemoryRankDevicePointState::of(r))
            })?,
            point_aggregates: objects(py, &s.point_aggregates, |a| {
                Ok(MemoryRankPointAggregate::of(a))
            })?,
            warnings: s.group.warnings.clone(),
            inner: s,
        })
    }
}

#[pymethods]
impl MemoryRunGroupSummary {
    fn to_text(&self, py: Python<'_>) -> String {
        py.detach(|| tcgd_memory::report::render_group_summary(&self.inner, Format::Text))
    }

    fn to_html(&self, py: Python<'_>) -> String {
        py.detach(|| tcgd_memory::report::render_group_summary(&self.inner, Format::Html))
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &tcgd_memory::report::group_summary_json(&self.inner))
    }

    /// `report.txt/.json/.html`, `rank_points.csv`, `rank_devices.csv` (when a rank has
    /// a device) and `point_aggregates.csv`; their paths by format and CSV stem.
    #[pyo3(signature = (output_dir, overwrite = false))]
    fn write<'py>(
        &self,
        py: Python<'py>,
        output_dir: PathBuf,
        overwrite: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let files = py.detach(|| tcgd_memory::report::group_summary_files(&self.inner));
        write_files(py, output_dir, files, &GROUP_SUMMARY_FILES, overwrite)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        let group = &slf.get().inner.group;
        Ok(format!(
            "MemoryRunGroupSummary(name={}, ranks={}, points={}, warnings={})",
            crate::classes::py_repr(py, group.name.as_str())?,
            crate::classes::py_repr(py, group.ranks())?,
            group.labels.len(),
            group.warnings.len()
        ))
    }
}

/// A baseline group's phase against a candidate group's, rank by rank.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryRunGroupPhaseComparison {
    /// The baseline group's descriptor, as the report's JSON holds it.
    #[pyo3(get)]
    baseline: Py<PyAny>,
    #[pyo3(get)]
    candidate: Py<PyAny>,
    /// The baseline group compared.
    #[pyo3(get)]
    baseline_group: Py<PyAny>,
    /// The candidate group compared.
    #[pyo3(get)]
    candidate_group: Py<PyAny>,
    /// Ranks whose phases were compared, ascending.
    #[pyo3(get)]
    ranks: Vec<i64>,
    /// Common ranks left out because an incomplete run stopped before an endpoint.
    #[pyo3(get)]
    skipped_ranks: Vec<i64>,
    #[pyo3(get)]
    baseline_only_ranks: Vec<i64>,
    #[pyo3(get)]
    candidate_only_ranks: Vec<i64>,
    /// Rank rows (of every level) whose identity does not hold.
    #[pyo3(get)]
    identity_failures: usize,
    #[pyo3(get)]
    warnings: Vec<String>,
    /// `(rank, MemoryPhaseComparison)` of every compared rank.
    #[pyo3(get)]
    rank_comparisons: Py<PyTuple>,
    #[pyo3(get)]
    rank_decomposition: Py<PyTuple>,
    #[pyo3(get)]
    rank_pool_decomposition: Py<PyTuple>,
    #[pyo3(get)]
    rank_device_decomposition: Py<PyTuple>,
    #[pyo3(get)]
    phase_aggregates: Py<PyTuple>,
    /// Frames text and HTML show per attribution stack.
    #[pyo3(get)]
    display_stack_depth: usize,
    /// Attribution rows text and HTML show per table.
    #[pyo3(get)]
    display_limit: usize,
    inner: rg::GroupPhaseComparison,
}

impl MemoryRunGroupPhaseComparison {
    fn of(
        py: Python<'_>,
        c: rg::GroupPhaseComparison,
        groups: (Py<PyAny>, Py<PyAny>),
        (display_stack_depth, display_limit): (usize, usize),
    ) -> PyResult<Self> {
        let comparisons = c
            .rank_comparisons
            .iter()
            .map(|(r, c)| Ok((*r, MemoryPhaseComparison::of(py, c.clone())?)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(MemoryRunGroupPhaseComparison {
            baseline: descriptor(py, &c.baseline)?.unbind(),
            candidate: descriptor(py, &c.candidate)?.unbind(),
            baseline_group: groups.0,
            candidate_group: groups.1,
            ranks: c.ranks.clone(),
            skipped_ranks: c.skipped_ranks.clone(),
            baseline_only_ranks: c.baseline_only_ranks.clone(),
            candidate_only_ranks: c.candidate_only_ranks.clone(),
            identity_failures: c.identity_failures(),
            warnings: c.warnings.clone(),
            rank_comparisons: PyTuple::new(py, comparisons)?.unbind(),
            rank_decomposition: rank_rows(py, &c.rank_decomposition(), scope_row)?,
            rank_pool_decomposition: rank_rows(py, &c.rank_pool_decomposition(), pool_row)?,
            rank_device_decomposition: rank_rows(py, &c.rank_device_decomposition(), device_row)?,
            phase_aggregates: objects(py, &c.phase_aggregates, |a| {
                MemoryRunGroupPhaseAggregate::of(py, a)
            })?,
            display_stack_depth,
            display_limit,
            inner: c,
        })
    }

    fn records<'py>(
        &self,
        py: Python<'py>,
        level: PhaseLevel,
        include_unchanged: bool,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        row_dicts(py, self.inner.rank_records(level, include_unchanged))
    }
}

#[pymethods]
impl MemoryRunGroupPhaseComparison {
    #[pyo3(signature = (include_unchanged = true, limit = None, stack_depth = None))]
    fn to_text(
        &self,
        py: Python<'_>,
        include_unchanged: bool,
        limit: Option<i64>,
        stack_depth: Option<i64>,
    ) -> PyResult<String> {
        self.render(py, Format::Text, include_unchanged, limit, stack_depth)
    }

    #[pyo3(signature = (include_unchanged = true, limit = None, stack_depth = None))]
    fn to_html(
        &self,
        py: Python<'_>,
        include_unchanged: bool,
        limit: Option<i64>,
        stack_depth: Option<i64>,
    ) -> PyResult<String> {
        self.render(py, Format::Html, include_unchanged, limit, stack_depth)
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &tcgd_memory::report::group_phases_json(&self.inner))
    }

    /// The lines of `phase_aggregates.csv` as dicts; `include_unchanged=False` keeps the
    /// aggregates with a nonzero term.
    #[pyo3(signature = (*, include_unchanged = true))]
    fn phase_aggregate_rows<'py>(
        &self,
        py: Python<'py>,
        include_unchanged: bool,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        row_dicts(py, self.inner.phase_aggregate_records(include_unchanged))
    }

    /// The lines of `rank_decomposition.csv` as dicts; `include_unchanged=False` keeps the
    /// rows with a nonzero term.
    #[pyo3(signature = (*, include_unchanged = true))]
    fn rank_decomposition_rows<'py>(
        &self,
        py: Python<'py>,
        include_unchanged: bool,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.records(py, PhaseLevel::Scope, include_unchanged)
    }

    /// The lines of `rank_pool_decomposition.csv` as dicts.
    #[pyo3(signature = (*, include_unchanged = true))]
    fn rank_pool_decomposition_rows<'py>(
        &self,
        py: Python<'py>,
        include_unchanged: bool,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.records(py, PhaseLevel::Pool, include_unchanged)
    }

    /// The lines of `rank_device_decomposition.csv` as dicts.
    #[pyo3(signature = (*, include_unchanged = true))]
    fn rank_device_decomposition_rows<'py>(
        &self,
        py: Python<'py>,
        include_unchanged: bool,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.records(py, PhaseLevel::Device, include_unchanged)
    }

    /// `report.txt/.json/.html`, `rank_decomposition.csv`, `rank_pool_decomposition.csv`,
    /// `rank_device_decomposition.csv` (when a device equation exists) and
    /// `phase_aggregates.csv`; their paths by format and CSV stem.
    #[pyo3(signature = (output_dir, include_unchanged = true, limit = None, stack_depth = None, overwrite = false))]
    fn write<'py>(
        &self,
        py: Python<'py>,
        output_dir: PathBuf,
        include_unchanged: bool,
        limit: Option<i64>,
        stack_depth: Option<i64>,
        overwrite: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        guard(py, || check_display(limit, stack_depth))?;
        let files =
            py.detach(|| tcgd_memory::report::group_phases_files(&self.inner, include_unchanged));
        write_files(py, output_dir, files, &GROUP_PHASE_FILES, overwrite)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let warnings = slf.get().inner.warnings.len().to_string();
        crate::classes::attrs_repr_with(
            slf.as_any(),
            &["ranks", "skipped_ranks", "identity_failures"],
            &[("warnings", warnings)],
        )
    }
}

impl MemoryRunGroupPhaseComparison {
    fn render(
        &self,
        py: Python<'_>,
        format: Format,
        include_unchanged: bool,
        limit: Option<i64>,
        stack_depth: Option<i64>,
    ) -> PyResult<String> {
        guard(py, || {
            check_display(limit, stack_depth)?;
            Ok(py.detach(|| {
                tcgd_memory::report::render_group_phases(&self.inner, format, include_unchanged)
            }))
        })
    }
}

/// `{rank: [((device, pool), (device, pool)), ...]}` as Python passes pool mappings.
type RankPoolMappings = BTreeMap<i64, PoolMappingArgs>;

#[pyfunction]
#[pyo3(signature = (baseline, candidate, *, baseline_start, baseline_end, candidate_start, candidate_end, pool_mappings, device_mappings, baseline_group = None, candidate_group = None, display_stack_depth = 2, display_limit = 20))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn compare_run_group_phases(
    py: Python<'_>,
    baseline: &Bound<'_, MemoryRunGroup>,
    candidate: &Bound<'_, MemoryRunGroup>,
    baseline_start: PointArg,
    baseline_end: PointArg,
    candidate_start: PointArg,
    candidate_end: PointArg,
    pool_mappings: RankPoolMappings,
    device_mappings: BTreeMap<i64, Vec<(i64, i64)>>,
    baseline_group: Option<Py<PyAny>>,
    candidate_group: Option<Py<PyAny>>,
    display_stack_depth: usize,
    display_limit: usize,
) -> PyResult<MemoryRunGroupPhaseComparison> {
    let inner = guard(py, || {
        let endpoints = GroupPhaseEndpoints {
            baseline_start: baseline_start.into(),
            baseline_end: baseline_end.into(),
            candidate_start: candidate_start.into(),
            candidate_end: candidate_end.into(),
        };
        let options = GroupPhaseOptions {
            pool_mappings,
            device_mappings,
        };
        let (b, c) = (&baseline.get().inner, &candidate.get().inner);
        let inner = py.detach(|| rg::compare_run_group_phases(b, c, &endpoints, &options))?;
        Ok(inner)
    })?;
    // The groups as the caller names them (the facade's), else these native groups.
    let groups = (
        baseline_group.unwrap_or_else(|| baseline.clone().into_any().unbind()),
        candidate_group.unwrap_or_else(|| candidate.clone().into_any().unbind()),
    );
    MemoryRunGroupPhaseComparison::of(py, inner, groups, (display_stack_depth, display_limit))
}
