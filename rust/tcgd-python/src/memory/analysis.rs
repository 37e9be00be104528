//! Comparisons, phase decompositions, timelines and the reports rendered from them.

use super::*;

/// A comparison of two states: the report tree (rendered on demand) and the reference's
/// rows, built once.
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryComparison {
    pub(super) inner: tcgd_memory::Comparison,
    rows: tcgd_memory::rows::ComparisonRows,
}

#[pymethods]
impl MemoryComparison {
    #[pyo3(signature = (format="text", include_unchanged=true, depth="stream"))]
    fn render(
        &self,
        py: Python<'_>,
        format: &str,
        include_unchanged: bool,
        depth: &str,
    ) -> PyResult<String> {
        guard(py, || {
            let format = format_of(format)?;
            let opts = report_options(include_unchanged, depth)?;
            Ok(py.detach(|| tcgd_memory::report::render_comparison(&self.inner, format, opts)))
        })
    }

    #[getter]
    fn relation(&self) -> &'static str {
        self.inner.relation.as_str()
    }

    #[getter]
    fn lifecycle_label(&self) -> &'static str {
        self.inner.lifecycle.as_str()
    }

    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }

    #[getter]
    fn suggested_pool_mapping(&self) -> PoolMappingArgs {
        self.inner.suggested_pool_mapping.clone()
    }

    /// One row per scope (`all`, `default`, `private`).
    #[getter]
    fn allocator_scopes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        row_tuple::<_, MemoryAllocatorScopeComparison>(py, &self.rows.allocator_scopes)
    }

    /// One row per paired or one-sided pool, in report order.
    #[getter]
    fn pools<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        row_tuple::<_, MemoryPoolComparison>(py, &self.rows.pools)
    }

    /// One row per paired or one-sided (device, pool, stream) observation.
    #[getter]
    fn observations<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        row_tuple::<_, MemoryObservationComparison>(py, &self.rows.observations)
    }

    /// One row per paired or one-sided device: samples and allocator rollups.
    #[getter]
    fn device_comparisons<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        row_tuple::<_, MemoryDeviceComparison>(py, &self.rows.device_comparisons)
    }

    /// The reference's CSV files of this comparison, `[(file name, text)]`.
    fn csv_files(&self) -> Vec<(String, String)> {
        self.rows.csv_files()
    }

    /// `observations.csv` and, when there are devices, `devices.csv` (what a phase
    /// comparison takes from its end gap).
    fn end_gap_csv_files(&self) -> Vec<(String, String)> {
        std::iter::once(self.rows.observations_csv())
            .chain(self.rows.devices_csv())
            .collect()
    }
}

/// `run` or `probe`: what took the states of a same-origin comparison.
fn origin_kind(origin: &str) -> BindResult<tcgd_memory::rows::OriginKind> {
    match origin {
        "run" => Ok(tcgd_memory::rows::OriginKind::Run),
        "probe" => Ok(tcgd_memory::rows::OriginKind::Probe),
        other => Err(BindingError::InvalidInput(format!(
            "origin must be 'run' or 'probe', got '{other}'"
        ))),
    }
}

#[pyfunction]
#[pyo3(signature = (reference, candidate, *, pool_mapping, device_mapping, origin="run"))]
pub(super) fn compare_states(
    py: Python<'_>,
    reference: &MemoryState,
    candidate: &MemoryState,
    pool_mapping: PoolMappingArgs,
    device_mapping: Vec<(i64, i64)>,
    origin: &str,
) -> PyResult<MemoryComparison> {
    guard(py, || {
        let origin = origin_kind(origin)?;
        let opts = options(pool_mapping, device_mapping);
        let (r, c) = (reference.inner.as_ref(), candidate.inner.as_ref());
        py.detach(|| {
            let inner = tcgd_memory::compare(r, c, &opts)?;
            let rows = tcgd_memory::rows::ComparisonRows::build(&inner, r, c, &opts, origin)?;
            Ok(MemoryComparison { inner, rows })
        })
    })
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryPhaseComparison {
    pub(super) inner: tcgd_memory::PhaseComparison,
    rows: tcgd_memory::rows::PhaseRows,
}

impl MemoryPhaseComparison {
    pub(super) fn of(inner: tcgd_memory::PhaseComparison) -> Self {
        let rows = tcgd_memory::rows::PhaseRows::build(&inner);
        MemoryPhaseComparison { inner, rows }
    }
}

#[pymethods]
impl MemoryPhaseComparison {
    #[pyo3(signature = (format="text", include_unchanged=true))]
    fn render(&self, py: Python<'_>, format: &str, include_unchanged: bool) -> PyResult<String> {
        guard(py, || {
            let format = format_of(format)?;
            let opts = ReportOptions {
                include_unchanged,
                depth: Depth::Stream,
            };
            Ok(py.detach(|| tcgd_memory::report::render_phases(&self.inner, format, opts)))
        })
    }

    #[getter]
    fn identity_failures(&self) -> usize {
        self.inner.identity_failures().len()
    }

    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }

    #[getter]
    fn allocator_scope_decomposition<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        row_tuple::<_, MemoryAllocatorScopePhaseDecomposition>(
            py,
            &self.rows.allocator_scope_decomposition,
        )
    }

    #[getter]
    fn pool_decomposition<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        row_tuple::<_, MemoryPoolPhaseDecomposition>(py, &self.rows.pool_decomposition)
    }

    #[getter]
    fn device_decomposition<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        row_tuple::<_, MemoryDevicePhaseDecomposition>(py, &self.rows.device_decomposition)
    }

    /// The decomposition's CSV files, `[(file name, text)]`.
    fn csv_files(&self) -> Vec<(String, String)> {
        self.rows.csv_files()
    }
}

#[pyfunction]
#[pyo3(signature = (baseline_start, baseline_end, candidate_start, candidate_end, *, pool_mapping, device_mapping))]
pub(super) fn compare_phases(
    py: Python<'_>,
    baseline_start: &MemoryState,
    baseline_end: &MemoryState,
    candidate_start: &MemoryState,
    candidate_end: &MemoryState,
    pool_mapping: PoolMappingArgs,
    device_mapping: Vec<(i64, i64)>,
) -> PyResult<MemoryPhaseComparison> {
    guard(py, || {
        let opts = options(pool_mapping, device_mapping);
        let inner = py.detach(|| {
            tcgd_memory::compare_phases(
                (&baseline_start.inner, &baseline_end.inner),
                (&candidate_start.inner, &candidate_end.inner),
                &opts,
            )
        })?;
        Ok(MemoryPhaseComparison::of(inner))
    })
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryTimeline {
    inner: tcgd_memory::Timeline,
    rows: tcgd_memory::rows::TimelineRows,
}

#[pymethods]
impl MemoryTimeline {
    #[pyo3(signature = (format="text", include_unchanged=true))]
    fn render(&self, py: Python<'_>, format: &str, include_unchanged: bool) -> PyResult<String> {
        guard(py, || {
            let format = format_of(format)?;
            let opts = ReportOptions {
                include_unchanged,
                depth: Depth::Stream,
            };
            Ok(py.detach(|| tcgd_memory::report::render_timeline(&self.inner, format, opts)))
        })
    }

    #[getter]
    fn allocator_scope_entries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        row_tuple::<_, MemoryAllocatorScopeTimelineEntry>(py, &self.rows.allocator_scope_entries)
    }

    #[getter]
    fn pool_entries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        row_tuple::<_, MemoryPoolTimelineEntry>(py, &self.rows.pool_entries)
    }

    #[getter]
    fn observation_entries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        row_tuple::<_, MemoryObservationTimelineEntry>(py, &self.rows.observation_entries)
    }

    #[getter]
    fn device_entries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        row_tuple::<_, MemoryDeviceTimelineEntry>(py, &self.rows.device_entries)
    }

    /// The timeline's CSV files, `[(file name, text)]`.
    fn csv_files(&self) -> Vec<(String, String)> {
        self.rows.csv_files()
    }
}

#[pyfunction]
pub(super) fn memory_timeline(
    py: Python<'_>,
    states: Vec<PyRef<'_, MemoryState>>,
) -> PyResult<MemoryTimeline> {
    guard(py, || {
        let owned: Vec<Arc<RustState>> = states.iter().map(|s| s.inner.clone()).collect();
        py.detach(|| {
            let refs: Vec<&RustState> = owned.iter().map(|s| s.as_ref()).collect();
            let inner = tcgd_memory::timeline(&refs)?;
            let rows = tcgd_memory::rows::TimelineRows::build(&inner, &refs)?;
            Ok(MemoryTimeline { inner, rows })
        })
    })
}

/// Several states, each reported on its own, as one document (`tcgd memory summary`).
#[pyfunction]
#[pyo3(signature = (states, format="text", include_unchanged=true, depth="stream"))]
pub(super) fn render_memory_summaries(
    py: Python<'_>,
    states: Vec<PyRef<'_, MemoryState>>,
    format: &str,
    include_unchanged: bool,
    depth: &str,
) -> PyResult<String> {
    guard(py, || {
        let format = format_of(format)?;
        let opts = report_options(include_unchanged, depth)?;
        let owned: Vec<Arc<RustState>> = states.iter().map(|s| s.inner.clone()).collect();
        Ok(py.detach(|| {
            let refs: Vec<&RustState> = owned.iter().map(|s| s.as_ref()).collect();
            tcgd_memory::report::render_summaries(&refs, format, opts)
        }))
    })
}

/// Writes `(file name, content)` pairs into a report directory by the rules every report
/// follows: a directory holding anything needs `overwrite`, which removes only `own`.
#[pyfunction]
pub(super) fn write_report_files(
    py: Python<'_>,
    directory: PathBuf,
    files: Vec<(String, String)>,
    own: Vec<String>,
    overwrite: bool,
) -> PyResult<Vec<PathBuf>> {
    guard(py, || {
        py.detach(|| tcgd_report::write_report(&directory, &files, &own, overwrite))
            .map_err(BindingError::from)
    })
}
