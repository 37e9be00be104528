//! The Python methods of the memory types that are classes of the native module as they
//! are (the `python` feature): their attributes are their fields (`#[pyclass(get_all)]`
//! where they are declared); here are the constructors and what is not a field.

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::report::Display;

pyo3::import_exception!(torch_cudagraph_debug.errors, InvalidInputError);

#[pymethods]
impl Display {
    /// Each at least 1; the defaults are an attribution section's (two frames, twenty
    /// rows).
    #[new]
    #[pyo3(signature = (
        stack_depth = Display::ATTRIBUTION.stack_depth as i64,
        limit = Display::ATTRIBUTION.limit as i64
    ))]
    fn py_new(stack_depth: i64, limit: i64) -> PyResult<Display> {
        Display::new(stack_depth, limit).map_err(InvalidInputError::new_err)
    }

    /// The defaults of a lifetime report: four frames per stack, twenty cohorts.
    #[staticmethod]
    fn for_lifetimes() -> Display {
        Display::LIFETIMES
    }

    fn __repr__(&self) -> String {
        format!(
            "MemoryDisplayOptions(stack_depth={}, limit={})",
            self.stack_depth, self.limit
        )
    }

    /// Pickles (and copies) as the class called with its attributes.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let d = slf.get();
        (slf.get_type(), (d.stack_depth, d.limit)).into_pyobject(slf.py())
    }
}
