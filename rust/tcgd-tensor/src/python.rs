//! What `TensorValueSummary` has in Python beyond its fields: the checked constructor,
//! the dict forms and the reference's other names for the extremes.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

use crate::TensorSummary;

pyo3::import_exception!(torch_cudagraph_debug.errors, InvalidInputError);

/// The statistics' names in `to_dict()` and `from_dict()`: the fields, in order.
const FIELDS: [&str; 11] = [
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
impl TensorSummary {
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
    ) -> PyResult<TensorSummary> {
        let counted = [finite_count, nan_count, pos_inf_count, neg_inf_count]
            .iter()
            .try_fold(0u64, |acc, &n| acc.checked_add(n));
        if counted != Some(numel) || zero_count > finite_count {
            return Err(InvalidInputError::new_err(format!(
                "a TensorValueSummary needs finite_count + nan_count + pos_inf_count + \
                 neg_inf_count == numel and zero_count <= finite_count, got numel={numel}, \
                 finite_count={finite_count}, nan_count={nan_count}, \
                 pos_inf_count={pos_inf_count}, neg_inf_count={neg_inf_count}, \
                 zero_count={zero_count}"
            )));
        }
        Ok(TensorSummary {
            numel,
            finite_count,
            nan_count,
            pos_inf_count,
            neg_inf_count,
            zero_count,
            min,
            max,
            mean,
            std,
            l2_norm,
        })
    }

    /// The same as `min` (the reference's other name).
    #[getter]
    fn minimum(&self) -> Option<f64> {
        self.min
    }

    /// The same as `max` (the reference's other name).
    #[getter]
    fn maximum(&self) -> Option<f64> {
        self.max
    }

    /// max(|min|, |max|) over the finite values; None when none is finite.
    #[getter(abs_max)]
    fn py_abs_max(&self) -> Option<f64> {
        self.abs_max()
    }

    /// The summary `to_dict()` gave (`minimum` / `maximum` accepted for `min` / `max`),
    /// checked as the constructor checks it.
    #[classmethod]
    fn from_dict(cls: &Bound<'_, PyType>, value: &Bound<'_, PyDict>) -> PyResult<Py<PyAny>> {
        let kwargs = PyDict::new(cls.py());
        for (key, value) in value.iter() {
            let key: String = key.extract()?;
            let name = match key.as_str() {
                "minimum" => "min",
                "maximum" => "max",
                other => other,
            };
            if !FIELDS.contains(&name) {
                return Err(InvalidInputError::new_err(format!(
                    "TensorValueSummary.from_dict: unknown key {}; keys are {}",
                    format!("{key:?}").replace('"', "'"),
                    FIELDS.join(", ")
                )));
            }
            kwargs.set_item(name, value)?;
        }
        Ok(cls.call((), Some(&kwargs))?.unbind())
    }

    /// The statistics by their names here (report.json keeps its own, shorter names).
    fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(slf.py());
        for name in FIELDS {
            dict.set_item(name, slf.getattr(name)?)?;
        }
        Ok(dict)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let fields = FIELDS
            .iter()
            .map(|name| Ok(format!("{name}={}", slf.getattr(*name)?.repr()?)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(format!("TensorValueSummary({})", fields.join(", ")))
    }
}
