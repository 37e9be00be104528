//! `torch_cudagraph_debug._native`: the Rust core as seen from Python.
//!
//! Thin on purpose: argument conversion, GIL release around heavy work, and error
//! mapping. Logic lives in the crates below.

pub(crate) mod anomaly;
mod args;
pub(crate) mod calls;
mod classes;
pub(crate) mod compare;
pub(crate) mod config;
pub(crate) mod diagnosis;
mod errors;
pub(crate) mod memory;
pub(crate) mod probe;
pub(crate) mod recorded;
pub(crate) mod recording;
pub(crate) mod results;
pub(crate) mod store;

use pyo3::prelude::*;
use tcgd_tensor::{summarize as summarize_bytes, DType, TensorSummary};

use errors::{guard, BindResult};

/// Host memory handed over as plain facts: the address and length of a contiguous CPU
/// tensor's bytes. (The buffer protocol is not in the limited API of Python 3.10, which
/// this abi3 wheel targets.)
#[derive(Debug, Clone, Copy, FromPyObject)]
pub(crate) struct HostBytes(usize, usize);

impl HostBytes {
    /// # Safety
    /// `ptr` must address `len` readable bytes that stay alive, unmoved and unwritten for
    /// the lifetime the caller picks. Only this package's Python layer creates `HostBytes`:
    /// it passes a private, contiguous CPU tensor and keeps it referenced for the call.
    pub(crate) unsafe fn as_slice<'a>(self) -> &'a [u8] {
        let HostBytes(ptr, len) = self;
        if len == 0 {
            return &[];
        }
        // SAFETY: guaranteed by the caller, as documented above.
        unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }
    }
}

pub(crate) fn parse_dtype(name: &str) -> BindResult<DType> {
    Ok(DType::from_torch_name(name)?)
}

/// Summary of a tensor's host bytes (contiguous, little-endian), `data` being
/// `(address, length)`: the same `TensorValueSummary` the comparisons report.
#[pyfunction]
pub(crate) fn summarize(py: Python<'_>, dtype: &str, data: HostBytes) -> PyResult<TensorSummary> {
    guard(py, || {
        let dtype = parse_dtype(dtype)?;
        // SAFETY: `data` comes from `_torch_bridge.host_bytes`, which keeps the tensor
        // alive in the calling frame for the duration of this call.
        let bytes = unsafe { data.as_slice() };
        let summary = py
            .detach(|| summarize_bytes(dtype, bytes))
            .map_err(tcgd_store::StoreError::from)?;
        Ok(summary)
    })
}

/// Content digest of bytes, as stored in runs (`blake3:<hex>`).
#[pyfunction]
pub(crate) fn content_digest(py: Python<'_>, data: HostBytes) -> PyResult<String> {
    guard(py, || {
        // SAFETY: as in `summarize`.
        let bytes = unsafe { data.as_slice() };
        Ok(py.detach(|| tcgd_store::content_digest(bytes)))
    })
}

/// Checks a dtype name; raises `UnsupportedDtypeError` for one that cannot be recorded.
#[pyfunction]
pub(crate) fn check_dtype(name: &str) -> BindResult<()> {
    parse_dtype(name).map(|_| ())
}

/// A byte count in binary units ("1.50 MiB", "512 B"): the one formatting every report
/// and CLI line uses, so sizes read the same everywhere.
#[pyfunction]
pub(crate) fn format_bytes(n: i64) -> String {
    tcgd_memory::report::format_bytes(n)
}

/// A signed byte change ("+1.00 MiB", "-512 B", "+0 B"), as reports print it.
#[pyfunction]
pub(crate) fn format_change(n: i64) -> String {
    tcgd_memory::report::format_change(n)
}

/// A byte value at two states and its change ("2.00 MiB -> 18.00 MiB (+16.00 MiB)"),
/// `None` as "n/a", as comparison reports print it.
#[pyfunction]
pub(crate) fn format_comparison(
    reference: Option<i64>,
    candidate: Option<i64>,
    delta: Option<i64>,
) -> String {
    tcgd_memory::report::format_comparison(reference, candidate, delta)
}

/// The allocator's trace action names, as the replay that parses them knows them.
#[pyfunction]
fn trace_action_names() -> Vec<&'static str> {
    tcgd_memory::lifetimes::Action::known_names().collect()
}

/// The trace actions of one allocation's tenancy of a block address, in order: what the
/// lifetime replay follows.
#[pyfunction]
fn lifetime_action_names() -> Vec<&'static str> {
    tcgd_memory::lifetimes::Action::lifetime_names().collect()
}

/// Checks that every error class the core raises is importable from
/// `torch_cudagraph_debug.errors`. The package calls it right after importing this module:
/// an error's Python type is resolved lazily, when the error reaches Python, and a failure
/// there would be a panic outside any guard; checked up front, a broken install fails the
/// import instead, naming the missing class.
#[pyfunction]
fn check_error_classes(py: Python<'_>) -> PyResult<()> {
    errors::check_classes(py)
}

// Declared with everything it exports, so that its stubs are generated from these
// declarations (pyo3's introspection; `scripts/generate-stubs`).
/// The compiled core of torch-cudagraph-debug. Private: the package's Python modules are
/// its interface.
#[pymodule]
mod _native {
    #[pymodule_export]
    use super::anomaly::first_anomaly;
    #[pymodule_export]
    use super::compare::{
        compare_point_series, compare_run_groups, compare_runs, compare_sets, run_group,
    };
    #[pymodule_export]
    use super::config::{check_run_name, ProbeConfig};
    #[pymodule_export]
    use super::diagnosis::{judge_against_float64, PyReportDocument, PySiteAccuracy};
    #[pymodule_export]
    use super::memory::attribution::{
        allocation_stack_coverage, attribution_csv, compare_allocation_stacks, event_window,
        memory_attribution, summarize_allocation_stacks, summarize_state_events,
        with_attribution_sections, MemoryAttribution,
    };
    #[pymodule_export]
    use super::memory::group::{
        compare_run_group_phases, MemoryRankDevicePhaseDecomposition, MemoryRankDevicePointState,
        MemoryRankPhaseDecomposition, MemoryRankPhaseRow, MemoryRankPointAggregate,
        MemoryRankPointState, MemoryRankPoolPhaseDecomposition, MemoryRunGroup,
        MemoryRunGroupPhaseAggregate, MemoryRunGroupPhaseComparison, MemoryRunGroupSummary,
    };
    #[pymodule_export]
    use super::memory::lifetimes::{
        memory_lifetimes, AllocationCohort, CohortBirth, CohortFreeCompletion, CohortFreeRequest,
        CohortTransition, MemoryAllocationLifetimeAnalysis,
    };
    #[pymodule_export]
    use super::memory::{
        check_snapshot_import, compare_phases, compare_states, memory_state_from_pickle,
        memory_timeline, render_memory_summaries, write_report_files, AbsoluteStats,
        MemoryAllocatorScopeComparison, MemoryAllocatorScopePhaseDecomposition,
        MemoryAllocatorScopeTimelineEntry, MemoryComparison, MemoryDeviceComparison,
        MemoryDevicePeaks, MemoryDevicePhaseDecomposition, MemoryDeviceTimelineEntry,
        MemoryIngestor, MemoryObservationComparison, MemoryObservationTimelineEntry,
        MemoryPhaseComparison, MemoryPhaseComponents, MemoryPhaseRow, MemoryPoolComparison,
        MemoryPoolOwner, MemoryPoolPhaseDecomposition, MemoryPoolTimelineEntry, MemoryRunReader,
        MemoryRunWriter, MemorySlotComparison, MemoryState, MemoryStatsDelta, MemoryTimeline,
        MemoryTimelineEntry,
    };
    #[pymodule_export]
    use super::recorded::{PyRecordedObservation, PyRecordedPoint};
    #[pymodule_export]
    use super::results::{
        comparison_literals, PyComparisonResult, PyGroupComparison, PyGroupInfo, PyGroupMember,
        PyGroupSummary, PyIssue, PyObservationComparison, PyOptions, PyPointComparison,
        PyPointPair, PyRankComparison, PyRankPoint, PyRunComparison, PySeriesComparison, PySide,
        PySnapshotComparison, PyWhole,
    };
    #[pymodule_export]
    use super::{
        calls::CompiledCall, calls::PointClock, check_dtype, content_digest, format_bytes,
        format_change, format_comparison, probe::capture_id, probe::cuda_available,
        probe::probe_memory, probe::release_deferred, probe::ProbeRuntime,
        recording::add_nvrtc_search_dir, recording::DeviceRecorder, store::compact_root,
        store::list_runs, store::set_log_retention, store::PyRunManifest, store::RunReader,
        store::RunWriter, store::RunWriterBase, summarize,
    };
    #[pymodule_export]
    use tcgd_compare::{
        AnomalySite, Counts, Divergence, FirstAnomaly, FirstMismatch, Metrics, PointRef,
        SeriesPoint, Subject,
    };
    #[pymodule_export]
    use tcgd_config::{Decision, MemorySettings, RunSettings};
    #[pymodule_export]
    use tcgd_memory::attribution::{
        AttributionStatus, EventSummary, EvidenceStatus, StackCoverage, StackDelta, StackSummary,
    };
    #[pymodule_export]
    use tcgd_memory::group::MetricExtrema;
    #[pymodule_export]
    use tcgd_memory::lifetimes::{CohortPointState, CohortSizeBucket, CohortSizeOutcome};
    #[pymodule_export]
    use tcgd_memory::report::Display;
    #[pymodule_export]
    use tcgd_memory::{rows::DeviceSample, Lifecycle, MemoryStats};
    #[pymodule_export]
    use tcgd_store::{RunHeader, Site, SiteLocation};
    #[pymodule_export]
    use tcgd_tensor::TensorSummary;

    #[pymodule_export]
    use super::{check_error_classes, lifetime_action_names, trace_action_names};

    #[pymodule_export]
    const FORMAT_VERSION: u32 = tcgd_store::FORMAT_VERSION;

    #[pymodule_export]
    #[allow(non_upper_case_globals)]
    const __version__: &str = env!("CARGO_PKG_VERSION");

    /// The site columns of a run's `observations` table, in order: the attributes of a
    /// `TensorSite`.
    #[pymodule_export]
    const SITE_COLUMNS: [&str; tcgd_store::Site::ATTRIBUTES.len()] = tcgd_store::Site::ATTRIBUTES;

    /// Values one device kernel launch takes at most: a probe group's summaries, a batched
    /// probe's copies.
    #[pymodule_export]
    const MAX_SITES_PER_LAUNCH: usize = tcgd_cuda::MAX_SITES_PER_LAUNCH;

    /// The CSV files a memory comparison's `write()` writes its rows to.
    #[pymodule_export]
    const MEMORY_ROW_CSV_FILES: [&str; tcgd_memory::rows::ROW_CSV_FILES.len()] =
        tcgd_memory::rows::ROW_CSV_FILES;
}
