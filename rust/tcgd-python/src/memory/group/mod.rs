//! Run groups: the native group built from opened runs, its summary, and the group phase
//! comparison, as frozen classes; their rows (plain value objects) are in [`rows`].

use std::collections::BTreeMap;

use tcgd_memory::group::{
    self as rg, GroupMember, GroupPhaseEndpoints, GroupPhaseOptions, PointRef,
};
use tcgd_memory::report::{GROUP_PHASE_FILES, GROUP_SUMMARY_FILES};

use crate::classes::frozen_class;
use crate::results::serde_to_py;

use super::*;

mod rows;

pub use rows::*;

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

frozen_class! {
    /// The memory runs of a multi-rank job, checked as one group.
    #[pyclass]
    pub struct MemoryRunGroup(rg::MemoryRunGroup);
    |g, py| {
        name: String => g.name.clone();
        root: Option<PathBuf> => g.root.clone();
        group_id: Option<String> => g.group_id.clone();
        world_size: Option<i64> => g.world_size;
        ranks: Vec<i64> => g.ranks();
        missing_ranks: Vec<i64> => g.missing_ranks.clone();
        complete: bool => g.complete;
        labels: Vec<String> => g.labels.clone();
        warnings: Vec<String> => g.warnings.clone();
    }
    {
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

        fn summary(&self, py: Python<'_>) -> MemoryRunGroupSummary {
            MemoryRunGroupSummary {
                inner: py.detach(|| self.inner.summary()),
            }
        }
    }
}

/// What identifies a group, as its reports' JSON holds it.
fn descriptor<'py>(py: Python<'py>, group: &rg::MemoryRunGroup) -> PyResult<Bound<'py, PyAny>> {
    serde_to_py(py, &tcgd_memory::report::group_descriptor_json(group))
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

frozen_class! {
    /// Per-rank states of every point and their cross-rank extrema.
    #[pyclass]
    pub struct MemoryRunGroupSummary(rg::GroupSummary);
    |s, py| {
        group: PyResult<Bound<'py, PyAny>> => descriptor(py, &s.group);
        rank_points: Vec<MemoryRankPointState> =>
            s.rank_points.iter().cloned().map(MemoryRankPointState::from).collect();
        rank_devices: Vec<MemoryRankDevicePointState> =>
            s.rank_devices.iter().cloned().map(MemoryRankDevicePointState::from).collect();
        point_aggregates: Vec<MemoryRankPointAggregate> =>
            s.point_aggregates.iter().cloned().map(MemoryRankPointAggregate::from).collect();
        warnings: Vec<String> => s.group.warnings.clone();
    }
    {
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
}

frozen_class! {
    /// A baseline group's phase against a candidate group's, rank by rank.
    #[pyclass]
    pub struct MemoryRunGroupPhaseComparison(rg::GroupPhaseComparison);
    |c, py| {
        baseline: PyResult<Bound<'py, PyAny>> => descriptor(py, &c.baseline);
        candidate: PyResult<Bound<'py, PyAny>> => descriptor(py, &c.candidate);
        ranks: Vec<i64> => c.ranks.clone();
        skipped_ranks: Vec<i64> => c.skipped_ranks.clone();
        baseline_only_ranks: Vec<i64> => c.baseline_only_ranks.clone();
        candidate_only_ranks: Vec<i64> => c.candidate_only_ranks.clone();
        identity_failures: usize => c.identity_failures();
        warnings: Vec<String> => c.warnings.clone();
        /// `(rank, MemoryPhaseComparison)` of every compared rank.
        rank_comparisons: PyResult<Vec<(i64, MemoryPhaseComparison)>> => c
            .rank_comparisons
            .iter()
            .map(|(r, c)| Ok((*r, MemoryPhaseComparison::of(py, c.clone())?)))
            .collect();
        rank_decomposition: Vec<MemoryRankPhaseDecomposition> =>
            c.rank_decomposition().into_iter().map(MemoryRankPhaseDecomposition::from).collect();
        rank_pool_decomposition: Vec<MemoryRankPoolPhaseDecomposition> => c
            .rank_pool_decomposition()
            .into_iter()
            .map(MemoryRankPoolPhaseDecomposition::from)
            .collect();
        rank_device_decomposition: Vec<MemoryRankDevicePhaseDecomposition> => c
            .rank_device_decomposition()
            .into_iter()
            .map(MemoryRankDevicePhaseDecomposition::from)
            .collect();
        phase_aggregates: Vec<MemoryRunGroupPhaseAggregate> => c
            .phase_aggregates
            .iter()
            .cloned()
            .map(MemoryRunGroupPhaseAggregate::from)
            .collect();
    }
    {
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
            let files = py.detach(|| {
                tcgd_memory::report::group_phases_files(&self.inner, include_unchanged)
            });
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
    add_to_module!(
        m,
        [
            MemoryRunGroup,
            MemoryRunGroupSummary,
            MemoryRunGroupPhaseComparison,
            MemoryRankPointState,
            MemoryRankDevicePointState,
            MemoryRankPointAggregate,
            MemoryRankPhaseDecomposition,
            MemoryRankPoolPhaseDecomposition,
            MemoryRankDevicePhaseDecomposition,
            MemoryMetricExtrema,
            MemoryRunGroupPhaseAggregate
        ],
        [compare_run_group_phases]
    )
}
