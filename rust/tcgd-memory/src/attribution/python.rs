//! The Python methods of the attribution rows that are classes of the native module as
//! they are (the `python` feature): their attributes are their fields (`#[pyclass(get_all)]`
//! where they are declared); here are the constructors, what is derived from the fields
//! (stack keys, the facade's pool key), the reference's other names, `to_dict()` (the row
//! as `report.json` holds it), `to_row()` (its CSV line) and `repr`.

use pyo3::inspect::PyStaticExpr;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};
use tcgd_report::python::{attrs_dict, cells_to_python, repr_of, to_python};

use super::{
    AttributionStatus, EventSummary, EvidenceStatus, PoolConfidence, StackCoverage, StackDelta,
    StackFrames, StackSummary,
};
use crate::model::PoolId;
use crate::report::attribution::{self as rep, Titles};

pyo3::import_exception!(torch_cudagraph_debug.errors, InvalidInputError);

/// A stack is a tuple of one dict per frame (`filename`, `line`, `name`, the FX fields
/// when present), innermost first: the frames as `report.json` holds them.
impl<'py> IntoPyObject<'py> for &StackFrames {
    type Target = PyTuple;
    type Output = Bound<'py, PyTuple>;
    type Error = PyErr;
    const OUTPUT_TYPE: PyStaticExpr = PyStaticExpr::Name { id: "tuple" };

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let frames = self
            .0
            .iter()
            .map(|frame| to_python(py, frame))
            .collect::<PyResult<Vec<_>>>()?;
        PyTuple::new(py, frames)
    }
}

/// A confidence is its name in Python (`reported`, `matched`, ...), as in the reports.
impl<'py> IntoPyObject<'py> for &PoolConfidence {
    type Target = PyString;
    type Output = Bound<'py, PyString>;
    type Error = std::convert::Infallible;
    const OUTPUT_TYPE: PyStaticExpr = <&str as IntoPyObject<'py>>::OUTPUT_TYPE;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(PyString::new(py, self.as_str()))
    }
}

/// The first `depth` frames of `frames` as reports show stacks; every frame for `None`.
fn display_stack(frames: &StackFrames, depth: Option<i64>) -> PyResult<String> {
    let depth = crate::frames::display_depth(depth).map_err(InvalidInputError::new_err)?;
    Ok(frames.key_at_depth(depth))
}

/// `MemoryPoolKey(device_index, pool_id)` of the facade.
fn pool_key(py: Python<'_>, device_index: i64, pool_id: PoolId) -> PyResult<Py<PyAny>> {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let class = CLASS.import(
        py,
        "torch_cudagraph_debug.memory_debug._model",
        "MemoryPoolKey",
    )?;
    Ok(class.call1((device_index, pool_id))?.unbind())
}

/// `(reference, candidate)` titles when both are given.
fn titles<'a>(
    reference: &'a Option<String>,
    candidate: &'a Option<String>,
) -> PyResult<Titles<'a>> {
    match (reference, candidate) {
        (Some(r), Some(c)) => Ok(Some((r.as_str(), c.as_str()))),
        (None, None) => Ok(None),
        _ => Err(InvalidInputError::new_err(
            "reference_label and candidate_label go together: give both or neither",
        )),
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

#[pymethods]
impl EvidenceStatus {
    #[new]
    #[pyo3(signature = (requested, available, complete))]
    fn py_new(requested: bool, available: bool, complete: bool) -> Self {
        EvidenceStatus {
            requested,
            available,
            complete,
        }
    }

    /// The status of an analysis nobody asked for: nothing requested, so nothing
    /// available or complete.
    #[staticmethod]
    fn not_requested() -> Self {
        EvidenceStatus::default()
    }

    /// `{"requested", "available", "complete"}`.
    // A Python method takes its object by reference, `Copy` or not.
    #[allow(clippy::wrong_self_convention)]
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
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

#[pymethods]
impl AttributionStatus {
    #[new]
    #[pyo3(signature = (stacks, events, lifetimes))]
    fn py_new(stacks: EvidenceStatus, events: EvidenceStatus, lifetimes: EvidenceStatus) -> Self {
        AttributionStatus {
            stacks,
            events,
            lifetimes,
        }
    }

    /// `{"stacks", "events", "lifetimes"}`, each as its status's `to_dict()`.
    fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        attrs_dict(slf.as_any(), &["stacks", "events", "lifetimes"])
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(slf.as_any(), &["stacks", "events", "lifetimes"])
    }
}

#[pymethods]
impl StackCoverage {
    /// Every active block has frames.
    #[getter(complete)]
    fn py_complete(&self) -> bool {
        self.complete()
    }

    /// The reference's name of `coverage`.
    #[getter]
    fn ratio(&self) -> f64 {
        self.coverage
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &rep::coverage_json(self))
    }

    /// The coverage as one flat row (the pool as `a,b`).
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        cells_to_python(py, rep::coverage_row(self))
    }

    fn __repr__(&self) -> String {
        format!(
            "AllocationStackCoverage(coverage={:.4}, attributed_bytes={}, active_bytes={})",
            self.coverage, self.attributed_bytes, self.active_bytes
        )
    }
}

#[pymethods]
impl StackSummary {
    /// Locations only (`file:line:function <- ...`); `<unattributed>` without frames.
    #[getter]
    fn stack_key(&self) -> String {
        self.stack_frames.key()
    }

    /// Fingerprint of the complete stack, every frame field included.
    #[getter]
    fn stack_fingerprint(&self) -> String {
        self.stack_frames.fingerprint()
    }

    /// The pool of `device_index` and `pool_id`, as the facade keys pools.
    #[getter(pool_key)]
    fn py_pool_key(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        pool_key(py, self.device_index, self.pool_id)
    }

    /// The first `depth` frames as reports show stacks; every frame for `None`.
    #[pyo3(signature = (depth=None))]
    fn display_stack(&self, depth: Option<i64>) -> PyResult<String> {
        display_stack(&self.stack_frames, depth)
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &rep::summary_json(self))
    }

    /// The row flat, in the columns of the other stack rows' CSV files.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        cells_to_python(py, rep::summary_row(self))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let shown = [
            "device_index",
            "pool_id",
            "size_bytes",
            "count",
            "stack_key",
        ];
        repr_of(slf.as_any(), &shown)
    }
}

#[pymethods]
impl StackDelta {
    /// Locations only (`file:line:function <- ...`); `<unattributed>` without frames.
    #[getter]
    fn stack_key(&self) -> String {
        self.stack_frames.key()
    }

    /// Fingerprint of the complete stack, every frame field included.
    #[getter]
    fn stack_fingerprint(&self) -> String {
        self.stack_frames.fingerprint()
    }

    /// Bytes, requested bytes or count changed.
    #[getter(changed)]
    fn py_changed(&self) -> bool {
        self.changed()
    }

    /// The reference's name of `changed`.
    #[getter]
    fn has_changes(&self) -> bool {
        self.changed()
    }

    /// The first `depth` frames as reports show stacks; every frame for `None`.
    #[pyo3(signature = (depth=None))]
    fn display_stack(&self, depth: Option<i64>) -> PyResult<String> {
        display_stack(&self.stack_frames, depth)
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &rep::delta_json(self))
    }

    /// The row as `allocation_stack_comparisons.csv` holds it, without the endpoints'
    /// titles.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        cells_to_python(py, rep::delta_row(self, None))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let shown = [
            "reference_key",
            "candidate_key",
            "delta_size_bytes",
            "stack_key",
        ];
        repr_of(slf.as_any(), &shown)
    }
}

#[pymethods]
impl EventSummary {
    /// Locations only (`file:line:function <- ...`); `<unattributed>` without frames.
    #[getter]
    fn stack_key(&self) -> String {
        self.stack_frames.key()
    }

    /// Fingerprint of the complete stack, every frame field included.
    #[getter]
    fn stack_fingerprint(&self) -> String {
        self.stack_frames.fingerprint()
    }

    /// `pool[a,b]`, `pool[n/a]` for an `oom` event, `pool[unknown]` when not found.
    #[getter(pool_label)]
    fn py_pool_label(&self) -> String {
        self.pool_label()
    }

    /// The reference's name of `total_bytes`.
    #[getter]
    fn size_bytes(&self) -> i64 {
        self.total_bytes
    }

    /// The first `depth` frames as reports show stacks; every frame for `None`.
    #[pyo3(signature = (depth=None))]
    fn display_stack(&self, depth: Option<i64>) -> PyResult<String> {
        display_stack(&self.stack_frames, depth)
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
        let titles = titles(&reference_label, &candidate_label)?;
        to_python(py, &rep::event_row_json(self, titles))
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
        let titles = titles(&reference_label, &candidate_label)?;
        cells_to_python(py, rep::event_row(self, titles))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let shown = [
            "device_index",
            "action",
            "total_bytes",
            "count",
            "attribution_confidence",
        ];
        repr_of(slf.as_any(), &shown)
    }
}
