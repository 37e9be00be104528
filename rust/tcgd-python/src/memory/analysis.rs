//! Comparisons, phase decompositions, timelines and the reports rendered from them.

use super::*;

/// A comparison of two states: the report tree (rendered on demand) and the reference's
/// rows, built once.
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryComparison {
    pub(super) inner: tcgd_memory::Comparison,
    rows: tcgd_memory::rows::ComparisonRows,
    /// One row per scope (`all`, `default`, `private`).
    #[pyo3(get)]
    allocator_scopes: Py<PyTuple>,
    /// One row per paired or one-sided pool, in report order.
    #[pyo3(get)]
    pools: Py<PyTuple>,
    /// One row per paired or one-sided (device, pool, stream) observation.
    #[pyo3(get)]
    observations: Py<PyTuple>,
    /// One row per paired or one-sided device: samples and allocator rollups.
    #[pyo3(get)]
    device_comparisons: Py<PyTuple>,
}

impl MemoryComparison {
    fn of(
        py: Python<'_>,
        inner: tcgd_memory::Comparison,
        rows: tcgd_memory::rows::ComparisonRows,
    ) -> PyResult<Self> {
        Ok(MemoryComparison {
            allocator_scopes: converted_tuple(
                py,
                &rows.allocator_scopes,
                MemoryAllocatorScopeComparison::of,
            )?,
            pools: converted_tuple(py, &rows.pools, MemoryPoolComparison::of)?,
            observations: converted_tuple(py, &rows.observations, MemoryObservationComparison::of)?,
            device_comparisons: converted_tuple(
                py,
                &rows.device_comparisons,
                MemoryDeviceComparison::of,
            )?,
            inner,
            rows,
        })
    }
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
        render_report(py, format, include_unchanged, depth, |f, o| {
            tcgd_memory::report::render_comparison(&self.inner, f, o)
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

    /// Every row as its dict, by attribute name (what `to_dict()` holds).
    fn rows_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.rows)
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
pub(crate) fn compare_states(
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
        let (inner, rows) = py.detach(|| -> BindResult<_> {
            let inner = tcgd_memory::compare(r, c, &opts)?;
            let rows = tcgd_memory::rows::ComparisonRows::build(&inner, r, c, &opts, origin)?;
            Ok((inner, rows))
        })?;
        Ok(MemoryComparison::of(py, inner, rows)?)
    })
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryPhaseComparison {
    pub(super) inner: tcgd_memory::PhaseComparison,
    rows: tcgd_memory::rows::PhaseRows,
    #[pyo3(get)]
    allocator_scope_decomposition: Py<PyTuple>,
    #[pyo3(get)]
    pool_decomposition: Py<PyTuple>,
    #[pyo3(get)]
    device_decomposition: Py<PyTuple>,
}

impl MemoryPhaseComparison {
    pub(super) fn of(py: Python<'_>, inner: tcgd_memory::PhaseComparison) -> PyResult<Self> {
        let rows = tcgd_memory::rows::PhaseRows::build(&inner);
        Ok(MemoryPhaseComparison {
            allocator_scope_decomposition: converted_tuple(
                py,
                &rows.allocator_scope_decomposition,
                MemoryAllocatorScopePhaseDecomposition::of,
            )?,
            pool_decomposition: converted_tuple(
                py,
                &rows.pool_decomposition,
                MemoryPoolPhaseDecomposition::of,
            )?,
            device_decomposition: converted_tuple(
                py,
                &rows.device_decomposition,
                MemoryDevicePhaseDecomposition::of,
            )?,
            inner,
            rows,
        })
    }
}

#[pymethods]
impl MemoryPhaseComparison {
    #[pyo3(signature = (format="text", include_unchanged=true))]
    fn render(&self, py: Python<'_>, format: &str, include_unchanged: bool) -> PyResult<String> {
        render_report(py, format, include_unchanged, "stream", |f, o| {
            tcgd_memory::report::render_phases(&self.inner, f, o)
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

    /// Every row as its dict, by attribute name (what `to_dict()` holds).
    fn rows_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.rows)
    }

    /// The decomposition's CSV files, `[(file name, text)]`.
    fn csv_files(&self) -> Vec<(String, String)> {
        self.rows.csv_files()
    }
}

#[pyfunction]
#[pyo3(signature = (baseline_start, baseline_end, candidate_start, candidate_end, *, pool_mapping, device_mapping))]
pub(crate) fn compare_phases(
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
        Ok(MemoryPhaseComparison::of(py, inner)?)
    })
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryTimeline {
    inner: tcgd_memory::Timeline,
    rows: tcgd_memory::rows::TimelineRows,
    #[pyo3(get)]
    allocator_scope_entries: Py<PyTuple>,
    #[pyo3(get)]
    pool_entries: Py<PyTuple>,
    #[pyo3(get)]
    observation_entries: Py<PyTuple>,
    #[pyo3(get)]
    device_entries: Py<PyTuple>,
}

#[pymethods]
impl MemoryTimeline {
    #[pyo3(signature = (format="text", include_unchanged=true))]
    fn render(&self, py: Python<'_>, format: &str, include_unchanged: bool) -> PyResult<String> {
        render_report(py, format, include_unchanged, "stream", |f, o| {
            tcgd_memory::report::render_timeline(&self.inner, f, o)
        })
    }

    /// Every row as its dict, by attribute name (what `to_dict()` holds).
    fn rows_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.rows)
    }

    /// The timeline's CSV files, `[(file name, text)]`.
    fn csv_files(&self) -> Vec<(String, String)> {
        self.rows.csv_files()
    }
}

#[pyfunction]
pub(crate) fn memory_timeline(
    py: Python<'_>,
    states: Vec<PyRef<'_, MemoryState>>,
) -> PyResult<MemoryTimeline> {
    guard(py, || {
        let owned: Vec<Arc<RustState>> = states.iter().map(|s| s.inner.clone()).collect();
        let (inner, rows) = py.detach(|| -> BindResult<_> {
            let refs: Vec<&RustState> = owned.iter().map(|s| s.as_ref()).collect();
            let inner = tcgd_memory::timeline(&refs)?;
            let rows = tcgd_memory::rows::TimelineRows::build(&inner, &refs)?;
            Ok((inner, rows))
        })?;
        Ok(MemoryTimeline {
            allocator_scope_entries: converted_tuple(
                py,
                &rows.allocator_scope_entries,
                MemoryAllocatorScopeTimelineEntry::of,
            )?,
            pool_entries: converted_tuple(py, &rows.pool_entries, MemoryPoolTimelineEntry::of)?,
            observation_entries: converted_tuple(
                py,
                &rows.observation_entries,
                MemoryObservationTimelineEntry::of,
            )?,
            device_entries: converted_tuple(
                py,
                &rows.device_entries,
                MemoryDeviceTimelineEntry::of,
            )?,
            inner,
            rows,
        })
    })
}

/// Several states, each reported on its own, as one document (`tcgd memory summary`).
#[pyfunction]
#[pyo3(signature = (states, format="text", include_unchanged=true, depth="stream"))]
pub(crate) fn render_memory_summaries(
    py: Python<'_>,
    states: Vec<PyRef<'_, MemoryState>>,
    format: &str,
    include_unchanged: bool,
    depth: &str,
) -> PyResult<String> {
    let owned: Vec<Arc<RustState>> = states.iter().map(|s| s.inner.clone()).collect();
    render_report(py, format, include_unchanged, depth, |f, o| {
        let refs: Vec<&RustState> = owned.iter().map(|s| s.as_ref()).collect();
        tcgd_memory::report::render_summaries(&refs, f, o)
    })
}

/// Writes `(file name, content)` pairs into a report directory by the rules every report
/// follows: a directory holding anything needs `overwrite`, which removes only `own`.
/// Returns the paths keyed as every `write()` keys them ([`crate::classes::paths_by_format`]).
#[pyfunction]
pub(crate) fn write_report_files(
    py: Python<'_>,
    directory: PathBuf,
    files: Vec<(String, String)>,
    own: Vec<String>,
    overwrite: bool,
) -> PyResult<Bound<'_, PyDict>> {
    let written = guard(py, || {
        py.detach(|| tcgd_report::write_report(&directory, &files, &own, overwrite))
            .map_err(BindingError::from)
    })?;
    crate::classes::paths_by_format(py, written)
}
