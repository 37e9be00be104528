//! Run groups: the native group built from opened runs, its summary, and the group phase
//! comparison, as frozen classes; their rows (plain value objects) are in [`rows`].

use std::collections::BTreeMap;

use tcgd_memory::group::{
    self as rg, GroupMember, GroupPhaseEndpoints, GroupPhaseOptions, MetricExtrema, PointRef,
};
use tcgd_memory::report::{GROUP_PHASE_FILES, GROUP_SUMMARY_FILES};

use super::*;

mod rows;

pub use rows::*;

fn to_dict<'py>(py: Python<'py>, value: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    crate::results::json_to_py(py, value)
}

/// A point as Python names it: a label or a position.
#[derive(FromPyObject)]
pub(super) enum PointArg {
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
    inner: rg::MemoryRunGroup,
}

#[pymethods]
impl MemoryRunGroup {
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

    fn descriptor<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let value = tcgd_memory::report::group_descriptor_json(&self.inner);
        to_dict(py, &value)
    }

    fn summary(&self, py: Python<'_>) -> MemoryRunGroupSummary {
        MemoryRunGroupSummary {
            inner: py.detach(|| self.inner.summary()),
        }
    }
}

// ---------------------------------------------------------------------- results

fn write_files(
    py: Python<'_>,
    output_dir: PathBuf,
    files: Vec<(String, String)>,
    own: &[&str],
    overwrite: bool,
) -> PyResult<BTreeMap<String, PathBuf>> {
    guard(py, || {
        let own: Vec<String> = own.iter().map(|s| (*s).to_owned()).collect();
        let names: Vec<String> = files.iter().map(|(n, _)| n.clone()).collect();
        let paths = py
            .detach(|| tcgd_report::write_report(&output_dir, &files, &own, overwrite))
            .map_err(BindingError::from)?;
        Ok(names.into_iter().zip(paths).collect())
    })
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

/// Per-rank states of every point and their cross-rank extrema.
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryRunGroupSummary {
    inner: rg::GroupSummary,
}

#[pymethods]
impl MemoryRunGroupSummary {
    #[getter]
    fn group<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_dict(
            py,
            &tcgd_memory::report::group_descriptor_json(&self.inner.group),
        )
    }

    #[getter]
    fn rank_points(&self) -> Vec<MemoryRankPointState> {
        self.inner
            .rank_points
            .iter()
            .map(|r| MemoryRankPointState {
                rank: r.at.rank,
                point_index: r.at.point_index,
                label: r.at.label.clone(),
                scope: r.scope.as_str().to_owned(),
                observation_count: r.observation_count,
                pool_count: r.pool_count,
                stats: r.stats.iter().cloned().collect(),
            })
            .collect()
    }

    #[getter]
    fn rank_devices(&self) -> Vec<MemoryRankDevicePointState> {
        self.inner
            .rank_devices
            .iter()
            .map(|r| MemoryRankDevicePointState {
                rank: r.at.rank,
                point_index: r.at.point_index,
                label: r.at.label.clone(),
                device_index: r.device_index,
                free_bytes: r.free_bytes,
                total_bytes: r.total_bytes,
                used_bytes: r.used_bytes,
                cuda_allocator_residual_bytes: r.cuda_allocator_residual_bytes,
                stats: r.stats.iter().cloned().collect(),
            })
            .collect()
    }

    #[getter]
    fn point_aggregates(&self) -> Vec<MemoryRankPointAggregate> {
        self.inner
            .point_aggregates
            .iter()
            .map(|a| {
                let e = &a.extrema;
                MemoryRankPointAggregate {
                    point_index: a.point_index,
                    label: a.label.clone(),
                    scope: a.scope.as_str().to_owned(),
                    metric: a.metric.clone(),
                    rank_count: e.rank_count,
                    min_bytes: e.min_bytes,
                    min_rank: e.min_rank,
                    min_ranks: e.min_ranks.clone(),
                    max_bytes: e.max_bytes,
                    max_rank: e.max_rank,
                    max_ranks: e.max_ranks.clone(),
                    spread_bytes: e.spread_bytes,
                    worst_rank: a.worst_rank(),
                }
            })
            .collect()
    }

    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.group.warnings.clone()
    }

    fn to_text(&self, py: Python<'_>) -> String {
        py.detach(|| tcgd_memory::report::render_group_summary(&self.inner, Format::Text))
    }

    fn to_html(&self, py: Python<'_>) -> String {
        py.detach(|| tcgd_memory::report::render_group_summary(&self.inner, Format::Html))
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_dict(py, &tcgd_memory::report::group_summary_json(&self.inner))
    }

    /// `report.txt/.json/.html`, `rank_points.csv`, `rank_devices.csv` (when a rank has
    /// a device) and `point_aggregates.csv`; `{file name: path}`.
    #[pyo3(signature = (output_dir, overwrite = false))]
    fn write(
        &self,
        py: Python<'_>,
        output_dir: PathBuf,
        overwrite: bool,
    ) -> PyResult<BTreeMap<String, PathBuf>> {
        let files = py.detach(|| tcgd_memory::report::group_summary_files(&self.inner));
        write_files(py, output_dir, files, &GROUP_SUMMARY_FILES, overwrite)
    }

    fn __repr__(&self) -> String {
        format!(
            "MemoryRunGroupSummary(name={:?}, ranks={:?}, points={}, warnings={})",
            self.inner.group.name,
            self.inner.group.ranks(),
            self.inner.group.labels.len(),
            self.inner.group.warnings.len()
        )
    }
}

/// A baseline group's phase against a candidate group's, rank by rank.
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryRunGroupPhaseComparison {
    inner: rg::GroupPhaseComparison,
}

#[pymethods]
impl MemoryRunGroupPhaseComparison {
    #[getter]
    fn baseline<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_dict(
            py,
            &tcgd_memory::report::group_descriptor_json(&self.inner.baseline),
        )
    }

    #[getter]
    fn candidate<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_dict(
            py,
            &tcgd_memory::report::group_descriptor_json(&self.inner.candidate),
        )
    }

    #[getter]
    fn ranks(&self) -> Vec<i64> {
        self.inner.ranks.clone()
    }

    #[getter]
    fn skipped_ranks(&self) -> Vec<i64> {
        self.inner.skipped_ranks.clone()
    }

    #[getter]
    fn baseline_only_ranks(&self) -> Vec<i64> {
        self.inner.baseline_only_ranks.clone()
    }

    #[getter]
    fn candidate_only_ranks(&self) -> Vec<i64> {
        self.inner.candidate_only_ranks.clone()
    }

    #[getter]
    fn identity_failures(&self) -> usize {
        self.inner.identity_failures()
    }

    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }

    /// `(rank, MemoryPhaseComparison)` of every compared rank.
    #[getter]
    fn rank_comparisons(&self) -> Vec<(i64, MemoryPhaseComparison)> {
        self.inner
            .rank_comparisons
            .iter()
            .map(|(r, c)| (*r, MemoryPhaseComparison::of(c.clone())))
            .collect()
    }

    #[getter]
    fn rank_decomposition(&self) -> Vec<MemoryRankPhaseDecomposition> {
        self.inner
            .rank_decomposition()
            .iter()
            .map(|r| {
                MemoryRankPhaseDecomposition::of(
                    r,
                    r.row
                        .scope
                        .map(|s| s.as_str().to_owned())
                        .unwrap_or_default(),
                )
            })
            .collect()
    }

    #[getter]
    fn rank_pool_decomposition(&self) -> Vec<MemoryRankPoolPhaseDecomposition> {
        self.inner
            .rank_pool_decomposition()
            .iter()
            .map(|r| {
                MemoryRankPoolPhaseDecomposition::of(
                    r,
                    r.row.baseline_device,
                    r.row.baseline_pool,
                    r.row.candidate_device,
                    r.row.candidate_pool,
                )
            })
            .collect()
    }

    #[getter]
    fn rank_device_decomposition(&self) -> Vec<MemoryRankDevicePhaseDecomposition> {
        self.inner
            .rank_device_decomposition()
            .iter()
            .map(|r| {
                MemoryRankDevicePhaseDecomposition::of(
                    r,
                    r.row.baseline_device,
                    r.row.candidate_device,
                )
            })
            .collect()
    }

    #[getter]
    fn phase_aggregates(&self, py: Python<'_>) -> PyResult<Vec<MemoryRunGroupPhaseAggregate>> {
        let wrap = |e: &Option<MetricExtrema>| -> PyResult<Option<Py<MemoryMetricExtrema>>> {
            e.as_ref()
                .map(|e| Py::new(py, MemoryMetricExtrema::from(e)))
                .transpose()
        };
        self.inner
            .phase_aggregates
            .iter()
            .map(|a| {
                Ok(MemoryRunGroupPhaseAggregate {
                    scope: a.scope.as_str().to_owned(),
                    metric: a.metric.clone(),
                    rank_count: a.rank_count,
                    baseline_change: wrap(&a.terms.baseline_change)?,
                    candidate_change: wrap(&a.terms.candidate_change)?,
                    start_gap: wrap(&a.terms.start_gap)?,
                    end_gap: wrap(&a.terms.end_gap)?,
                    change_gap: wrap(&a.terms.change_gap)?,
                })
            })
            .collect()
    }

    #[pyo3(signature = (include_unchanged = true, limit = None, stack_depth = None))]
    fn to_text(
        &self,
        py: Python<'_>,
        include_unchanged: bool,
        limit: Option<i64>,
        stack_depth: Option<i64>,
    ) -> PyResult<String> {
        guard(py, || {
            check_display(limit, stack_depth)?;
            Ok(py.detach(|| {
                tcgd_memory::report::render_group_phases(
                    &self.inner,
                    Format::Text,
                    include_unchanged,
                )
            }))
        })
    }

    #[pyo3(signature = (include_unchanged = true, limit = None, stack_depth = None))]
    fn to_html(
        &self,
        py: Python<'_>,
        include_unchanged: bool,
        limit: Option<i64>,
        stack_depth: Option<i64>,
    ) -> PyResult<String> {
        guard(py, || {
            check_display(limit, stack_depth)?;
            Ok(py.detach(|| {
                tcgd_memory::report::render_group_phases(
                    &self.inner,
                    Format::Html,
                    include_unchanged,
                )
            }))
        })
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_dict(py, &tcgd_memory::report::group_phases_json(&self.inner))
    }

    /// `report.txt/.json/.html`, `rank_decomposition.csv`, `rank_pool_decomposition.csv`,
    /// `rank_device_decomposition.csv` (when a device equation exists) and
    /// `phase_aggregates.csv`; `{file name: path}`.
    #[pyo3(signature = (output_dir, include_unchanged = true, limit = None, stack_depth = None, overwrite = false))]
    fn write(
        &self,
        py: Python<'_>,
        output_dir: PathBuf,
        include_unchanged: bool,
        limit: Option<i64>,
        stack_depth: Option<i64>,
        overwrite: bool,
    ) -> PyResult<BTreeMap<String, PathBuf>> {
        guard(py, || check_display(limit, stack_depth))?;
        let files =
            py.detach(|| tcgd_memory::report::group_phases_files(&self.inner, include_unchanged));
        write_files(py, output_dir, files, &GROUP_PHASE_FILES, overwrite)
    }

    fn __repr__(&self) -> String {
        format!(
            "MemoryRunGroupPhaseComparison(ranks={:?}, skipped_ranks={:?}, \
             identity_failures={}, warnings={})",
            self.inner.ranks,
            self.inner.skipped_ranks,
            self.inner.identity_failures(),
            self.inner.warnings.len()
        )
    }
}

/// `{rank: [((device, pool), (device, pool)), ...]}` as Python passes pool mappings.
type RankPoolMappings = BTreeMap<i64, PoolMappingArgs>;

#[pyfunction]
#[pyo3(signature = (baseline, candidate, *, baseline_start, baseline_end, candidate_start, candidate_end, pool_mappings, device_mappings))]
#[allow(clippy::too_many_arguments)]
pub(super) fn compare_run_group_phases(
    py: Python<'_>,
    baseline: &MemoryRunGroup,
    candidate: &MemoryRunGroup,
    baseline_start: PointArg,
    baseline_end: PointArg,
    candidate_start: PointArg,
    candidate_end: PointArg,
    pool_mappings: RankPoolMappings,
    device_mappings: BTreeMap<i64, Vec<(i64, i64)>>,
) -> PyResult<MemoryRunGroupPhaseComparison> {
    guard(py, || {
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
        let inner = py.detach(|| {
            rg::compare_run_group_phases(&baseline.inner, &candidate.inner, &endpoints, &options)
        })?;
        Ok(MemoryRunGroupPhaseComparison { inner })
    })
}

pub(super) fn register_group(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MemoryRunGroup>()?;
    m.add_class::<MemoryRunGroupSummary>()?;
    m.add_class::<MemoryRunGroupPhaseComparison>()?;
    m.add_class::<MemoryRankPointState>()?;
    m.add_class::<MemoryRankDevicePointState>()?;
    m.add_class::<MemoryRankPointAggregate>()?;
    m.add_class::<MemoryRankPhaseDecomposition>()?;
    m.add_class::<MemoryRankPoolPhaseDecomposition>()?;
    m.add_class::<MemoryRankDevicePhaseDecomposition>()?;
    m.add_class::<MemoryMetricExtrema>()?;
    m.add_class::<MemoryRunGroupPhaseAggregate>()?;
    m.add_function(wrap_pyfunction!(compare_run_group_phases, m)?)?;
    Ok(())
}
