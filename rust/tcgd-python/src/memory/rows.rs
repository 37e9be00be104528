//! The rows of comparisons, timelines and phase decompositions as frozen Python classes
//! over [`tcgd_memory::rows`], which builds them and computes every fact they show.
//!
//! Each class is a plain `#[pyclass]` whose Python attributes are its `#[pyo3(get)]`
//! fields, converted once from the core row when the result is made; the core row stays
//! in a private field for `to_dict()` (its serde form, the one `report.json` holds),
//! `to_row()` (its line of the result's CSV file, [`CsvRow`]) and `repr`.

use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
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

    fn __repr__(&self) -> String {
        format!(
            "MemoryAllocatorScopeComparison(scope={:?}, delta_reserved_bytes={})",
            self.scope, self.row.delta.reserved_bytes
        )
    }
}

/// One pool on each side (`None` on the side that lacks it), how the two were paired,
/// their statistics and change, and the address lifecycle where it means something.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryPoolComparison {
    #[pyo3(get)]
    reference_key: Py<PyAny>,
    #[pyo3(get)]
    candidate_key: Py<PyAny>,
    /// The row's pool: the reference side's, the candidate's for a candidate-only row.
    #[pyo3(get)]
    pool_key: Py<PyAny>,
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
    row: rows::PoolComparison,
}

impl MemoryPoolComparison {
    pub(super) fn of(py: Python<'_>, row: &rows::PoolComparison) -> PyResult<Self> {
        Ok(MemoryPoolComparison {
            reference_key: pool_key(py, row.keys.reference)?,
            candidate_key: pool_key(py, row.keys.candidate)?,
            pool_key: pool_key(py, row.key())?,
            pool_kind: row.pool_kind.as_str(),
            match_kind: row.match_kind.as_str(),
            reference: side_stats(py, row.stats.reference.as_ref())?,
            candidate: side_stats(py, row.stats.candidate.as_ref())?,
            delta: delta(py, &row.delta)?,
            lifecycle: row.lifecycle,
            changed: row.changed(),
            row: row.clone(),
        })
    }
}

#[pymethods]
impl MemoryPoolComparison {
    /// The row as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.row)
    }

    /// The row as `pools.csv` holds it.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        csv_row(py, &self.row)
    }

    fn __repr__(&self) -> String {
        slot_repr("MemoryPoolComparison", &self.row)
    }
}

/// One `(device, pool, stream)` observation on each side, as [`MemoryPoolComparison`]
/// is for a pool.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryObservationComparison {
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
    row: rows::ObservationComparison,
}

impl MemoryObservationComparison {
    pub(super) fn of(py: Python<'_>, row: &rows::ObservationComparison) -> PyResult<Self> {
        Ok(MemoryObservationComparison {
            reference_key: observation_key(py, row.keys.reference)?,
            candidate_key: observation_key(py, row.keys.candidate)?,
            pool_kind: row.pool_kind.as_str(),
            match_kind: row.match_kind.as_str(),
            reference: side_stats(py, row.stats.reference.as_ref())?,
            candidate: side_stats(py, row.stats.candidate.as_ref())?,
            delta: delta(py, &row.delta)?,
            lifecycle: row.lifecycle,
            changed: row.changed(),
            row: row.clone(),
        })
    }
}

#[pymethods]
impl MemoryObservationComparison {
    /// The row as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.row)
    }

    /// The row as `observations.csv` holds it.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        csv_row(py, &self.row)
    }

    fn __repr__(&self) -> String {
        slot_repr("MemoryObservationComparison", &self.row)
    }
}

fn slot_repr<K: std::fmt::Debug>(class: &str, row: &rows::SlotComparison<K>) -> String {
    format!(
        "{class}(reference_key={:?}, candidate_key={:?}, match={:?}, delta_reserved_bytes={})",
        row.keys.reference,
        row.keys.candidate,
        row.match_kind.as_str(),
        row.delta.reserved_bytes
    )
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

    fn __repr__(&self) -> String {
        format!(
            "MemoryDeviceComparison(reference_device_index={:?}, candidate_device_index={:?}, \
             match={:?})",
            self.reference_device_index, self.candidate_device_index, self.match_kind
        )
    }
}

// ---------------------------------------------------------------------- timeline entries

fn entry_repr<T: std::fmt::Debug>(class: &str, e: &rows::timeline::TimelineEntry<T>) -> String {
    format!(
        "{class}(point_label={:?}, {:?}, reserved_bytes={})",
        e.point.point_label, e.subject, e.stats.reserved_bytes
    )
}

/// One allocator scope at one point: absolute statistics and the change since the
/// previous point (`None` at the first).
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryAllocatorScopeTimelineEntry {
    #[pyo3(get)]
    point_index: i64,
    #[pyo3(get)]
    point_label: String,
    #[pyo3(get)]
    scope: &'static str,
    #[pyo3(get)]
    stats: Stats,
    #[pyo3(get)]
    delta: Option<StatsDelta>,
    row: rows::ScopeTimelineEntry,
}

impl MemoryAllocatorScopeTimelineEntry {
    pub(super) fn of(py: Python<'_>, row: &rows::ScopeTimelineEntry) -> PyResult<Self> {
        Ok(MemoryAllocatorScopeTimelineEntry {
            point_index: row.point.point_index,
            point_label: row.point.point_label.clone(),
            scope: row.subject.as_str(),
            stats: stats(py, &row.stats)?,
            delta: row.delta.as_ref().map(|d| delta(py, d)).transpose()?,
            row: row.clone(),
        })
    }
}

#[pymethods]
impl MemoryAllocatorScopeTimelineEntry {
    /// The entry as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.row)
    }

    /// The entry as `allocator_scopes.csv` holds it.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        csv_row(py, &self.row)
    }

    fn __repr__(&self) -> String {
        entry_repr("MemoryAllocatorScopeTimelineEntry", &self.row)
    }
}

/// One pool at one point: absolute statistics and the change since the previous point.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryPoolTimelineEntry {
    #[pyo3(get)]
    point_index: i64,
    #[pyo3(get)]
    point_label: String,
    /// The pool (`MemoryPoolKey`); `pool_key` is the same.
    #[pyo3(get)]
    key: Py<PyAny>,
    #[pyo3(get)]
    pool_key: Py<PyAny>,
    #[pyo3(get)]
    pool_kind: &'static str,
    #[pyo3(get)]
    stats: Stats,
    #[pyo3(get)]
    delta: Option<StatsDelta>,
    row: rows::PoolTimelineEntry,
}

impl MemoryPoolTimelineEntry {
    pub(super) fn of(py: Python<'_>, row: &rows::PoolTimelineEntry) -> PyResult<Self> {
        let key = pool_key(py, Some(row.subject))?;
        Ok(MemoryPoolTimelineEntry {
            point_index: row.point.point_index,
            point_label: row.point.point_label.clone(),
            pool_key: key.clone_ref(py),
            key,
            pool_kind: tcgd_memory::PoolKind::of(row.subject.pool_id).as_str(),
            stats: stats(py, &row.stats)?,
            delta: row.delta.as_ref().map(|d| delta(py, d)).transpose()?,
            row: row.clone(),
        })
    }
}

#[pymethods]
impl MemoryPoolTimelineEntry {
    /// The entry as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.row)
    }

    /// The entry as `pools.csv` holds it.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        csv_row(py, &self.row)
    }

    fn __repr__(&self) -> String {
        entry_repr("MemoryPoolTimelineEntry", &self.row)
    }
}

/// One `(device, pool, stream)` observation at one point.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryObservationTimelineEntry {
    #[pyo3(get)]
    point_index: i64,
    #[pyo3(get)]
    point_label: String,
    #[pyo3(get)]
    key: Py<PyAny>,
    #[pyo3(get)]
    stats: Stats,
    #[pyo3(get)]
    delta: Option<StatsDelta>,
    row: rows::ObservationTimelineEntry,
}

impl MemoryObservationTimelineEntry {
    pub(super) fn of(py: Python<'_>, row: &rows::ObservationTimelineEntry) -> PyResult<Self> {
        Ok(MemoryObservationTimelineEntry {
            point_index: row.point.point_index,
            point_label: row.point.point_label.clone(),
            key: observation_key(py, Some(row.subject))?,
            stats: stats(py, &row.stats)?,
            delta: row.delta.as_ref().map(|d| delta(py, d)).transpose()?,
            row: row.clone(),
        })
    }
}

#[pymethods]
impl MemoryObservationTimelineEntry {
    /// The entry as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.row)
    }

    /// The entry as `observations.csv` holds it.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        csv_row(py, &self.row)
    }

    fn __repr__(&self) -> String {
        entry_repr("MemoryObservationTimelineEntry", &self.row)
    }
}

/// One device at one point: its sample, the allocator rollup and its change, and the
/// sample's changes since the previous point (`None` together when either point lacks a
/// sample).
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryDeviceTimelineEntry {
    #[pyo3(get)]
    point_index: i64,
    #[pyo3(get)]
    point_label: String,
    #[pyo3(get)]
    device_index: i64,
    #[pyo3(get)]
    sample: Option<rows::DeviceSample>,
    #[pyo3(get)]
    stats: Stats,
    #[pyo3(get)]
    delta: Option<StatsDelta>,
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
    row: rows::DeviceTimelineEntry,
}

impl MemoryDeviceTimelineEntry {
    pub(super) fn of(py: Python<'_>, row: &rows::DeviceTimelineEntry) -> PyResult<Self> {
        Ok(MemoryDeviceTimelineEntry {
            point_index: row.point.point_index,
            point_label: row.point.point_label.clone(),
            device_index: row.device_index,
            sample: row.sample,
            stats: stats(py, &row.stats)?,
            delta: row.delta.as_ref().map(|d| delta(py, d)).transpose()?,
            delta_used_bytes: row.delta_used_bytes(),
            delta_free_bytes: row.delta_free_bytes(),
            delta_total_bytes: row.delta_total_bytes(),
            allocator_reserved_bytes: row.stats.reserved_bytes,
            delta_allocator_reserved_bytes: row.delta.map(|d| d.reserved_bytes),
            cuda_allocator_residual_bytes: row.cuda_allocator_residual_bytes(),
            delta_cuda_allocator_residual_bytes: row.delta_cuda_allocator_residual_bytes(),
            row: row.clone(),
        })
    }
}

#[pymethods]
impl MemoryDeviceTimelineEntry {
    /// The entry as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.row)
    }

    /// The entry as `devices.csv` holds it.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        csv_row(py, &self.row)
    }

    fn __repr__(&self) -> String {
        format!(
            "MemoryDeviceTimelineEntry(point_label={:?}, device_index={}, reserved_bytes={})",
            self.point_label, self.device_index, self.allocator_reserved_bytes
        )
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

    fn __repr__(&self) -> String {
        format!(
            "MemoryPhaseComponents(metric={:?}, end_gap_bytes={:?}, change_gap_bytes={:?}, \
             identity_holds={:?})",
            self.metric, self.end_gap_bytes, self.change_gap_bytes, self.identity_holds
        )
    }
}

/// What every phase row holds besides its identity, converted once.
struct PhaseTerms {
    metric: String,
    components: Py<MemoryPhaseComponents>,
    identity_holds: Option<bool>,
    changed: bool,
}

impl PhaseTerms {
    fn of(py: Python<'_>, row: &rows::PhaseDecomposition) -> PyResult<Self> {
        Ok(PhaseTerms {
            metric: row.metric(),
            components: Py::new(py, MemoryPhaseComponents::of(row.components()))?,
            identity_holds: row.0.values.identity_holds(),
            changed: row.changed(),
        })
    }
}

fn phase_repr(class: &str, row: &rows::PhaseDecomposition) -> String {
    let v = &row.0.values;
    format!(
        "{class}(metric={:?}, end_gap_bytes={:?}, change_gap_bytes={:?}, identity_holds={:?})",
        row.metric(),
        v.end_gap(),
        v.change_gap(),
        v.identity_holds()
    )
}

/// One phase metric of one allocator scope.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryAllocatorScopePhaseDecomposition {
    #[pyo3(get)]
    scope: Option<&'static str>,
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

impl MemoryAllocatorScopePhaseDecomposition {
    pub(super) fn of(py: Python<'_>, row: &rows::PhaseDecomposition) -> PyResult<Self> {
        let t = PhaseTerms::of(py, row)?;
        Ok(MemoryAllocatorScopePhaseDecomposition {
            scope: row.0.scope.map(|s| s.as_str()),
            metric: t.metric,
            components: t.components,
            identity_holds: t.identity_holds,
            changed: t.changed,
            row: row.clone(),
        })
    }
}

#[pymethods]
impl MemoryAllocatorScopePhaseDecomposition {
    /// The row as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.row)
    }

    /// The row as `allocator_scopes.csv` holds it.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        csv_row(py, &self.row)
    }

    fn __repr__(&self) -> String {
        phase_repr("MemoryAllocatorScopePhaseDecomposition", &self.row)
    }
}

/// One phase metric of one mapped pool pair (either side `None` when a run lacks it).
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
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

impl MemoryPoolPhaseDecomposition {
    pub(super) fn of(py: Python<'_>, row: &rows::PhaseDecomposition) -> PyResult<Self> {
        let t = PhaseTerms::of(py, row)?;
        let baseline = pool_key(py, row.baseline_pool())?;
        let candidate = pool_key(py, row.candidate_pool())?;
        Ok(MemoryPoolPhaseDecomposition {
            baseline_pool: baseline.clone_ref(py),
            candidate_pool: candidate.clone_ref(py),
            baseline_key: baseline,
            candidate_key: candidate,
            label: row.pool_pair_label(),
            metric: t.metric,
            components: t.components,
            identity_holds: t.identity_holds,
            changed: t.changed,
            row: row.clone(),
        })
    }
}

#[pymethods]
impl MemoryPoolPhaseDecomposition {
    /// The row as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.row)
    }

    /// The row as `pools.csv` holds it.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        csv_row(py, &self.row)
    }

    fn __repr__(&self) -> String {
        phase_repr("MemoryPoolPhaseDecomposition", &self.row)
    }
}

/// One phase metric of one device pair, allocator and CUDA Runtime metrics alike.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryDevicePhaseDecomposition {
    #[pyo3(get)]
    baseline_device_index: Option<i64>,
    #[pyo3(get)]
    candidate_device_index: Option<i64>,
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

impl MemoryDevicePhaseDecomposition {
    pub(super) fn of(py: Python<'_>, row: &rows::PhaseDecomposition) -> PyResult<Self> {
        let t = PhaseTerms::of(py, row)?;
        Ok(MemoryDevicePhaseDecomposition {
            baseline_device_index: row.0.baseline_device,
            candidate_device_index: row.0.candidate_device,
            metric: t.metric,
            components: t.components,
            identity_holds: t.identity_holds,
            changed: t.changed,
            row: row.clone(),
        })
    }
}

#[pymethods]
impl MemoryDevicePhaseDecomposition {
    /// The row as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.row)
    }

    /// The row as `device_decomposition.csv` holds it.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        csv_row(py, &self.row)
    }

    fn __repr__(&self) -> String {
        phase_repr("MemoryDevicePhaseDecomposition", &self.row)
    }
}

/// Rows as a tuple of their Python class, each converted by `convert`.
pub(super) fn converted_tuple<C, R>(
    py: Python<'_>,
    items: &[R],
    convert: fn(Python<'_>, &R) -> PyResult<C>,
) -> PyResult<Py<PyTuple>>
where
    C: pyo3::PyClass + Into<pyo3::PyClassInitializer<C>>,
{
    let objects = items
        .iter()
        .map(|r| Bound::new(py, convert(py, r)?))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyTuple::new(py, objects)?.unbind())
}
