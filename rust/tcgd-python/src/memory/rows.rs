//! The rows of comparisons, timelines and phase decompositions as frozen Python classes
//! over [`tcgd_memory::rows`], which builds them and computes every fact they show.
//!
//! Each class is a plain `#[pyclass]` whose Python attributes are its `#[pyo3(get)]`
//! fields, converted once from the core row when the result is made; the core row stays
//! in a private field for `to_dict()` (its serde form, the one `report.json` holds),
//! `to_row()` (its line of the result's CSV file, [`CsvRow`]) and `repr`.

use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use pyo3::PyClassInitializer;
use tcgd_memory::rows::comparison::{DeviceMetric as M, DeviceSide as S};
use tcgd_memory::rows::{self as rows, CsvRow, ObservationRef, PoolRef};

use super::*;

/// One of the facade's named tuples (`MemoryPoolKey`, `MemoryObservationKey`), imported
/// once into `class`, made from `fields`; `None` for a missing key.
fn model_tuple<'py>(
    py: Python<'py>,
    class: &PyOnceLock<Py<PyType>>,
    name: &str,
    fields: Option<impl pyo3::call::PyCallArgs<'py>>,
) -> PyResult<Py<PyAny>> {
    let Some(fields) = fields else {
        return Ok(py.None());
    };
    let class = class.import(py, "torch_cudagraph_debug.memory_debug._model", name)?;
    Ok(class.call1(fields)?.unbind())
}

fn pool_key(py: Python<'_>, key: Option<PoolRef>) -> PyResult<Py<PyAny>> {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let fields = key.map(|k| (k.device_index, k.pool_id));
    model_tuple(py, &CLASS, "MemoryPoolKey", fields)
}

fn observation_key(py: Python<'_>, key: Option<ObservationRef>) -> PyResult<Py<PyAny>> {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let fields = key.map(|k| (k.device_index, k.pool_id, k.stream));
    model_tuple(py, &CLASS, "MemoryObservationKey", fields)
}

type Stats = Py<AbsoluteStats>;
type StatsDelta = Py<MemoryStatsDelta>;

fn stats(py: Python<'_>, s: &tcgd_memory::MemoryStats) -> PyResult<Stats> {
    stats_object(py, *s)
}

fn side_stats(py: Python<'_>, s: Option<&tcgd_memory::MemoryStats>) -> PyResult<Option<Stats>> {
    s.map(|s| stats(py, s)).transpose()
}

fn delta(py: Python<'_>, s: &tcgd_memory::MemoryStats) -> PyResult<StatsDelta> {
    delta_object(py, *s)
}

/// An optional value as Python writes it (`None`, `3`, `True`).
fn py_value<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "None".to_owned(), |v| v.to_string())
}

/// A row's line of its CSV file as `{column: value}` (`to_row()`).
fn csv_row<'py>(py: Python<'py>, row: &impl CsvRow) -> PyResult<Bound<'py, PyDict>> {
    crate::classes::csv_row_dict(py, row.csv_names(), row.csv_cells())
}

// ---------------------------------------------------------------------- comparison rows

/// One allocator scope (`all`, `default`, `private`) summed over every device, on each
/// side and their change.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryAllocatorScopeComparison {
    #[pyo3(get)]
    scope: &'static str,
    #[pyo3(get)]
    reference: Stats,
    #[pyo3(get)]
    candidate: Stats,
    #[pyo3(get)]
    delta: StatsDelta,
    #[pyo3(get)]
    changed: bool,
    row: rows::ScopeComparison,
}

impl MemoryAllocatorScopeComparison {
    pub(super) fn of(py: Python<'_>, row: &rows::ScopeComparison) -> PyResult<Self> {
        Ok(MemoryAllocatorScopeComparison {
            scope: row.scope.as_str(),
            reference: stats(py, &row.reference)?,
            candidate: stats(py, &row.candidate)?,
            delta: delta(py, &row.delta)?,
            changed: row.changed(),
            row: row.clone(),
        })
    }
}

#[pymethods]
impl MemoryAllocatorScopeComparison {
    /// The row as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.row)
    }

    /// The row as `allocator_scopes.csv` holds it.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        csv_row(py, &self.row)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let delta = slf.get().row.delta.reserved_bytes.to_string();
        crate::classes::attrs_repr_with(
            slf.as_any(),
            &["scope"],
            &[("delta_reserved_bytes", delta)],
        )
    }
}

/// What a row family's base class shows of its core row, whatever its subject: the
/// dict form (`to_dict()`) and the CSV line (`to_row()`).
trait RowForms: Send + Sync {
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;
    fn csv<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>>;
}

impl<R: serde::Serialize + CsvRow + Send + Sync> RowForms for R {
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, self)
    }
    fn csv<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        csv_row(py, self)
    }
}

/// One pool or `(device, pool, stream)` observation on each side (`None` on the side
/// that lacks it), how the two were paired, their statistics and change, and the
/// address lifecycle where it means something; the row's dict form, CSV line and repr.
/// The base class of `MemoryPoolComparison` and `MemoryObservationComparison`.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "_MemorySlotComparison",
    subclass,
    frozen,
    skip_from_py_object
)]
pub struct MemorySlotComparison {
    #[pyo3(get)]
    reference_key: Py<PyAny>,
    #[pyo3(get)]
    candidate_key: Py<PyAny>,
    #[pyo3(get)]
    pool_kind: &'static str,
    #[pyo3(get, name = "match")]
    match_kind: &'static str,
    #[pyo3(get)]
    reference: Option<Stats>,
    #[pyo3(get)]
    candidate: Option<Stats>,
    #[pyo3(get)]
    delta: StatsDelta,
    #[pyo3(get)]
    lifecycle: Option<tcgd_memory::Lifecycle>,
    #[pyo3(get)]
    changed: bool,
    row: Box<dyn RowForms>,
}

impl MemorySlotComparison {
    /// The Python object of `row` as the class `kind` belongs to, its keys made by
    /// `key` (`MemoryPoolKey` or `MemoryObservationKey`).
    fn with<K, C>(
        py: Python<'_>,
        row: &rows::SlotComparison<K>,
        key: fn(Python<'_>, Option<K>) -> PyResult<Py<PyAny>>,
        kind: C,
    ) -> PyResult<PyClassInitializer<C>>
    where
        K: rows::comparison::RowKey + serde::Serialize + std::fmt::Debug + Send + Sync + 'static,
        C: pyo3::PyClass<BaseType = MemorySlotComparison>,
    {
        let base = MemorySlotComparison {
            reference_key: key(py, row.keys.reference)?,
            candidate_key: key(py, row.keys.candidate)?,
            pool_kind: row.pool_kind.as_str(),
            match_kind: row.match_kind.as_str(),
            reference: side_stats(py, row.stats.reference.as_ref())?,
            candidate: side_stats(py, row.stats.candidate.as_ref())?,
            delta: delta(py, &row.delta)?,
            lifecycle: row.lifecycle,
            changed: row.changed(),
            row: Box::new(row.clone()),
        };
        Ok(PyClassInitializer::from(base).add_subclass(kind))
    }
}

#[pymethods]
impl MemorySlotComparison {
    /// The row as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.row.dict(py)
    }

    /// The row as its CSV file holds it (`pools.csv`, `observations.csv`).
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.row.csv(py)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let delta = slf
            .get()
            .delta
            .bind(slf.py())
            .as_super()
            .get()
            .reserved_bytes;
        let names = ["reference_key", "candidate_key", "match"];
        crate::classes::attrs_repr_with(
            slf.as_any(),
            &names,
            &[("delta_reserved_bytes", delta.to_string())],
        )
    }
}

/// One pool on each side, as the base class describes.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    extends = MemorySlotComparison,
    frozen,
    skip_from_py_object
)]
pub struct MemoryPoolComparison {
    /// The row's pool: the reference side's, the candidate's for a candidate-only row.
    #[pyo3(get)]
    pool_key: Py<PyAny>,
}

impl MemoryPoolComparison {
    pub(super) fn of(
        py: Python<'_>,
        row: &rows::PoolComparison,
    ) -> PyResult<PyClassInitializer<Self>> {
        let kind = MemoryPoolComparison {
            pool_key: pool_key(py, row.key())?,
        };
        MemorySlotComparison::with(py, row, pool_key, kind)
    }
}

/// One `(device, pool, stream)` observation on each side, as the base class describes.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    extends = MemorySlotComparison,
    frozen,
    skip_from_py_object
)]
pub struct MemoryObservationComparison {}

impl MemoryObservationComparison {
    pub(super) fn of(
        py: Python<'_>,
        row: &rows::ObservationComparison,
    ) -> PyResult<PyClassInitializer<Self>> {
        MemorySlotComparison::with(py, row, observation_key, MemoryObservationComparison {})
    }
}

/// One device on each side: its CUDA Runtime sample (`reference`, `candidate`), its
/// allocator rollup (`reference_allocator`, `candidate_allocator`, `allocator_delta`),
/// the device metrics of each side and their change, and the address lifecycle.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryDeviceComparison {
    #[pyo3(get)]
    reference_device_index: Option<i64>,
    #[pyo3(get)]
    candidate_device_index: Option<i64>,
    #[pyo3(get, name = "match")]
    match_kind: &'static str,
    /// The reference side's sample (`None` when its query failed or the side lacks
    /// the device); `reference_sample` is the same.
    #[pyo3(get)]
    reference: Option<rows::DeviceSample>,
    #[pyo3(get)]
    candidate: Option<rows::DeviceSample>,
    #[pyo3(get)]
    reference_sample: Option<rows::DeviceSample>,
    #[pyo3(get)]
    candidate_sample: Option<rows::DeviceSample>,
    /// The reference side's allocator rollup; `reference_stats` is the same.
    #[pyo3(get)]
    reference_allocator: Option<Stats>,
    #[pyo3(get)]
    candidate_allocator: Option<Stats>,
    #[pyo3(get)]
    reference_stats: Option<Stats>,
    #[pyo3(get)]
    candidate_stats: Option<Stats>,
    /// The allocator rollup's change; `delta` is the same.
    #[pyo3(get)]
    allocator_delta: StatsDelta,
    #[pyo3(get)]
    delta: StatsDelta,
    #[pyo3(get)]
    lifecycle: Option<tcgd_memory::Lifecycle>,
    #[pyo3(get)]
    changed: bool,
    #[pyo3(get)]
    reference_used_bytes: Option<i64>,
    #[pyo3(get)]
    candidate_used_bytes: Option<i64>,
    #[pyo3(get)]
    delta_used_bytes: Option<i64>,
    #[pyo3(get)]
    reference_free_bytes: Option<i64>,
    #[pyo3(get)]
    candidate_free_bytes: Option<i64>,
    #[pyo3(get)]
    delta_free_bytes: Option<i64>,
    #[pyo3(get)]
    reference_total_bytes: Option<i64>,
    #[pyo3(get)]
    candidate_total_bytes: Option<i64>,
    #[pyo3(get)]
    delta_total_bytes: Option<i64>,
    #[pyo3(get)]
    reference_allocator_reserved_bytes: Option<i64>,
    #[pyo3(get)]
    candidate_allocator_reserved_bytes: Option<i64>,
    #[pyo3(get)]
    delta_allocator_reserved_bytes: Option<i64>,
    #[pyo3(get)]
    reference_cuda_allocator_residual_bytes: Option<i64>,
    #[pyo3(get)]
    candidate_cuda_allocator_residual_bytes: Option<i64>,
    #[pyo3(get)]
    delta_cuda_allocator_residual_bytes: Option<i64>,
    row: rows::DeviceComparison,
}

impl MemoryDeviceComparison {
    pub(super) fn of(py: Python<'_>, row: &rows::DeviceComparison) -> PyResult<Self> {
        let reference = row.sample.reference;
        let candidate = row.sample.candidate;
        let reference_allocator = side_stats(py, row.stats.reference.as_ref())?;
        let candidate_allocator = side_stats(py, row.stats.candidate.as_ref())?;
        let allocator_delta = delta(py, &row.delta)?;
        let m = |side, metric| row.metric(side, metric);
        Ok(MemoryDeviceComparison {
            reference_device_index: row.device_index.reference,
            candidate_device_index: row.device_index.candidate,
            match_kind: row.match_kind.as_str(),
            reference_sample: reference,
            candidate_sample: candidate,
            reference,
            candidate,
            reference_stats: reference_allocator.as_ref().map(|s| s.clone_ref(py)),
            candidate_stats: candidate_allocator.as_ref().map(|s| s.clone_ref(py)),
            reference_allocator,
            candidate_allocator,
            delta: allocator_delta.clone_ref(py),
            allocator_delta,
            lifecycle: row.lifecycle,
            changed: row.changed(),
            reference_used_bytes: m(S::Reference, M::Used),
            candidate_used_bytes: m(S::Candidate, M::Used),
            delta_used_bytes: m(S::Delta, M::Used),
            reference_free_bytes: m(S::Reference, M::Free),
            candidate_free_bytes: m(S::Candidate, M::Free),
            delta_free_bytes: m(S::Delta, M::Free),
            reference_total_bytes: m(S::Reference, M::Total),
            candidate_total_bytes: m(S::Candidate, M::Total),
            delta_total_bytes: m(S::Delta, M::Total),
            reference_allocator_reserved_bytes: m(S::Reference, M::AllocatorReserved),
            candidate_allocator_reserved_bytes: m(S::Candidate, M::AllocatorReserved),
            delta_allocator_reserved_bytes: m(S::Delta, M::AllocatorReserved),
            reference_cuda_allocator_residual_bytes: m(S::Reference, M::CudaAllocatorResidual),
            candidate_cuda_allocator_residual_bytes: m(S::Candidate, M::CudaAllocatorResidual),
            delta_cuda_allocator_residual_bytes: m(S::Delta, M::CudaAllocatorResidual),
            row: row.clone(),
        })
    }
}

#[pymethods]
impl MemoryDeviceComparison {
    /// The row as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.row)
    }

    /// The row as `devices.csv` holds it.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        csv_row(py, &self.row)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let names = ["reference_device_index", "candidate_device_index", "match"];
        crate::classes::attrs_repr(slf.as_any(), &names)
    }
}

// ---------------------------------------------------------------------- timeline entries

/// The attribute that names a timeline entry's subject, for `repr`.
trait EntrySubjectAttribute {
    const SUBJECT: &'static str;
}

impl EntrySubjectAttribute for rows::ScopeTimelineEntry {
    const SUBJECT: &'static str = "scope";
}

impl EntrySubjectAttribute for rows::PoolTimelineEntry {
    const SUBJECT: &'static str = "key";
}

impl EntrySubjectAttribute for rows::ObservationTimelineEntry {
    const SUBJECT: &'static str = "key";
}

impl EntrySubjectAttribute for rows::DeviceTimelineEntry {
    const SUBJECT: &'static str = "device_index";
}

/// The parts every timeline entry has, borrowed from its core row.
struct EntryParts<'a> {
    point: &'a rows::timeline::PointTag,
    stats: &'a tcgd_memory::MemoryStats,
    delta: Option<&'a tcgd_memory::MemoryStats>,
}

impl<'a, T> From<&'a rows::timeline::TimelineEntry<T>> for EntryParts<'a> {
    fn from(e: &'a rows::timeline::TimelineEntry<T>) -> Self {
        EntryParts {
            point: &e.point,
            stats: &e.stats,
            delta: e.delta.as_ref(),
        }
    }
}

/// What every timeline entry shows besides its subject: the point, the absolute
/// statistics and their change since the previous point (`None` at the first), and the
/// entry's dict form, CSV line and repr. The base class of the four entry classes.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "_MemoryTimelineEntry",
    subclass,
    frozen,
    skip_from_py_object
)]
pub struct MemoryTimelineEntry {
    #[pyo3(get)]
    point_index: i64,
    #[pyo3(get)]
    point_label: String,
    #[pyo3(get)]
    stats: Stats,
    #[pyo3(get)]
    delta: Option<StatsDelta>,
    /// The absolute reserved bytes and the subject's attribute, for `repr`.
    reserved_bytes: i64,
    subject: &'static str,
    row: Box<dyn RowForms>,
}

impl MemoryTimelineEntry {
    /// The Python object of `row` as the class `subject` belongs to.
    fn with<K, R>(
        py: Python<'_>,
        parts: EntryParts<'_>,
        row: &R,
        subject: K,
    ) -> PyResult<PyClassInitializer<K>>
    where
        K: pyo3::PyClass<BaseType = MemoryTimelineEntry>,
        R: RowForms + EntrySubjectAttribute + Clone + 'static,
    {
        let base = MemoryTimelineEntry {
            point_index: parts.point.point_index,
            point_label: parts.point.point_label.clone(),
            stats: stats(py, parts.stats)?,
            delta: parts.delta.map(|d| delta(py, d)).transpose()?,
            reserved_bytes: parts.stats.reserved_bytes,
            subject: R::SUBJECT,
            row: Box::new(row.clone()),
        };
        Ok(PyClassInitializer::from(base).add_subclass(subject))
    }
}

#[pymethods]
impl MemoryTimelineEntry {
    /// The entry as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.row.dict(py)
    }

    /// The entry as its level's CSV file holds it (`allocator_scopes.csv`, `pools.csv`,
    /// `observations.csv`, `devices.csv`).
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.row.csv(py)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let entry = slf.get();
        let reserved = entry.reserved_bytes.to_string();
        let names = ["point_label", entry.subject];
        crate::classes::attrs_repr_with(slf.as_any(), &names, &[("reserved_bytes", reserved)])
    }
}

/// One allocator scope at one point.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    extends = MemoryTimelineEntry,
    frozen,
    skip_from_py_object
)]
pub struct MemoryAllocatorScopeTimelineEntry {
    #[pyo3(get)]
    scope: &'static str,
}

impl MemoryAllocatorScopeTimelineEntry {
    pub(super) fn of(
        py: Python<'_>,
        row: &rows::ScopeTimelineEntry,
    ) -> PyResult<PyClassInitializer<Self>> {
        let scope = row.subject.as_str();
        MemoryTimelineEntry::with(
            py,
            row.into(),
            row,
            MemoryAllocatorScopeTimelineEntry { scope },
        )
    }
}

/// One pool at one point.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    extends = MemoryTimelineEntry,
    frozen,
    skip_from_py_object
)]
pub struct MemoryPoolTimelineEntry {
    /// The pool (`MemoryPoolKey`); `pool_key` is the same.
    #[pyo3(get)]
    key: Py<PyAny>,
    #[pyo3(get)]
    pool_key: Py<PyAny>,
    #[pyo3(get)]
    pool_kind: &'static str,
}

impl MemoryPoolTimelineEntry {
    pub(super) fn of(
        py: Python<'_>,
        row: &rows::PoolTimelineEntry,
    ) -> PyResult<PyClassInitializer<Self>> {
        let key = pool_key(py, Some(row.subject))?;
        let subject = MemoryPoolTimelineEntry {
            pool_key: key.clone_ref(py),
            key,
            pool_kind: tcgd_memory::PoolKind::of(row.subject.pool_id).as_str(),
        };
        MemoryTimelineEntry::with(py, row.into(), row, subject)
    }
}

/// One `(device, pool, stream)` observation at one point.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    extends = MemoryTimelineEntry,
    frozen,
    skip_from_py_object
)]
pub struct MemoryObservationTimelineEntry {
    #[pyo3(get)]
    key: Py<PyAny>,
}

impl MemoryObservationTimelineEntry {
    pub(super) fn of(
        py: Python<'_>,
        row: &rows::ObservationTimelineEntry,
    ) -> PyResult<PyClassInitializer<Self>> {
        let key = observation_key(py, Some(row.subject))?;
        MemoryTimelineEntry::with(py, row.into(), row, MemoryObservationTimelineEntry { key })
    }
}

/// One device at one point: its sample, the allocator rollup and its change, and the
/// sample's changes since the previous point (`None` together when either point lacks a
/// sample).
#[pyclass(
    module = "torch_cudagraph_debug._native",
    extends = MemoryTimelineEntry,
    frozen,
    skip_from_py_object
)]
pub struct MemoryDeviceTimelineEntry {
    #[pyo3(get)]
    device_index: i64,
    #[pyo3(get)]
    sample: Option<rows::DeviceSample>,
    #[pyo3(get)]
    delta_used_bytes: Option<i64>,
    #[pyo3(get)]
    delta_free_bytes: Option<i64>,
    #[pyo3(get)]
    delta_total_bytes: Option<i64>,
    /// The allocator's reserved bytes on the device (the rollup's `reserved_bytes`).
    #[pyo3(get)]
    allocator_reserved_bytes: i64,
    #[pyo3(get)]
    delta_allocator_reserved_bytes: Option<i64>,
    #[pyo3(get)]
    cuda_allocator_residual_bytes: Option<i64>,
    #[pyo3(get)]
    delta_cuda_allocator_residual_bytes: Option<i64>,
}

impl MemoryDeviceTimelineEntry {
    pub(super) fn of(
        py: Python<'_>,
        row: &rows::DeviceTimelineEntry,
    ) -> PyResult<PyClassInitializer<Self>> {
        let subject = MemoryDeviceTimelineEntry {
            device_index: row.device_index,
            sample: row.sample,
            delta_used_bytes: row.delta_used_bytes(),
            delta_free_bytes: row.delta_free_bytes(),
            delta_total_bytes: row.delta_total_bytes(),
            allocator_reserved_bytes: row.stats.reserved_bytes,
            delta_allocator_reserved_bytes: row.delta.map(|d| d.reserved_bytes),
            cuda_allocator_residual_bytes: row.cuda_allocator_residual_bytes(),
            delta_cuda_allocator_residual_bytes: row.delta_cuda_allocator_residual_bytes(),
        };
        let parts = EntryParts {
            point: &row.point,
            stats: &row.stats,
            delta: row.delta.as_ref(),
        };
        MemoryTimelineEntry::with(py, parts, row, subject)
    }
}

// ---------------------------------------------------------------------- phase rows

/// The terms of one phase equation of one metric,
/// `end_gap = start_gap + candidate_change - baseline_change` (each `None` when a reading
/// is missing), and what follows from them.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryPhaseComponents {
    #[pyo3(get)]
    metric: String,
    #[pyo3(get)]
    baseline_change_bytes: Option<i64>,
    #[pyo3(get)]
    candidate_change_bytes: Option<i64>,
    #[pyo3(get)]
    start_gap_bytes: Option<i64>,
    #[pyo3(get)]
    end_gap_bytes: Option<i64>,
    /// `candidate_change - baseline_change`.
    #[pyo3(get)]
    change_gap_bytes: Option<i64>,
    /// Whether the equation holds (`None` when a term is missing).
    #[pyo3(get)]
    identity_holds: Option<bool>,
    /// Whether any of the four terms is known and not zero.
    #[pyo3(get)]
    changed: bool,
    row: rows::PhaseComponents,
}

impl MemoryPhaseComponents {
    fn of(row: rows::PhaseComponents) -> Self {
        let v = &row.values;
        MemoryPhaseComponents {
            metric: row.metric.clone(),
            baseline_change_bytes: v.baseline_change(),
            candidate_change_bytes: v.candidate_change(),
            start_gap_bytes: v.start_gap(),
            end_gap_bytes: v.end_gap(),
            change_gap_bytes: v.change_gap(),
            identity_holds: v.identity_holds(),
            changed: v.changed(),
            row,
        }
    }
}

#[pymethods]
impl MemoryPhaseComponents {
    /// The terms as `report.json` holds them.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.row)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let names = [
            "metric",
            "end_gap_bytes",
            "change_gap_bytes",
            "identity_holds",
        ];
        crate::classes::attrs_repr(slf.as_any(), &names)
    }
}

/// What every phase row shows besides its identity: the metric, the equation's terms,
/// whether the equation holds and whether anything changed, and the row's dict form,
/// CSV line and repr. The base class of the three phase decomposition classes, which
/// add the row's scope, pool pair or device pair.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "_MemoryPhaseRow",
    subclass,
    frozen,
    skip_from_py_object
)]
pub struct MemoryPhaseRow {
    #[pyo3(get)]
    metric: String,
    #[pyo3(get)]
    components: Py<MemoryPhaseComponents>,
    #[pyo3(get)]
    identity_holds: Option<bool>,
    #[pyo3(get)]
    changed: bool,
    row: rows::PhaseDecomposition,
}

impl MemoryPhaseRow {
    /// The Python object of `row` as the class `identity` belongs to.
    fn with<K: pyo3::PyClass<BaseType = MemoryPhaseRow>>(
        py: Python<'_>,
        row: &rows::PhaseDecomposition,
        identity: K,
    ) -> PyResult<PyClassInitializer<K>> {
        let base = MemoryPhaseRow {
            metric: row.metric(),
            components: Py::new(py, MemoryPhaseComponents::of(row.components()))?,
            identity_holds: row.0.values.identity_holds(),
            changed: row.changed(),
            row: row.clone(),
        };
        Ok(PyClassInitializer::from(base).add_subclass(identity))
    }
}

#[pymethods]
impl MemoryPhaseRow {
    /// The row as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.row)
    }

    /// The row as its level's CSV file holds it (`allocator_scopes.csv`, `pools.csv`,
    /// `device_decomposition.csv`).
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        csv_row(py, &self.row)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let v = &slf.get().row.0.values;
        let holds = v.identity_holds().map(|h| if h { "True" } else { "False" });
        let terms = [
            ("end_gap_bytes", py_value(v.end_gap())),
            ("change_gap_bytes", py_value(v.change_gap())),
            ("identity_holds", py_value(holds)),
        ];
        crate::classes::attrs_repr_with(slf.as_any(), &["metric"], &terms)
    }
}

/// One phase metric of one allocator scope.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    extends = MemoryPhaseRow,
    frozen,
    skip_from_py_object
)]
pub struct MemoryAllocatorScopePhaseDecomposition {
    #[pyo3(get)]
    scope: Option<&'static str>,
}

impl MemoryAllocatorScopePhaseDecomposition {
    pub(crate) fn of(
        py: Python<'_>,
        row: &rows::PhaseDecomposition,
    ) -> PyResult<PyClassInitializer<Self>> {
        let scope = row.0.scope.map(|s| s.as_str());
        MemoryPhaseRow::with(py, row, MemoryAllocatorScopePhaseDecomposition { scope })
    }
}

/// One phase metric of one mapped pool pair (either side `None` when a run lacks it).
#[pyclass(
    module = "torch_cudagraph_debug._native",
    extends = MemoryPhaseRow,
    frozen,
    skip_from_py_object
)]
pub struct MemoryPoolPhaseDecomposition {
    /// The baseline run's pool (`MemoryPoolKey`); `baseline_pool` is the same.
    #[pyo3(get)]
    baseline_key: Py<PyAny>,
    #[pyo3(get)]
    candidate_key: Py<PyAny>,
    #[pyo3(get)]
    baseline_pool: Py<PyAny>,
    #[pyo3(get)]
    candidate_pool: Py<PyAny>,
    /// `device[0] pool[0,1] -> device[0] pool[0,2]`: the pair as reports name it.
    #[pyo3(get)]
    label: String,
}

impl MemoryPoolPhaseDecomposition {
    pub(crate) fn of(
        py: Python<'_>,
        row: &rows::PhaseDecomposition,
    ) -> PyResult<PyClassInitializer<Self>> {
        let baseline = pool_key(py, row.baseline_pool())?;
        let candidate = pool_key(py, row.candidate_pool())?;
        let identity = MemoryPoolPhaseDecomposition {
            baseline_pool: baseline.clone_ref(py),
            candidate_pool: candidate.clone_ref(py),
            baseline_key: baseline,
            candidate_key: candidate,
            label: row.pool_pair_label(),
        };
        MemoryPhaseRow::with(py, row, identity)
    }
}

/// One phase metric of one device pair, allocator and CUDA Runtime metrics alike.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    extends = MemoryPhaseRow,
    frozen,
    skip_from_py_object
)]
pub struct MemoryDevicePhaseDecomposition {
    #[pyo3(get)]
    baseline_device_index: Option<i64>,
    #[pyo3(get)]
    candidate_device_index: Option<i64>,
}

impl MemoryDevicePhaseDecomposition {
    pub(crate) fn of(
        py: Python<'_>,
        row: &rows::PhaseDecomposition,
    ) -> PyResult<PyClassInitializer<Self>> {
        let identity = MemoryDevicePhaseDecomposition {
            baseline_device_index: row.0.baseline_device,
            candidate_device_index: row.0.candidate_device,
        };
        MemoryPhaseRow::with(py, row, identity)
    }
}

/// Rows as a tuple of their Python class, each converted by `convert`.
pub(super) fn converted_tuple<C, I, R>(
    py: Python<'_>,
    items: &[R],
    convert: fn(Python<'_>, &R) -> PyResult<I>,
) -> PyResult<Py<PyTuple>>
where
    C: pyo3::PyClass,
    I: Into<PyClassInitializer<C>>,
{
    let objects = items
        .iter()
        .map(|r| Bound::new(py, convert(py, r)?))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyTuple::new(py, objects)?.unbind())
}
