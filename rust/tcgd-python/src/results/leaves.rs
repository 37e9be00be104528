//! The small result classes: value summaries, sides, first mismatches, metrics.

use super::*;

/// Counts and statistics of a value: `finite_count + nan_count + pos_inf_count +
/// neg_inf_count == numel`, `zero_count` is part of `finite_count`; `min`, `max`, `mean`,
/// `std` (population) and `l2_norm` cover the finite elements in float64 and are `None`
/// when there is none (`l2_norm` is then 0). `minimum` and `maximum` are `min` and `max`.
#[pyclass(
    name = "TensorValueSummary",
    module = "torch_cudagraph_debug._native",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyValueSummary {
    #[pyo3(get)]
    numel: u64,
    #[pyo3(get)]
    finite_count: u64,
    #[pyo3(get)]
    nan_count: u64,
    #[pyo3(get)]
    pos_inf_count: u64,
    #[pyo3(get)]
    neg_inf_count: u64,
    #[pyo3(get)]
    zero_count: u64,
    #[pyo3(get)]
    min: Option<f64>,
    #[pyo3(get)]
    max: Option<f64>,
    #[pyo3(get)]
    minimum: Option<f64>,
    #[pyo3(get)]
    maximum: Option<f64>,
    #[pyo3(get)]
    mean: Option<f64>,
    #[pyo3(get)]
    std: Option<f64>,
    #[pyo3(get)]
    l2_norm: f64,
}

impl From<TensorSummary> for PyValueSummary {
    fn from(s: TensorSummary) -> Self {
        PyValueSummary {
            numel: s.numel,
            finite_count: s.finite,
            nan_count: s.nan,
            pos_inf_count: s.pos_inf,
            neg_inf_count: s.neg_inf,
            zero_count: s.zero,
            min: s.min,
            max: s.max,
            minimum: s.min,
            maximum: s.max,
            mean: s.mean,
            std: s.std,
            l2_norm: s.l2,
        }
    }
}

/// The statistics' names in `to_dict()` and `from_dict()`.
const SUMMARY_FIELDS: [&str; 11] = [
    "numel",
    "finite_count",
    "nan_count",
    "pos_inf_count",
    "neg_inf_count",
    "zero_count",
    "min",
    "max",
    "mean",
    "std",
    "l2_norm",
];

#[pymethods]
impl PyValueSummary {
    #[new]
    #[pyo3(signature = (
        *, numel, finite_count, nan_count, pos_inf_count, neg_inf_count, zero_count,
        min=None, max=None, mean=None, std=None, l2_norm=0.0
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        numel: u64,
        finite_count: u64,
        nan_count: u64,
        pos_inf_count: u64,
        neg_inf_count: u64,
        zero_count: u64,
        min: Option<f64>,
        max: Option<f64>,
        mean: Option<f64>,
        std: Option<f64>,
        l2_norm: f64,
    ) -> PyResult<PyValueSummary> {
        let counted = [finite_count, nan_count, pos_inf_count, neg_inf_count]
            .iter()
            .try_fold(0u64, |acc, &n| acc.checked_add(n));
        if counted != Some(numel) || zero_count > finite_count {
            return Err(BindingError::InvalidInput(format!(
                "a TensorValueSummary needs finite_count + nan_count + pos_inf_count + \
                 neg_inf_count == numel and zero_count <= finite_count, got numel={numel}, \
                 finite_count={finite_count}, nan_count={nan_count}, \
                 pos_inf_count={pos_inf_count}, neg_inf_count={neg_inf_count}, \
                 zero_count={zero_count}"
            ))
            .into());
        }
        Ok(PyValueSummary::from(TensorSummary {
            numel,
            finite: finite_count,
            nan: nan_count,
            pos_inf: pos_inf_count,
            neg_inf: neg_inf_count,
            zero: zero_count,
            min,
            max,
            mean,
            std,
            l2: l2_norm,
        }))
    }

    /// The summary `to_dict()` gave (`minimum` / `maximum` accepted for `min` / `max`),
    /// checked as the constructor checks it.
    #[classmethod]
    fn from_dict(
        cls: &Bound<'_, pyo3::types::PyType>,
        value: &Bound<'_, PyDict>,
    ) -> PyResult<Py<PyAny>> {
        let kwargs = PyDict::new(cls.py());
        for (key, value) in value.iter() {
            let key: String = key.extract()?;
            let name = match key.as_str() {
                "minimum" => "min",
                "maximum" => "max",
                other => other,
            };
            if !SUMMARY_FIELDS.contains(&name) {
                return Err(BindingError::InvalidInput(format!(
                    "TensorValueSummary.from_dict: unknown key {}; keys are {}",
                    quoted(&key),
                    SUMMARY_FIELDS.join(", ")
                ))
                .into());
            }
            kwargs.set_item(name, value)?;
        }
        Ok(cls.call((), Some(&kwargs))?.unbind())
    }

    /// The statistics by their names here (report.json keeps its own, shorter names).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let values: [Bound<'py, PyAny>; 11] = [
            self.numel.into_pyobject(py)?.into_any(),
            self.finite_count.into_pyobject(py)?.into_any(),
            self.nan_count.into_pyobject(py)?.into_any(),
            self.pos_inf_count.into_pyobject(py)?.into_any(),
            self.neg_inf_count.into_pyobject(py)?.into_any(),
            self.zero_count.into_pyobject(py)?.into_any(),
            self.min.into_pyobject(py)?.into_any(),
            self.max.into_pyobject(py)?.into_any(),
            self.mean.into_pyobject(py)?.into_any(),
            self.std.into_pyobject(py)?.into_any(),
            self.l2_norm.into_pyobject(py)?.into_any(),
        ];
        let dict = PyDict::new(py);
        for (name, value) in SUMMARY_FIELDS.iter().zip(values) {
            dict.set_item(name, value)?;
        }
        Ok(dict)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let fields = SUMMARY_FIELDS
            .iter()
            .map(|name| Ok(format!("{name}={}", slf.getattr(*name)?.repr()?)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(format!("TensorValueSummary({})", fields.join(", ")))
    }
}

/// One side of a compared pair, as it was recorded (the observation's descriptor).
#[pyclass(
    name = "ObservationSide",
    module = "torch_cudagraph_debug._native",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PySide {
    pub(crate) inner: ObservationSide,
}

impl From<ObservationSide> for PySide {
    fn from(inner: ObservationSide) -> Self {
        PySide { inner }
    }
}

#[pymethods]
impl PySide {
    #[getter]
    fn order(&self) -> i64 {
        self.inner.order
    }
    #[getter]
    fn dtype(&self) -> String {
        self.inner.dtype.clone()
    }
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.inner.shape.iter().copied())
    }
    #[getter]
    fn stride<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.inner.stride.iter().copied())
    }
    #[getter]
    fn source_device(&self) -> String {
        self.inner.source_device.clone()
    }
    /// `"full"` or `"summary"`.
    #[getter]
    fn payload(&self) -> String {
        self.inner.payload.clone()
    }
    #[getter]
    fn digest(&self) -> Option<String> {
        self.inner.digest.clone()
    }
    #[getter]
    fn summary(&self) -> Option<PyValueSummary> {
        self.inner.summary.map(PyValueSummary::from)
    }
    #[getter]
    fn site(&self) -> Option<tcgd_store::SiteLocation> {
        self.inner.site.clone()
    }
    /// The value as its JSON report holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::classes::serde_to_py(py, &self.inner)
    }
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &["order", "dtype", "shape", "stride", "payload"],
        )
    }
}
