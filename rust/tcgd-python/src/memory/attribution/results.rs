//! One comparison's attribution as a frozen Python class. Its rows (stack coverage,
//! summaries and deltas, allocator-event summaries, evidence statuses) are the core types
//! of `tcgd_memory::attribution` themselves, classes of the native module as they are.

use tcgd_memory::attribution::{
    self as att, AttributionStatus, EventSummary, StackCoverage, StackDelta,
};
use tcgd_memory::report::attribution::{self as rep, Display};

use super::super::lifetimes::MemoryAllocationLifetimeAnalysis;

use crate::results::serde_to_py;

use super::super::*;

pub(crate) fn display(limit: i64, stack_depth: i64) -> BindResult<Display> {
    Display::new(stack_depth, limit).map_err(BindingError::InvalidInput)
}

/// Objects of rows, as a tuple.
fn row_objects<T>(py: Python<'_>, rows: &[T]) -> PyResult<Py<PyTuple>>
where
    T: Clone + Into<pyo3::PyClassInitializer<T>> + pyo3::PyClass,
{
    let objects = rows
        .iter()
        .map(|r| Bound::new(py, r.clone()))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyTuple::new(py, objects)?.unbind())
}

/// The attribution of one comparison.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryAttribution {
    #[pyo3(get)]
    attribution_status: Py<AttributionStatus>,
    #[pyo3(get)]
    reference_stack_coverage: Option<Py<StackCoverage>>,
    #[pyo3(get)]
    candidate_stack_coverage: Option<Py<StackCoverage>>,
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
        let coverage = |c: &Option<StackCoverage>| c.clone().map(|c| Py::new(py, c)).transpose();
        Ok(MemoryAttribution {
            attribution_status: Py::new(py, a.status)?,
            reference_stack_coverage: coverage(&a.reference.stack_coverage)?,
            candidate_stack_coverage: coverage(&a.candidate.stack_coverage)?,
            allocation_lifetimes: a
                .lifetimes
                .clone()
                .map(|l| Py::new(py, MemoryAllocationLifetimeAnalysis::new(l)))
                .transpose()?,
            stack_deltas: row_objects::<StackDelta>(py, &a.stack_deltas)?,
            event_summaries: row_objects::<EventSummary>(py, &a.events)?,
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
