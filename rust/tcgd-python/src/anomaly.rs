//! The first-anomaly search of tcgd-compare as Python sees it: a function over an open
//! `RunReader`, answering with frozen result objects built once here (their getters read
//! the Rust values; nothing goes through JSON).

use pyo3::prelude::*;
use tcgd_compare::{AnomalyHit, AnomalyQuery, FirstAnomaly};

use crate::errors::{guard, BindingError};
use crate::store::RunReader;

/// One observation that hit the rule: where it is (point, replay, order, name, site) and
/// what it holds (element counts, finite extremes). `FirstAnomaly` derives from it.
#[pyclass(
    name = "AnomalySite",
    module = "torch_cudagraph_debug._native",
    frozen,
    subclass,
    skip_from_py_object
)]
pub struct PyAnomalySite {
    hit: AnomalyHit,
}

#[pymethods]
impl PyAnomalySite {
    #[getter]
    fn point_index(&self) -> i64 {
        self.hit.point_index
    }
    #[getter]
    fn label(&self) -> &str {
        &self.hit.label
    }
    #[getter]
    fn replay_index(&self) -> Option<i64> {
        self.hit.replay_index
    }
    #[getter]
    fn order(&self) -> i64 {
        self.hit.order
    }
    #[getter]
    fn name(&self) -> &str {
        &self.hit.name
    }
    #[getter]
    fn invocation_index(&self) -> i64 {
        self.hit.invocation_index
    }
    #[getter]
    fn site_id(&self) -> Option<&str> {
        self.hit.site.site_id.as_deref()
    }
    #[getter]
    fn graph_kind(&self) -> Option<&str> {
        self.hit.site.graph_kind.as_deref()
    }
    #[getter]
    fn node_name(&self) -> Option<&str> {
        self.hit.site.node_name.as_deref()
    }
    #[getter]
    fn aten_op(&self) -> Option<&str> {
        self.hit.site.aten_op.as_deref()
    }
    #[getter]
    fn module_path(&self) -> Option<&str> {
        self.hit.site.module_path.as_deref()
    }
    #[getter]
    fn source_location(&self) -> Option<&str> {
        self.hit.site.source_location.as_deref()
    }
    #[getter]
    fn compile_id(&self) -> Option<&str> {
        self.hit.site.compile_id.as_deref()
    }
    #[getter]
    fn nan_count(&self) -> u64 {
        self.hit.summary.nan_count
    }
    #[getter]
    fn pos_inf_count(&self) -> u64 {
        self.hit.summary.pos_inf_count
    }
    #[getter]
    fn neg_inf_count(&self) -> u64 {
        self.hit.summary.neg_inf_count
    }
    #[getter]
    fn min(&self) -> Option<f64> {
        self.hit.summary.min
    }
    #[getter]
    fn max(&self) -> Option<f64> {
        self.hit.summary.max
    }
    /// max(|min|, |max|) of the finite values; None when none is finite.
    #[getter]
    fn abs_max(&self) -> Option<f64> {
        self.hit.summary.abs_max()
    }
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let shown = [
            "point_index",
            "label",
            "replay_index",
            "order",
            "name",
            "nan_count",
            "pos_inf_count",
            "neg_inf_count",
        ];
        crate::classes::attrs_repr(slf.as_any(), &shown)
    }
}

/// The first anomaly of a run: the first site's values (the `AnomalySite` it is), the
/// rule that was applied, how many observations were visited, and every site that hit at
/// the same replay (`sites`, the first of them being this one).
#[pyclass(
    name = "FirstAnomaly",
    module = "torch_cudagraph_debug._native",
    extends = PyAnomalySite,
    frozen,
    skip_from_py_object
)]
pub struct PyFirstAnomaly {
    anomaly: FirstAnomaly,
    sites: Vec<Py<PyAnomalySite>>,
}

#[pymethods]
impl PyFirstAnomaly {
    /// `"nan"`, `"inf"`, `"nonfinite"` or `"abs_max"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.anomaly.kind
    }
    #[getter]
    fn threshold(&self) -> Option<f64> {
        self.anomaly.threshold
    }
    /// The site filter the search used, as given.
    #[getter]
    fn site_filter(&self) -> Option<&str> {
        self.anomaly.site_filter.as_deref()
    }
    /// Observations visited in execution order up to and including the first hit.
    #[getter]
    fn scanned(&self) -> u64 {
        self.anomaly.scanned
    }
    /// Every site that hit at the first hit's replay (its point, for a point without a
    /// replay index), in execution order.
    #[getter]
    fn sites(&self, py: Python<'_>) -> Vec<Py<PyAnomalySite>> {
        self.sites.iter().map(|s| s.clone_ref(py)).collect()
    }
    /// The whole answer as a dict of JSON values (what `tcgd tensor first-anomaly --json`
    /// prints).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        tcgd_report::python::to_python(py, &self.anomaly)
    }
    /// `to_dict()` as JSON text.
    fn to_json(&self, py: Python<'_>) -> PyResult<String> {
        guard(py, || {
            serde_json::to_string(&self.anomaly)
                .map_err(|e| BindingError::Internal(format!("cannot encode the anomaly: {e}")))
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
        crate::classes::attrs_repr(slf.as_any(), &shown)
    }
}

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
) -> PyResult<Option<Py<PyFirstAnomaly>>> {
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
    let sites = anomaly
        .hits
        .iter()
        .map(|h| Py::new(py, PyAnomalySite { hit: h.clone() }))
        .collect::<PyResult<Vec<_>>>()?;
    let first = PyAnomalySite {
        hit: anomaly.first().clone(),
    };
    let init = PyClassInitializer::from(first).add_subclass(PyFirstAnomaly { anomaly, sites });
    Ok(Some(Py::new(py, init)?))
}
