//! Comparisons, phase decompositions, timelines and the reports rendered from them.

use super::*;

/// A rendered-on-demand comparison of two states.
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryComparison {
    pub(super) inner: tcgd_memory::Comparison,
    reference: Arc<RustState>,
    candidate: Arc<RustState>,
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

    /// One row per paired or one-sided pool, in report order.
    fn pool_rows(&self) -> PyResult<Vec<ComparisonRow>> {
        comparison_rows(&self.inner, false)
    }

    /// One row per paired or one-sided (device, pool, stream) observation.
    fn observation_rows(&self) -> PyResult<Vec<ComparisonRow>> {
        comparison_rows(&self.inner, true)
    }

    /// One row per paired or one-sided device: samples and allocator rollups.
    fn device_rows(&self) -> PyResult<Vec<DeviceRow>> {
        device_rows(
            &self.inner,
            Some(self.reference.as_ref()),
            self.candidate.as_ref(),
        )
    }
}

#[pyfunction]
#[pyo3(signature = (reference, candidate, *, pool_mapping, device_mapping))]
pub(super) fn compare_states(
    py: Python<'_>,
    reference: &MemoryState,
    candidate: &MemoryState,
    pool_mapping: PoolMappingArgs,
    device_mapping: Vec<(i64, i64)>,
) -> PyResult<MemoryComparison> {
    guard(py, || {
        let opts = options(pool_mapping, device_mapping);
        let inner =
            py.detach(|| tcgd_memory::compare(&reference.inner, &candidate.inner, &opts))?;
        Ok(MemoryComparison {
            inner,
            reference: reference.inner.clone(),
            candidate: candidate.inner.clone(),
        })
    })
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryPhaseComparison {
    pub(super) inner: tcgd_memory::PhaseComparison,
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

    /// `(level, scope, baseline_device, candidate_device, baseline_pool, candidate_pool,
    /// metric, [baseline_start, baseline_end, candidate_start, candidate_end])`.
    fn rows(&self) -> Vec<PhaseRow> {
        phase_rows(&self.inner)
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
        Ok(MemoryPhaseComparison { inner })
    })
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryTimeline {
    inner: tcgd_memory::Timeline,
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

    /// `(point_index, label, level, scope, device, pool, stats, delta)` per row.
    fn rows(&self) -> Vec<TimelineRow> {
        timeline_rows(&self.inner)
    }
}

#[pyfunction]
pub(super) fn memory_timeline(
    py: Python<'_>,
    states: Vec<PyRef<'_, MemoryState>>,
) -> PyResult<MemoryTimeline> {
    guard(py, || {
        let owned: Vec<Arc<RustState>> = states.iter().map(|s| s.inner.clone()).collect();
        let inner = py.detach(|| {
            let refs: Vec<&RustState> = owned.iter().map(|s| s.as_ref()).collect();
            tcgd_memory::timeline(&refs)
        })?;
        Ok(MemoryTimeline { inner })
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
