//! The attribution results as frozen Python classes: evidence statuses, stack coverage,
//! stack summaries and deltas, allocator-event summaries, and one comparison's attribution.

use tcgd_memory::attribution::{self as att, EvidenceStatus, StackFrames};
use tcgd_memory::report::attribution::{self as rep, Display};

use super::super::lifetimes::MemoryAllocationLifetimeAnalysis;

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

/// A JSON value (from the report layer) as Python objects.
pub(crate) fn to_py<'py>(
    py: Python<'py>,
    value: &serde_json::Value,
) -> PyResult<Bound<'py, PyAny>> {
    let json = py.import("json")?;
    json.call_method1("loads", (value.to_string(),))
}

/// `(device, (a, b))` of one side of a stack delta.
pub(crate) type SideKeyArg = Option<(i64, (i64, i64))>;

#[pyclass(module = "torch_cudagraph_debug._native", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct MemoryEvidenceStatus {
    #[pyo3(get)]
    requested: bool,
    #[pyo3(get)]
    available: bool,
    #[pyo3(get)]
    complete: bool,
}

impl From<EvidenceStatus> for MemoryEvidenceStatus {
    fn from(s: EvidenceStatus) -> Self {
        MemoryEvidenceStatus {
            requested: s.requested,
            available: s.available,
            complete: s.complete,
        }
    }
}

#[pymethods]
impl MemoryEvidenceStatus {
    #[new]
    #[pyo3(signature = (requested, available, complete))]
    fn new(requested: bool, available: bool, complete: bool) -> Self {
        MemoryEvidenceStatus {
            requested,
            available,
            complete,
        }
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("requested", self.requested)?;
        d.set_item("available", self.available)?;
        d.set_item("complete", self.complete)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let b = |v: bool| if v { "True" } else { "False" };
        format!(
            "MemoryEvidenceStatus(requested={}, available={}, complete={})",
            b(self.requested),
            b(self.available),
            b(self.complete)
        )
    }
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct MemoryAttributionStatus {
    #[pyo3(get)]
    stacks: MemoryEvidenceStatus,
    #[pyo3(get)]
    events: MemoryEvidenceStatus,
    #[pyo3(get)]
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

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("stacks", self.stacks.to_dict(py)?)?;
        d.set_item("events", self.events.to_dict(py)?)?;
        d.set_item("lifetimes", self.lifetimes.to_dict(py)?)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!(
            "MemoryAttributionStatus(stacks={}, events={}, lifetimes={})",
            self.stacks.__repr__(),
            self.events.__repr__(),
            self.lifetimes.__repr__()
        )
    }
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct AllocationStackCoverage {
    pub(crate) inner: att::StackCoverage,
}

#[pymethods]
impl AllocationStackCoverage {
    #[getter]
    fn device_index(&self) -> Option<i64> {
        self.inner.device_index
    }
    #[getter]
    fn pool_id(&self) -> Option<(i64, i64)> {
        self.inner.pool_id
    }
    #[getter]
    fn active_bytes(&self) -> i64 {
        self.inner.active_bytes
    }
    #[getter]
    fn attributed_bytes(&self) -> i64 {
        self.inner.attributed_bytes
    }
    #[getter]
    fn unattributed_bytes(&self) -> i64 {
        self.inner.unattributed_bytes
    }
    #[getter]
    fn active_blocks(&self) -> i64 {
        self.inner.active_blocks
    }
    #[getter]
    fn attributed_blocks(&self) -> i64 {
        self.inner.attributed_blocks
    }
    #[getter]
    fn coverage(&self) -> f64 {
        self.inner.coverage
    }
    #[getter]
    fn complete(&self) -> bool {
        self.inner.complete()
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &rep::coverage_json(&self.inner))
    }
    fn __repr__(&self) -> String {
        format!(
            "AllocationStackCoverage(coverage={:.4}, attributed_bytes={}, active_bytes={})",
            self.inner.coverage, self.inner.attributed_bytes, self.inner.active_bytes
        )
    }
}

/// Flat `to_row()` dict: every field, frames as canonical JSON.
pub(crate) fn row<'py>(py: Python<'py>, value: serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    let mut flat = serde_json::Map::new();
    if let serde_json::Value::Object(map) = value {
        for (k, v) in map {
            match (k.as_str(), v) {
                ("stack_frames", frames) => {
                    flat.insert("stack_frames_json".into(), frames.to_string().into());
                }
                (_, serde_json::Value::Object(inner)) => {
                    for (ik, iv) in inner {
                        flat.insert(format!("{k}_{ik}"), iv);
                    }
                }
                (_, v) => {
                    flat.insert(k, v);
                }
            }
        }
    }
    to_py(py, &serde_json::Value::Object(flat))
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct AllocationStackSummary {
    pub(crate) inner: att::StackSummary,
}

#[pymethods]
impl AllocationStackSummary {
    #[getter]
    fn stack_frames<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        frames_tuple(py, &self.inner.stack_frames)
    }
    #[getter]
    fn stack_key(&self) -> String {
        self.inner.stack_frames.key()
    }
    #[getter]
    fn stack_fingerprint(&self) -> String {
        self.inner.stack_frames.fingerprint()
    }
    #[getter]
    fn device_index(&self) -> i64 {
        self.inner.device_index
    }
    #[getter]
    fn pool_id(&self) -> (i64, i64) {
        self.inner.pool_id
    }
    #[getter]
    fn stream(&self) -> Option<i64> {
        self.inner.stream
    }
    #[getter]
    fn size_bytes(&self) -> i64 {
        self.inner.size_bytes
    }
    #[getter]
    fn requested_bytes(&self) -> i64 {
        self.inner.requested_bytes
    }
    #[getter]
    fn count(&self) -> i64 {
        self.inner.count
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &rep::summary_json(&self.inner))
    }
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        row(py, rep::summary_json(&self.inner))
    }
    fn __repr__(&self) -> String {
        format!(
            "AllocationStackSummary(device_index={}, pool_id={:?}, size_bytes={}, count={}, \
             stack_key={:?})",
            self.inner.device_index,
            self.inner.pool_id,
            self.inner.size_bytes,
            self.inner.count,
            self.inner.stack_frames.key()
        )
    }
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct AllocationStackDelta {
    pub(crate) inner: att::StackDelta,
}

#[pymethods]
impl AllocationStackDelta {
    #[getter]
    fn stack_frames<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        frames_tuple(py, &self.inner.stack_frames)
    }
    #[getter]
    fn stack_key(&self) -> String {
        self.inner.stack_frames.key()
    }
    #[getter]
    fn stack_fingerprint(&self) -> String {
        self.inner.stack_frames.fingerprint()
    }
    #[getter]
    fn reference_key(&self) -> SideKeyArg {
        self.inner.reference_key
    }
    #[getter]
    fn candidate_key(&self) -> SideKeyArg {
        self.inner.candidate_key
    }
    #[getter]
    fn stream(&self) -> Option<i64> {
        self.inner.stream
    }
    #[getter]
    fn reference_size_bytes(&self) -> i64 {
        self.inner.reference_size_bytes
    }
    #[getter]
    fn candidate_size_bytes(&self) -> i64 {
        self.inner.candidate_size_bytes
    }
    #[getter]
    fn delta_size_bytes(&self) -> i64 {
        self.inner.delta_size_bytes
    }
    #[getter]
    fn reference_requested_bytes(&self) -> i64 {
        self.inner.reference_requested_bytes
    }
    #[getter]
    fn candidate_requested_bytes(&self) -> i64 {
        self.inner.candidate_requested_bytes
    }
    #[getter]
    fn delta_requested_bytes(&self) -> i64 {
        self.inner.delta_requested_bytes
    }
    #[getter]
    fn reference_count(&self) -> i64 {
        self.inner.reference_count
    }
    #[getter]
    fn candidate_count(&self) -> i64 {
        self.inner.candidate_count
    }
    #[getter]
    fn delta_count(&self) -> i64 {
        self.inner.delta_count
    }
    #[getter]
    fn changed(&self) -> bool {
        self.inner.changed()
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &rep::delta_json(&self.inner))
    }
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        row(py, rep::delta_json(&self.inner))
    }
    fn __repr__(&self) -> String {
        format!(
            "AllocationStackDelta(reference_key={:?}, candidate_key={:?}, delta_size_bytes={}, \
             stack_key={:?})",
            self.inner.reference_key,
            self.inner.candidate_key,
            self.inner.delta_size_bytes,
            self.inner.stack_frames.key()
        )
    }
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct AllocatorEventSummary {
    pub(crate) inner: att::EventSummary,
}

#[pymethods]
impl AllocatorEventSummary {
    #[getter]
    fn stack_frames<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        frames_tuple(py, &self.inner.stack_frames)
    }
    #[getter]
    fn stack_key(&self) -> String {
        self.inner.stack_frames.key()
    }
    #[getter]
    fn stack_fingerprint(&self) -> String {
        self.inner.stack_frames.fingerprint()
    }
    #[getter]
    fn device_index(&self) -> i64 {
        self.inner.device_index
    }
    #[getter]
    fn pool_id(&self) -> Option<(i64, i64)> {
        self.inner.pool_id
    }
    #[getter]
    fn stream(&self) -> i64 {
        self.inner.stream
    }
    #[getter]
    fn action(&self) -> String {
        self.inner.action.clone()
    }
    #[getter]
    fn total_bytes(&self) -> i64 {
        self.inner.total_bytes
    }
    #[getter]
    fn count(&self) -> i64 {
        self.inner.count
    }
    #[getter]
    fn attribution_confidence(&self) -> &'static str {
        self.inner.attribution_confidence.as_str()
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &rep::event_json(&self.inner))
    }
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        row(py, rep::event_json(&self.inner))
    }
    fn __repr__(&self) -> String {
        format!(
            "AllocatorEventSummary(device_index={}, action={:?}, total_bytes={}, count={}, \
             attribution_confidence={:?})",
            self.inner.device_index,
            self.inner.action,
            self.inner.total_bytes,
            self.inner.count,
            self.inner.attribution_confidence.as_str()
        )
    }
}

pub(crate) fn display(limit: usize, stack_depth: usize) -> BindResult<Display> {
    if limit == 0 || stack_depth == 0 {
        return Err(BindingError::InvalidInput(format!(
            "limit and stack_depth must be >= 1, got limit={limit}, stack_depth={stack_depth}"
        )));
    }
    Ok(Display { stack_depth, limit })
}

/// The attribution of one comparison.
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryAttribution {
    pub(crate) inner: att::Attribution,
}

#[pymethods]
impl MemoryAttribution {
    #[getter]
    fn attribution_status(&self) -> MemoryAttributionStatus {
        let s = self.inner.status;
        MemoryAttributionStatus {
            stacks: s.stacks.into(),
            events: s.events.into(),
            lifetimes: s.lifetimes.into(),
        }
    }
    #[getter]
    fn reference_stack_coverage(&self) -> Option<AllocationStackCoverage> {
        self.inner
            .reference
            .stack_coverage
            .clone()
            .map(|inner| AllocationStackCoverage { inner })
    }
    #[getter]
    fn candidate_stack_coverage(&self) -> Option<AllocationStackCoverage> {
        self.inner
            .candidate
            .stack_coverage
            .clone()
            .map(|inner| AllocationStackCoverage { inner })
    }
    /// The cohort report of the compared range (lifetime requests on two points of one
    /// run whose history covers it).
    #[getter]
    fn allocation_lifetimes(&self) -> Option<MemoryAllocationLifetimeAnalysis> {
        self.inner
            .lifetimes
            .clone()
            .map(MemoryAllocationLifetimeAnalysis::new)
    }
    #[getter]
    fn stack_deltas(&self) -> Vec<AllocationStackDelta> {
        self.inner
            .stack_deltas
            .iter()
            .cloned()
            .map(|inner| AllocationStackDelta { inner })
            .collect()
    }
    #[getter]
    fn event_summaries(&self) -> Vec<AllocatorEventSummary> {
        self.inner
            .events
            .iter()
            .cloned()
            .map(|inner| AllocatorEventSummary { inner })
            .collect()
    }
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &rep::attribution_json(&self.inner))
    }
}
