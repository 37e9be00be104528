//! `ProbeConfig`: probe config files and node selection for the compile pass.

use pyo3::prelude::*;
use tcgd_config::{select_nodes, NodeFacts};

use crate::errors::{guard, BindingError};

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct ProbeConfig {
    inner: tcgd_config::ProbeConfig,
}

#[pymethods]
impl ProbeConfig {
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
            let inner = tcgd_config::ProbeConfig::parse(name, text, env!("CARGO_PKG_VERSION"))?;
            Ok(ProbeConfig { inner })
        })
    }

    /// Validates a config given as data (the JSON text of a dict), through the same TOML
    /// schema.
    #[staticmethod]
    fn from_json(py: Python<'_>, json: &str) -> PyResult<ProbeConfig> {
        guard(py, || {
            let value: toml::Value = serde_json::from_str(json)
                .map_err(|e| BindingError::Config(format!("<dict>: not a config table: {e}")))?;
            let text = toml::to_string(&value)
                .map_err(|e| BindingError::Config(format!("<dict>: not a config table: {e}")))?;
            let inner =
                tcgd_config::ProbeConfig::parse("<dict>", &text, env!("CARGO_PKG_VERSION"))?;
            Ok(ProbeConfig { inner })
        })
    }

    /// blake3 of the config text and the package version.
    #[getter]
    fn digest(&self) -> String {
        self.inner.digest.clone()
    }

    #[getter]
    fn source_name(&self) -> String {
        self.inner.source_name.clone()
    }

    /// The `[run]` settings as JSON.
    fn run_json(&self) -> Result<String, BindingError> {
        serde_json::to_string(&self.inner.run).map_err(|e| BindingError::Internal(e.to_string()))
    }

    /// The `[memory]` settings as JSON (`null` when the config has none).
    fn memory_json(&self) -> Result<String, BindingError> {
        serde_json::to_string(&self.inner.memory).map_err(|e| BindingError::Internal(e.to_string()))
    }

    /// Decides every candidate node of one graph: JSON list of node facts in, JSON list
    /// of decisions out (graph order).
    fn select(&self, py: Python<'_>, nodes_json: &str) -> PyResult<String> {
        guard(py, || {
            let nodes: Vec<NodeFacts> = serde_json::from_str(nodes_json)
                .map_err(|e| BindingError::InvalidInput(format!("node facts: {e}")))?;
            let decisions = select_nodes(&self.inner.select, &self.inner.exclude, &nodes);
            serde_json::to_string(&decisions).map_err(|e| BindingError::Internal(e.to_string()))
        })
    }
}

/// Checks a run name given in code (`run_name=`) by the rule `[run] name` follows: one
/// safe directory name under the run directory.
#[pyfunction]
pub fn check_run_name(name: &str) -> Result<(), BindingError> {
    tcgd_config::check_run_name(name)
        .map_err(|why| BindingError::InvalidInput(format!("run name {why}")))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_to_module!(m, [ProbeConfig], [check_run_name])
}
