//! The first-anomaly search of tcgd-compare as Python sees it: a function over an open
//! `RunReader`, answering with frozen result objects built once here (their getters read
//! the Rust values; nothing goes through JSON).

use pyo3::prelude::*;
use tcgd_compare::{AnomalyHit, AnomalyQuery, FirstAnomaly};

use crate::classes::frozen_class;
use crate::errors::{guard, BindingError};
use crate::store::RunReader;

/// An anomaly class over `$inner`: the getters of one site (`$hit`, read from the value
/// `$v`), then the class's own getters and options.
macro_rules! anomaly_class {
    (
        $(#$meta:tt)*
        pub struct $class:ident($inner:ty);
        |$v:ident, $py:ident| site = ($($hit:tt)*) { $($getters:tt)* }
        $($options:tt)*
    ) => {
        frozen_class! {
            $(#$meta)*
            pub struct $class($inner);
            |$v, $py| {
                point_index: i64 => $($hit)*.point_index;
                label: String => $($hit)*.label.clone();
                replay_index: Option<i64> => $($hit)*.replay_index;
                order: i64 => $($hit)*.order;
                name: String => $($hit)*.name.clone();
                invocation_index: i64 => $($hit)*.invocation_index;
                site_id: Option<String> => $($hit)*.site.site_id.clone();
                graph_kind: Option<String> => $($hit)*.site.graph_kind.clone();
                node_name: Option<String> => $($hit)*.site.node_name.clone();
                aten_op: Option<String> => $($hit)*.site.aten_op.clone();
                module_path: Option<String> => $($hit)*.site.module_path.clone();
                source_location: Option<String> => $($hit)*.site.source_location.clone();
                compile_id: Option<String> => $($hit)*.site.compile_id.clone();
                nan: u64 => $($hit)*.values.nan;
                posinf: u64 => $($hit)*.values.posinf;
                neginf: u64 => $($hit)*.values.neginf;
                min: Option<f64> => $($hit)*.values.min;
                max: Option<f64> => $($hit)*.values.max;
                /// max(|min|, |max|) of the finite values; None when none is finite.
                abs_max: Option<f64> => $($hit)*.values.abs_max();
                $($getters)*
            }
            $($options)*
        }
    };
}

anomaly_class! {
    /// One observation that hit the rule: where it is (point, replay, order, name, site)
    /// and what it holds (element counts, finite extremes).
    #[pyclass(name = "AnomalySite")]
    pub struct PyAnomalySite(AnomalyHit);
    |h, py| site = (h) {}
    repr(point_index, label, replay_index, order, name, nan, posinf, neginf);
}

/// A first anomaly with its sites as Python objects, made once.
pub struct AnomalyAt {
    anomaly: FirstAnomaly,
    sites: Vec<Py<PyAnomalySite>>,
}

anomaly_class! {
    /// The first anomaly of a run: the first site's values (as `AnomalySite` has them), the
    /// rule that was applied, how many observations were visited, and every site that hit
    /// at the same replay (`sites`, the first of them being this one).
    #[pyclass(name = "FirstAnomaly")]
    pub struct PyFirstAnomaly(AnomalyAt);
    |a, py| site = (a.anomaly.first()) {
        /// `"nan"`, `"inf"`, `"nonfinite"` or `"abs_max"`.
        kind: &'static str => a.anomaly.kind;
        threshold: Option<f64> => a.anomaly.threshold;
        /// The site filter the search used, as given.
        site_filter: Option<String> => a.anomaly.site_filter.clone();
        /// Observations visited in execution order up to and including the first hit.
        scanned: u64 => a.anomaly.scanned;
        /// Every site that hit at the first hit's replay (its point, for a point without a
        /// replay index), in execution order.
        sites: Vec<Py<PyAnomalySite>> => a.sites.iter().map(|s| s.clone_ref(py)).collect();
    }
    repr(kind, point_index, label, replay_index, name, scanned);
    {
        /// The whole answer as one JSON object (what `tcgd tensor first-anomaly --json`
        /// prints).
        fn to_json(&self, py: Python<'_>) -> PyResult<String> {
            guard(py, || {
                serde_json::to_string(&self.inner.anomaly).map_err(|e| {
                    BindingError::Internal(format!("cannot encode the anomaly: {e}"))
                })
            })
        }
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
) -> PyResult<Option<PyFirstAnomaly>> {
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
        .map(|h| Py::new(py, PyAnomalySite::from(h.clone())))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(Some(PyFirstAnomaly::from(AnomalyAt { anomaly, sites })))
}
