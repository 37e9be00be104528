//! Stack and event attribution as frozen Python classes: evidence statuses, stack
//! coverage, stack summaries and deltas, allocator-event summaries, and the attribution
//! of one comparison with its report sections.

use tcgd_memory::attribution::events::{self as ev, PointWindow};
use tcgd_memory::attribution::{
    self as att, AttributionRequest, BlockFilter, EvidenceStatus, StackFrames,
};
use tcgd_memory::lifetimes as lt;
use tcgd_memory::report::attribution::{self as rep, Display};

use super::lifetimes::MemoryAllocationLifetimeAnalysis;

use super::*;

fn frames_tuple<'py>(py: Python<'py>, frames: &StackFrames) -> PyResult<Bound<'py, PyTuple>> {
    let items = frames
        .0
        .iter()
        .map(|f| {
            let d = PyDict::new(py);
            d.set_item("filename", &f.filename)?;
            d.set_item("line", f.line)?;
            d.set_item("name", &f.name)?;
            Ok(d)
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, items)
}

/// A JSON value (from the report layer) as Python objects.
fn to_py<'py>(py: Python<'py>, value: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    let json = py.import("json")?;
    json.call_method1("loads", (value.to_string(),))
}

/// `(device, (a, b))` of one side of a stack delta.
type SideKeyArg = Option<(i64, (i64, i64))>;

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
    inner: att::StackCoverage,
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
fn row<'py>(py: Python<'py>, value: serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
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
    inner: att::StackSummary,
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
    inner: att::StackDelta,
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
    inner: att::EventSummary,
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

fn display(limit: usize, stack_depth: usize) -> BindResult<Display> {
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
    inner: att::Attribution,
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
            .reference_stack_coverage
            .clone()
            .map(|inner| AllocationStackCoverage { inner })
    }
    #[getter]
    fn candidate_stack_coverage(&self) -> Option<AllocationStackCoverage> {
        self.inner
            .candidate_stack_coverage
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

/// Renders attributions (one per comparison, in order) as one report section: `text`,
/// `html` (a fragment), `json` (a list), or the CSV files by name.
#[pyfunction]
#[pyo3(signature = (items, format, include_unchanged=true, limit=20, stack_depth=2))]
pub(super) fn render_attributions(
    py: Python<'_>,
    items: Vec<PyRef<'_, MemoryAttribution>>,
    format: &str,
    include_unchanged: bool,
    limit: usize,
    stack_depth: usize,
) -> PyResult<String> {
    guard(py, || {
        let d = display(limit, stack_depth)?;
        let refs: Vec<&att::Attribution> = items.iter().map(|a| &a.inner).collect();
        Ok(match format {
            "text" => refs
                .iter()
                .map(|a| rep::attribution_text(a, d, include_unchanged))
                .collect::<Vec<_>>()
                .join(""),
            "html" => refs
                .iter()
                .map(|a| rep::attribution_html(a, d, include_unchanged))
                .collect::<Vec<_>>()
                .join(""),
            "json" => {
                serde_json::Value::Array(refs.iter().map(|a| rep::attribution_json(a)).collect())
                    .to_string()
            }
            "allocation_stack_comparisons.csv" => rep::stack_deltas_csv(&refs, include_unchanged),
            "events.csv" => rep::events_csv(&refs),
            other => {
                return Err(BindingError::InvalidInput(format!(
                    "unknown attribution format '{other}'; use text, html, json, \
                     allocation_stack_comparisons.csv or events.csv"
                )))
            }
        })
    })
}

/// Attributes a comparison. Events read the windows of the points after `reference` up
/// to `candidate`: from `reader` for run points, else from `interval` (the probe's
/// snapshots in that range, in order).
#[pyfunction]
#[pyo3(signature = (reference, candidate, comparison, *, stacks, events, lifetimes, reader=None, interval=None))]
#[allow(clippy::too_many_arguments)]
pub(super) fn memory_attribution(
    py: Python<'_>,
    reference: &MemoryState,
    candidate: &MemoryState,
    comparison: &MemoryComparison,
    stacks: bool,
    events: bool,
    lifetimes: bool,
    reader: Option<PyRef<'_, MemoryRunReader>>,
    interval: Option<Vec<PyRef<'_, MemoryState>>>,
) -> PyResult<MemoryAttribution> {
    guard(py, || {
        let request = AttributionRequest {
            stacks,
            events,
            lifetimes,
        };
        let (r, c) = (&reference.inner, &candidate.inner);
        let cmp = &comparison.inner;
        att::check_request(cmp.relation, &request)?;
        // Points of the interval, each with its stored events.
        let mut owned: Vec<(Arc<RustState>, Vec<Event>)> = Vec::new();
        if events && c.identity.index > r.identity.index {
            match (&reader, &interval) {
                (Some(reader), _) => {
                    for index in r.identity.index + 1..=c.identity.index {
                        let state = reader
                            .inner
                            .states()
                            .iter()
                            .find(|s| s.identity.index == index)
                            .cloned()
                            .ok_or_else(|| {
                                MemoryError::HistoryTruncated(format!(
                                    "event attribution '{}' -> '{}': point {index} of the \
                                     interval is not in the run (damaged and skipped), so its \
                                     history window is missing",
                                    r.identity.title(),
                                    c.identity.title()
                                ))
                            })?;
                        let run = &reader.inner;
                        let stored = py.detach(|| run.events(index))?;
                        owned.push((state, stored));
                    }
                }
                (None, Some(states)) => {
                    let mut expected = r.identity.index + 1;
                    for s in states {
                        if s.inner.identity.index != expected {
                            return Err(MemoryError::HistoryTruncated(format!(
                                "event attribution '{}' -> '{}': snapshot {expected} of the \
                                 interval is missing, so its history window is unknown",
                                r.identity.title(),
                                c.identity.title()
                            ))
                            .into());
                        }
                        expected += 1;
                        owned.push((s.inner.clone(), s.inner.events.clone()));
                    }
                    if expected != c.identity.index + 1 {
                        return Err(MemoryError::HistoryTruncated(format!(
                            "event attribution '{}' -> '{}': the interval's snapshots end at \
                             {}, not at the candidate",
                            r.identity.title(),
                            c.identity.title(),
                            expected - 1
                        ))
                        .into());
                    }
                }
                (None, None) => {
                    return Err(BindingError::InvalidInput(
                        "event attribution needs the run reader or the interval's snapshots".into(),
                    ))
                }
            }
        }
        let windows: Vec<PointWindow<'_>> = owned
            .iter()
            .map(|(s, e)| PointWindow {
                label: &s.identity.label,
                index: s.identity.index,
                events: e,
                windows: &s.windows,
            })
            .collect();
        let mut inner = att::attribute(r, c, cmp, &request, Some(&windows))?;
        // Lifetimes replay the run's stored history over the compared range.
        if let (true, Some(reader)) = (lifetimes, &reader) {
            let (a, b) = (r.identity.index, c.identity.index);
            if a != b {
                let run = &reader.inner;
                let found = py.detach(|| lt::range_lifetimes(run, a.min(b), a.max(b)));
                att::attach_lifetimes(&mut inner, found)?;
            }
        }
        Ok(MemoryAttribution { inner })
    })
}

fn filter(device: Option<i64>, pool: Option<(i64, i64)>, stream: Option<i64>) -> BlockFilter {
    BlockFilter {
        device,
        pool,
        stream,
    }
}

#[pyfunction]
#[pyo3(signature = (state, *, device=None, pool=None))]
pub(super) fn allocation_stack_coverage(
    py: Python<'_>,
    state: &MemoryState,
    device: Option<i64>,
    pool: Option<(i64, i64)>,
) -> PyResult<AllocationStackCoverage> {
    guard(py, || {
        let inner = att::stacks::coverage(&state.inner, filter(device, pool, None))?;
        Ok(AllocationStackCoverage { inner })
    })
}

#[pyfunction]
#[pyo3(signature = (state, *, device=None, pool=None, stream=None, by_stream=false))]
pub(super) fn summarize_allocation_stacks(
    py: Python<'_>,
    state: &MemoryState,
    device: Option<i64>,
    pool: Option<(i64, i64)>,
    stream: Option<i64>,
    by_stream: bool,
) -> PyResult<Vec<AllocationStackSummary>> {
    guard(py, || {
        let rows = att::stacks::summarize(&state.inner, filter(device, pool, stream), by_stream)?;
        Ok(rows
            .into_iter()
            .map(|inner| AllocationStackSummary { inner })
            .collect())
    })
}

/// Stack deltas between two states whose pools pair by id (`device`/`pool` restrict the
/// pairs).
#[pyfunction]
#[pyo3(signature = (reference, candidate, *, device=None, pool=None, stream=None, by_stream=false, include_unchanged=false))]
#[allow(clippy::too_many_arguments)]
pub(super) fn compare_allocation_stacks(
    py: Python<'_>,
    reference: &MemoryState,
    candidate: &MemoryState,
    device: Option<i64>,
    pool: Option<(i64, i64)>,
    stream: Option<i64>,
    by_stream: bool,
    include_unchanged: bool,
) -> PyResult<Vec<AllocationStackDelta>> {
    guard(py, || {
        let keep = |k: &Option<(i64, (i64, i64))>| {
            k.is_none_or(|(d, p)| device.is_none_or(|x| x == d) && pool.is_none_or(|x| x == p))
        };
        let pairs: Vec<_> = att::stacks::identity_pairs(&reference.inner, &candidate.inner)
            .into_iter()
            .filter(|(r, c)| keep(r) && keep(c))
            .collect();
        let rows = att::stacks::compare_stacks(
            &reference.inner,
            &candidate.inner,
            &pairs,
            stream,
            by_stream,
            include_unchanged,
        )?;
        Ok(rows
            .into_iter()
            .map(|inner| AllocationStackDelta { inner })
            .collect())
    })
}

/// Event rows of the entries `events_of` stored, pools looked up in the segments of
/// `reference` and `candidate`.
#[pyfunction]
pub(super) fn summarize_state_events(
    py: Python<'_>,
    events_of: &MemoryState,
    reference: &MemoryState,
    candidate: &MemoryState,
) -> PyResult<Vec<AllocatorEventSummary>> {
    guard(py, || {
        let ranges = ev::segment_ranges(&[&reference.inner, &candidate.inner]);
        let rows = ev::summarize_events(&events_of.inner.events, &events_of.inner.stacks, &ranges);
        Ok(rows
            .into_iter()
            .map(|inner| AllocatorEventSummary { inner })
            .collect())
    })
}

/// `(start, end, status)` of the window between the last `start_marker` and the last
/// `end_marker` (the end of the list when `None`).
#[pyfunction]
#[pyo3(signature = (metadata, start_marker, end_marker=None))]
pub(super) fn event_window(
    metadata: Vec<Option<String>>,
    start_marker: &str,
    end_marker: Option<&str>,
) -> (usize, usize, &'static str) {
    let refs: Vec<Option<&str>> = metadata.iter().map(|m| m.as_deref()).collect();
    let (start, end, status) = ev::event_window(&refs, start_marker, end_marker);
    (start, end, status.as_str())
}

pub(super) fn register_attribution(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MemoryEvidenceStatus>()?;
    m.add_class::<MemoryAttributionStatus>()?;
    m.add_class::<AllocationStackCoverage>()?;
    m.add_class::<AllocationStackSummary>()?;
    m.add_class::<AllocationStackDelta>()?;
    m.add_class::<AllocatorEventSummary>()?;
    m.add_class::<MemoryAttribution>()?;
    m.add_function(wrap_pyfunction!(memory_attribution, m)?)?;
    m.add_function(wrap_pyfunction!(render_attributions, m)?)?;
    m.add_function(wrap_pyfunction!(allocation_stack_coverage, m)?)?;
    m.add_function(wrap_pyfunction!(summarize_allocation_stacks, m)?)?;
    m.add_function(wrap_pyfunction!(compare_allocation_stacks, m)?)?;
    m.add_function(wrap_pyfunction!(summarize_state_events, m)?)?;
    m.add_function(wrap_pyfunction!(event_window, m)?)?;
    Ok(())
}
