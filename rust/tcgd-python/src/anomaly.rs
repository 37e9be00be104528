//! The first-anomaly search of tcgd-compare as Python sees it: a function over an open
//! `RunReader`, answering with frozen result objects built once here (their getters read
//! the Rust values; nothing goes through JSON).

use pyo3::prelude::*;
use tcgd_compare::{AnomalyHit, AnomalyQuery, FirstAnomaly};

use crate::errors::{guard, BindingError};
use crate::store::RunReader;

/// One observation that hit the rule: where it is (point, replay, order, name, site) and
/// what it holds (element counts, finite extremes).
#[pyclass(module = "torch_cudagraph_debug._native", name = "AnomalySite", frozen)]
pub struct PyAnomalySite {
    inner: AnomalyHit,
}

/// The per-site getters, shared by `AnomalySite` and `FirstAnomaly` (whose values are
/// those of its first site). A macro, because pyo3 classes cannot inherit methods.
macro_rules! site_getters {
    ($class:ty, { $($extra:tt)* }) => {
        #[pymethods]
        impl $class {
            #[getter]
            fn point_index(&self) -> i64 {
                self.hit().point_index
            }
            #[getter]
            fn label(&self) -> String {
                self.hit().label.clone()
            }
            #[getter]
            fn replay_index(&self) -> Option<i64> {
                self.hit().replay_index
            }
            #[getter]
            fn order(&self) -> i64 {
                self.hit().order
            }
            #[getter]
            fn name(&self) -> String {
                self.hit().name.clone()
            }
            #[getter]
            fn invocation_index(&self) -> i64 {
                self.hit().invocation_index
            }
            #[getter]
            fn site_id(&self) -> Option<String> {
                self.hit().site_id.clone()
            }
            #[getter]
            fn graph_kind(&self) -> Option<String> {
                self.hit().graph_kind.clone()
            }
            #[getter]
            fn node_name(&self) -> Option<String> {
                self.hit().node_name.clone()
            }
            #[getter]
            fn aten_op(&self) -> Option<String> {
                self.hit().aten_op.clone()
            }
            #[getter]
            fn module_path(&self) -> Option<String> {
                self.hit().module_path.clone()
            }
            #[getter]
            fn nan(&self) -> u64 {
                self.hit().nan
            }
            #[getter]
            fn posinf(&self) -> u64 {
                self.hit().posinf
            }
            #[getter]
            fn neginf(&self) -> u64 {
                self.hit().neginf
            }
            #[getter]
            fn min(&self) -> Option<f64> {
                self.hit().min
            }
            #[getter]
            fn max(&self) -> Option<f64> {
                self.hit().max
            }
            /// max(|min|, |max|) of the finite values; None when none is finite.
            #[getter]
            fn abs_max(&self) -> Option<f64> {
                self.hit().abs_max()
            }

            $($extra)*
        }
    };
}

impl PyAnomalySite {
    fn hit(&self) -> &AnomalyHit {
        &self.inner
    }
}

site_getters!(PyAnomalySite, {
    fn __repr__(&self) -> String {
        let h = &self.inner;
        format!(
            "AnomalySite(point_index={}, label={}, replay_index={}, order={}, name={}, \
             nan={}, posinf={}, neginf={})",
            h.point_index,
            quoted(&h.label),
            opt(h.replay_index),
            h.order,
            quoted(&h.name),
            h.nan,
            h.posinf,
            h.neginf
        )
    }
});

/// The first anomaly of a run: the first site's values (as `AnomalySite` has them), the
/// rule that was applied, how many observations were visited, and every site that hit at
/// the same replay (`sites`, the first of them being this one).
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "FirstAnomaly",
    frozen
)]
pub struct PyFirstAnomaly {
    inner: FirstAnomaly,
    sites: Vec<Py<PyAnomalySite>>,
}

impl PyFirstAnomaly {
    fn hit(&self) -> &AnomalyHit {
        self.inner.first()
    }
}

site_getters!(PyFirstAnomaly, {
    /// `"nan"`, `"inf"`, `"nonfinite"` or `"abs_max"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind
    }

    #[getter]
    fn threshold(&self) -> Option<f64> {
        self.inner.threshold
    }

    /// The site filter the search used, as given.
    #[getter]
    fn site_filter(&self) -> Option<String> {
        self.inner.site_filter.clone()
    }

    /// Observations visited in execution order up to and including the first hit.
    #[getter]
    fn scanned(&self) -> u64 {
        self.inner.scanned
    }

    /// Every site that hit at the first hit's replay (its point, for a point without a
    /// replay index), in execution order.
    #[getter]
    fn sites(&self, py: Python<'_>) -> Vec<Py<PyAnomalySite>> {
        self.sites.iter().map(|s| s.clone_ref(py)).collect()
    }

    /// The whole answer as one JSON object (what `tcgd tensor first-anomaly --json`
    /// prints).
    fn to_json(&self, py: Python<'_>) -> PyResult<String> {
        guard(py, || {
            serde_json::to_string(&self.inner)
                .map_err(|e| BindingError::Internal(format!("cannot encode the anomaly: {e}")))
        })
    }

    fn __repr__(&self) -> String {
        let h = self.inner.first();
        format!(
            "FirstAnomaly(kind={}, point_index={}, label={}, replay_index={}, name={}, \
             sites={}, scanned={})",
            quoted(self.inner.kind),
            h.point_index,
            quoted(&h.label),
            opt(h.replay_index),
            quoted(&h.name),
            self.inner.hits.len(),
            self.inner.scanned
        )
    }
});

/// A string as Python's `repr` writes it (single quotes), so reprs read like Python's.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

fn opt(value: Option<i64>) -> String {
    value.map_or_else(|| "None".to_owned(), |v| v.to_string())
}

/// The first anomaly of the tensor run `reader` has open, or None. `kind` is `"nan"`,
/// `"inf"`, `"nonfinite"` or `"abs_max"` (which needs `threshold`); `site` is a glob or
/// exact name over observation names, module paths, node names and site ids.
#[pyfunction]
#[pyo3(signature = (reader, kind = "nonfinite", threshold = None, site = None))]
fn first_anomaly(
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
    let Some(inner) = found else {
        return Ok(None);
    };
    let sites = inner
        .hits
        .iter()
        .map(|h| Py::new(py, PyAnomalySite { inner: h.clone() }))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(Some(PyFirstAnomaly { inner, sites }))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAnomalySite>()?;
    m.add_class::<PyFirstAnomaly>()?;
    m.add_function(wrap_pyfunction!(first_anomaly, m)?)?;
    Ok(())
}
