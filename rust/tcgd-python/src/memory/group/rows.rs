//! The rows of group summaries and group phase comparisons: per-rank states, extrema
//! across ranks and phase aggregates, as plain frozen value objects.

use std::collections::BTreeMap;

use tcgd_memory::group::{self as rg, MetricExtrema, RankPhaseRow};

use super::super::*;

#[pyclass(
    module = "torch_cudagraph_debug._native",
    frozen,
    get_all,
    skip_from_py_object
)]
#[derive(Clone)]
pub struct MemoryRankPointState {
    pub(crate) rank: i64,
    pub(crate) point_index: i64,
    pub(crate) label: String,
    pub(crate) scope: String,
    pub(crate) observation_count: usize,
    pub(crate) pool_count: usize,
    /// Every metric by its public name (`allocated_bytes`, `segment_count`, ...).
    pub(crate) stats: BTreeMap<String, i64>,
}

#[pymethods]
impl MemoryRankPointState {
    fn __repr__(&self) -> String {
        format!(
            "MemoryRankPointState(rank={}, point={:?}, scope={:?}, allocated_bytes={})",
            self.rank,
            self.label,
            self.scope,
            self.stats
                .get("allocated_bytes")
                .copied()
                .unwrap_or_default()
        )
    }
}

#[pyclass(
    module = "torch_cudagraph_debug._native",
    frozen,
    get_all,
    skip_from_py_object
)]
#[derive(Clone)]
pub struct MemoryRankDevicePointState {
    pub(crate) rank: i64,
    pub(crate) point_index: i64,
    pub(crate) label: String,
    pub(crate) device_index: i64,
    pub(crate) free_bytes: Option<i64>,
    pub(crate) total_bytes: Option<i64>,
    pub(crate) used_bytes: Option<i64>,
    pub(crate) cuda_allocator_residual_bytes: Option<i64>,
    pub(crate) stats: BTreeMap<String, i64>,
}

#[pymethods]
impl MemoryRankDevicePointState {
    fn __repr__(&self) -> String {
        format!(
            "MemoryRankDevicePointState(rank={}, point={:?}, device_index={}, used_bytes={:?})",
            self.rank, self.label, self.device_index, self.used_bytes
        )
    }
}

#[pyclass(
    module = "torch_cudagraph_debug._native",
    frozen,
    get_all,
    skip_from_py_object
)]
#[derive(Clone)]
pub struct MemoryMetricExtrema {
    pub(crate) min_bytes: i64,
    pub(crate) min_rank: i64,
    pub(crate) min_ranks: Vec<i64>,
    pub(crate) max_bytes: i64,
    pub(crate) max_rank: i64,
    pub(crate) max_ranks: Vec<i64>,
    pub(crate) spread_bytes: i64,
    pub(crate) rank_count: usize,
}

impl From<&MetricExtrema> for MemoryMetricExtrema {
    fn from(e: &MetricExtrema) -> Self {
        MemoryMetricExtrema {
            min_bytes: e.min_bytes,
            min_rank: e.min_rank,
            min_ranks: e.min_ranks.clone(),
            max_bytes: e.max_bytes,
            max_rank: e.max_rank,
            max_ranks: e.max_ranks.clone(),
            spread_bytes: e.spread_bytes,
            rank_count: e.rank_count,
        }
    }
}

#[pymethods]
impl MemoryMetricExtrema {
    fn __repr__(&self) -> String {
        format!(
            "MemoryMetricExtrema(min_bytes={}, min_rank={}, max_bytes={}, max_rank={}, \
             spread_bytes={})",
            self.min_bytes, self.min_rank, self.max_bytes, self.max_rank, self.spread_bytes
        )
    }
}

#[pyclass(
    module = "torch_cudagraph_debug._native",
    frozen,
    get_all,
    skip_from_py_object
)]
#[derive(Clone)]
pub struct MemoryRankPointAggregate {
    pub(crate) point_index: i64,
    pub(crate) label: String,
    pub(crate) scope: String,
    pub(crate) metric: String,
    pub(crate) rank_count: usize,
    pub(crate) min_bytes: i64,
    pub(crate) min_rank: i64,
    pub(crate) min_ranks: Vec<i64>,
    pub(crate) max_bytes: i64,
    pub(crate) max_rank: i64,
    pub(crate) max_ranks: Vec<i64>,
    pub(crate) spread_bytes: i64,
    /// `max_rank`: the metrics are absolute and never negative, so the most is the worst.
    pub(crate) worst_rank: i64,
}

#[pymethods]
impl MemoryRankPointAggregate {
    fn __repr__(&self) -> String {
        format!(
            "MemoryRankPointAggregate(point={:?}, scope={:?}, metric={:?}, min_bytes={}, \
             max_bytes={}, worst_rank={})",
            self.label, self.scope, self.metric, self.min_bytes, self.max_bytes, self.worst_rank
        )
    }
}

macro_rules! phase_row_class {
    ($name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        #[pyclass(module = "torch_cudagraph_debug._native", frozen, get_all, skip_from_py_object)]
        #[derive(Clone)]
        pub struct $name {
            rank: i64,
            $($field: $ty,)*
            metric: String,
            baseline_start_bytes: Option<i64>,
            baseline_end_bytes: Option<i64>,
            candidate_start_bytes: Option<i64>,
            candidate_end_bytes: Option<i64>,
            baseline_change_bytes: Option<i64>,
            candidate_change_bytes: Option<i64>,
            start_gap_bytes: Option<i64>,
            end_gap_bytes: Option<i64>,
            change_gap_bytes: Option<i64>,
            identity_holds: Option<bool>,
        }

        impl $name {
            pub(crate) fn of(r: &RankPhaseRow, $($field: $ty),*) -> Self {
                let v = r.values();
                $name {
                    rank: r.rank,
                    $($field,)*
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
                }
            }
        }

        #[pymethods]
        impl $name {
            fn __repr__(&self) -> String {
                format!(
                    "{}(rank={}, metric={:?}, end_gap_bytes={:?}, change_gap_bytes={:?})",
                    stringify!($name),
                    self.rank,
                    self.metric,
                    self.end_gap_bytes,
                    self.change_gap_bytes
                )
            }
        }
    };
}

phase_row_class!(MemoryRankPhaseDecomposition { scope: String });
phase_row_class!(MemoryRankPoolPhaseDecomposition {
    baseline_device_index: Option<i64>,
    baseline_pool_id: Option<(i64, i64)>,
    candidate_device_index: Option<i64>,
    candidate_pool_id: Option<(i64, i64)>,
});
phase_row_class!(MemoryRankDevicePhaseDecomposition {
    baseline_device_index: Option<i64>,
    candidate_device_index: Option<i64>,
});

#[pyclass(
    module = "torch_cudagraph_debug._native",
    frozen,
    get_all,
    skip_from_py_object
)]
pub struct MemoryRunGroupPhaseAggregate {
    pub(crate) scope: String,
    pub(crate) metric: String,
    pub(crate) rank_count: usize,
    pub(crate) baseline_change: Option<Py<MemoryMetricExtrema>>,
    pub(crate) candidate_change: Option<Py<MemoryMetricExtrema>>,
    pub(crate) start_gap: Option<Py<MemoryMetricExtrema>>,
    pub(crate) end_gap: Option<Py<MemoryMetricExtrema>>,
    pub(crate) change_gap: Option<Py<MemoryMetricExtrema>>,
}

#[pymethods]
impl MemoryRunGroupPhaseAggregate {
    fn __repr__(&self) -> String {
        format!(
            "MemoryRunGroupPhaseAggregate(scope={:?}, metric={:?}, rank_count={})",
            self.scope, self.metric, self.rank_count
        )
    }
}
