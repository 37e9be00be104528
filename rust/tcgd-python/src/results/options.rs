//! `TensorComparisonOptions`: checked once when made, defaults from the engine.

use super::*;

/// How values are compared. Every option is checked when the options are made; a bad
/// value raises `InvalidInputError` whose `option` and `reason` say which and why.
/// Defaults (those of the Rust engine, the one place they are written): mode="allclose",
/// rtol=1e-5, atol=1e-8, equal_nan=False, dtype_policy="strict", layout_policy="strict",
/// limit=20.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorComparisonOptions",
    frozen,
    skip_from_py_object
)]
#[derive(Clone)]
pub struct PyOptions {
    pub(crate) inner: CompareOptions,
}

impl PyOptions {
    /// The options a comparison function was given: `None` for the defaults, else a
    /// `TensorComparisonOptions`.
    pub(crate) fn of(value: Option<&Bound<'_, PyAny>>) -> BindResult<CompareOptions> {
        match value.filter(|v| !v.is_none()) {
            None => Ok(CompareOptions::default()),
            Some(v) => v
                .cast::<PyOptions>()
                .map(|o| o.get().inner.clone())
                .map_err(|_| {
                    BindingError::InvalidInput(format!(
                        "options must be a TensorComparisonOptions, got {}",
                        py_repr(v)
                    ))
                }),
        }
    }
}

/// An argument given and not `None`.
pub(super) fn given<'py>(v: Option<&Bound<'py, PyAny>>) -> Option<Bound<'py, PyAny>> {
    v.filter(|v| !v.is_none()).cloned()
}

pub(super) fn name_option(option: &str, value: &Bound<'_, PyAny>) -> BindResult<String> {
    value
        .extract::<String>()
        .map_err(|_| invalid_option(option, format!("must be a string, got {}", py_repr(value))))
}

pub(super) fn number_option(option: &str, value: &Bound<'_, PyAny>) -> BindResult<f64> {
    let refused = || invalid_option(option, format!("must be a number, got {}", py_repr(value)));
    if value.cast::<PyBool>().is_ok() {
        return Err(refused());
    }
    value.extract::<f64>().map_err(|_| refused())
}

#[pymethods]
impl PyOptions {
    #[new]
    #[pyo3(signature = (
        mode=None, rtol=None, atol=None, equal_nan=None, dtype_policy=None,
        layout_policy=None, limit=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        mode: Option<&Bound<'_, PyAny>>,
        rtol: Option<&Bound<'_, PyAny>>,
        atol: Option<&Bound<'_, PyAny>>,
        equal_nan: Option<&Bound<'_, PyAny>>,
        dtype_policy: Option<&Bound<'_, PyAny>>,
        layout_policy: Option<&Bound<'_, PyAny>>,
        limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyOptions> {
        guard(py, || {
            let d = CompareOptions::default();
            let mode = match given(mode) {
                Some(v) => name_option("mode", &v)?,
                None => d.mode.as_str().to_owned(),
            };
            let rtol = match given(rtol) {
                Some(v) => number_option("rtol", &v)?,
                None => d.rtol,
            };
            let atol = match given(atol) {
                Some(v) => number_option("atol", &v)?,
                None => d.atol,
            };
            let equal_nan = match given(equal_nan) {
                Some(v) => v.cast::<PyBool>().map(|b| b.is_true()).map_err(|_| {
                    invalid_option("equal_nan", format!("must be a bool, got {}", py_repr(&v)))
                })?,
                None => d.equal_nan,
            };
            let dtype_policy = match given(dtype_policy) {
                Some(v) => name_option("dtype_policy", &v)?,
                None => d.dtype_policy.as_str().to_owned(),
            };
            let layout_policy = match given(layout_policy) {
                Some(v) => name_option("layout_policy", &v)?,
                None => d.layout_policy.as_str().to_owned(),
            };
            let limit = match given(limit) {
                Some(v) => match v.cast::<PyBool>() {
                    Ok(_) => None,
                    Err(_) => v.extract::<usize>().ok(),
                }
                .ok_or_else(|| {
                    invalid_option(
                        "limit",
                        format!("must be an integer >= 0, got {}", py_repr(&v)),
                    )
                })?,
                None => d.limit,
            };
            let inner = CompareOptions::from_names(
                &mode,
                rtol,
                atol,
                equal_nan,
                &dtype_policy,
                &layout_policy,
                limit,
            )
            .map_err(|e| match e {
                CompareError::InvalidOption { option, reason } => invalid_option(&option, reason),
                other => other.into(),
            })?;
            Ok(PyOptions { inner })
        })
    }

    /// `"allclose"` or `"exact"`.
    #[getter]
    fn mode(&self) -> &'static str {
        self.inner.mode.as_str()
    }
    #[getter]
    fn rtol(&self) -> f64 {
        self.inner.rtol
    }
    #[getter]
    fn atol(&self) -> f64 {
        self.inner.atol
    }
    #[getter]
    fn equal_nan(&self) -> bool {
        self.inner.equal_nan
    }
    /// `"strict"` or `"promote"`.
    #[getter]
    fn dtype_policy(&self) -> &'static str {
        self.inner.dtype_policy.as_str()
    }
    /// `"strict"` or `"ignore"`.
    #[getter]
    fn layout_policy(&self) -> &'static str {
        self.inner.layout_policy.as_str()
    }
    /// Rows per table in text and HTML reports (JSON and CSV are complete).
    #[getter]
    fn limit(&self) -> usize {
        self.inner.limit
    }

    /// Every option by name, as a comparison's JSON report holds them under `options`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner)
    }

    /// These options with the given ones changed, checked like new options.
    #[pyo3(signature = (**changes))]
    fn replace(&self, py: Python<'_>, changes: Option<&Bound<'_, PyDict>>) -> PyResult<PyOptions> {
        let kwargs = self.to_dict(py)?.cast_into::<PyDict>()?;
        if let Some(changes) = changes {
            for (k, v) in changes.iter() {
                if !kwargs.contains(&k)? {
                    return Err(BindingError::InvalidInput(format!(
                        "TensorComparisonOptions has no option {}",
                        py_repr(&k)
                    ))
                    .into());
                }
                kwargs.set_item(k, v)?;
            }
        }
        let class = py.get_type::<PyOptions>();
        let made = class.call((), Some(&kwargs))?.cast_into::<PyOptions>()?;
        Ok(made.get().clone())
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let o = &slf.get().inner;
        let args = (
            o.mode.as_str(),
            o.rtol,
            o.atol,
            o.equal_nan,
            o.dtype_policy.as_str(),
            o.layout_policy.as_str(),
            o.limit,
        )
            .into_pyobject(py)?;
        (slf.get_type(), args).into_pyobject(py)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyOptions>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let o = &self.inner;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            o.mode.as_str(),
            o.rtol.to_bits(),
            o.atol.to_bits(),
            o.equal_nan,
            o.dtype_policy.as_str(),
            o.layout_policy.as_str(),
            o.limit,
        )
            .hash(&mut h);
        h.finish()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let o = &self.inner;
        let float = |x: f64| py_repr(&PyFloat::new(py, x).into_any());
        format!(
            "TensorComparisonOptions(mode='{}', rtol={}, atol={}, equal_nan={}, \
             dtype_policy='{}', layout_policy='{}', limit={})",
            o.mode.as_str(),
            float(o.rtol),
            float(o.atol),
            if o.equal_nan { "True" } else { "False" },
            o.dtype_policy.as_str(),
            o.layout_policy.as_str(),
            o.limit
        )
    }
}
