//! The memory state's values as typed frozen classes with the reference design's names:
//! `MemoryStats` (absolute), `MemoryStatsDelta` (signed) and `DeviceMemorySample`.

use pyo3::exceptions::{PyDeprecationWarning, PyValueError};

use super::*;

/// `candidate - reference` field by field; a derived delta is then the same formula over
/// the deltas, so `awaiting_free_bytes` of a delta is the change of `awaiting_free_bytes`.
pub(super) fn stats_delta(
    reference: &tcgd_memory::MemoryStats,
    candidate: &tcgd_memory::MemoryStats,
) -> PyResult<tcgd_memory::MemoryStats> {
    tcgd_memory::rows::stats_delta(reference, candidate).map_err(|e| BindingError::from(e).into())
}

fn repr_of(class: &str, s: &tcgd_memory::MemoryStats) -> String {
    let fields: Vec<String> = s.public_columns()[..11]
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    format!("{class}({})", fields.join(", "))
}

fn metric_named(stats: &tcgd_memory::MemoryStats, name: &str) -> PyResult<i64> {
    let columns = stats.public_columns();
    columns
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "unknown memory metric '{name}'; use one of {:?}",
                tcgd_memory::PUBLIC_STAT_NAMES
            ))
        })
}

fn fields_of(kwargs: Option<&Bound<'_, PyDict>>, allow_negative: bool) -> PyResult<[i64; 11]> {
    let mut values = [0i64; 11];
    if let Some(kwargs) = kwargs {
        for (key, value) in kwargs.iter() {
            let key: String = key.extract()?;
            let stored = &tcgd_memory::PUBLIC_STAT_NAMES[..11];
            let index = stored.iter().position(|f| *f == key).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "unknown MemoryStats field '{key}'; the fields are {stored:?} (the \
                     derived *_bytes values are computed)"
                ))
            })?;
            let v: i64 = value.extract()?;
            if v < 0 && !allow_negative {
                return Err(PyValueError::new_err(format!(
                    "MemoryStats.{key} must be >= 0, got {v}"
                )));
            }
            values[index] = v;
        }
    }
    Ok(values)
}

/// The first release's spelling of a metric (without `_bytes`): its value, with a
/// `DeprecationWarning` naming the new one.
fn deprecated_metric(py: Python<'_>, stats: &tcgd_memory::MemoryStats, old: &str) -> PyResult<i64> {
    let new = format!("{old}_bytes");
    let message = std::ffi::CString::new(format!(
        "MemoryStats.{old} is deprecated; use MemoryStats.{new}"
    ))
    .unwrap_or_default();
    let category = py.get_type::<PyDeprecationWarning>();
    PyErr::warn(py, category.as_any(), &message, 1)?;
    metric_named(stats, &new)
}

/// What the caching allocator holds in one slice of its state (bytes or counts).
#[pyclass(
    name = "MemoryStats",
    module = "torch_cudagraph_debug._native",
    frozen,
    eq,
    hash,
    skip_from_py_object
)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyMemoryStats {
    /// Sum of segment sizes: what the allocator holds from CUDA.
    #[pyo3(get)]
    reserved_bytes: i64,
    /// Blocks owned by live tensors.
    #[pyo3(get)]
    allocated_bytes: i64,
    /// Allocated, or freed and waiting for a stream-safe free.
    #[pyo3(get)]
    active_bytes: i64,
    /// Unrounded sizes the active blocks were requested with.
    #[pyo3(get)]
    requested_bytes: i64,
    #[pyo3(get)]
    segment_count: i64,
    #[pyo3(get)]
    block_count: i64,
    #[pyo3(get)]
    inactive_block_count: i64,
    #[pyo3(get)]
    largest_inactive_block_bytes: i64,
    #[pyo3(get)]
    expandable_segment_count: i64,
    #[pyo3(get)]
    expandable_reserved_bytes: i64,
    #[pyo3(get)]
    expandable_inactive_bytes: i64,
    /// `active_bytes - allocated_bytes`: freed by the owner, not yet reusable.
    #[pyo3(get)]
    awaiting_free_bytes: i64,
    /// `reserved_bytes - active_bytes`: reusable only inside its own pool.
    #[pyo3(get)]
    inactive_bytes: i64,
    /// `active_bytes - requested_bytes`: rounding inside active blocks.
    #[pyo3(get)]
    internal_fragmentation_bytes: i64,
    pub(super) inner: tcgd_memory::MemoryStats,
}

/// `candidate - reference` of every `MemoryStats` field (signed).
#[pyclass(
    name = "MemoryStatsDelta",
    module = "torch_cudagraph_debug._native",
    frozen,
    eq,
    hash,
    skip_from_py_object
)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyMemoryStatsDelta {
    #[pyo3(get)]
    reserved_bytes: i64,
    #[pyo3(get)]
    allocated_bytes: i64,
    #[pyo3(get)]
    active_bytes: i64,
    #[pyo3(get)]
    requested_bytes: i64,
    #[pyo3(get)]
    segment_count: i64,
    #[pyo3(get)]
    block_count: i64,
    #[pyo3(get)]
    inactive_block_count: i64,
    #[pyo3(get)]
    largest_inactive_block_bytes: i64,
    #[pyo3(get)]
    expandable_segment_count: i64,
    #[pyo3(get)]
    expandable_reserved_bytes: i64,
    #[pyo3(get)]
    expandable_inactive_bytes: i64,
    /// The change of `awaiting_free_bytes`.
    #[pyo3(get)]
    awaiting_free_bytes: i64,
    /// The change of `inactive_bytes`.
    #[pyo3(get)]
    inactive_bytes: i64,
    /// The change of `internal_fragmentation_bytes`.
    #[pyo3(get)]
    internal_fragmentation_bytes: i64,
    pub(super) inner: tcgd_memory::MemoryStats,
}

impl PyMemoryStats {
    pub(super) fn of(inner: tcgd_memory::MemoryStats) -> Self {
        let [reserved_bytes, allocated_bytes, active_bytes, requested_bytes, segment_count, block_count, inactive_block_count, largest_inactive_block_bytes, expandable_segment_count, expandable_reserved_bytes, expandable_inactive_bytes, awaiting_free_bytes, inactive_bytes, internal_fragmentation_bytes] =
            inner.public_columns().map(|(_, v)| v);
        PyMemoryStats {
            reserved_bytes,
            allocated_bytes,
            active_bytes,
            requested_bytes,
            segment_count,
            block_count,
            inactive_block_count,
            largest_inactive_block_bytes,
            expandable_segment_count,
            expandable_reserved_bytes,
            expandable_inactive_bytes,
            awaiting_free_bytes,
            inactive_bytes,
            internal_fragmentation_bytes,
            inner,
        }
    }
}

impl PyMemoryStatsDelta {
    pub(super) fn of(inner: tcgd_memory::MemoryStats) -> Self {
        let [reserved_bytes, allocated_bytes, active_bytes, requested_bytes, segment_count, block_count, inactive_block_count, largest_inactive_block_bytes, expandable_segment_count, expandable_reserved_bytes, expandable_inactive_bytes, awaiting_free_bytes, inactive_bytes, internal_fragmentation_bytes] =
            inner.public_columns().map(|(_, v)| v);
        PyMemoryStatsDelta {
            reserved_bytes,
            allocated_bytes,
            active_bytes,
            requested_bytes,
            segment_count,
            block_count,
            inactive_block_count,
            largest_inactive_block_bytes,
            expandable_segment_count,
            expandable_reserved_bytes,
            expandable_inactive_bytes,
            awaiting_free_bytes,
            inactive_bytes,
            internal_fragmentation_bytes,
            inner,
        }
    }
}

/// `(name, value)` of every item of a dict of metrics.
fn metric_pairs(value: &Bound<'_, PyDict>) -> PyResult<Vec<(String, i64)>> {
    value
        .iter()
        .map(|(k, v)| Ok((k.extract::<String>()?, v.extract::<i64>()?)))
        .collect()
}

#[pymethods]
impl PyMemoryStats {
    /// Every field keyword-only, missing ones 0; values must be `>= 0`.
    #[new]
    #[pyo3(signature = (**fields))]
    fn new(fields: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let values = fields_of(fields, false)?;
        Ok(PyMemoryStats::of(tcgd_memory::MemoryStats::from_stored(
            values,
        )))
    }

    /// The statistics of several slices taken together (any iterable of `MemoryStats`):
    /// every field summed except `largest_inactive_block_bytes`, their maximum (how the
    /// allocator's pools and devices add up). An empty iterable gives all zeros.
    #[staticmethod]
    fn combine(values: &Bound<'_, PyAny>) -> PyResult<Self> {
        let items = values
            .try_iter()?
            .map(|v| Ok(v?.cast::<PyMemoryStats>()?.get().inner))
            .collect::<PyResult<Vec<tcgd_memory::MemoryStats>>>()?;
        let sum = tcgd_memory::MemoryStats::try_sum(&items).map_err(|e| {
            PyValueError::new_err(format!(
                "MemoryStats.combine: the sum of {} does not fit in 64 bits",
                e.metric
            ))
        })?;
        Ok(PyMemoryStats::of(sum))
    }

    /// The statistics `to_dict()` gave: every stored field by its public name (missing
    /// ones 0, values `>= 0`); a derived field, when present, must equal what the stored
    /// ones give.
    #[staticmethod]
    fn from_dict(value: &Bound<'_, PyDict>) -> PyResult<Self> {
        let stats = tcgd_memory::MemoryStats::from_public(&metric_pairs(value)?)
            .map_err(PyValueError::new_err)?;
        if let Some((name, v)) = stats.public_columns()[..11].iter().find(|(_, v)| *v < 0) {
            return Err(PyValueError::new_err(format!(
                "MemoryStats.{name} must be >= 0, got {v}"
            )));
        }
        Ok(PyMemoryStats::of(stats))
    }

    fn __sub__(&self, other: PyRef<'_, PyMemoryStats>) -> PyResult<PyMemoryStatsDelta> {
        Ok(PyMemoryStatsDelta::of(stats_delta(
            &other.inner,
            &self.inner,
        )?))
    }

    /// `other - self`. Python's subtraction slot answers both orders, so the reflected
    /// one is declared too (and is in the generated stub).
    fn __rsub__(&self, other: PyRef<'_, PyMemoryStats>) -> PyResult<PyMemoryStatsDelta> {
        Ok(PyMemoryStatsDelta::of(stats_delta(
            &self.inner,
            &other.inner,
        )?))
    }

    /// One metric by its public name (`MemoryStatMetric`).
    fn metric(&self, name: &str) -> PyResult<i64> {
        metric_named(&self.inner, name)
    }

    /// Every field, the derived ones included, under its `*_bytes`/`*_count` name.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &tcgd_memory::rows::PublicStats(&self.inner))
    }

    fn __repr__(&self) -> String {
        repr_of("MemoryStats", &self.inner)
    }

    // The first release's spellings (without `_bytes`), kept for existing code: each
    // warns and gives the metric under its new name.
    #[getter]
    fn reserved(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated_metric(py, &self.inner, "reserved")
    }
    #[getter]
    fn allocated(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated_metric(py, &self.inner, "allocated")
    }
    #[getter]
    fn active(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated_metric(py, &self.inner, "active")
    }
    #[getter]
    fn requested(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated_metric(py, &self.inner, "requested")
    }
    #[getter]
    fn largest_inactive_block(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated_metric(py, &self.inner, "largest_inactive_block")
    }
    #[getter]
    fn expandable_reserved(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated_metric(py, &self.inner, "expandable_reserved")
    }
    #[getter]
    fn expandable_inactive(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated_metric(py, &self.inner, "expandable_inactive")
    }
    #[getter]
    fn awaiting_free(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated_metric(py, &self.inner, "awaiting_free")
    }
    #[getter]
    fn inactive(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated_metric(py, &self.inner, "inactive")
    }
    #[getter]
    fn internal_fragmentation(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated_metric(py, &self.inner, "internal_fragmentation")
    }
}

#[pymethods]
impl PyMemoryStatsDelta {
    /// Every field keyword-only (signed), missing ones 0.
    #[new]
    #[pyo3(signature = (**fields))]
    fn new(fields: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let values = fields_of(fields, true)?;
        Ok(PyMemoryStatsDelta::of(
            tcgd_memory::MemoryStats::from_stored(values),
        ))
    }

    /// `candidate - reference`; a missing side counts as empty (zero) state.
    #[staticmethod]
    #[pyo3(signature = (reference, candidate))]
    fn between(
        reference: Option<PyRef<'_, PyMemoryStats>>,
        candidate: Option<PyRef<'_, PyMemoryStats>>,
    ) -> PyResult<Self> {
        let zero = tcgd_memory::MemoryStats::default();
        let r = reference.map_or(zero, |s| s.inner);
        let c = candidate.map_or(zero, |s| s.inner);
        Ok(PyMemoryStatsDelta::of(stats_delta(&r, &c)?))
    }

    /// Whether any field changed.
    #[getter]
    fn changed(&self) -> bool {
        self.inner != tcgd_memory::MemoryStats::default()
    }

    /// One metric by its public name (`MemoryStatMetric`).
    fn metric(&self, name: &str) -> PyResult<i64> {
        metric_named(&self.inner, name)
    }

    /// Every field, the derived ones included, under its `*_bytes`/`*_count` name.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &tcgd_memory::rows::PublicStats(&self.inner))
    }

    fn __repr__(&self) -> String {
        repr_of("MemoryStatsDelta", &self.inner)
    }
}

/// One CUDA Runtime reading of a device (`torch.cuda.mem_get_info`): device-wide.
#[pyclass(
    name = "DeviceMemorySample",
    module = "torch_cudagraph_debug._native",
    frozen,
    eq,
    hash,
    skip_from_py_object
)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyDeviceMemorySample {
    inner: tcgd_memory::rows::DeviceSample,
}

impl PyDeviceMemorySample {
    pub(super) fn of(inner: tcgd_memory::rows::DeviceSample) -> Self {
        PyDeviceMemorySample { inner }
    }
}

#[pymethods]
impl PyDeviceMemorySample {
    #[new]
    #[pyo3(signature = (free_bytes, total_bytes))]
    fn new(free_bytes: i64, total_bytes: i64) -> PyResult<Self> {
        if free_bytes < 0 || total_bytes < 0 || free_bytes > total_bytes {
            return Err(PyValueError::new_err(format!(
                "a device sample needs 0 <= free_bytes <= total_bytes, got free {free_bytes}, \
                 total {total_bytes}"
            )));
        }
        Ok(PyDeviceMemorySample::of(tcgd_memory::rows::DeviceSample {
            free_bytes,
            total_bytes,
        }))
    }
    #[getter]
    fn free_bytes(&self) -> i64 {
        self.inner.free_bytes
    }
    #[getter]
    fn total_bytes(&self) -> i64 {
        self.inner.total_bytes
    }
    /// `total_bytes - free_bytes`: device-wide, other processes included.
    #[getter]
    fn used_bytes(&self) -> i64 {
        self.inner.used_bytes()
    }
    /// The sample `to_dict()` gave: `free_bytes` and `total_bytes`, and `used_bytes`
    /// when present (it must equal `total_bytes - free_bytes`).
    #[staticmethod]
    fn from_dict(value: &Bound<'_, PyDict>) -> PyResult<Self> {
        let mut fields: [Option<i64>; 3] = [None; 3];
        for (name, v) in metric_pairs(value)? {
            let slot = ["free_bytes", "total_bytes", "used_bytes"]
                .iter()
                .position(|f| *f == name)
                .ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "unknown DeviceMemorySample field '{name}'; the fields are \
                         free_bytes, total_bytes (and the derived used_bytes)"
                    ))
                })?;
            fields[slot] = Some(v);
        }
        let [Some(free), Some(total), used] = fields else {
            return Err(PyValueError::new_err(
                "a DeviceMemorySample dict needs free_bytes and total_bytes",
            ));
        };
        let sample = PyDeviceMemorySample::new(free, total)?;
        if used.is_some_and(|u| u != sample.inner.used_bytes()) {
            return Err(PyValueError::new_err(format!(
                "used_bytes {} is not total_bytes - free_bytes = {}",
                used.unwrap_or_default(),
                sample.inner.used_bytes()
            )));
        }
        Ok(sample)
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.inner)
    }
    fn __repr__(&self) -> String {
        format!(
            "DeviceMemorySample(free_bytes={}, total_bytes={}, used_bytes={})",
            self.inner.free_bytes,
            self.inner.total_bytes,
            self.inner.used_bytes()
        )
    }
}
