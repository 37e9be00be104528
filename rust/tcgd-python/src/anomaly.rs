//! The first-anomaly search of tcgd-compare as Python sees it: a function over an open
//! `RunReader`. Its answer is tcgd-compare's `FirstAnomaly` (an `AnomalySite`, the first
//! hit, with the question and the other hits), whose attributes are its fields.

use pyo3::prelude::*;
use tcgd_compare::{AnomalyQuery, FirstAnomaly};

use crate::errors::{guard, BindingError};
use crate::store::RunReader;

/// The first anomaly of the tensor run `reader` has open, or None. `kind` is `"nan"`,
/// `"inf"`, `"nonfinite"` or `"abs_max"` (which needs `threshold`); `site` is a glob or
/// exact name over observation names, module paths, node names and site ids.
#[pyfunction]
#[pyo3(signature = (reader, kind = "nonfinite", threshold = None, site = None))]
pub(crate) fn first_anomaly(
    py: Python<'_>,
    reader: &Bound<'_, RunReader>,
    kind: &str,
    threshold: Option<f64>,
    site: Option<&str>,
) -> PyResult<Option<Py<FirstAnomaly>>> {
    let query = guard(py, || {
        AnomalyQuery::parse(kind, threshold, site).map_err(BindingError::from)
    })?;
    let reader = reader.get();
    let found = guard(py, || {
        py.detach(|| tcgd_compare::first_anomaly_in_run(reader.store(), &query))
            .map_err(BindingError::from)
    })?;
    let Some(anomaly) = found else {
        return Ok(None);
    };
    let first = PyClassInitializer::from(anomaly.first().clone());
    Ok(Some(Py::new(py, first.add_subclass(anomaly))?))
}
