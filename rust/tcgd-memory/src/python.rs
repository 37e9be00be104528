//! The Python methods of the memory types that are classes of the native module as they
//! are (the `python` feature): their attributes are their fields (`#[pyclass(get_all)]`
//! where they are declared); here are the constructors and what is not a field.

use pyo3::exceptions::{PyDeprecationWarning, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::lifecycle::Lifecycle;
use crate::report::Display;
use crate::rows::{DeviceSample, PublicStats};
use crate::stats::{MemoryStats, PUBLIC_STAT_NAMES};

pyo3::import_exception!(torch_cudagraph_debug.errors, InvalidInputError);

#[pymethods]
impl Display {
    /// Each at least 1; the defaults are an attribution section's (two frames, twenty
    /// rows).
    #[new]
    #[pyo3(signature = (
        stack_depth = Display::ATTRIBUTION.stack_depth as i64,
        limit = Display::ATTRIBUTION.limit as i64
    ))]
    fn py_new(stack_depth: i64, limit: i64) -> PyResult<Display> {
        Display::new(stack_depth, limit).map_err(InvalidInputError::new_err)
    }

    /// The defaults of a lifetime report: four frames per stack, twenty cohorts.
    #[staticmethod]
    fn for_lifetimes() -> Display {
        Display::LIFETIMES
    }

    fn __repr__(&self) -> String {
        format!(
            "MemoryDisplayOptions(stack_depth={}, limit={})",
            self.stack_depth, self.limit
        )
    }

    /// Pickles (and copies) as the class called with its attributes.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let d = slf.get();
        (slf.get_type(), (d.stack_depth, d.limit)).into_pyobject(slf.py())
    }
}

pyo3::import_exception!(torch_cudagraph_debug.errors, SnapshotFormatError);

/// What the facade's statistics classes share: the eleven stored fields (attributes of
/// the base, declared on [`MemoryStats`]), the three derived ones, a metric by name and
/// the dict form. Two statistics are equal when they are of the same class and their
/// fields are.
#[pymethods]
impl MemoryStats {
    /// `active_bytes - allocated_bytes`: freed by the owner, not yet reusable.
    #[getter(awaiting_free_bytes)]
    fn py_awaiting_free_bytes(&self) -> i64 {
        self.awaiting_free_bytes()
    }

    /// `reserved_bytes - active_bytes`: reusable only inside its own pool.
    #[getter(inactive_bytes)]
    fn py_inactive_bytes(&self) -> i64 {
        self.inactive_bytes()
    }

    /// `active_bytes - requested_bytes`: rounding inside active blocks.
    #[getter(internal_fragmentation_bytes)]
    fn py_internal_fragmentation_bytes(&self) -> i64 {
        self.internal_fragmentation_bytes()
    }

    /// One metric by its public name (`MemoryStatMetric`).
    fn metric(&self, name: &str) -> PyResult<i64> {
        metric_named(self, name)
    }

    /// Every field, the derived ones included, under its `*_bytes`/`*_count` name.
    #[pyo3(name = "to_dict")]
    fn dict_form<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        tcgd_report::python::to_python(py, &PublicStats(self))
    }

    fn __eq__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> bool {
        other.get_type().is(slf.get_type())
            && other
                .cast::<MemoryStats>()
                .is_ok_and(|o| o.get() == slf.get())
    }

    fn __hash__(&self) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(self, &mut hasher);
        std::hash::Hasher::finish(&hasher)
    }

    /// Pickles (and copies) as the class called with the stored fields as keywords.
    fn __getnewargs_ex__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
        let fields = PyDict::new(py);
        for (name, value) in &self.public_columns()[..11] {
            fields.set_item(name, value)?;
        }
        Ok((PyTuple::empty(py), fields))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let fields: Vec<String> = slf.get().public_columns()[..11]
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        Ok(format!("{}({})", slf.get_type().name()?, fields.join(", ")))
    }
}

fn metric_named(stats: &MemoryStats, name: &str) -> PyResult<i64> {
    let columns = stats.public_columns();
    let found = columns.iter().find(|(n, _)| *n == name);
    found.map(|(_, v)| *v).ok_or_else(|| {
        PyValueError::new_err(format!(
            "unknown memory metric '{name}'; use one of {PUBLIC_STAT_NAMES:?}"
        ))
    })
}

/// The stored fields from keyword arguments, missing ones 0; negative values only where
/// `signed`.
fn stored_fields(fields: Option<&Bound<'_, PyDict>>, signed: bool) -> PyResult<MemoryStats> {
    let mut values = [0i64; 11];
    let stored = &PUBLIC_STAT_NAMES[..11];
    for (key, value) in fields.into_iter().flatten() {
        let key: String = key.extract()?;
        let index = stored.iter().position(|f| *f == key).ok_or_else(|| {
            PyValueError::new_err(format!(
                "unknown MemoryStats field '{key}'; the fields are {stored:?} (the derived \
                 *_bytes values are computed)"
            ))
        })?;
        let v: i64 = value.extract()?;
        if v < 0 && !signed {
            return Err(PyValueError::new_err(format!(
                "MemoryStats.{key} must be >= 0, got {v}"
            )));
        }
        values[index] = v;
    }
    Ok(MemoryStats::from_stored(values))
}

/// `candidate - reference` field by field; a derived delta is then the same formula over
/// the deltas, so `awaiting_free_bytes` of a delta is the change of `awaiting_free_bytes`.
fn delta_of<'py>(
    py: Python<'py>,
    reference: &MemoryStats,
    candidate: &MemoryStats,
) -> PyResult<Bound<'py, MemoryStatsDelta>> {
    let delta = crate::rows::stats_delta(reference, candidate)
        .map_err(|e| SnapshotFormatError::new_err(e.to_string()))?;
    Bound::new(py, MemoryStatsDelta::of(delta))
}

/// Python's `MemoryStats`: what the caching allocator holds in one slice of its state
/// (bytes or counts), every field `>= 0`.
#[pyclass(
    name = "MemoryStats",
    module = "torch_cudagraph_debug._native",
    extends = MemoryStats,
    frozen
)]
pub struct AbsoluteStats;

impl AbsoluteStats {
    /// The Python object of `stats`.
    pub fn of(stats: MemoryStats) -> PyClassInitializer<AbsoluteStats> {
        PyClassInitializer::from(stats).add_subclass(AbsoluteStats)
    }
}

#[pymethods]
impl AbsoluteStats {
    /// Every field keyword-only, missing ones 0; values must be `>= 0`.
    #[new]
    #[pyo3(signature = (**fields))]
    fn new(fields: Option<&Bound<'_, PyDict>>) -> PyResult<PyClassInitializer<Self>> {
        Ok(AbsoluteStats::of(stored_fields(fields, false)?))
    }

    /// The statistics of several slices taken together (any iterable of `MemoryStats`):
    /// every field summed except `largest_inactive_block_bytes`, their maximum (how the
    /// allocator's pools and devices add up). An empty iterable gives all zeros.
    #[staticmethod]
    fn combine<'py>(values: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        let items = values
            .try_iter()?
            .map(|v| Ok(*v?.cast::<AbsoluteStats>()?.as_super().get()))
            .collect::<PyResult<Vec<MemoryStats>>>()?;
        let sum = MemoryStats::try_sum(&items).map_err(|e| {
            PyValueError::new_err(format!(
                "MemoryStats.combine: the sum of {} does not fit in 64 bits",
                e.metric
            ))
        })?;
        Bound::new(values.py(), AbsoluteStats::of(sum))
    }

    /// The statistics `to_dict()` gave: every stored field by its public name (missing
    /// ones 0, values `>= 0`); a derived field, when present, must equal what the stored
    /// ones give.
    #[staticmethod]
    fn from_dict<'py>(value: &Bound<'py, PyDict>) -> PyResult<Bound<'py, Self>> {
        let pairs = value
            .iter()
            .map(|(k, v)| Ok((k.extract::<String>()?, v.extract::<i64>()?)))
            .collect::<PyResult<Vec<(String, i64)>>>()?;
        let stats = MemoryStats::from_public(&pairs).map_err(PyValueError::new_err)?;
        if let Some((name, v)) = stats.public_columns()[..11].iter().find(|(_, v)| *v < 0) {
            return Err(PyValueError::new_err(format!(
                "MemoryStats.{name} must be >= 0, got {v}"
            )));
        }
        Bound::new(value.py(), AbsoluteStats::of(stats))
    }

    /// `self - other`, a `MemoryStatsDelta`.
    fn __sub__<'py>(
        slf: PyRef<'py, Self>,
        other: PyRef<'py, AbsoluteStats>,
    ) -> PyResult<Bound<'py, MemoryStatsDelta>> {
        delta_of(slf.py(), other.as_super(), slf.as_super())
    }

    /// `other - self`. Python's subtraction slot answers both orders, so the reflected
    /// one is declared too (and is in the generated stub).
    fn __rsub__<'py>(
        slf: PyRef<'py, Self>,
        other: PyRef<'py, AbsoluteStats>,
    ) -> PyResult<Bound<'py, MemoryStatsDelta>> {
        delta_of(slf.py(), slf.as_super(), other.as_super())
    }

    // The first release's spellings (without `_bytes`), kept for existing code: each
    // warns and gives the metric under its new name.
    #[getter]
    fn reserved(slf: PyRef<'_, Self>) -> PyResult<i64> {
        deprecated_metric(slf, "reserved")
    }
    #[getter]
    fn allocated(slf: PyRef<'_, Self>) -> PyResult<i64> {
        deprecated_metric(slf, "allocated")
    }
    #[getter]
    fn active(slf: PyRef<'_, Self>) -> PyResult<i64> {
        deprecated_metric(slf, "active")
    }
    #[getter]
    fn requested(slf: PyRef<'_, Self>) -> PyResult<i64> {
        deprecated_metric(slf, "requested")
    }
    #[getter]
    fn largest_inactive_block(slf: PyRef<'_, Self>) -> PyResult<i64> {
        deprecated_metric(slf, "largest_inactive_block")
    }
    #[getter]
    fn expandable_reserved(slf: PyRef<'_, Self>) -> PyResult<i64> {
        deprecated_metric(slf, "expandable_reserved")
    }
    #[getter]
    fn expandable_inactive(slf: PyRef<'_, Self>) -> PyResult<i64> {
        deprecated_metric(slf, "expandable_inactive")
    }
    #[getter]
    fn awaiting_free(slf: PyRef<'_, Self>) -> PyResult<i64> {
        deprecated_metric(slf, "awaiting_free")
    }
    #[getter]
    fn inactive(slf: PyRef<'_, Self>) -> PyResult<i64> {
        deprecated_metric(slf, "inactive")
    }
    #[getter]
    fn internal_fragmentation(slf: PyRef<'_, Self>) -> PyResult<i64> {
        deprecated_metric(slf, "internal_fragmentation")
    }
}

/// The first release's spelling of a metric (without `_bytes`): its value, with a
/// `DeprecationWarning` naming the new one.
fn deprecated_metric(slf: PyRef<'_, AbsoluteStats>, old: &str) -> PyResult<i64> {
    let new = format!("{old}_bytes");
    let message = std::ffi::CString::new(format!(
        "MemoryStats.{old} is deprecated; use MemoryStats.{new}"
    ))
    .unwrap_or_default();
    let py = slf.py();
    PyErr::warn(py, &py.get_type::<PyDeprecationWarning>(), &message, 1)?;
    metric_named(slf.as_super(), &new)
}

/// Python's `MemoryStatsDelta`: `candidate - reference` of every `MemoryStats` field
/// (signed).
#[pyclass(
    name = "MemoryStatsDelta",
    module = "torch_cudagraph_debug._native",
    extends = MemoryStats,
    frozen
)]
pub struct MemoryStatsDelta;

impl MemoryStatsDelta {
    /// The Python object of the change `delta`.
    pub fn of(delta: MemoryStats) -> PyClassInitializer<MemoryStatsDelta> {
        PyClassInitializer::from(delta).add_subclass(MemoryStatsDelta)
    }
}

#[pymethods]
impl MemoryStatsDelta {
    /// Every field keyword-only (signed), missing ones 0.
    #[new]
    #[pyo3(signature = (**fields))]
    fn new(fields: Option<&Bound<'_, PyDict>>) -> PyResult<PyClassInitializer<Self>> {
        Ok(MemoryStatsDelta::of(stored_fields(fields, true)?))
    }

    /// `candidate - reference`; a missing side counts as empty (zero) state.
    #[staticmethod]
    #[pyo3(signature = (reference, candidate))]
    fn between<'py>(
        py: Python<'py>,
        reference: Option<PyRef<'py, AbsoluteStats>>,
        candidate: Option<PyRef<'py, AbsoluteStats>>,
    ) -> PyResult<Bound<'py, Self>> {
        let side = |s: Option<PyRef<'py, AbsoluteStats>>| {
            s.map_or_else(MemoryStats::default, |s| **s.as_super())
        };
        delta_of(py, &side(reference), &side(candidate))
    }

    /// Whether any field changed.
    #[getter]
    fn changed(slf: PyRef<'_, Self>) -> bool {
        **slf.as_super() != MemoryStats::default()
    }
}

#[pymethods]
impl DeviceSample {
    #[new]
    #[pyo3(signature = (free_bytes, total_bytes))]
    fn py_new(free_bytes: i64, total_bytes: i64) -> PyResult<Self> {
        if free_bytes < 0 || total_bytes < 0 || free_bytes > total_bytes {
            return Err(PyValueError::new_err(format!(
                "a device sample needs 0 <= free_bytes <= total_bytes, got free {free_bytes}, \
                 total {total_bytes}"
            )));
        }
        Ok(DeviceSample {
            free_bytes,
            total_bytes,
        })
    }

    /// Pickles (and copies) as the class called with both readings.
    fn __getnewargs__(&self) -> (i64, i64) {
        (self.free_bytes, self.total_bytes)
    }

    /// `total_bytes - free_bytes`: device-wide, other processes included.
    #[getter(used_bytes)]
    fn py_used_bytes(&self) -> i64 {
        self.used_bytes()
    }

    /// The sample `to_dict()` gave: `free_bytes` and `total_bytes`, and `used_bytes`
    /// when present (it must equal `total_bytes - free_bytes`).
    #[staticmethod]
    fn from_dict(value: &Bound<'_, PyDict>) -> PyResult<Self> {
        const FIELDS: [&str; 3] = ["free_bytes", "total_bytes", "used_bytes"];
        let mut fields: [Option<i64>; 3] = [None; 3];
        for (name, v) in value.iter() {
            let name: String = name.extract()?;
            let slot = FIELDS.iter().position(|f| *f == name).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "unknown DeviceMemorySample field '{name}'; the fields are free_bytes, \
                     total_bytes (and the derived used_bytes)"
                ))
            })?;
            fields[slot] = Some(v.extract()?);
        }
        let [Some(free), Some(total), used] = fields else {
            return Err(PyValueError::new_err(
                "a DeviceMemorySample dict needs free_bytes and total_bytes",
            ));
        };
        let sample = DeviceSample::py_new(free, total)?;
        match used {
            Some(u) if u != sample.used_bytes() => Err(PyValueError::new_err(format!(
                "used_bytes {u} is not total_bytes - free_bytes = {}",
                sample.used_bytes()
            ))),
            _ => Ok(sample),
        }
    }

    #[pyo3(name = "to_dict")]
    fn dict_form<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        tcgd_report::python::to_python(py, self)
    }

    fn __repr__(&self) -> String {
        format!(
            "DeviceMemorySample(free_bytes={}, total_bytes={}, used_bytes={})",
            self.free_bytes,
            self.total_bytes,
            self.used_bytes()
        )
    }
}

#[pymethods]
impl Lifecycle {
    /// Whether any of the four is not zero.
    #[getter]
    fn changed(&self) -> bool {
        !self.is_zero()
    }

    /// The sum of several lifecycle changes (of the pools of a device, say); `None` when
    /// `values` holds none.
    #[staticmethod]
    fn combine(values: Vec<PyRef<'_, Lifecycle>>) -> Option<Lifecycle> {
        let (first, rest) = values.split_first()?;
        let mut total = **first;
        for v in rest {
            total.add(v);
        }
        Some(total)
    }

    /// The lifecycle change as `report.json` holds it.
    #[pyo3(name = "to_dict")]
    fn dict_form<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        tcgd_report::python::to_python(py, self)
    }

    fn __repr__(&self) -> String {
        format!(
            "MemoryLifecycleDelta(new_segment_bytes={}, removed_segment_bytes={}, \
             newly_active_bytes={}, became_inactive_bytes={})",
            self.new_segment_bytes,
            self.removed_segment_bytes,
            self.newly_active_bytes,
            self.became_inactive_bytes
        )
    }
}
