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

/// The classes over `tcgd_memory::MemoryStats`, one `#[pymethods]` block each (without
/// the `multiple-pymethods` feature): the struct, the getter of every public metric by
/// its position in `MemoryStats::public_columns`, the getters of the first release's
/// spellings listed under `deprecated` (the name without `_bytes`, warning), then the
/// class's own methods.
macro_rules! stats_class {
    (
        $ty:ident, $name:literal, $doc:literal,
        $(deprecated: [$($old:ident),* $(,)?],)?
        { $($extra:tt)* }
    ) => {
        #[doc = $doc]
        #[pyclass(
            name = $name,
            module = "torch_cudagraph_debug._native",
            frozen,
            eq,
            hash,
            skip_from_py_object
        )]
        #[derive(Clone, PartialEq, Eq, Hash)]
        pub struct $ty {
            pub(super) inner: tcgd_memory::MemoryStats,
        }

        impl $ty {
            pub(super) fn of(inner: tcgd_memory::MemoryStats) -> Self {
                $ty { inner }
            }

            fn column(&self, index: usize) -> i64 {
                self.inner.public_columns()[index].1
            }
        }

        #[pymethods]
        impl $ty {
            $($extra)*

            $($(
                #[getter]
                fn $old(&self, py: Python<'_>) -> PyResult<i64> {
                    deprecated_metric(py, &self.inner, stringify!($old))
                }
            )*)?

            #[getter]
            fn reserved_bytes(&self) -> i64 { self.column(0) }
            #[getter]
            fn allocated_bytes(&self) -> i64 { self.column(1) }
            #[getter]
            fn active_bytes(&self) -> i64 { self.column(2) }
            #[getter]
            fn requested_bytes(&self) -> i64 { self.column(3) }
            #[getter]
            fn segment_count(&self) -> i64 { self.column(4) }
            #[getter]
            fn block_count(&self) -> i64 { self.column(5) }
            #[getter]
            fn inactive_block_count(&self) -> i64 { self.column(6) }
            #[getter]
            fn largest_inactive_block_bytes(&self) -> i64 { self.column(7) }
            #[getter]
            fn expandable_segment_count(&self) -> i64 { self.column(8) }
            #[getter]
            fn expandable_reserved_bytes(&self) -> i64 { self.column(9) }
            #[getter]
            fn expandable_inactive_bytes(&self) -> i64 { self.column(10) }
            /// `active_bytes - allocated_bytes`: freed by the owner, not yet reusable.
            #[getter]
            fn awaiting_free_bytes(&self) -> i64 { self.column(11) }
            /// `reserved_bytes - active_bytes`: reusable only inside its own pool.
            #[getter]
            fn inactive_bytes(&self) -> i64 { self.column(12) }
            /// `active_bytes - requested_bytes`: rounding inside active blocks.
            #[getter]
            fn internal_fragmentation_bytes(&self) -> i64 { self.column(13) }

            /// One metric by its public name (`MemoryStatMetric`).
            fn metric(&self, name: &str) -> PyResult<i64> {
                metric_named(&self.inner, name)
            }
            /// Every field, the derived ones included, under its `*_bytes`/`*_count` name.
            fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                crate::results::serde_to_py(py, &tcgd_memory::rows::PublicStats(&self.inner))
            }
            fn __repr__(&self) -> String {
                repr_of($name, &self.inner)
            }
        }
    };
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

stats_class!(
    PyMemoryStats,
    "MemoryStats",
    "What the caching allocator holds in one slice of its state (bytes or counts).",
    deprecated: [
        reserved,
        allocated,
        active,
        requested,
        largest_inactive_block,
        expandable_reserved,
        expandable_inactive,
        awaiting_free,
        inactive,
        internal_fragmentation,
    ],
    {
        /// Every field keyword-only, missing ones 0; values must be `>= 0`.
        #[new]
        #[pyo3(signature = (**fields))]
        fn new(fields: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
            let values = fields_of(fields, false)?;
            Ok(PyMemoryStats::of(tcgd_memory::MemoryStats::from_stored(
                values,
            )))
        }

        fn __sub__(&self, other: PyRef<'_, PyMemoryStats>) -> PyResult<PyMemoryStatsDelta> {
            Ok(PyMemoryStatsDelta::of(stats_delta(
                &other.inner,
                &self.inner,
            )?))
        }
    }
);

stats_class!(
    PyMemoryStatsDelta,
    "MemoryStatsDelta",
    "`candidate - reference` of every `MemoryStats` field (signed).",
    {
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
    }
);

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
