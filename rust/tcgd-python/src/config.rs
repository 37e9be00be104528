//! `ProbeConfig`: probe config files, their `[run]` and `[memory]` settings (defaults
//! applied by tcgd-config) and node selection for the compile pass, as typed objects.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use tcgd_config::{select_nodes, Decision, MemorySettings, NodeFacts, RunSettings};

use crate::errors::{guard, BindResult, BindingError};

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
    fn run(&self) -> RunSettings {
        self.inner.run.clone()
    }
    /// The `[memory]` settings (`None` when the config has no `[memory]`).
    #[getter]
    fn memory(&self) -> Option<MemorySettings> {
        self.inner.memory.clone()
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
    fn select(&self, nodes: Vec<NodeFacts>) -> Vec<Decision> {
        select_nodes(&self.inner.select, &self.inner.exclude, &nodes)
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
