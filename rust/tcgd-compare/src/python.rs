//! The Python methods of the result types that are classes of the native module (the
//! `python` feature): their attributes are their fields (`#[pyclass(get_all)]` where they
//! are declared); here are what is not a field, `to_dict()` (the value as report.json
//! holds it) and `repr`.

use pyo3::inspect::PyStaticExpr;
use pyo3::prelude::*;
use pyo3::types::PyString;
use tcgd_report::python::{repr_of, to_python};

use crate::{Counts, Divergence, PointRef, SeriesPoint, Status, Subject};

/// A status is its name in Python (`match`, `mismatch`, `inconclusive`), as in the reports.
impl<'py> IntoPyObject<'py> for &Status {
    type Target = PyString;
    type Output = Bound<'py, PyString>;
    type Error = std::convert::Infallible;
    const OUTPUT_TYPE: PyStaticExpr = <&str as IntoPyObject<'py>>::OUTPUT_TYPE;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(PyString::new(py, self.as_str()))
    }
}

#[pymethods]
impl PointRef {
    /// The point as report.json holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }
    fn __repr__(&self) -> String {
        format!("PointInfo({})", self.display())
    }
}

#[pymethods]
impl Subject {
    /// The subject as report.json holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }
    fn __repr__(&self) -> String {
        format!("ComparisonSubject({})", self.display())
    }
}

#[pymethods]
impl Counts {
    /// The counts as report.json holds them.
    // A Python method takes its object by reference, `Copy` or not.
    #[allow(clippy::wrong_self_convention)]
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(
            slf.as_any(),
            &["total", "match", "mismatch", "inconclusive"],
        )
    }
}

#[pymethods]
impl SeriesPoint {
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(slf.as_any(), &["point", "label", "replay_index"])
    }
}

#[pymethods]
impl Divergence {
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let shown = ["name", "invocation_index", "status", "mismatched_points"];
        repr_of(slf.as_any(), &shown)
    }
}
