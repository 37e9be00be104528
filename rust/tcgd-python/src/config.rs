//! `ProbeConfig`: probe config files, their `[run]` and `[memory]` settings (defaults
//! applied by tcgd-config) and node selection for the compile pass, as typed objects.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use tcgd_config::{select_nodes, Decision, MemorySettings, NodeFacts, RunSettings};

use crate::errors::{guard, BindResult, BindingError};
use crate::results::serde_to_py;

/// A validated probe config.
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct ProbeConfig {
    pub(crate) inner: tcgd_config::ProbeConfig,
}

impl From<tcgd_config::ProbeConfig> for ProbeConfig {
    fn from(inner: tcgd_config::ProbeConfig) -> Self {
        ProbeConfig { inner }
    }
}

#[pymethods]
impl ProbeConfig {
    /// blake3 of the config text and the package version.
    #[getter]
    fn digest(&self) -> String {
        self.inner.digest.clone()
    }
    #[getter]
    fn source_name(&self) -> String {
        self.inner.source_name.clone()
    }
    /// The `[run]` settings, every default applied.
    #[getter]
    fn run(&self) -> PyRunSettings {
        self.inner.run.clone().into()
    }
    /// The `[memory]` settings (`None` when the config has no `[memory]`).
    #[getter]
    fn memory(&self) -> Option<PyMemorySettings> {
        self.inner.memory.clone().map(PyMemorySettings::from)
    }

    /// Reads and validates a TOML config file.
    #[staticmethod]
    fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<ProbeConfig> {
        guard(py, || {
            let inner = tcgd_config::ProbeConfig::load(&path, env!("CARGO_PKG_VERSION"))?;
            Ok(ProbeConfig { inner })
        })
    }

    /// Validates config text; `name` stands for the file in error messages.
    #[staticmethod]
    fn parse(py: Python<'_>, text: &str, name: &str) -> PyResult<ProbeConfig> {
        guard(py, || {
            Ok(ProbeConfig {
                inner: parse(name, text)?,
            })
        })
    }

    /// Validates a config given as data (a dict with the file's structure), through
    /// the same TOML schema.
    #[staticmethod]
    fn from_dict(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<ProbeConfig> {
        guard(py, || {
            let table = toml_value(data).map_err(not_a_table)?;
            Ok(ProbeConfig {
                inner: from_table(&table)?,
            })
        })
    }

    /// `from_dict` of the JSON text of a dict.
    #[staticmethod]
    fn from_json(py: Python<'_>, json: &str) -> PyResult<ProbeConfig> {
        guard(py, || {
            let table: toml::Value = serde_json::from_str(json).map_err(not_a_table)?;
            Ok(ProbeConfig {
                inner: from_table(&table)?,
            })
        })
    }

    /// The `[run]` settings as JSON (the `run` object's fields).
    fn run_json(&self) -> BindResult<String> {
        json(&self.inner.run)
    }

    /// The `[memory]` settings as JSON (`null` when the config has none).
    fn memory_json(&self) -> BindResult<String> {
        json(&self.inner.memory)
    }

    /// Decides every candidate node of one graph, in graph order: one
    /// `ProbeDecision` per node's facts (a dict with every `NodeFacts` key).
    fn select(&self, nodes: Vec<NodeArgs>) -> Vec<PyProbeDecision> {
        let nodes: Vec<NodeFacts> = nodes.into_iter().map(NodeFacts::from).collect();
        select_nodes(&self.inner.select, &self.inner.exclude, &nodes)
            .into_iter()
            .map(PyProbeDecision::from)
            .collect()
    }
}

/// The `[run]` settings of a probe config.
#[pyclass(
    name = "ProbeRunSettings",
    module = "torch_cudagraph_debug._native",
    frozen
)]
pub struct PyRunSettings {
    pub(crate) inner: RunSettings,
}

impl From<RunSettings> for PyRunSettings {
    fn from(inner: RunSettings) -> Self {
        PyRunSettings { inner }
    }
}

#[pymethods]
impl PyRunSettings {
    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }
    #[getter]
    fn dir(&self) -> Option<String> {
        self.inner.dir.clone()
    }
    /// `"full"` or `"summary"`.
    #[getter]
    fn payload<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner.payload)
    }
    /// Calls whose full values each site keeps on the device (0: none).
    #[getter]
    fn history(&self) -> u32 {
        self.inner.history
    }
    /// With summary payloads, also full values every this many calls (0: never).
    #[getter]
    fn full_every(&self) -> u32 {
        self.inner.full_every
    }
    #[getter]
    fn trigger_nonfinite(&self) -> bool {
        self.inner.trigger_nonfinite
    }
    #[getter]
    fn trigger_abs_max(&self) -> Option<f64> {
        self.inner.trigger_abs_max
    }
    #[getter]
    fn overwrite(&self) -> bool {
        self.inner.overwrite
    }
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &[
                "name",
                "dir",
                "payload",
                "history",
                "full_every",
                "trigger_nonfinite",
                "trigger_abs_max",
                "overwrite",
            ],
        )
    }
}

/// The `[memory]` settings of a probe config: the memory points the compile plugin
/// records on its own.
#[pyclass(
    name = "ProbeMemorySettings",
    module = "torch_cudagraph_debug._native",
    frozen
)]
pub struct PyMemorySettings {
    pub(crate) inner: MemorySettings,
}

impl From<MemorySettings> for PyMemorySettings {
    fn from(inner: MemorySettings) -> Self {
        PyMemorySettings { inner }
    }
}

#[pymethods]
impl PyMemorySettings {
    #[getter]
    fn dir(&self) -> Option<String> {
        self.inner.dir.clone()
    }
    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }
    #[getter]
    fn points(&self) -> Vec<String> {
        self.inner.points.clone()
    }
    #[getter]
    fn every(&self) -> u32 {
        self.inner.every
    }
    #[getter]
    fn reset_peaks(&self) -> bool {
        self.inner.reset_peaks
    }
    #[getter]
    fn overwrite(&self) -> bool {
        self.inner.overwrite
    }
    /// Every attribute by name, in order.
    fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        crate::classes::attrs_dict(
            slf.as_any(),
            &["dir", "name", "points", "every", "reset_peaks", "overwrite"],
        )
    }
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &["dir", "name", "points", "every", "reset_peaks", "overwrite"],
        )
    }
}

/// What the selection decided for one candidate node, and why.
#[pyclass(
    name = "ProbeDecision",
    module = "torch_cudagraph_debug._native",
    frozen
)]
pub struct PyProbeDecision {
    pub(crate) inner: Decision,
}

impl From<Decision> for PyProbeDecision {
    fn from(inner: Decision) -> Self {
        PyProbeDecision { inner }
    }
}

#[pymethods]
impl PyProbeDecision {
    #[getter]
    fn node_name(&self) -> String {
        self.inner.node_name.clone()
    }
    #[getter]
    fn op(&self) -> String {
        self.inner.op.clone()
    }
    #[getter]
    fn module_path(&self) -> Option<String> {
        self.inner.module_path.clone()
    }
    #[getter]
    fn source_location(&self) -> Option<String> {
        self.inner.source_location.clone()
    }
    #[getter]
    fn selected(&self) -> bool {
        self.inner.selected
    }
    /// The index of the `[[select]]` rule that selected the node.
    #[getter]
    fn rule(&self) -> Option<usize> {
        self.inner.rule
    }
    /// `"record"` and/or `"print"`.
    #[getter]
    fn actions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner.actions)
    }
    #[getter]
    fn reason(&self) -> String {
        self.inner.reason.clone()
    }
    /// Every attribute by name, in order.
    fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        crate::classes::attrs_dict(
            slf.as_any(),
            &[
                "node_name",
                "op",
                "module_path",
                "source_location",
                "selected",
                "rule",
                "actions",
                "reason",
            ],
        )
    }
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(slf.as_any(), &["node_name", "op", "selected", "reason"])
    }
}

/// What the pass knows about one candidate node, as Python hands it over.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct NodeArgs {
    graph_kind: String,
    node_name: String,
    op: String,
    module_path: Option<String>,
    stack_trace: Option<String>,
    dtype: Option<String>,
    numel: Option<u64>,
    is_tensor: bool,
}

impl From<NodeArgs> for NodeFacts {
    fn from(n: NodeArgs) -> NodeFacts {
        NodeFacts {
            graph_kind: n.graph_kind,
            node_name: n.node_name,
            op: n.op,
            module_path: n.module_path,
            stack_trace: n.stack_trace,
            dtype: n.dtype,
            numel: n.numel,
            is_tensor: n.is_tensor,
        }
    }
}

fn parse(name: &str, text: &str) -> BindResult<tcgd_config::ProbeConfig> {
    Ok(tcgd_config::ProbeConfig::parse(
        name,
        text,
        env!("CARGO_PKG_VERSION"),
    )?)
}

/// A config given as data, checked as its TOML text would be (errors name `<dict>`).
fn from_table(table: &toml::Value) -> BindResult<tcgd_config::ProbeConfig> {
    parse("<dict>", &toml::to_string(table).map_err(not_a_table)?)
}

fn not_a_table(why: impl std::fmt::Display) -> BindingError {
    BindingError::Config(format!("<dict>: not a config table: {why}"))
}

/// Python data as a TOML value: dicts (with string keys) as tables, lists and tuples as
/// arrays, booleans, integers, floats and strings as themselves.
fn toml_value(value: &Bound<'_, PyAny>) -> Result<toml::Value, String> {
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut table = toml::Table::new();
        for (key, item) in dict.iter() {
            let key: String = key
                .extract()
                .map_err(|_| format!("the key {} is not a string", describe(&key)))?;
            table.insert(key, toml_value(&item)?);
        }
        return Ok(toml::Value::Table(table));
    }
    let items = if let Ok(list) = value.cast::<PyList>() {
        Some(list.iter().collect::<Vec<_>>())
    } else {
        value.cast::<PyTuple>().ok().map(|t| t.iter().collect())
    };
    if let Some(items) = items {
        let array = items.iter().map(toml_value).collect::<Result<_, _>>()?;
        return Ok(toml::Value::Array(array));
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(toml::Value::Boolean(b.is_true()));
    }
    if value.cast::<PyInt>().is_ok() {
        let int = value
            .extract::<i64>()
            .map_err(|_| format!("{} does not fit in 64 bits", describe(value)))?;
        return Ok(toml::Value::Integer(int));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        return Ok(toml::Value::Float(f.value()));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(toml::Value::String(
            s.to_str().map_err(|e| e.to_string())?.to_owned(),
        ));
    }
    Err(format!("{} is not a TOML value", describe(value)))
}

fn describe(value: &Bound<'_, PyAny>) -> String {
    value
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "a value".to_owned())
}

fn json<T: serde::Serialize>(value: &T) -> BindResult<String> {
    serde_json::to_string(value).map_err(|e| BindingError::Internal(e.to_string()))
}

/// Checks a run name given in code (`run_name=`) by the rule `[run] name` follows: one
/// safe directory name under the run directory.
#[pyfunction]
pub fn check_run_name(name: &str) -> Result<(), BindingError> {
    tcgd_config::check_run_name(name)
        .map_err(|why| BindingError::InvalidInput(format!("run name {why}")))
}
