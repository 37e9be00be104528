//! The group summary: per point, every rank's allocator and device state, and the extrema across ranks (never sums).

use serde::Serialize;

use crate::stats::{public_metric_name, MemoryStats, Scope};

use super::*;

// ---------------------------------------------------------------------- summary

/// Every metric of a stats row under its public name, in the store's column order.
pub fn stats_metrics(stats: &MemoryStats) -> Vec<(String, i64)> {
    stats
        .columns()
        .iter()
        .map(|(n, v)| (public_metric_name(n), *v))
        .collect()
}

/// The public names of [`stats_metrics`], in order.
pub fn stat_names() -> Vec<String> {
    stats_metrics(&MemoryStats::default())
        .into_iter()
        .map(|(n, _)| n)
        .collect()
}

/// Metrics as one JSON object, `{name: value}`.
fn metrics_map<S: serde::Serializer>(
    metrics: &[(String, i64)],
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.collect_map(metrics.iter().map(|(n, v)| (n, v)))
}

/// One rank's point, as the rows of a group summary name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RankPoint {
    pub rank: i64,
    /// The id of the rank's run.
    pub run_id: String,
    pub point_index: i64,
    pub label: String,
}

/// One rank's allocator state of one scope at one point.
#[derive(Debug, Clone, Serialize)]
pub struct RankPointState {
    #[serde(flatten)]
    pub at: RankPoint,
    pub scope: Scope,
    pub observation_count: usize,
    pub pool_count: usize,
    #[serde(serialize_with = "metrics_map")]
    pub stats: Vec<(String, i64)>,
}

/// One rank's device at one point: the allocator's rollup and the CUDA Runtime sample.
#[derive(Debug, Clone, Serialize)]
pub struct RankDevicePointState {
    #[serde(flatten)]
    pub at: RankPoint,
    pub device_index: i64,
    pub free_bytes: Option<i64>,
    pub total_bytes: Option<i64>,
    pub used_bytes: Option<i64>,
    pub cuda_allocator_residual_bytes: Option<i64>,
    #[serde(serialize_with = "metrics_map")]
    pub stats: Vec<(String, i64)>,
}

impl RankDevicePointState {
    /// What the caching allocator reserves on the device (its `reserved_bytes`).
    pub fn allocator_reserved_bytes(&self) -> i64 {
        self.stats
            .iter()
            .find(|(n, _)| n == "reserved_bytes")
            .map_or(0, |(_, v)| *v)
    }

    /// The CUDA Runtime reading, when the point has one.
    pub fn sample(&self) -> Option<crate::rows::DeviceSample> {
        Some(crate::rows::DeviceSample {
            free_bytes: self.free_bytes?,
            total_bytes: self.total_bytes?,
        })
    }
}

/// Minimum and maximum of one value across ranks, with the ranks holding them.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        module = "torch_cudagraph_debug._native",
        name = "MemoryMetricExtrema",
        frozen,
        get_all,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetricExtrema {
    pub min_bytes: i64,
    /// The lowest rank holding the minimum; `min_ranks` lists every rank holding it.
    pub min_rank: i64,
    pub min_ranks: Vec<i64>,
    pub max_bytes: i64,
    pub max_rank: i64,
    pub max_ranks: Vec<i64>,
    /// `max_bytes - min_bytes` (saturating).
    pub spread_bytes: i64,
    /// Ranks that have the value.
    pub rank_count: usize,
}

impl MetricExtrema {
    /// `None` when no rank has the value. The spread is computed in 128 bits and
    /// saturates: signed values of different ranks can be further apart than 64 bits.
    pub fn of(values: &[(i64, i64)]) -> Option<MetricExtrema> {
        let min = values.iter().map(|(_, v)| *v).min()?;
        let max = values.iter().map(|(_, v)| *v).max()?;
        let holding = |x: i64| -> Vec<i64> {
            let mut r: Vec<i64> = values
                .iter()
                .filter(|(_, v)| *v == x)
                .map(|(r, _)| *r)
                .collect();
            r.sort_unstable();
            r
        };
        let (min_ranks, max_ranks) = (holding(min), holding(max));
        let spread = (i128::from(max) - i128::from(min)).min(i128::from(i64::MAX)) as i64;
        Some(MetricExtrema {
            min_bytes: min,
            min_rank: min_ranks[0],
            min_ranks,
            max_bytes: max,
            max_rank: max_ranks[0],
            max_ranks,
            spread_bytes: spread,
            rank_count: values.len(),
        })
    }
}

/// One metric of one scope at one point across the ranks that recorded the point.
#[derive(Debug, Clone, Serialize)]
pub struct RankPointAggregate {
    pub point_index: i64,
    pub label: String,
    pub scope: Scope,
    pub metric: String,
    #[serde(flatten)]
    pub extrema: MetricExtrema,
}

impl RankPointAggregate {
    /// The rank with the most of an absolute (never negative) metric.
    pub fn worst_rank(&self) -> i64 {
        self.extrema.max_rank
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct GroupSummary {
    pub group: MemoryRunGroup,
    pub rank_points: Vec<RankPointState>,
    pub rank_devices: Vec<RankDevicePointState>,
    pub point_aggregates: Vec<RankPointAggregate>,
}

pub(crate) fn summarise(group: &MemoryRunGroup) -> GroupSummary {
    let mut rank_points = Vec::new();
    let mut rank_devices = Vec::new();
    for m in &group.members {
        for s in &m.states {
            let at = RankPoint {
                rank: m.run.rank,
                run_id: m.run.run_id.clone(),
                point_index: s.identity.index,
                label: s.identity.label.clone(),
            };
            for scope in Scope::ALL {
                let pools = s
                    .pool_stats()
                    .iter()
                    .filter(|((_, p), _)| scope.contains(*p))
                    .count();
                let observations = s
                    .observations
                    .iter()
                    .filter(|(k, _)| scope.contains(k.pool))
                    .count();
                rank_points.push(RankPointState {
                    at: at.clone(),
                    scope,
                    observation_count: observations,
                    pool_count: pools,
                    stats: stats_metrics(&s.scope_stats(None, scope)),
                });
            }
            for &d in &s.devices {
                let memory = s.memory(d);
                rank_devices.push(RankDevicePointState {
                    at: at.clone(),
                    device_index: d,
                    free_bytes: memory.free_bytes,
                    total_bytes: memory.total_bytes,
                    used_bytes: memory.cuda_used(),
                    cuda_allocator_residual_bytes: s.residual(d),
                    stats: stats_metrics(&s.device_stats(d)),
                });
            }
        }
    }
    let mut point_aggregates = Vec::new();
    for (index, label) in group.labels.iter().enumerate() {
        for scope in Scope::ALL {
            let rows: Vec<&RankPointState> = rank_points
                .iter()
                .filter(|r| r.at.point_index == index as i64 && r.scope == scope)
                .collect();
            let Some(first) = rows.first() else { continue };
            for (metric, _) in first.stats.iter().filter(|(n, _)| n.ends_with("_bytes")) {
                let values: Vec<(i64, i64)> = rows
                    .iter()
                    .filter_map(|r| {
                        r.stats
                            .iter()
                            .find(|(n, _)| n == metric)
                            .map(|(_, v)| (r.at.rank, *v))
                    })
                    .collect();
                if let Some(extrema) = MetricExtrema::of(&values) {
                    point_aggregates.push(RankPointAggregate {
                        point_index: index as i64,
                        label: label.clone(),
                        scope,
                        metric: metric.clone(),
                        extrema,
                    });
                }
            }
        }
    }
    GroupSummary {
        group: group.clone(),
        rank_points,
        rank_devices,
        point_aggregates,
    }
}
