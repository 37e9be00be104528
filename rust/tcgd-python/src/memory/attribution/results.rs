//! The attribution results as frozen Python classes: evidence statuses, stack coverage,
//! stack summaries and deltas, allocator-event summaries, and one comparison's attribution.
//! Each row keeps its core value for `to_dict()` (the row as `report.json` holds it) and
//! `to_row()` (the same columns as its CSV file).

use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use tcgd_memory::attribution::{self as att, EvidenceStatus, StackFrames};
use tcgd_memory::report::attribution::{self as rep, Display};

use super::super::lifetimes::{display_depth, MemoryAllocationLifetimeAnalysis};
use tcgd_report::python::cells_to_python;

use crate::results::serde_to_py;

use super::super::*;

use super::*;

pub(crate) fn frames_tuple<'py>(
    py: Python<'py>,
    frames: &StackFrames,
) -> PyResult<Bound<'py, PyTuple>> {
    let items = frames
        .0
        .iter()
        .map(|f| {
            let d = PyDict::new(py);
            d.set_item("filename", &f.filename)?;
            d.set_item("line", f.line)?;
            d.set_item("name", &f.name)?;
            for (key, value) in [
                ("fx_node_op", &f.fx_node_op),
                ("fx_node_name", &f.fx_node_name),
                ("fx_node_target", &f.fx_node_target),
                ("fx_original_trace", &f.fx_original_trace),
            ] {
                if let Some(value) = value {
                    d.set_item(key, value)?;
                }
            }
            Ok(d)
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, items)
}

/// `(device, (a, b))` of one side of a stack delta.
pub(crate) type SideKeyArg = Option<(i64, (i64, i64))>;

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// The first `depth` frames of `frames` as reports show stacks; every frame for `None`.
fn display_stack(py: Python<'_>, frames: &StackFrames, depth: Option<i64>) -> PyResult<String> {
    let depth = guard(py, || display_depth(depth))?;
    Ok(frames.key_at_depth(depth))
}

/// Whether an analysis was asked for, whether its evidence existed, and whether that
/// evidence was complete.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct MemoryEvidenceStatus {
    #[pyo3(get)]
    requested: bool,
    #[pyo3(get)]
    available: bool,
    #[pyo3(get)]
    complete: bool,
    inner: EvidenceStatus,
}

impl MemoryEvidenceStatus {
    fn of(s: EvidenceStatus) -> Self {
        MemoryEvidenceStatus {
            requested: s.requested,
            available: s.available,
            complete: s.complete,
            inner: s,
        }
    }
}

impl From<EvidenceStatus> for MemoryEvidenceStatus {
    fn from(s: EvidenceStatus) -> Self {
        MemoryEvidenceStatus::of(s)
    }
}

#[pymethods]
impl MemoryEvidenceStatus {
    #[new]
    #[pyo3(signature = (requested, available, complete))]
    fn new(requested: bool, available: bool, complete: bool) -> Self {
        MemoryEvidenceStatus::of(EvidenceStatus {
            requested,
            available,
            complete,
        })
    }

    /// The status of an analysis nobody asked for: nothing requested, so nothing
    /// available or complete.
    #[staticmethod]
    fn not_requested() -> Self {
        MemoryEvidenceStatus::of(EvidenceStatus::default())
    }

    /// `{"requested", "available", "complete"}`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner)
    }

    fn __repr__(&self) -> String {
        format!(
            "MemoryEvidenceStatus(requested={}, available={}, complete={})",
            py_bool(self.requested),
            py_bool(self.available),
            py_bool(self.complete)
        )
    }
}

/// Whether each kind of evidence an attribution can use was asked for, found and
/// complete.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    frozen,
    get_all,
    eq,
    from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct MemoryAttributionStatus {
    stacks: MemoryEvidenceStatus,
    events: MemoryEvidenceStatus,
    lifetimes: MemoryEvidenceStatus,
}

#[pymethods]
impl MemoryAttributionStatus {
    #[new]
    #[pyo3(signature = (stacks, events, lifetimes))]
    fn new(
        stacks: MemoryEvidenceStatus,
        events: MemoryEvidenceStatus,
        lifetimes: MemoryEvidenceStatus,
    ) -> Self {
        MemoryAttributionStatus {
            stacks,
            events,
            lifetimes,
        }
    }

    /// `{"stacks", "events", "lifetimes"}`, each as its status's `to_dict()`.
    fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        crate::classes::attrs_dict(slf.as_any(), &["stacks", "events", "lifetimes"])
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(slf.as_any(), &["stacks", "events", "lifetimes"])
    }
}

/// Attributed active bytes over active bytes, for a whole state or one pool.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct AllocationStackCoverage {
    #[pyo3(get)]
    device_index: Option<i64>,
    #[pyo3(get)]
    pool_id: Option<(i64, i64)>,
    /// Bytes of the active blocks.
    #[pyo3(get)]
    active_bytes: i64,
    /// Bytes of the active blocks that have allocation frames.
    #[pyo3(get)]
    attributed_bytes: i64,
    /// `active_bytes - attributed_bytes`: the `<unattributed>` bucket.
    #[pyo3(get)]
    unattributed_bytes: i64,
    #[pyo3(get)]
    active_blocks: i64,
    #[pyo3(get)]
    attributed_blocks: i64,
    /// `attributed_bytes / active_bytes`; `1.0` when nothing is active.
    #[pyo3(get)]
    coverage: f64,
    /// Every active block has frames.
    #[pyo3(get)]
    complete: bool,
    inner: att::StackCoverage,
}

impl AllocationStackCoverage {
    pub(crate) fn of(c: &att::StackCoverage) -> Self {
        AllocationStackCoverage {
            device_index: c.device_index,
            pool_id: c.pool_id,
            active_bytes: c.active_bytes,
            attributed_bytes: c.attributed_bytes,
            unattributed_bytes: c.unattributed_bytes,
            active_blocks: c.active_blocks,
            attributed_blocks: c.attributed_blocks,
            coverage: c.coverage,
            complete: c.complete(),
            inner: c.clone(),
        }
    }
}

#[pymethods]
impl AllocationStackCoverage {
    /// The reference's name of `coverage`.
    #[getter]
    fn ratio(&self) -> f64 {
        self.coverage
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &rep::coverage_json(&self.inner))
    }

    /// The coverage as one flat row (the pool as `a,b`).
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        cells_to_python(py, rep::coverage_row(&self.inner))
    }

    fn __repr__(&self) -> String {
        format!(
            "AllocationStackCoverage(coverage={:.4}, attributed_bytes={}, active_bytes={})",
            self.coverage, self.attributed_bytes, self.active_bytes
        )
    }
}

/// `MemoryPoolKey(device_index, pool_id)` of the facade.
fn pool_key(py: Python<'_>, device_index: i64, pool_id: (i64, i64)) -> PyResult<Py<PyAny>> {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let class = CLASS.import(
        py,
        "torch_cudagraph_debug.memory_debug._model",
        "MemoryPoolKey",
    )?;
    Ok(class.call1((device_index, pool_id))?.unbind())
}

/// Active blocks of one (device, pool, stream when asked, complete stack).
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct AllocationStackSummary {
    /// Every frame as a dict (`filename`, `line`, `name`, FX fields when present),
    /// innermost first.
    #[pyo3(get)]
    stack_frames: Py<PyTuple>,
    /// Locations only (`file:line:function <- ...`); `<unattributed>` without frames.
    #[pyo3(get)]
    stack_key: String,
    /// Fingerprint of the complete stack, every frame field included.
    #[pyo3(get)]
    stack_fingerprint: String,
    #[pyo3(get)]
    device_index: i64,
    #[pyo3(get)]
    pool_id: (i64, i64),
    /// The pool of `device_index` and `pool_id`, as the facade keys pools.
    #[pyo3(get)]
    pool_key: Py<PyAny>,
    /// `None` when streams were summed.
    #[pyo3(get)]
    stream: Option<i64>,
    /// Bytes (allocator-rounded) of the blocks.
    #[pyo3(get)]
    size_bytes: i64,
    /// Requested (unrounded) bytes of the blocks.
    #[pyo3(get)]
    requested_bytes: i64,
    /// Blocks.
    #[pyo3(get)]
    count: i64,
    inner: att::StackSummary,
}

impl AllocationStackSummary {
    pub(crate) fn of(py: Python<'_>, s: &att::StackSummary) -> PyResult<Self> {
        Ok(AllocationStackSummary {
            stack_frames: frames_tuple(py, &s.stack_frames)?.unbind(),
            stack_key: s.stack_frames.key(),
            stack_fingerprint: s.stack_frames.fingerprint(),
            device_index: s.device_index,
            pool_id: s.pool_id,
            pool_key: pool_key(py, s.device_index, s.pool_id)?,
            stream: s.stream,
            size_bytes: s.size_bytes,
            requested_bytes: s.requested_bytes,
            count: s.count,
            inner: s.clone(),
        })
    }
}

#[pymethods]
impl AllocationStackSummary {
    /// The first `depth` frames as reports show stacks; every frame for `None`.
    #[pyo3(signature = (depth=None))]
    fn display_stack(&self, py: Python<'_>, depth: Option<i64>) -> PyResult<String> {
        display_stack(py, &self.inner.stack_frames, depth)
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &rep::summary_json(&self.inner))
    }

    /// The row flat, in the columns of the other stack rows' CSV files.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        cells_to_python(py, rep::summary_row(&self.inner))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &[
                "device_index",
                "pool_id",
                "size_bytes",
                "count",
                "stack_key",
            ],
        )
    }
}

/// The change of one (pool pair, stream when asked, complete stack) between two states.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct AllocationStackDelta {
    #[pyo3(get)]
    stack_frames: Py<PyTuple>,
    #[pyo3(get)]
    stack_key: String,
    #[pyo3(get)]
    stack_fingerprint: String,
    /// `(device, (a, b))` of the reference side; `None` where it lacks the pool.
    #[pyo3(get)]
    reference_key: SideKeyArg,
    #[pyo3(get)]
    candidate_key: SideKeyArg,
    #[pyo3(get)]
    stream: Option<i64>,
    #[pyo3(get)]
    reference_size_bytes: i64,
    #[pyo3(get)]
    candidate_size_bytes: i64,
    #[pyo3(get)]
    delta_size_bytes: i64,
    #[pyo3(get)]
    reference_requested_bytes: i64,
    #[pyo3(get)]
    candidate_requested_bytes: i64,
    #[pyo3(get)]
    delta_requested_bytes: i64,
    #[pyo3(get)]
    reference_count: i64,
    #[pyo3(get)]
    candidate_count: i64,
    #[pyo3(get)]
    delta_count: i64,
    /// Bytes, requested bytes or count changed.
    #[pyo3(get)]
    changed: bool,
    inner: att::StackDelta,
}

impl AllocationStackDelta {
    pub(crate) fn of(py: Python<'_>, d: &att::StackDelta) -> PyResult<Self> {
        Ok(AllocationStackDelta {
            stack_frames: frames_tuple(py, &d.stack_frames)?.unbind(),
            stack_key: d.stack_frames.key(),
            stack_fingerprint: d.stack_frames.fingerprint(),
            reference_key: d.reference_key,
            candidate_key: d.candidate_key,
            stream: d.stream,
            reference_size_bytes: d.reference_size_bytes,
            candidate_size_bytes: d.candidate_size_bytes,
            delta_size_bytes: d.delta_size_bytes,
            reference_requested_bytes: d.reference_requested_bytes,
            candidate_requested_bytes: d.candidate_requested_bytes,
            delta_requested_bytes: d.delta_requested_bytes,
            reference_count: d.reference_count,
            candidate_count: d.candidate_count,
            delta_count: d.delta_count,
            changed: d.changed(),
            inner: d.clone(),
        })
    }
}

#[pymethods]
impl AllocationStackDelta {
    /// The reference's name of `changed`.
    #[getter]
    fn has_changes(&self) -> bool {
        self.changed
    }

    /// The first `depth` frames as reports show stacks; every frame for `None`.
    #[pyo3(signature = (depth=None))]
    fn display_stack(&self, py: Python<'_>, depth: Option<i64>) -> PyResult<String> {
        display_stack(py, &self.inner.stack_frames, depth)
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &rep::delta_json(&self.inner))
    }

    /// The row as `allocation_stack_comparisons.csv` holds it, without the endpoints'
    /// titles.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        cells_to_python(py, rep::delta_row(&self.inner, None))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &[
                "reference_key",
                "candidate_key",
                "delta_size_bytes",
                "stack_key",
            ],
        )
    }
}

/// Allocator events of one (device, pool, stream, action, complete stack) in an interval.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct AllocatorEventSummary {
    #[pyo3(get)]
    stack_frames: Py<PyTuple>,
    #[pyo3(get)]
    stack_key: String,
    #[pyo3(get)]
    stack_fingerprint: String,
    #[pyo3(get)]
    device_index: i64,
    /// `None` unless the confidence is `reported` or `matched`.
    #[pyo3(get)]
    pool_id: Option<(i64, i64)>,
    #[pyo3(get)]
    stream: i64,
    /// The trace action (`alloc`, `free_requested`, `free_completed`, `oom`, ...).
    #[pyo3(get)]
    action: String,
    /// Sum of the events' absolute sizes.
    #[pyo3(get)]
    total_bytes: i64,
    /// Events.
    #[pyo3(get)]
    count: i64,
    /// `reported`, `matched`, `ambiguous`, `unknown` or `not_applicable`.
    #[pyo3(get)]
    attribution_confidence: &'static str,
    /// `pool[a,b]`, `pool[n/a]` for an `oom` event, `pool[unknown]` when not found.
    #[pyo3(get)]
    pool_label: String,
    inner: att::EventSummary,
}

impl AllocatorEventSummary {
    pub(crate) fn of(py: Python<'_>, e: &att::EventSummary) -> PyResult<Self> {
        Ok(AllocatorEventSummary {
            stack_frames: frames_tuple(py, &e.stack_frames)?.unbind(),
            stack_key: e.stack_frames.key(),
            stack_fingerprint: e.stack_frames.fingerprint(),
            device_index: e.device_index,
            pool_id: e.pool_id,
            stream: e.stream,
            action: e.action.clone(),
            total_bytes: e.total_bytes,
            count: e.count,
            attribution_confidence: e.attribution_confidence.as_str(),
            pool_label: e.pool_label(),
            inner: e.clone(),
        })
    }
}

/// `(reference, candidate)` titles when both are given.
fn titles<'a>(
    reference_label: &'a Option<String>,
    candidate_label: &'a Option<String>,
) -> BindResult<rep::Titles<'a>> {
    match (reference_label, candidate_label) {
        (Some(r), Some(c)) => Ok(Some((r.as_str(), c.as_str()))),
        (None, None) => Ok(None),
        _ => Err(BindingError::InvalidInput(
            "reference_label and candidate_label go together: give both or neither".into(),
        )),
    }
}

#[pymethods]
impl AllocatorEventSummary {
    /// The reference's name of `total_bytes`.
    #[getter]
    fn size_bytes(&self) -> i64 {
        self.total_bytes
    }

    /// The first `depth` frames as reports show stacks; every frame for `None`.
    #[pyo3(signature = (depth=None))]
    fn display_stack(&self, py: Python<'_>, depth: Option<i64>) -> PyResult<String> {
        display_stack(py, &self.inner.stack_frames, depth)
    }

    /// The row as `report.json` holds it; with the endpoints' labels, they come first as
    /// `reference` and `candidate`.
    #[pyo3(signature = (*, reference_label=None, candidate_label=None))]
    fn to_dict<'py>(
        &self,
        py: Python<'py>,
        reference_label: Option<String>,
        candidate_label: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let titles = guard(py, || titles(&reference_label, &candidate_label))?;
        serde_to_py(py, &rep::event_row_json(&self.inner, titles))
    }

    /// The row as its line of `events.csv` holds it; with the endpoints' labels, they come
    /// first as `reference` and `candidate`, as in the file.
    #[pyo3(signature = (*, reference_label=None, candidate_label=None))]
    fn to_row<'py>(
        &self,
        py: Python<'py>,
        reference_label: Option<String>,
        candidate_label: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let titles = guard(py, || titles(&reference_label, &candidate_label))?;
        cells_to_python(py, rep::event_row(&self.inner, titles))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &[
                "device_index",
                "action",
                "total_bytes",
                "count",
                "attribution_confidence",
            ],
        )
    }
}

pub(crate) fn display(limit: i64, stack_depth: i64) -> BindResult<Display> {
    Display::new(stack_depth, limit).map_err(BindingError::InvalidInput)
}

/// Objects of rows, as a tuple.
fn row_objects<'py, R, T>(
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

/// The attribution of one comparison.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryAttribution {
    #[pyo3(get)]
    attribution_status: Py<MemoryAttributionStatus>,
    #[pyo3(get)]
    reference_stack_coverage: Option<Py<AllocationStackCoverage>>,
    #[pyo3(get)]
    candidate_stack_coverage: Option<Py<AllocationStackCoverage>>,
    /// The cohort report of the compared range (lifetime requests on two points of one
    /// run whose history covers it).
    #[pyo3(get)]
    allocation_lifetimes: Option<Py<MemoryAllocationLifetimeAnalysis>>,
    /// `AllocationStackDelta` of every (pool pair, stack), largest change first.
    #[pyo3(get)]
    stack_deltas: Py<PyTuple>,
    /// `AllocatorEventSummary` of every event group of the interval.
    #[pyo3(get)]
    event_summaries: Py<PyTuple>,
    #[pyo3(get)]
    warnings: Vec<String>,
    pub(crate) inner: att::Attribution,
}

impl MemoryAttribution {
    pub(crate) fn of(py: Python<'_>, a: att::Attribution) -> PyResult<Self> {
        let coverage = |c: &Option<att::StackCoverage>| {
            c.as_ref()
                .map(|c| Py::new(py, AllocationStackCoverage::of(c)))
                .transpose()
        };
        let s = &a.status;
        Ok(MemoryAttribution {
            attribution_status: Py::new(
                py,
                MemoryAttributionStatus::new(s.stacks.into(), s.events.into(), s.lifetimes.into()),
            )?,
            reference_stack_coverage: coverage(&a.reference.stack_coverage)?,
            candidate_stack_coverage: coverage(&a.candidate.stack_coverage)?,
            allocation_lifetimes: a
                .lifetimes
                .clone()
                .map(|l| Py::new(py, MemoryAllocationLifetimeAnalysis::new(l)))
                .transpose()?,
            stack_deltas: row_objects(py, &a.stack_deltas, |d| AllocationStackDelta::of(py, d))?,
            event_summaries: row_objects(py, &a.events, |e| AllocatorEventSummary::of(py, e))?,
            warnings: a.warnings.clone(),
            inner: a,
        })
    }
}

#[pymethods]
impl MemoryAttribution {
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &rep::attribution_json(&self.inner))
    }
}
