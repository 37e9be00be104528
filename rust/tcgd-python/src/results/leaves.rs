//! The small result classes: value summaries, sites, sides, first mismatches, metrics.

use super::*;

/// Counts and statistics of a value: `finite_count + nan_count + pos_inf_count +
/// neg_inf_count == numel`, `zero_count` is part of `finite_count`; `min`, `max`, `mean`,
/// `std` (population) and `l2_norm` cover the finite elements in float64 and are `None`
/// when there is none (`l2_norm` is then 0).
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorValueSummary",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyValueSummary {
    pub(super) inner: SummaryView,
}

impl From<tcgd_tensor::TensorSummary> for PyValueSummary {
    fn from(summary: tcgd_tensor::TensorSummary) -> PyValueSummary {
        PyValueSummary {
            inner: summary.into(),
        }
    }
}

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
        Ok(PyValueSummary {
            inner: SummaryView {
                numel,
                finite: finite_count,
                nan: nan_count,
                posinf: pos_inf_count,
                neginf: neg_inf_count,
                zero: zero_count,
                min,
                max,
                mean,
                std,
                l2: l2_norm,
            },
        })
    }

    #[getter]
    fn numel(&self) -> u64 {
        self.inner.numel
    }
    #[getter]
    fn finite_count(&self) -> u64 {
        self.inner.finite
    }
    #[getter]
    fn nan_count(&self) -> u64 {
        self.inner.nan
    }
    #[getter]
    fn pos_inf_count(&self) -> u64 {
        self.inner.posinf
    }
    #[getter]
    fn neg_inf_count(&self) -> u64 {
        self.inner.neginf
    }
    #[getter]
    fn zero_count(&self) -> u64 {
        self.inner.zero
    }
    #[getter]
    fn min(&self) -> Option<f64> {
        self.inner.min
    }
    #[getter]
    fn max(&self) -> Option<f64> {
        self.inner.max
    }
    #[getter]
    fn mean(&self) -> Option<f64> {
        self.inner.mean
    }
    #[getter]
    fn std(&self) -> Option<f64> {
        self.inner.std
    }
    #[getter]
    fn l2_norm(&self) -> f64 {
        self.inner.l2
    }

    /// The fields by their names here (report.json keeps its own, shorter names).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.inner;
        let d = PyDict::new(py);
        d.set_item("numel", s.numel)?;
        d.set_item("finite_count", s.finite)?;
        d.set_item("nan_count", s.nan)?;
        d.set_item("pos_inf_count", s.posinf)?;
        d.set_item("neg_inf_count", s.neginf)?;
        d.set_item("zero_count", s.zero)?;
        d.set_item("min", s.min)?;
        d.set_item("max", s.max)?;
        d.set_item("mean", s.mean)?;
        d.set_item("std", s.std)?;
        d.set_item("l2_norm", s.l2)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let s = &self.inner;
        let f = |x: Option<f64>| x.map_or_else(|| "None".to_owned(), |v| format!("{v:?}"));
        format!(
            "TensorValueSummary(numel={}, finite_count={}, nan_count={}, pos_inf_count={}, \
             neg_inf_count={}, zero_count={}, min={}, max={}, mean={}, std={}, l2_norm={:?})",
            s.numel,
            s.finite,
            s.nan,
            s.posinf,
            s.neginf,
            s.zero,
            f(s.min),
            f(s.max),
            f(s.mean),
            f(s.std),
            s.l2
        )
    }
}

/// Where a compared value came from when a compile pass placed its probe.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "ObservationSite",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PySite {
    pub(super) inner: SiteView,
}

#[pymethods]
impl PySite {
    #[getter]
    fn site_id(&self) -> Option<String> {
        self.inner.site_id.clone()
    }
    #[getter]
    fn graph_kind(&self) -> Option<String> {
        self.inner.graph_kind.clone()
    }
    #[getter]
    fn node_name(&self) -> Option<String> {
        self.inner.node_name.clone()
    }
    #[getter]
    fn aten_op(&self) -> Option<String> {
        self.inner.aten_op.clone()
    }
    #[getter]
    fn module_path(&self) -> Option<String> {
        self.inner.module_path.clone()
    }
    #[getter]
    fn source_location(&self) -> Option<String> {
        self.inner.source_location.clone()
    }
    #[getter]
    fn compile_id(&self) -> Option<String> {
        self.inner.compile_id.clone()
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner)
    }
    fn __repr__(&self) -> String {
        format!(
            "ObservationSite({})",
            self.inner.describe().unwrap_or_default()
        )
    }
}

/// One side of a compared pair, as it was recorded (the observation's descriptor).
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "ObservationSide",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PySide {
    pub(super) inner: ObservationSide,
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
        self.inner.summary.map(|inner| PyValueSummary { inner })
    }
    #[getter]
    fn site(&self) -> Option<PySite> {
        self.inner.site.clone().map(|inner| PySite { inner })
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner)
    }
    fn __repr__(&self) -> String {
        let s = &self.inner;
        format!(
            "ObservationSide(order={}, dtype='{}', shape={:?}, stride={:?}, payload='{}')",
            s.order, s.dtype, s.shape, s.stride, s.payload
        )
    }
}

/// The first element (row-major) that did not match: its flat index, coordinate and both
/// values (integers exact).
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "FirstMismatch",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyFirstMismatch {
    pub(super) inner: FirstMismatch,
}

#[pymethods]
impl PyFirstMismatch {
    #[getter]
    fn index(&self) -> u64 {
        self.inner.index
    }
    #[getter]
    fn coordinate<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.inner.coordinate.iter().copied())
    }
    #[getter]
    fn reference<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        scalar(py, &self.inner.reference)
    }
    #[getter]
    fn candidate<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        scalar(py, &self.inner.candidate)
    }
    fn __repr__(&self) -> String {
        format!(
            "FirstMismatch(index={}, coordinate={:?})",
            self.inner.index, self.inner.coordinate
        )
    }
}

/// Element-wise metrics of one pair. Error metrics cover the elements where both values
/// are finite (`finite_pairs`); they are `None` when there is none.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "ComparisonMetrics",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyMetrics {
    pub(super) inner: Metrics,
}

#[pymethods]
impl PyMetrics {
    /// `"float64"`, `"complex128"` or `"integer"`: the type values were compared in.
    #[getter]
    fn compared_as(&self) -> &'static str {
        self.inner.compared_as
    }
    #[getter]
    fn total(&self) -> u64 {
        self.inner.total
    }
    #[getter]
    fn mismatch_count(&self) -> u64 {
        self.inner.mismatch_count
    }
    #[getter]
    fn mismatch_fraction(&self) -> f64 {
        self.inner.mismatch_fraction
    }
    #[getter]
    fn finite_pairs(&self) -> u64 {
        self.inner.finite_pairs
    }
    #[getter]
    fn max_abs_error(&self) -> Option<f64> {
        self.inner.max_abs_error
    }
    #[getter]
    fn max_rel_error(&self) -> Option<f64> {
        self.inner.max_rel_error
    }
    #[getter]
    fn mean_abs_error(&self) -> Option<f64> {
        self.inner.mean_abs_error
    }
    #[getter]
    fn first_mismatch(&self) -> Option<PyFirstMismatch> {
        self.inner
            .first_mismatch
            .clone()
            .map(|inner| PyFirstMismatch { inner })
    }
    #[getter]
    fn cosine_similarity(&self) -> Option<f64> {
        self.inner.cosine_similarity
    }
    #[getter]
    fn relative_l2_error(&self) -> Option<f64> {
        self.inner.relative_l2_error
    }
    #[getter]
    fn max_ulp_distance(&self) -> Option<u64> {
        self.inner.max_ulp_distance
    }
    #[getter]
    fn nan_introduced(&self) -> u64 {
        self.inner.nan_introduced
    }
    #[getter]
    fn inf_introduced(&self) -> u64 {
        self.inner.inf_introduced
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner)
    }
    fn __repr__(&self) -> String {
        let m = &self.inner;
        format!(
            "ComparisonMetrics(mismatch_count={}, total={}, max_abs_error={:?})",
            m.mismatch_count, m.total, m.max_abs_error
        )
    }
}
