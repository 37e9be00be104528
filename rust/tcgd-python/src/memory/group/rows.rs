//! The rows of group summaries and group phase comparisons: per-rank states, extrema
//! across ranks and phase aggregates, as frozen classes over the rows tcgd-memory builds.
//! Each keeps its core row for `to_dict()` (the row as `report.json` holds it).

use std::collections::BTreeMap;

use tcgd_memory::group::{self as rg, MetricExtrema, RankPhaseRow};
use tcgd_memory::phases::PhaseLevel;
use tcgd_memory::rows as core_rows;

use crate::results::serde_to_py;

use super::super::*;

/// One rank's allocator state of one scope at one point.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryRankPointState {
    #[pyo3(get)]
    rank: i64,
    /// The id of the rank's run.
    #[pyo3(get)]
    run_id: String,
    #[pyo3(get)]
    point_index: i64,
    /// The point's label.
    #[pyo3(get)]
    label: String,
    /// `all`, `default` or `private`.
    #[pyo3(get)]
    scope: &'static str,
    #[pyo3(get)]
    observation_count: usize,
    #[pyo3(get)]
    pool_count: usize,
    /// Every metric by its public name (`allocated_bytes`, `segment_count`, ...).
    #[pyo3(get)]
    stats: BTreeMap<String, i64>,
    inner: rg::RankPointState,
}

impl MemoryRankPointState {
    pub(crate) fn of(r: &rg::RankPointState) -> Self {
        MemoryRankPointState {
            rank: r.at.rank,
            run_id: r.at.run_id.clone(),
            point_index: r.at.point_index,
            label: r.at.label.clone(),
            scope: r.scope.as_str(),
            observation_count: r.observation_count,
            pool_count: r.pool_count,
            stats: r.stats.iter().cloned().collect(),
            inner: r.clone(),
        }
    }
}

#[pymethods]
impl MemoryRankPointState {
    /// The reference's name of `label`.
    #[getter]
    fn point_label(&self) -> String {
        self.label.clone()
    }

    /// The row as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let allocated = slf.get().stats.get("allocated_bytes").copied().unwrap_or(0);
        crate::classes::attrs_repr_with(
            slf.as_any(),
            &["rank", "label", "scope"],
            &[("allocated_bytes", allocated.to_string())],
        )
    }
}

/// One rank's device at one point: the allocator's rollup and the CUDA Runtime reading.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryRankDevicePointState {
    #[pyo3(get)]
    rank: i64,
    /// The id of the rank's run.
    #[pyo3(get)]
    run_id: String,
    #[pyo3(get)]
    point_index: i64,
    #[pyo3(get)]
    label: String,
    #[pyo3(get)]
    device_index: i64,
    /// The CUDA Runtime reading (`torch.cuda.mem_get_info`), when the point has one.
    #[pyo3(get)]
    sample: Option<tcgd_memory::rows::DeviceSample>,
    #[pyo3(get)]
    free_bytes: Option<i64>,
    #[pyo3(get)]
    total_bytes: Option<i64>,
    /// `total_bytes - free_bytes`: device-wide, other processes included.
    #[pyo3(get)]
    used_bytes: Option<i64>,
    /// What the caching allocator reserves on the device.
    #[pyo3(get)]
    allocator_reserved_bytes: i64,
    /// `used_bytes - allocator_reserved_bytes` (signed; not an ownership attribution).
    #[pyo3(get)]
    cuda_allocator_residual_bytes: Option<i64>,
    /// The device rollup's metrics by public name.
    #[pyo3(get)]
    stats: BTreeMap<String, i64>,
    inner: rg::RankDevicePointState,
}

impl MemoryRankDevicePointState {
    pub(crate) fn of(r: &rg::RankDevicePointState) -> Self {
        MemoryRankDevicePointState {
            rank: r.at.rank,
            run_id: r.at.run_id.clone(),
            point_index: r.at.point_index,
            label: r.at.label.clone(),
            device_index: r.device_index,
            sample: r.sample(),
            free_bytes: r.free_bytes,
            total_bytes: r.total_bytes,
            used_bytes: r.used_bytes,
            allocator_reserved_bytes: r.allocator_reserved_bytes(),
            cuda_allocator_residual_bytes: r.cuda_allocator_residual_bytes,
            stats: r.stats.iter().cloned().collect(),
            inner: r.clone(),
        }
    }
}

#[pymethods]
impl MemoryRankDevicePointState {
    /// The reference's name of `label`.
    #[getter]
    fn point_label(&self) -> String {
        self.label.clone()
    }

    /// The row as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &["rank", "label", "device_index", "used_bytes"],
        )
    }
}

/// The extrema of one metric of one scope at one point across the ranks that recorded
/// it, flat: the point, then the extrema's values.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryRankPointAggregate {
    #[pyo3(get)]
    point_index: i64,
    #[pyo3(get)]
    label: String,
    #[pyo3(get)]
    scope: &'static str,
    /// The metric's public name (`allocated_bytes`, ...).
    #[pyo3(get)]
    metric: String,
    /// Ranks that recorded the point.
    #[pyo3(get)]
    rank_count: usize,
    #[pyo3(get)]
    min_bytes: i64,
    #[pyo3(get)]
    min_rank: i64,
    #[pyo3(get)]
    min_ranks: Vec<i64>,
    #[pyo3(get)]
    max_bytes: i64,
    #[pyo3(get)]
    max_rank: i64,
    #[pyo3(get)]
    max_ranks: Vec<i64>,
    #[pyo3(get)]
    spread_bytes: i64,
    /// `max_rank`: the metrics are absolute and never negative, so the most is the worst.
    #[pyo3(get)]
    worst_rank: i64,
    inner: rg::RankPointAggregate,
}

impl MemoryRankPointAggregate {
    pub(crate) fn of(a: &rg::RankPointAggregate) -> Self {
        let e = &a.extrema;
        MemoryRankPointAggregate {
            point_index: a.point_index,
            label: a.label.clone(),
            scope: a.scope.as_str(),
            metric: a.metric.clone(),
            rank_count: e.rank_count,
            min_bytes: e.min_bytes,
            min_rank: e.min_rank,
            min_ranks: e.min_ranks.clone(),
            max_bytes: e.max_bytes,
            max_rank: e.max_rank,
            max_ranks: e.max_ranks.clone(),
            spread_bytes: e.spread_bytes,
            worst_rank: a.worst_rank(),
            inner: a.clone(),
        }
    }
}

#[pymethods]
impl MemoryRankPointAggregate {
    /// The reference's name of `label`.
    #[getter]
    fn point_label(&self) -> String {
        self.label.clone()
    }

    /// The reference's name of `min_bytes`.
    #[getter]
    fn min_value(&self) -> i64 {
        self.min_bytes
    }

    /// The reference's name of `max_bytes`.
    #[getter]
    fn max_value(&self) -> i64 {
        self.max_bytes
    }

    /// The reference's name of `spread_bytes`.
    #[getter]
    fn spread_value(&self) -> i64 {
        self.spread_bytes
    }

    /// The row as `report.json` holds it (with `worst_rank`).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner.json())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &[
                "label",
                "scope",
                "metric",
                "min_bytes",
                "max_bytes",
                "worst_rank",
            ],
        )
    }
}

/// One rank's phase row of one level (an allocator scope, a pool pair or a device pair):
/// the metric and the terms of its four-point equation. The base of
/// `MemoryRankPhaseDecomposition`, `MemoryRankPoolPhaseDecomposition` and
/// `MemoryRankDevicePhaseDecomposition`, which add their level's identity.
#[pyclass(
    name = "_MemoryRankPhaseRow",
    module = "torch_cudagraph_debug._native",
    frozen,
    subclass,
    skip_from_py_object
)]
pub struct MemoryRankPhaseRow {
    #[pyo3(get)]
    rank: i64,
    /// The metric's public name (`reserved_bytes`, ...).
    #[pyo3(get)]
    metric: String,
    #[pyo3(get)]
    baseline_start_bytes: Option<i64>,
    #[pyo3(get)]
    baseline_end_bytes: Option<i64>,
    #[pyo3(get)]
    candidate_start_bytes: Option<i64>,
    #[pyo3(get)]
    candidate_end_bytes: Option<i64>,
    #[pyo3(get)]
    baseline_change_bytes: Option<i64>,
    #[pyo3(get)]
    candidate_change_bytes: Option<i64>,
    #[pyo3(get)]
    start_gap_bytes: Option<i64>,
    #[pyo3(get)]
    end_gap_bytes: Option<i64>,
    /// `candidate_change_bytes - baseline_change_bytes`.
    #[pyo3(get)]
    change_gap_bytes: Option<i64>,
    /// `end_gap = start_gap + candidate_change - baseline_change`; `None` when a term is
    /// unknown.
    #[pyo3(get)]
    identity_holds: Option<bool>,
    /// A term is known and not zero: a change in either phase or a gap at either end.
    #[pyo3(get)]
    changed: bool,
    /// The row as the rank's own phase comparison holds it
    /// (`MemoryAllocatorScopePhaseDecomposition`, `MemoryPoolPhaseDecomposition` or
    /// `MemoryDevicePhaseDecomposition`).
    #[pyo3(get)]
    decomposition: Py<PyAny>,
    inner: RankPhaseRow,
}

impl MemoryRankPhaseRow {
    fn of(py: Python<'_>, r: &RankPhaseRow) -> PyResult<Self> {
        let v = r.values();
        let row = core_rows::PhaseDecomposition(r.row.clone());
        let decomposition = match r.row.level {
            PhaseLevel::Scope => {
                Bound::new(py, MemoryAllocatorScopePhaseDecomposition::of(py, &row)?)?.into_any()
            }
            PhaseLevel::Pool => {
                Bound::new(py, MemoryPoolPhaseDecomposition::of(py, &row)?)?.into_any()
            }
            PhaseLevel::Device => {
                Bound::new(py, MemoryDevicePhaseDecomposition::of(py, &row)?)?.into_any()
            }
        }
        .unbind();
        Ok(MemoryRankPhaseRow {
            rank: r.rank,
            metric: tcgd_memory::stats::public_metric_name(r.row.metric),
            baseline_start_bytes: v.baseline_start,
            baseline_end_bytes: v.baseline_end,
            candidate_start_bytes: v.candidate_start,
            candidate_end_bytes: v.candidate_end,
            baseline_change_bytes: v.baseline_change(),
            candidate_change_bytes: v.candidate_change(),
            start_gap_bytes: v.start_gap(),
            end_gap_bytes: v.end_gap(),
            change_gap_bytes: rg::change_gap(v),
            identity_holds: v.identity_holds(),
            changed: r.changed(),
            decomposition,
            inner: r.clone(),
        })
    }
}

#[pymethods]
impl MemoryRankPhaseRow {
    /// The row as `report.json` holds it: its rank, identity and terms, flat.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner.json())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &["rank", "metric", "end_gap_bytes", "change_gap_bytes"],
        )
    }
}

/// One rank's allocator-scope phase row.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    frozen,
    extends = MemoryRankPhaseRow,
    skip_from_py_object
)]
pub struct MemoryRankPhaseDecomposition {
    /// `all`, `default` or `private`.
    #[pyo3(get)]
    scope: &'static str,
}

/// One rank's phase row of one mapped pool pair.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    frozen,
    extends = MemoryRankPhaseRow,
    skip_from_py_object
)]
pub struct MemoryRankPoolPhaseDecomposition {
    #[pyo3(get)]
    baseline_device_index: Option<i64>,
    #[pyo3(get)]
    baseline_pool_id: Option<(i64, i64)>,
    #[pyo3(get)]
    candidate_device_index: Option<i64>,
    #[pyo3(get)]
    candidate_pool_id: Option<(i64, i64)>,
}

/// One rank's phase row of one device pair.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    frozen,
    extends = MemoryRankPhaseRow,
    skip_from_py_object
)]
pub struct MemoryRankDevicePhaseDecomposition {
    #[pyo3(get)]
    baseline_device_index: Option<i64>,
    #[pyo3(get)]
    candidate_device_index: Option<i64>,
}

/// A level's rank rows as a tuple of `Kind` objects, `kind` giving each row's identity.
pub(crate) fn rank_rows<'py, Kind>(
    py: Python<'py>,
    rows: &[RankPhaseRow],
    kind: fn(&RankPhaseRow) -> Kind,
) -> PyResult<Py<PyTuple>>
where
    Kind: pyo3::PyClass<BaseType = MemoryRankPhaseRow>,
{
    let bound = rows
        .iter()
        .map(|r| {
            let base = MemoryRankPhaseRow::of(py, r)?;
            Bound::new(
                py,
                pyo3::PyClassInitializer::from(base).add_subclass(kind(r)),
            )
        })
        .collect::<PyResult<Vec<Bound<'py, Kind>>>>()?;
    Ok(PyTuple::new(py, bound)?.unbind())
}

pub(crate) fn scope_row(r: &RankPhaseRow) -> MemoryRankPhaseDecomposition {
    MemoryRankPhaseDecomposition {
        scope: r.row.scope.map_or("", |s| s.as_str()),
    }
}

pub(crate) fn pool_row(r: &RankPhaseRow) -> MemoryRankPoolPhaseDecomposition {
    MemoryRankPoolPhaseDecomposition {
        baseline_device_index: r.row.baseline_device,
        baseline_pool_id: r.row.baseline_pool,
        candidate_device_index: r.row.candidate_device,
        candidate_pool_id: r.row.candidate_pool,
    }
}

pub(crate) fn device_row(r: &RankPhaseRow) -> MemoryRankDevicePhaseDecomposition {
    MemoryRankDevicePhaseDecomposition {
        baseline_device_index: r.row.baseline_device,
        candidate_device_index: r.row.candidate_device,
    }
}

fn extrema(py: Python<'_>, e: &Option<MetricExtrema>) -> PyResult<Option<Py<MetricExtrema>>> {
    e.clone().map(|e| Py::new(py, e)).transpose()
}

/// The cross-rank extrema of every term of one scope's equation for one metric.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryRunGroupPhaseAggregate {
    #[pyo3(get)]
    scope: &'static str,
    #[pyo3(get)]
    metric: String,
    /// Ranks compared.
    #[pyo3(get)]
    rank_count: usize,
    /// Every rank's equation holds.
    #[pyo3(get)]
    identity_holds: bool,
    /// Some rank's term is not zero (a change in either phase or a gap at either end).
    #[pyo3(get)]
    changed: bool,
    #[pyo3(get)]
    baseline_change: Option<Py<MetricExtrema>>,
    #[pyo3(get)]
    candidate_change: Option<Py<MetricExtrema>>,
    #[pyo3(get)]
    start_gap: Option<Py<MetricExtrema>>,
    #[pyo3(get)]
    end_gap: Option<Py<MetricExtrema>>,
    #[pyo3(get)]
    change_gap: Option<Py<MetricExtrema>>,
    inner: rg::GroupPhaseAggregate,
}

impl MemoryRunGroupPhaseAggregate {
    pub(crate) fn of(py: Python<'_>, a: &rg::GroupPhaseAggregate) -> PyResult<Self> {
        let t = &a.terms;
        Ok(MemoryRunGroupPhaseAggregate {
            scope: a.scope.as_str(),
            metric: a.metric.clone(),
            rank_count: a.rank_count,
            identity_holds: a.identity_holds,
            changed: a.changed(),
            baseline_change: extrema(py, &t.baseline_change)?,
            candidate_change: extrema(py, &t.candidate_change)?,
            start_gap: extrema(py, &t.start_gap)?,
            end_gap: extrema(py, &t.end_gap)?,
            change_gap: extrema(py, &t.change_gap)?,
            inner: a.clone(),
        })
    }
}

#[pymethods]
impl MemoryRunGroupPhaseAggregate {
    /// The aggregate as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(slf.as_any(), &["scope", "metric", "rank_count"])
    }
}
