//! `TensorComparisonOptions`: checked once when made, defaults from the engine.

use super::*;

/// How values are compared. Every option is checked when the options are made; a bad
/// value raises `InvalidInputError` whose `option` and `reason` say which and why.
/// Defaults (those of the Rust engine, the one place they are written):
/// mode="allclose", rtol=1e-5, atol=1e-8, equal_nan=False, dtype_policy="strict",
/// layout_policy="strict", limit=20.
#[pyclass(
    name = "TensorComparisonOptions",
    module = "torch_cudagraph_debug._native",
    frozen,
    skip_from_py_object
)]
#[derive(Clone)]
pub struct PyOptions {
    pub(crate) inner: CompareOptions,
}

impl From<CompareOptions> for PyOptions {
    fn from(inner: CompareOptions) -> Self {
        PyOptions { inner }
    }
}

#[pymethods]
impl PyOptions {
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
    /// The value as its JSON report holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::classes::serde_to_py(py, &self.inner)
    }
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &[
                "mode",
                "rtol",
                "atol",
                "equal_nan",
                "dtype_policy",
                "layout_policy",
                "limit",
            ],
        )
    }

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
            let inner = CompareOptions::from_names(
                &option(mode, d.mode.as_str().to_owned(), |v| name_option("mode", v))?,
                option(rtol, d.rtol, |v| number_option("rtol", v))?,
                option(atol, d.atol, |v| number_option("atol", v))?,
                option(equal_nan, d.equal_nan, |v| {
                    v.cast::<PyBool>().map(|b| b.is_true()).map_err(|_| {
                        let reason = format!("must be a bool, got {}", py_repr(v));
                        invalid_option("equal_nan", reason)
                    })
                })?,
                &option(dtype_policy, d.dtype_policy.as_str().to_owned(), |v| {
                    name_option("dtype_policy", v)
                })?,
                &option(layout_policy, d.layout_policy.as_str().to_owned(), |v| {
                    name_option("layout_policy", v)
                })?,
                option(limit, d.limit, |v| {
                    count(v).ok_or_else(|| {
                        invalid_option(
                            "limit",
                            format!("must be an integer >= 0, got {}", py_repr(v)),
                        )
                    })
                })?,
            )
            .map_err(|e| match e {
                CompareError::InvalidOption { option, reason } => invalid_option(&option, reason),
                other => other.into(),
            })?;
            Ok(PyOptions { inner })
        })
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
        (slf.get_type(), slf.get().args()).into_pyobject(slf.py())
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyOptions>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        self.args().into_pyobject(py)?.hash()
    }
}

/// The options a `TensorComparisonOptions` is made from, in the order `new` takes them:
/// what a pickle holds, and what equal options hash alike by.
type OptionArgs = (
    &'static str,
    f64,
    f64,
    bool,
    &'static str,
    &'static str,
    usize,
);

impl PyOptions {
    fn args(&self) -> OptionArgs {
        let o = &self.inner;
        (
            o.mode.as_str(),
            o.rtol,
            o.atol,
            o.equal_nan,
            o.dtype_policy.as_str(),
            o.layout_policy.as_str(),
            o.limit,
        )
    }

    /// The options a comparison function was given: `None` for the defaults, else a
    /// `TensorComparisonOptions`.
    pub(crate) fn of(value: Option<&Bound<'_, PyAny>>) -> BindResult<CompareOptions> {
        option(value, CompareOptions::default(), |v| {
            v.cast::<PyOptions>()
                .map(|o| o.get().inner.clone())
                .map_err(|_| {
                    BindingError::InvalidInput(format!(
                        "options must be a TensorComparisonOptions, got {}",
                        py_repr(v)
                    ))
                })
        })
    }
}

/// An option as given, checked by `parse`; `default` when it is absent or `None`.
pub(super) fn option<'py, T>(
    value: Option<&Bound<'py, PyAny>>,
    default: T,
    parse: impl FnOnce(&Bound<'py, PyAny>) -> BindResult<T>,
) -> BindResult<T> {
    match value.filter(|v| !v.is_none()) {
        Some(v) => parse(v),
        None => Ok(default),
    }
}

/// An integer `>= 0` (not a bool).
pub(super) fn count(value: &Bound<'_, PyAny>) -> Option<usize> {
    match value.cast::<PyBool>() {
        Ok(_) => None,
        Err(_) => value.extract::<usize>().ok(),
    }
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
