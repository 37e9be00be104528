//! The store's types that are classes of the native module as they are (the `python`
//! feature): a run's header crosses typed, its provenance and metadata as Python values.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tcgd_report::python::{json_to_python, python_to_json};

use crate::{RunHeader, RunKind};

pyo3::import_exception!(torch_cudagraph_debug.errors, InvalidInputError);

#[pymethods]
impl RunHeader {
    /// What a run is created with. `kind` is `tensor` or `memory`; `provenance` (the
    /// producer's facts) and `run_metadata` (the user's) are dicts of JSON values.
    #[new]
    #[pyo3(signature = (
        run_id, name, kind, execution, *, rank=None, group_id=None, world_size=None,
        provenance=None, run_metadata=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        run_id: String,
        name: String,
        kind: &str,
        execution: String,
        rank: Option<i64>,
        group_id: Option<String>,
        world_size: Option<i64>,
        provenance: Option<&Bound<'_, PyDict>>,
        run_metadata: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<RunHeader> {
        let kind = RunKind::from_name(kind).ok_or_else(|| {
            InvalidInputError::new_err(format!("kind must be tensor or memory, got {kind:?}"))
        })?;
        let object = |value: Option<&Bound<'_, PyDict>>, what: &str| match value {
            Some(d) => python_to_json(d.as_any(), what),
            None => Ok(serde_json::json!({})),
        };
        Ok(RunHeader {
            run_id,
            name,
            kind,
            execution,
            rank,
            group_id,
            world_size,
            provenance: object(provenance, "provenance")?,
            run_metadata: object(run_metadata, "run_metadata")?,
        })
    }

    #[getter]
    fn run_id(&self) -> &str {
        &self.run_id
    }
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }
    /// `tensor` or `memory`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind.as_str()
    }
    #[getter]
    fn execution(&self) -> &str {
        &self.execution
    }
    #[getter]
    fn rank(&self) -> Option<i64> {
        self.rank
    }
    #[getter]
    fn group_id(&self) -> Option<&str> {
        self.group_id.as_deref()
    }
    #[getter]
    fn world_size(&self) -> Option<i64> {
        self.world_size
    }
    #[getter]
    fn provenance<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_python(py, &self.provenance)
    }
    #[getter]
    fn run_metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_python(py, &self.run_metadata)
    }
    fn __repr__(&self) -> String {
        format!(
            "RunHeader(run_id={:?}, name={:?}, kind={:?}, execution={:?})",
            self.run_id,
            self.name,
            self.kind.as_str(),
            self.execution
        )
    }
}
