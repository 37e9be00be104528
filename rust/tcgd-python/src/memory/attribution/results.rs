//! The attribution results as frozen Python classes: evidence statuses, stack coverage,
//! stack summaries and deltas, allocator-event summaries, and one comparison's attribution.

use tcgd_memory::attribution::{self as att, EvidenceStatus, StackFrames};
use tcgd_memory::report::attribution::{self as rep, Display};

use super::super::lifetimes::MemoryAllocationLifetimeAnalysis;

use crate::classes::{frozen_class, value_class};
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

value_class! {
    #[pyclass(from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct MemoryEvidenceStatus {
        requested: bool,
        available: bool,
        complete: bool,
    }
    eq;
    to_dict(Python);
    repr(all);
    {
        #[new]
        #[pyo3(signature = (requested, available, complete))]
        fn new(requested: bool, available: bool, complete: bool) -> Self {
            MemoryEvidenceStatus {
                requested,
                available,
                complete,
            }
        }
    }
}

impl From<EvidenceStatus> for MemoryEvidenceStatus {
    fn from(s: EvidenceStatus) -> Self {
        MemoryEvidenceStatus::new(s.requested, s.available, s.complete)
    }
}

value_class! {
    #[pyclass(from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct MemoryAttributionStatus {
        stacks: MemoryEvidenceStatus,
        events: MemoryEvidenceStatus,
        lifetimes: MemoryEvidenceStatus,
    }
    eq;
    to_dict(Python);
    repr(all);
    {
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
    }
}

frozen_class! {
    #[pyclass]
    pub struct AllocationStackCoverage(att::StackCoverage);
    |c, py| {
        device_index: Option<i64> => c.device_index;
        pool_id: Option<(i64, i64)> => c.pool_id;
        active_bytes: i64 => c.active_bytes;
        attributed_bytes: i64 => c.attributed_bytes;
        unattributed_bytes: i64 => c.unattributed_bytes;
        active_blocks: i64 => c.active_blocks;
        attributed_blocks: i64 => c.attributed_blocks;
        coverage: f64 => c.coverage;
        complete: bool => c.complete();
    }
    {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
            serde_to_py(py, &rep::coverage_json(&self.inner))
        }
        fn __repr__(&self) -> String {
            format!(
                "AllocationStackCoverage(coverage={:.4}, attributed_bytes={}, active_bytes={})",
                self.inner.coverage, self.inner.attributed_bytes, self.inner.active_bytes
            )
        }
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
    serde_to_py(py, &serde_json::Value::Object(flat))
}

/// A class over a row with an allocation stack: the stack's getters, then the row's own;
/// `to_dict()` is the row as the report's JSON holds it (`$json`), `to_row()` its flat
/// form.
macro_rules! stack_row {
    (
        $class:ident($inner:ty) as $json:path,
        |$v:ident, $py:ident| { $($getters:tt)* }
        $($options:tt)*
    ) => {
        frozen_class! {
            #[pyclass]
            pub struct $class($inner);
            |$v, $py| {
                stack_frames: PyResult<Bound<'py, PyTuple>> => frames_tuple($py, &$v.stack_frames);
                stack_key: String => $v.stack_frames.key();
                stack_fingerprint: String => $v.stack_frames.fingerprint();
                $($getters)*
            }
            $($options)*
            {
                fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                    serde_to_py(py, &$json(&self.inner))
                }
                fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                    row(py, $json(&self.inner))
                }
            }
        }
    };
}

stack_row! {
    AllocationStackSummary(att::StackSummary) as rep::summary_json,
    |s, py| {
        device_index: i64 => s.device_index;
        pool_id: (i64, i64) => s.pool_id;
        stream: Option<i64> => s.stream;
        size_bytes: i64 => s.size_bytes;
        requested_bytes: i64 => s.requested_bytes;
        count: i64 => s.count;
    }
    repr(device_index, pool_id, size_bytes, count, stack_key);
}

stack_row! {
    AllocationStackDelta(att::StackDelta) as rep::delta_json,
    |d, py| {
        reference_key: SideKeyArg => d.reference_key;
        candidate_key: SideKeyArg => d.candidate_key;
        stream: Option<i64> => d.stream;
        reference_size_bytes: i64 => d.reference_size_bytes;
        candidate_size_bytes: i64 => d.candidate_size_bytes;
        delta_size_bytes: i64 => d.delta_size_bytes;
        reference_requested_bytes: i64 => d.reference_requested_bytes;
        candidate_requested_bytes: i64 => d.candidate_requested_bytes;
        delta_requested_bytes: i64 => d.delta_requested_bytes;
        reference_count: i64 => d.reference_count;
        candidate_count: i64 => d.candidate_count;
        delta_count: i64 => d.delta_count;
        changed: bool => d.changed();
    }
    repr(reference_key, candidate_key, delta_size_bytes, stack_key);
}

stack_row! {
    AllocatorEventSummary(att::EventSummary) as rep::event_json,
    |e, py| {
        device_index: i64 => e.device_index;
        pool_id: Option<(i64, i64)> => e.pool_id;
        stream: i64 => e.stream;
        action: String => e.action.clone();
        total_bytes: i64 => e.total_bytes;
        count: i64 => e.count;
        attribution_confidence: &'static str => e.attribution_confidence.as_str();
    }
    repr(device_index, action, total_bytes, count, attribution_confidence);
}

pub(crate) fn display(limit: usize, stack_depth: usize) -> BindResult<Display> {
    if limit == 0 || stack_depth == 0 {
        return Err(BindingError::InvalidInput(format!(
            "limit and stack_depth must be >= 1, got limit={limit}, stack_depth={stack_depth}"
        )));
    }
    Ok(Display { stack_depth, limit })
}

frozen_class! {
    /// The attribution of one comparison.
    #[pyclass]
    pub struct MemoryAttribution(att::Attribution);
    |a, py| {
        attribution_status: MemoryAttributionStatus => MemoryAttributionStatus::new(
            a.status.stacks.into(),
            a.status.events.into(),
            a.status.lifetimes.into(),
        );
        reference_stack_coverage: Option<AllocationStackCoverage> =>
            a.reference.stack_coverage.clone().map(AllocationStackCoverage::from);
        candidate_stack_coverage: Option<AllocationStackCoverage> =>
            a.candidate.stack_coverage.clone().map(AllocationStackCoverage::from);
        /// The cohort report of the compared range (lifetime requests on two points of one
        /// run whose history covers it).
        allocation_lifetimes: Option<MemoryAllocationLifetimeAnalysis> =>
            a.lifetimes.clone().map(MemoryAllocationLifetimeAnalysis::new);
        stack_deltas: Vec<AllocationStackDelta> =>
            a.stack_deltas.iter().cloned().map(AllocationStackDelta::from).collect();
        event_summaries: Vec<AllocatorEventSummary> =>
            a.events.iter().cloned().map(AllocatorEventSummary::from).collect();
        warnings: Vec<String> => a.warnings.clone();
    }
    {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
            serde_to_py(py, &rep::attribution_json(&self.inner))
        }
    }
}
