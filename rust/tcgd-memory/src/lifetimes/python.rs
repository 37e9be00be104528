//! The Python methods of the lifetime rows that are classes of the native module as they
//! are (the `python` feature): their attributes are their fields (`#[pyclass(get_all)]`
//! where they are declared); here are the reference's other names, `to_dict()` (the row
//! as `report.json` holds it), `to_row()` (its CSV line) and `repr`.

use pyo3::inspect::PyStaticExpr;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use tcgd_report::python::{cells_to_python, repr_of, to_python};

use super::{CohortPointState, CohortSizeBucket, CohortSizeOutcome, Outcome};

/// An outcome is its name in Python (`owner_active`, `awaiting_free`, `free_completed`),
/// as in the reports.
impl<'py> IntoPyObject<'py> for &Outcome {
    type Target = PyString;
    type Output = Bound<'py, PyString>;
    type Error = std::convert::Infallible;
    const OUTPUT_TYPE: PyStaticExpr = <&str as IntoPyObject<'py>>::OUTPUT_TYPE;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(PyString::new(py, self.as_str()))
    }
}

#[pymethods]
impl CohortPointState {
    /// The reference's name of `label`.
    #[getter]
    fn point_label(&self) -> &str {
        &self.label
    }

    /// The state as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }

    /// The state as its line of `cohort_points.csv` holds it; `cohort_id` defaults to
    /// the id of the cohort it belongs to.
    #[pyo3(signature = (cohort_id=None))]
    fn to_row<'py>(
        &self,
        py: Python<'py>,
        cohort_id: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        cells_to_python(py, self.csv_row(cohort_id.unwrap_or(&self.cohort_id)))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(
            slf.as_any(),
            &[
                "point_index",
                "label",
                "owner_active_bytes",
                "owner_active_count",
                "awaiting_free_bytes",
                "awaiting_free_count",
            ],
        )
    }
}

#[pymethods]
impl CohortSizeBucket {
    /// The reference's name of `requested_size_bytes`.
    #[getter]
    fn requested_bytes(&self) -> i64 {
        self.requested_size_bytes
    }

    /// The bucket as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }

    /// The bucket as its line of `size_histograms.csv` holds it; `cohort_id` defaults to
    /// the id of the cohort it belongs to.
    #[pyo3(signature = (cohort_id=None))]
    fn to_row<'py>(
        &self,
        py: Python<'py>,
        cohort_id: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        cells_to_python(py, self.csv_row(cohort_id.unwrap_or(&self.cohort_id)))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(
            slf.as_any(),
            &["size_bytes", "requested_size_bytes", "count", "total_bytes"],
        )
    }
}

#[pymethods]
impl CohortSizeOutcome {
    /// The reference's name of `requested_size_bytes`.
    #[getter]
    fn requested_bytes(&self) -> i64 {
        self.requested_size_bytes
    }

    /// The reference's name of `outcome`: the generations' state at the last analysed
    /// point.
    #[getter]
    fn terminal_state(&self) -> &'static str {
        self.outcome.as_str()
    }

    /// The row as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }

    /// The row as its line of `size_outcomes.csv` holds it; `cohort_id` defaults to the
    /// id of the cohort it belongs to.
    #[pyo3(signature = (cohort_id=None))]
    fn to_row<'py>(
        &self,
        py: Python<'py>,
        cohort_id: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        cells_to_python(py, self.csv_row(cohort_id.unwrap_or(&self.cohort_id)))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(
            slf.as_any(),
            &[
                "size_bytes",
                "requested_size_bytes",
                "outcome",
                "count",
                "total_bytes",
            ],
        )
    }
}
