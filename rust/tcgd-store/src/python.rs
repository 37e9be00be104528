//! The store's types that are classes of the native module as they are (the `python`
//! feature): a run's header crosses typed, its provenance and metadata as Python values;
//! a site is `TensorSite` (recorded) or `ObservationSite` (compared), its columns the
//! attributes.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use tcgd_report::python::{attrs_dict, json_to_python, python_to_json, repr_of, to_python};

use crate::{RunHeader, RunKind, Site, SiteLocation};

pyo3::import_exception!(torch_cudagraph_debug.errors, InvalidInputError);

/// A header's JSON object as a dict; an empty one for anything else (a manifest written
/// without it).
fn json_object_to_python<'py>(
    py: Python<'py>,
    value: &serde_json::Value,
) -> PyResult<Bound<'py, PyAny>> {
    match value {
        serde_json::Value::Object(_) => json_to_python(py, value),
        _ => Ok(PyDict::new(py).into_any()),
    }
}

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
    /// Package, Python, platform, torch and CUDA versions of the recording process, as a
    /// dict (absent: empty).
    #[getter]
    fn provenance<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_object_to_python(py, &self.provenance)
    }
    /// The application's own metadata for the run, as a dict (absent: empty).
    #[getter]
    fn run_metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_object_to_python(py, &self.run_metadata)
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

#[pymethods]
impl Site {
    /// Every site column, by position or keyword (`None` where unknown); only
    /// `materialized_by_probe` may be left out.
    #[new]
    #[pyo3(signature = (
        site_id, graph_kind, node_name, aten_op, module_path, source_location, compile_id,
        materialized_by_probe = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        site_id: Option<String>,
        graph_kind: Option<String>,
        node_name: Option<String>,
        aten_op: Option<String>,
        module_path: Option<String>,
        source_location: Option<String>,
        compile_id: Option<String>,
        materialized_by_probe: Option<bool>,
    ) -> Site {
        // Every field named: a site column added to the list fails to compile here until
        // the constructor takes it too.
        Site {
            site_id,
            graph_kind,
            node_name,
            aten_op,
            module_path,
            source_location,
            compile_id,
            materialized_by_probe,
        }
    }

    /// The sites of one probe group as JSON text: the form the probe op carries in the
    /// graph (an op argument is a plain string).
    #[staticmethod]
    #[pyo3(name = "encode_group")]
    fn py_encode_group(sites: Vec<Site>) -> PyResult<String> {
        Site::encode_group(&sites).map_err(|e| InvalidInputError::new_err(e.to_string()))
    }

    /// The sites `encode_group` wrote, in order.
    #[staticmethod]
    #[pyo3(name = "decode_group")]
    fn py_decode_group(text: &str) -> PyResult<Vec<Site>> {
        Site::decode_group(text).map_err(|e| InvalidInputError::new_err(e.to_string()))
    }

    /// Every attribute by name, in order.
    fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        attrs_dict(slf.as_any(), &Site::ATTRIBUTES)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(slf.as_any(), &Site::ATTRIBUTES)
    }

    /// Pickles (and copies) as the class called with its attributes, in order.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let values = Site::ATTRIBUTES
            .iter()
            .map(|name| slf.getattr(*name))
            .collect::<PyResult<Vec<_>>>()?;
        (slf.get_type(), PyTuple::new(slf.py(), values)?).into_pyobject(slf.py())
    }
}

#[pymethods]
impl SiteLocation {
    /// The value as its JSON report holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }

    fn __repr__(&self) -> String {
        format!("ObservationSite({})", self.describe().unwrap_or_default())
    }
}
