//! The memory state as typed frozen classes with the reference design's names:
//! `MemoryStats` (absolute), `MemoryStatsDelta` (signed), `DeviceMemorySample`, and the
//! row tuples comparisons, timelines and phase decompositions hand to the Python facade.

use pyo3::exceptions::{PyDeprecationWarning, PyValueError};

use super::*;

/// The eleven stored fields in their public order (the three derived ones follow them in
/// `to_dict()`).
const BASE_FIELDS: [&str; 11] = [
    "reserved_bytes",
    "allocated_bytes",
    "active_bytes",
    "requested_bytes",
    "segment_count",
    "block_count",
    "inactive_block_count",
    "largest_inactive_block_bytes",
    "expandable_segment_count",
    "expandable_reserved_bytes",
    "expandable_inactive_bytes",
];

fn public_columns(s: &tcgd_memory::MemoryStats) -> [(&'static str, i64); 14] {
    [
        ("reserved_bytes", s.reserved),
        ("allocated_bytes", s.allocated),
        ("active_bytes", s.active),
        ("requested_bytes", s.requested),
        ("segment_count", s.segment_count),
        ("block_count", s.block_count),
        ("inactive_block_count", s.inactive_block_count),
        ("largest_inactive_block_bytes", s.largest_inactive_block),
        ("expandable_segment_count", s.expandable_segment_count),
        ("expandable_reserved_bytes", s.expandable_reserved),
        ("expandable_inactive_bytes", s.expandable_inactive),
        ("awaiting_free_bytes", s.active - s.allocated),
        ("inactive_bytes", s.reserved - s.active),
        ("internal_fragmentation_bytes", s.active - s.requested),
    ]
}

fn build(values: [i64; 11]) -> tcgd_memory::MemoryStats {
    tcgd_memory::MemoryStats {
        reserved: values[0],
        allocated: values[1],
        active: values[2],
        requested: values[3],
        segment_count: values[4],
        block_count: values[5],
        inactive_block_count: values[6],
        largest_inactive_block: values[7],
        expandable_segment_count: values[8],
        expandable_reserved: values[9],
        expandable_inactive: values[10],
    }
}

/// `candidate - reference` field by field; a derived delta is then the same formula over
/// the deltas, so `awaiting_free_bytes` of a delta is the change of `awaiting_free_bytes`.
pub(super) fn stats_delta(
    reference: &tcgd_memory::MemoryStats,
    candidate: &tcgd_memory::MemoryStats,
) -> PyResult<tcgd_memory::MemoryStats> {
    let r = public_columns(reference);
    let c = public_columns(candidate);
    let mut out = [0i64; 11];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = c[i].1.checked_sub(r[i].1).ok_or_else(|| {
            PyValueError::new_err(format!("the change of {} does not fit in 64 bits", r[i].0))
        })?;
    }
    Ok(build(out))
}

fn dict_of<'py>(py: Python<'py>, s: &tcgd_memory::MemoryStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, value) in public_columns(s) {
        d.set_item(name, value)?;
    }
    Ok(d)
}

fn repr_of(class: &str, s: &tcgd_memory::MemoryStats) -> String {
    let fields: Vec<String> = public_columns(s)[..11]
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    format!("{class}({})", fields.join(", "))
}

fn deprecated(py: Python<'_>, old: &str, new: &str) -> PyResult<()> {
    let message = std::ffi::CString::new(format!(
        "MemoryStats.{old} is deprecated; use MemoryStats.{new}"
    ))
    .unwrap_or_default();
    let category = py.get_type::<PyDeprecationWarning>();
    PyErr::warn(py, category.as_any(), &message, 1)
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
    pub(super) inner: tcgd_memory::MemoryStats,
}

impl PyMemoryStats {
    pub(super) fn of(inner: tcgd_memory::MemoryStats) -> Self {
        PyMemoryStats { inner }
    }
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
    pub(super) inner: tcgd_memory::MemoryStats,
}

impl PyMemoryStatsDelta {
    pub(super) fn of(inner: tcgd_memory::MemoryStats) -> Self {
        PyMemoryStatsDelta { inner }
    }
}

/// One `#[pymethods]` block per class (without the `multiple-pymethods` feature): the
/// getters both stats classes share, then the class's own methods.
macro_rules! stats_class {
    ($ty:ident, { $($extra:tt)* }) => {
        #[pymethods]
        impl $ty {
            $($extra)*

            #[getter]
            fn reserved_bytes(&self) -> i64 {
                self.inner.reserved
            }
            #[getter]
            fn allocated_bytes(&self) -> i64 {
                self.inner.allocated
            }
            #[getter]
            fn active_bytes(&self) -> i64 {
                self.inner.active
            }
            #[getter]
            fn requested_bytes(&self) -> i64 {
                self.inner.requested
            }
            #[getter]
            fn segment_count(&self) -> i64 {
                self.inner.segment_count
            }
            #[getter]
            fn block_count(&self) -> i64 {
                self.inner.block_count
            }
            #[getter]
            fn inactive_block_count(&self) -> i64 {
                self.inner.inactive_block_count
            }
            #[getter]
            fn largest_inactive_block_bytes(&self) -> i64 {
                self.inner.largest_inactive_block
            }
            #[getter]
            fn expandable_segment_count(&self) -> i64 {
                self.inner.expandable_segment_count
            }
            #[getter]
            fn expandable_reserved_bytes(&self) -> i64 {
                self.inner.expandable_reserved
            }
            #[getter]
            fn expandable_inactive_bytes(&self) -> i64 {
                self.inner.expandable_inactive
            }
            /// `active_bytes - allocated_bytes`: freed by the owner, not yet reusable.
            #[getter]
            fn awaiting_free_bytes(&self) -> i64 {
                self.inner.active - self.inner.allocated
            }
            /// `reserved_bytes - active_bytes`: reusable only inside its own pool.
            #[getter]
            fn inactive_bytes(&self) -> i64 {
                self.inner.reserved - self.inner.active
            }
            /// `active_bytes - requested_bytes`: rounding inside active blocks.
            #[getter]
            fn internal_fragmentation_bytes(&self) -> i64 {
                self.inner.active - self.inner.requested
            }
            /// One metric by its public name (`MemoryStatMetric`).
            fn metric(&self, name: &str) -> PyResult<i64> {
                public_columns(&self.inner)
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| *v)
                    .ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "unknown memory metric '{name}'; use one of {:?}",
                            public_columns(&self.inner).map(|(n, _)| n)
                        ))
                    })
            }
            /// Every field, the derived ones included, under its `*_bytes`/`*_count` name.
            fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                dict_of(py, &self.inner)
            }
            fn __repr__(&self) -> String {
                repr_of(stringify!($ty).trim_start_matches("Py"), &self.inner)
            }
        }
    };
}

fn fields_of(kwargs: Option<&Bound<'_, PyDict>>, allow_negative: bool) -> PyResult<[i64; 11]> {
    let mut values = [0i64; 11];
    if let Some(kwargs) = kwargs {
        for (key, value) in kwargs.iter() {
            let key: String = key.extract()?;
            let index = BASE_FIELDS.iter().position(|f| *f == key).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "unknown MemoryStats field '{key}'; the fields are {BASE_FIELDS:?} (the \
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

stats_class!(PyMemoryStats, {
    /// Every field keyword-only, missing ones 0; values must be `>= 0`.
    #[new]
    #[pyo3(signature = (**fields))]
    fn new(fields: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        Ok(PyMemoryStats::of(build(fields_of(fields, false)?)))
    }

    fn __sub__(&self, other: PyRef<'_, PyMemoryStats>) -> PyResult<PyMemoryStatsDelta> {
        Ok(PyMemoryStatsDelta::of(stats_delta(
            &other.inner,
            &self.inner,
        )?))
    }

    // Deprecated spellings of the first release (without the `_bytes` suffix).
    #[getter]
    fn reserved(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated(py, "reserved", "reserved_bytes")?;
        Ok(self.inner.reserved)
    }
    #[getter]
    fn allocated(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated(py, "allocated", "allocated_bytes")?;
        Ok(self.inner.allocated)
    }
    #[getter]
    fn active(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated(py, "active", "active_bytes")?;
        Ok(self.inner.active)
    }
    #[getter]
    fn requested(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated(py, "requested", "requested_bytes")?;
        Ok(self.inner.requested)
    }
    #[getter]
    fn largest_inactive_block(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated(py, "largest_inactive_block", "largest_inactive_block_bytes")?;
        Ok(self.inner.largest_inactive_block)
    }
    #[getter]
    fn expandable_reserved(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated(py, "expandable_reserved", "expandable_reserved_bytes")?;
        Ok(self.inner.expandable_reserved)
    }
    #[getter]
    fn expandable_inactive(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated(py, "expandable_inactive", "expandable_inactive_bytes")?;
        Ok(self.inner.expandable_inactive)
    }
    #[getter]
    fn awaiting_free(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated(py, "awaiting_free", "awaiting_free_bytes")?;
        Ok(self.inner.active - self.inner.allocated)
    }
    #[getter]
    fn inactive(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated(py, "inactive", "inactive_bytes")?;
        Ok(self.inner.reserved - self.inner.active)
    }
    #[getter]
    fn internal_fragmentation(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated(py, "internal_fragmentation", "internal_fragmentation_bytes")?;
        Ok(self.inner.active - self.inner.requested)
    }
});

stats_class!(PyMemoryStatsDelta, {
    /// Every field keyword-only (signed), missing ones 0.
    #[new]
    #[pyo3(signature = (**fields))]
    fn new(fields: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        Ok(PyMemoryStatsDelta::of(build(fields_of(fields, true)?)))
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
});

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
    free: i64,
    total: i64,
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
        Ok(PyDeviceMemorySample {
            free: free_bytes,
            total: total_bytes,
        })
    }
    #[getter]
    fn free_bytes(&self) -> i64 {
        self.free
    }
    #[getter]
    fn total_bytes(&self) -> i64 {
        self.total
    }
    /// `total_bytes - free_bytes`: device-wide, other processes included.
    #[getter]
    fn used_bytes(&self) -> i64 {
        self.total - self.free
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("free_bytes", self.free)?;
        d.set_item("total_bytes", self.total)?;
        d.set_item("used_bytes", self.total - self.free)?;
        Ok(d)
    }
    fn __repr__(&self) -> String {
        format!(
            "DeviceMemorySample(free_bytes={}, total_bytes={}, used_bytes={})",
            self.free,
            self.total,
            self.total - self.free
        )
    }
}

/// The sample of a device when both readings are known (a failed query leaves none).
pub(super) fn sample_of(state: &RustState, device: i64) -> Option<PyDeviceMemorySample> {
    let m = state.memory(device);
    match (m.free_bytes, m.total_bytes) {
        (Some(free), Some(total)) if free <= total => Some(PyDeviceMemorySample { free, total }),
        _ => None,
    }
}

// ---------------------------------------------------------------------- rows for the facade

/// `(device, pool_id)` or nothing.
type Side = (Option<i64>, Option<(i64, i64)>);
/// `(new_segment, removed_segment, newly_active, became_inactive)` bytes.
type LifecycleRow = (i64, i64, i64, i64);

fn lifecycle_row(l: &Option<tcgd_memory::Lifecycle>) -> Option<LifecycleRow> {
    l.as_ref().map(|l| {
        (
            l.new_segment_bytes,
            l.removed_segment_bytes,
            l.newly_active_bytes,
            l.became_inactive_bytes,
        )
    })
}

/// One comparison row: which pool (and stream) on each side, each side's stats (None for
/// a side that lacks it), the delta, the address lifecycle.
pub(super) type ComparisonRow = (
    Side,
    Side,
    Option<i64>,
    Option<i64>,
    &'static str,
    Option<PyMemoryStats>,
    Option<PyMemoryStats>,
    PyMemoryStatsDelta,
    Option<LifecycleRow>,
);

fn side_stats(present: bool, s: &tcgd_memory::MemoryStats) -> Option<PyMemoryStats> {
    present.then(|| PyMemoryStats::of(*s))
}

/// Pool rows (stream `None`) and observation rows of a comparison, in report order.
pub(super) fn comparison_rows(
    c: &tcgd_memory::Comparison,
    streams: bool,
) -> PyResult<Vec<ComparisonRow>> {
    let mut out = Vec::new();
    for d in &c.devices {
        for p in &d.pools {
            let r = (d.reference_device, p.reference_pool);
            let k = (d.candidate_device, p.candidate_pool);
            let (rp, cp) = (
                d.reference_device.is_some() && p.reference_pool.is_some(),
                d.candidate_device.is_some() && p.candidate_pool.is_some(),
            );
            if !streams {
                out.push((
                    r,
                    k,
                    None,
                    None,
                    p.kind.as_str(),
                    side_stats(rp, &p.stats.reference),
                    side_stats(cp, &p.stats.candidate),
                    PyMemoryStatsDelta::of(stats_delta(&p.stats.reference, &p.stats.candidate)?),
                    lifecycle_row(&p.lifecycle),
                ));
                continue;
            }
            for s in &p.streams {
                out.push((
                    r,
                    k,
                    s.reference_stream,
                    s.candidate_stream,
                    p.kind.as_str(),
                    side_stats(rp && s.reference_stream.is_some(), &s.stats.reference),
                    side_stats(cp && s.candidate_stream.is_some(), &s.stats.candidate),
                    PyMemoryStatsDelta::of(stats_delta(&s.stats.reference, &s.stats.candidate)?),
                    lifecycle_row(&s.lifecycle),
                ));
            }
        }
    }
    Ok(out)
}

/// One device row: indexes, each side's sample and allocator rollup, residuals.
pub(super) type DeviceRow = (
    Option<i64>,
    Option<i64>,
    Option<PyDeviceMemorySample>,
    Option<PyDeviceMemorySample>,
    Option<PyMemoryStats>,
    Option<PyMemoryStats>,
    PyMemoryStatsDelta,
    Option<LifecycleRow>,
);

pub(super) fn device_rows(
    c: &tcgd_memory::Comparison,
    reference: Option<&RustState>,
    candidate: &RustState,
) -> PyResult<Vec<DeviceRow>> {
    c.devices
        .iter()
        .map(|d| {
            let rs = reference
                .zip(d.reference_device)
                .and_then(|(s, i)| sample_of(s, i));
            let cs = d.candidate_device.and_then(|i| sample_of(candidate, i));
            Ok((
                d.reference_device,
                d.candidate_device,
                rs,
                cs,
                side_stats(d.reference_device.is_some(), &d.allocator.reference),
                side_stats(d.candidate_device.is_some(), &d.allocator.candidate),
                PyMemoryStatsDelta::of(stats_delta(
                    &d.allocator.reference,
                    &d.allocator.candidate,
                )?),
                lifecycle_row(&d.lifecycle),
            ))
        })
        .collect()
}

/// One timeline row: point, level, scope, device, pool, stats, previous-point delta.
pub(super) type TimelineRow = (
    i64,
    String,
    &'static str,
    Option<&'static str>,
    Option<i64>,
    Option<(i64, i64)>,
    PyMemoryStats,
    Option<PyMemoryStatsDelta>,
);

pub(super) fn timeline_rows(t: &tcgd_memory::Timeline) -> Vec<TimelineRow> {
    t.rows
        .iter()
        .map(|r| {
            (
                r.point_index,
                r.label.clone(),
                r.level.as_str(),
                r.scope.map(|s| s.as_str()),
                r.device,
                r.pool,
                PyMemoryStats::of(r.stats),
                r.change.map(PyMemoryStatsDelta::of),
            )
        })
        .collect()
}

/// One phase row: level, scope, devices, pools, metric, the four readings.
pub(super) type PhaseRow = (
    &'static str,
    Option<&'static str>,
    Option<i64>,
    Option<i64>,
    Option<(i64, i64)>,
    Option<(i64, i64)>,
    &'static str,
    [Option<i64>; 4],
);

pub(super) fn phase_rows(p: &tcgd_memory::PhaseComparison) -> Vec<PhaseRow> {
    p.rows
        .iter()
        .map(|r| {
            let v = r.values;
            (
                r.level.as_str(),
                r.scope.map(|s| s.as_str()),
                r.baseline_device,
                r.candidate_device,
                r.baseline_pool,
                r.candidate_pool,
                r.metric,
                [
                    v.baseline_start,
                    v.baseline_end,
                    v.candidate_start,
                    v.candidate_end,
                ],
            )
        })
        .collect()
}
