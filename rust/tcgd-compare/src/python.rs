//! The Python methods of the result types that are classes of the native module (the
//! `python` feature): their attributes are their fields (`#[pyclass(get_all)]` where they
//! are declared); here are what is not a field, `to_dict()` (the value as report.json
//! holds it) and `repr`.

use pyo3::inspect::{PyStaticExpr, PyStaticOperator};
use pyo3::prelude::*;
use pyo3::types::{PyComplex, PyFloat, PyString, PyTuple};
use tcgd_report::python::{repr_of, to_python};

use crate::{
    AnomalySite, Counts, Divergence, FirstAnomaly, FirstMismatch, Metrics, PointRef, Scalar,
    SeriesPoint, Status, Subject,
};

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
    #[new]
    #[pyo3(signature = (
        *, label=None, index=None, replay_index=None, snapshot_index=None, timestamp=None
    ))]
    fn new(
        label: Option<String>,
        index: Option<i64>,
        replay_index: Option<i64>,
        snapshot_index: Option<i64>,
        timestamp: Option<String>,
    ) -> PointRef {
        PointRef {
            label,
            index,
            replay_index,
            snapshot_index,
            timestamp,
        }
    }
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
    #[new]
    #[pyo3(signature = (
        kind, *, name=None, path=None, run_id=None, rank=None, world_size=None, complete=None,
        points=None, detail=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        kind: String,
        name: Option<String>,
        path: Option<String>,
        run_id: Option<String>,
        rank: Option<i64>,
        world_size: Option<i64>,
        complete: Option<bool>,
        points: Option<usize>,
        detail: Option<String>,
    ) -> Subject {
        Subject {
            kind,
            name,
            path,
            run_id,
            rank,
            world_size,
            complete,
            points,
            detail,
        }
    }
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

/// An element value as Python's `int`, `float` or `complex` (integers exact).
impl<'py> IntoPyObject<'py> for &Scalar {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;
    const OUTPUT_TYPE: PyStaticExpr = PyStaticExpr::BinOp {
        left: &PyStaticExpr::Name { id: "int" },
        op: PyStaticOperator::BitOr,
        right: &PyStaticExpr::BinOp {
            left: &PyStaticExpr::Name { id: "float" },
            op: PyStaticOperator::BitOr,
            right: &PyStaticExpr::Name { id: "complex" },
        },
    };

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match *self {
            Scalar::Int(v) => v.into_pyobject(py)?.into_any(),
            Scalar::Float(v) => PyFloat::new(py, v).into_any(),
            Scalar::Complex(re, im) => PyComplex::from_doubles(py, re, im).into_any(),
        })
    }
}

#[pymethods]
impl FirstMismatch {
    /// Position in the row-major flattened value.
    #[getter]
    fn index(&self) -> u64 {
        self.index
    }
    #[getter]
    fn coordinate<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.coordinate)
    }
    #[getter]
    fn reference(&self) -> &Scalar {
        &self.reference
    }
    #[getter]
    fn candidate(&self) -> &Scalar {
        &self.candidate
    }
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(slf.as_any(), &["index", "coordinate"])
    }
}

#[pymethods]
impl Metrics {
    /// The metrics as report.json holds them.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(slf.as_any(), &["mismatch_count", "total", "max_abs_error"])
    }
}

#[pymethods]
impl AnomalySite {
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let shown = ["point_index", "label", "replay_index", "order", "name"];
        repr_of(slf.as_any(), &shown)
    }
}

#[pymethods]
impl FirstAnomaly {
    /// The whole answer as a dict of JSON values (what `tcgd tensor first-anomaly --json`
    /// prints).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }
    /// `to_dict()` as JSON text.
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(self).map_err(|e| {
            pyo3::exceptions::PyValueError::new_err(format!("cannot encode the anomaly: {e}"))
        })
    }
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let shown = [
            "kind",
            "point_index",
            "label",
            "replay_index",
            "name",
            "scanned",
        ];
        repr_of(slf.as_any(), &shown)
    }
}
