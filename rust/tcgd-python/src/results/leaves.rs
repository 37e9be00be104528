//! The small result classes: value summaries, sides, first mismatches, metrics.

use super::*;

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
    fn summary(&self) -> Option<TensorSummary> {
        self.inner.summary
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
