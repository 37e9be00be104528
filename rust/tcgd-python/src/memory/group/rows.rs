//! The rows of group summaries and group phase comparisons: per-rank states, extrema
//! across ranks and phase aggregates, as frozen classes over the rows tcgd-memory builds.

use std::collections::BTreeMap;

use tcgd_memory::group::{self as rg, MetricExtrema, RankPhaseRow};

use crate::classes::frozen_class;

use super::super::*;

frozen_class! {
    #[pyclass]
    pub struct MemoryRankPointState(rg::RankPointState);
    |r, py| {
        rank: i64 => r.at.rank;
        point_index: i64 => r.at.point_index;
        label: String => r.at.label.clone();
        scope: &'static str => r.scope.as_str();
        observation_count: usize => r.observation_count;
        pool_count: usize => r.pool_count;
        /// Every metric by its public name (`allocated_bytes`, `segment_count`, ...).
        stats: BTreeMap<String, i64> => r.stats.iter().cloned().collect();
    }
    {
        fn __repr__(&self) -> String {
            let r = &self.inner;
            let allocated = r.stats.iter().find(|(name, _)| name == "allocated_bytes");
            format!(
                "MemoryRankPointState(rank={}, point={:?}, scope={:?}, allocated_bytes={})",
                r.at.rank,
                r.at.label,
                r.scope.as_str(),
                allocated.map_or(0, |(_, v)| *v)
            )
        }
    }
}

frozen_class! {
    #[pyclass]
    pub struct MemoryRankDevicePointState(rg::RankDevicePointState);
    |r, py| {
        rank: i64 => r.at.rank;
        point_index: i64 => r.at.point_index;
        label: String => r.at.label.clone();
        device_index: i64 => r.device_index;
        free_bytes: Option<i64> => r.free_bytes;
        total_bytes: Option<i64> => r.total_bytes;
        used_bytes: Option<i64> => r.used_bytes;
        cuda_allocator_residual_bytes: Option<i64> => r.cuda_allocator_residual_bytes;
        stats: BTreeMap<String, i64> => r.stats.iter().cloned().collect();
    }
    repr(rank, label, device_index, used_bytes);
}

frozen_class! {
    #[pyclass]
    pub struct MemoryMetricExtrema(MetricExtrema);
    |e, py| {
        min_bytes: i64 => e.min_bytes;
        min_rank: i64 => e.min_rank;
        min_ranks: Vec<i64> => e.min_ranks.clone();
        max_bytes: i64 => e.max_bytes;
        max_rank: i64 => e.max_rank;
        max_ranks: Vec<i64> => e.max_ranks.clone();
        spread_bytes: i64 => e.spread_bytes;
        rank_count: usize => e.rank_count;
    }
    repr(min_bytes, min_rank, max_bytes, max_rank, spread_bytes);
}

frozen_class! {
    /// The extrema of one metric at one point, flat: the point, then the extrema's values.
    #[pyclass]
    pub struct MemoryRankPointAggregate(rg::RankPointAggregate);
    |a, py| {
        point_index: i64 => a.point_index;
        label: String => a.label.clone();
        scope: &'static str => a.scope.as_str();
        metric: String => a.metric.clone();
        rank_count: usize => a.extrema.rank_count;
        min_bytes: i64 => a.extrema.min_bytes;
        min_rank: i64 => a.extrema.min_rank;
        min_ranks: Vec<i64> => a.extrema.min_ranks.clone();
        max_bytes: i64 => a.extrema.max_bytes;
        max_rank: i64 => a.extrema.max_rank;
        max_ranks: Vec<i64> => a.extrema.max_ranks.clone();
        spread_bytes: i64 => a.extrema.spread_bytes;
        /// `max_rank`: the metrics are absolute and never negative, so the most is the
        /// worst.
        worst_rank: i64 => a.worst_rank();
    }
    repr(label, scope, metric, min_bytes, max_bytes, worst_rank);
}

/// A class of one rank's phase rows: the rank, the row's identity (`$getters`), then the
/// metric and the terms of its equation.
macro_rules! phase_row_class {
    ($class:ident |$r:ident, $py:ident| { $($getters:tt)* }) => {
        frozen_class! {
            #[pyclass]
            pub struct $class(RankPhaseRow);
            |$r, $py| {
                rank: i64 => $r.rank;
                $($getters)*
                metric: String => tcgd_memory::stats::public_metric_name($r.row.metric);
                baseline_start_bytes: Option<i64> => $r.values().baseline_start;
                baseline_end_bytes: Option<i64> => $r.values().baseline_end;
                candidate_start_bytes: Option<i64> => $r.values().candidate_start;
                candidate_end_bytes: Option<i64> => $r.values().candidate_end;
                baseline_change_bytes: Option<i64> => $r.values().baseline_change();
                candidate_change_bytes: Option<i64> => $r.values().candidate_change();
                start_gap_bytes: Option<i64> => $r.values().start_gap();
                end_gap_bytes: Option<i64> => $r.values().end_gap();
                change_gap_bytes: Option<i64> => rg::change_gap($r.values());
                identity_holds: Option<bool> => $r.values().identity_holds();
            }
            repr(rank, metric, end_gap_bytes, change_gap_bytes);
        }
    };
}

phase_row_class!(MemoryRankPhaseDecomposition |r, py| {
    scope: &'static str => r.row.scope.map_or("", |s| s.as_str());
});
phase_row_class!(MemoryRankPoolPhaseDecomposition |r, py| {
    baseline_device_index: Option<i64> => r.row.baseline_device;
    baseline_pool_id: Option<(i64, i64)> => r.row.baseline_pool;
    candidate_device_index: Option<i64> => r.row.candidate_device;
    candidate_pool_id: Option<(i64, i64)> => r.row.candidate_pool;
});
phase_row_class!(MemoryRankDevicePhaseDecomposition |r, py| {
    baseline_device_index: Option<i64> => r.row.baseline_device;
    candidate_device_index: Option<i64> => r.row.candidate_device;
});

fn extrema(e: &Option<MetricExtrema>) -> Option<MemoryMetricExtrema> {
    e.clone().map(MemoryMetricExtrema::from)
}

frozen_class! {
    #[pyclass]
    pub struct MemoryRunGroupPhaseAggregate(rg::GroupPhaseAggregate);
    |a, py| {
        scope: &'static str => a.scope.as_str();
        metric: String => a.metric.clone();
        rank_count: usize => a.rank_count;
        baseline_change: Option<MemoryMetricExtrema> => extrema(&a.terms.baseline_change);
        candidate_change: Option<MemoryMetricExtrema> => extrema(&a.terms.candidate_change);
        start_gap: Option<MemoryMetricExtrema> => extrema(&a.terms.start_gap);
        end_gap: Option<MemoryMetricExtrema> => extrema(&a.terms.end_gap);
        change_gap: Option<MemoryMetricExtrema> => extrema(&a.terms.change_gap);
    }
    repr(scope, metric, rank_count);
}
