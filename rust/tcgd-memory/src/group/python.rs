//! The Python methods of the group rows that are classes of the native module as they
//! are (the `python` feature): their attributes are their fields (`#[pyclass(get_all)]`
//! where they are declared); here are `to_dict()` (the row as `report.json` holds it)
//! and `repr`.

use pyo3::prelude::*;
use tcgd_report::python::to_python;

use super::MetricExtrema;

#[pymethods]
impl MetricExtrema {
    /// The extrema as `report.json` holds them; with `prefix`, every key after it (joined
    /// by `_` unless it ends with one): `to_dict("end_gap")` gives `end_gap_min_bytes`,
    /// ... as flat rows name a term's extrema.
    #[pyo3(signature = (prefix=None))]
    fn to_dict<'py>(&self, py: Python<'py>, prefix: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.json_with_prefix(prefix))
    }

    fn __repr__(&self) -> String {
        format!(
            "MemoryMetricExtrema(min_bytes={}, min_rank={}, max_bytes={}, max_rank={}, \
             spread_bytes={})",
            self.min_bytes, self.min_rank, self.max_bytes, self.max_rank, self.spread_bytes
        )
    }
}
