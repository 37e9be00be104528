//! The Python side of the settings that are classes of the native module as they are
//! (the `python` feature): their attributes are their fields (`#[pyclass(get_all)]` where
//! they are declared); here are `to_dict()`, `repr`, and payloads and actions as their
//! names.

use pyo3::inspect::PyStaticExpr;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use tcgd_report::python::{attrs_dict, repr_of};

use crate::{Action, Decision, MemorySettings, Payload, RunSettings};

/// A payload is its name in Python (`"full"`, `"summary"`), as in the config file.
impl<'py> IntoPyObject<'py> for &Payload {
    type Target = PyString;
    type Output = Bound<'py, PyString>;
    type Error = std::convert::Infallible;
    const OUTPUT_TYPE: PyStaticExpr = <&str as IntoPyObject<'py>>::OUTPUT_TYPE;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(PyString::new(py, (*self).as_str()))
    }
}

/// An action is its name in Python (`"record"`, `"print"`).
impl<'py> IntoPyObject<'py> for &Action {
    type Target = PyString;
    type Output = Bound<'py, PyString>;
    type Error = std::convert::Infallible;
    const OUTPUT_TYPE: PyStaticExpr = <&str as IntoPyObject<'py>>::OUTPUT_TYPE;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(PyString::new(py, (*self).as_str()))
    }
}

/// The attributes of each class, in field order: what `to_dict()` holds.
const DECISION_ATTRIBUTES: [&str; 8] = [
    "node_name",
    "op",
    "module_path",
    "source_location",
    "selected",
    "rule",
    "actions",
    "reason",
];
const RUN_ATTRIBUTES: [&str; 8] = [
    "name",
    "dir",
    "payload",
    "history",
    "full_every",
    "trigger_nonfinite",
    "trigger_abs_max",
    "overwrite",
];
const MEMORY_ATTRIBUTES: [&str; 6] = ["dir", "name", "points", "every", "reset_peaks", "overwrite"];

#[pymethods]
impl Decision {
    /// Every attribute by name, in order.
    fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        attrs_dict(slf.as_any(), &DECISION_ATTRIBUTES)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(slf.as_any(), &["node_name", "op", "selected", "reason"])
    }
}

#[pymethods]
impl RunSettings {
    /// Every attribute by name, in order.
    fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        attrs_dict(slf.as_any(), &RUN_ATTRIBUTES)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(slf.as_any(), &RUN_ATTRIBUTES)
    }
}

#[pymethods]
impl MemorySettings {
    /// Every attribute by name, in order.
    fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        attrs_dict(slf.as_any(), &MEMORY_ATTRIBUTES)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(slf.as_any(), &MEMORY_ATTRIBUTES)
    }
}
