//! Group phase comparisons: the four-point phase comparison of every rank, and the gaps between ranks.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use crate::compare::{CompareOptions, PoolKey};
use crate::error::{MemoryError, Result};
use crate::phases::{compare_phases, PhaseComparison, PhaseLevel, PhaseRow, PhaseValues};
use crate::state::MemoryState;
use crate::stats::{public_metric_name, Scope};

use super::*;

// ---------------------------------------------------------------------- phases

/// The four endpoints of a group phase comparison.
#[derive(Debug, Clone)]
pub struct GroupPhaseEndpoints {
    pub baseline_start: PointRef,
    pub baseline_end: PointRef,
    pub candidate_start: PointRef,
    pub candidate_end: PointRef,
}

/// Per-rank pairing options: `pool_mappings[rank]`, `device_mappings[rank]`.
#[derive(Debug, Clone, Default)]
pub struct GroupPhaseOptions {
    pub pool_mappings: BTreeMap<i64, Vec<(PoolKey, PoolKey)>>,
    pub device_mappings: BTreeMap<i64, Vec<(i64, i64)>>,
}

/// One phase row of one rank (a scope, a pool pair or a device pair).
#[derive(Debug, Clone, Serialize)]
pub struct RankPhaseRow {
    pub rank: i64,
    pub row: PhaseRow,
}

impl RankPhaseRow {
    pub fn values(&self) -> &PhaseValues {
        &self.row.values
    }

    /// Whether a term of the equation is known and not zero: a change in either phase, or
    /// a gap between the runs at either end.
    pub fn changed(&self) -> bool {
        let v = self.values();
        [
            v.baseline_change(),
            v.candidate_change(),
            v.start_gap(),
            v.end_gap(),
        ]
        .iter()
        .any(|x| x.is_some_and(|x| x != 0))
    }
}

/// `candidate_change - baseline_change`, in 128 bits then checked back into 64.
pub fn change_gap(v: &PhaseValues) -> Option<i64> {
    let gap = i128::from(v.candidate_change()?) - i128::from(v.baseline_change()?);
    i64::try_from(gap).ok()
}

/// The cross-rank extrema of every term of one scope's equation for one metric.
#[derive(Debug, Clone, Serialize)]
pub struct GroupPhaseAggregate {
    pub scope: Scope,
    pub metric: String,
    pub rank_count: usize,
    /// Every rank's equation holds (`end_gap = start_gap + candidate_change -
    /// baseline_change`).
    pub identity_holds: bool,
    #[serde(flatten)]
    pub terms: TermExtrema,
}

impl GroupPhaseAggregate {
    /// Whether some rank's term is not zero: a change in either phase or a gap at either
    /// end (the change gap follows from the changes).
    pub fn changed(&self) -> bool {
        let t = &self.terms;
        [
            &t.baseline_change,
            &t.candidate_change,
            &t.start_gap,
            &t.end_gap,
        ]
        .into_iter()
        .flatten()
        .any(|e| e.min_bytes != 0 || e.max_bytes != 0)
    }
}

/// The cross-rank extrema of each term that ranks compute from their own points; `None`
/// where no rank has the term.
#[derive(Debug, Clone, Serialize)]
pub struct TermExtrema {
    pub baseline_change: Option<MetricExtrema>,
    pub candidate_change: Option<MetricExtrema>,
    pub start_gap: Option<MetricExtrema>,
    pub end_gap: Option<MetricExtrema>,
    pub change_gap: Option<MetricExtrema>,
}

impl TermExtrema {
    /// The terms' names, in the order [`all`](Self::all) gives them.
    pub const NAMES: [&'static str; 5] = [
        "baseline_change",
        "candidate_change",
        "start_gap",
        "end_gap",
        "change_gap",
    ];

    /// The extrema of each of [`NAMES`](Self::NAMES).
    pub fn all(&self) -> [Option<&MetricExtrema>; 5] {
        [
            &self.baseline_change,
            &self.candidate_change,
            &self.start_gap,
            &self.end_gap,
            &self.change_gap,
        ]
        .map(Option::as_ref)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct GroupPhaseComparison {
    pub baseline: MemoryRunGroup,
    pub candidate: MemoryRunGroup,
    /// The labels the four endpoints resolved to.
    pub endpoints: [String; 4],
    /// Ranks whose phases were compared, ascending.
    pub ranks: Vec<i64>,
    /// Common ranks left out because an incomplete run stopped before an endpoint.
    pub skipped_ranks: Vec<i64>,
    pub baseline_only_ranks: Vec<i64>,
    pub candidate_only_ranks: Vec<i64>,
    #[serde(skip)]
    pub rank_comparisons: Vec<(i64, PhaseComparison)>,
    pub phase_aggregates: Vec<GroupPhaseAggregate>,
    pub warnings: Vec<String>,
}

impl GroupPhaseComparison {
    fn rows_of(&self, level: PhaseLevel) -> Vec<RankPhaseRow> {
        self.rank_comparisons
            .iter()
            .flat_map(|(rank, c)| {
                c.rows
                    .iter()
                    .filter(move |r| r.level == level)
                    .map(move |r| RankPhaseRow {
                        rank: *rank,
                        row: r.clone(),
                    })
            })
            .collect()
    }

    /// Allocator-scope equations of every compared rank.
    pub fn rank_decomposition(&self) -> Vec<RankPhaseRow> {
        self.rows_of(PhaseLevel::Scope)
    }

    pub fn rank_pool_decomposition(&self) -> Vec<RankPhaseRow> {
        self.rows_of(PhaseLevel::Pool)
    }

    pub fn rank_device_decomposition(&self) -> Vec<RankPhaseRow> {
        self.rows_of(PhaseLevel::Device)
    }

    /// Rows (of every rank and level) whose identity does not hold.
    pub fn identity_failures(&self) -> usize {
        self.rank_comparisons
            .iter()
            .map(|(_, c)| c.identity_failures().len())
            .sum()
    }
}

pub(crate) fn endpoint<'a>(
    member: &'a GroupMember,
    label: &str,
    side: &str,
) -> Result<Option<&'a Arc<MemoryState>>> {
    match member.state(label) {
        Some(s) => Ok(Some(s)),
        None if !member.run.complete => Ok(None),
        None => Err(MemoryError::invalid(format!(
            "{side} rank {} has no point '{label}' though its run is complete",
            member.run.rank
        ))),
    }
}

/// Compares the baseline group's phase with the candidate group's, rank by rank: each
/// common rank gets the four-point equations of one run pair (`phases::compare_phases`),
/// and every scope equation term gets its cross-rank extrema.
pub fn compare_run_group_phases(
    baseline: &MemoryRunGroup,
    candidate: &MemoryRunGroup,
    endpoints: &GroupPhaseEndpoints,
    options: &GroupPhaseOptions,
) -> Result<GroupPhaseComparison> {
    let labels = [
        baseline.resolve(&endpoints.baseline_start, "baseline_start")?,
        baseline.resolve(&endpoints.baseline_end, "baseline_end")?,
        candidate.resolve(&endpoints.candidate_start, "candidate_start")?,
        candidate.resolve(&endpoints.candidate_end, "candidate_end")?,
    ];
    let order = |g: &MemoryRunGroup, l: &str| g.labels.iter().position(|x| x == l);
    if order(baseline, &labels[0]) > order(baseline, &labels[1]) {
        return Err(MemoryError::invalid(format!(
            "baseline_start '{}' comes after baseline_end '{}'",
            labels[0], labels[1]
        )));
    }
    if order(candidate, &labels[2]) > order(candidate, &labels[3]) {
        return Err(MemoryError::invalid(format!(
            "candidate_start '{}' comes after candidate_end '{}'",
            labels[2], labels[3]
        )));
    }
    let base_ranks: BTreeSet<i64> = baseline.ranks().into_iter().collect();
    let cand_ranks: BTreeSet<i64> = candidate.ranks().into_iter().collect();
    let common: Vec<i64> = base_ranks.intersection(&cand_ranks).copied().collect();
    for (what, keys) in [
        (
            "pool_mappings",
            options.pool_mappings.keys().copied().collect::<Vec<_>>(),
        ),
        (
            "device_mappings",
            options.device_mappings.keys().copied().collect(),
        ),
    ] {
        if let Some(r) = keys.iter().find(|r| !common.contains(r)) {
            return Err(MemoryError::invalid(format!(
                "{what} names rank {r}, which is not a rank of both groups (common ranks: {})",
                list(common.iter().map(i64::to_string))
            )));
        }
    }
    let mut warnings = Vec::new();
    let baseline_only: Vec<i64> = base_ranks.difference(&cand_ranks).copied().collect();
    let candidate_only: Vec<i64> = cand_ranks.difference(&base_ranks).copied().collect();
    if !baseline_only.is_empty() {
        warnings.push(format!(
            "rank(s) {} are only in the baseline group and are not compared",
            list(baseline_only.iter().map(i64::to_string))
        ));
    }
    if !candidate_only.is_empty() {
        warnings.push(format!(
            "rank(s) {} are only in the candidate group and are not compared",
            list(candidate_only.iter().map(i64::to_string))
        ));
    }
    let mut rank_comparisons = Vec::new();
    let mut skipped = Vec::new();
    for &rank in &common {
        let (b, c) = (
            baseline.member(rank).expect("common rank"),
            candidate.member(rank).expect("common rank"),
        );
        let states = [
            endpoint(b, &labels[0], "baseline")?,
            endpoint(b, &labels[1], "baseline")?,
            endpoint(c, &labels[2], "candidate")?,
            endpoint(c, &labels[3], "candidate")?,
        ];
        let [Some(bs), Some(be), Some(cs), Some(ce)] = states else {
            let missing: Vec<&str> = states
                .iter()
                .zip(&labels)
                .filter(|(s, _)| s.is_none())
                .map(|(_, l)| l.as_str())
                .collect();
            warnings.push(format!(
                "rank {rank} is skipped: its incomplete run stopped before {}",
                list(missing.iter().map(|l| format!("'{l}'")))
            ));
            skipped.push(rank);
            continue;
        };
        let opts = CompareOptions {
            pool_mapping: options
                .pool_mappings
                .get(&rank)
                .cloned()
                .unwrap_or_default(),
            device_mapping: options
                .device_mappings
                .get(&rank)
                .cloned()
                .unwrap_or_default(),
        };
        let phase = compare_phases((bs, be), (cs, ce), &opts)?;
        warnings.extend(phase.warnings.iter().map(|w| format!("rank {rank}: {w}")));
        rank_comparisons.push((rank, phase));
    }
    if rank_comparisons.is_empty() {
        return Err(MemoryError::invalid(format!(
            "no rank holds the whole phase in both groups (common ranks: {}; skipped: {})",
            if common.is_empty() {
                "none".to_owned()
            } else {
                list(common.iter().map(i64::to_string))
            },
            if skipped.is_empty() {
                "none".to_owned()
            } else {
                list(skipped.iter().map(i64::to_string))
            }
        )));
    }
    let phase_aggregates = aggregate_phases(&rank_comparisons);
    Ok(GroupPhaseComparison {
        baseline: baseline.clone(),
        candidate: candidate.clone(),
        endpoints: labels,
        ranks: rank_comparisons.iter().map(|(r, _)| *r).collect(),
        skipped_ranks: skipped,
        baseline_only_ranks: baseline_only,
        candidate_only_ranks: candidate_only,
        rank_comparisons,
        phase_aggregates,
        warnings,
    })
}

pub(crate) fn aggregate_phases(ranks: &[(i64, PhaseComparison)]) -> Vec<GroupPhaseAggregate> {
    // (scope, metric) in the first rank's row order: every rank has the same scope rows.
    let mut keys: Vec<(Scope, &'static str)> = Vec::new();
    for (_, c) in ranks {
        for r in c.rows.iter().filter(|r| r.level == PhaseLevel::Scope) {
            if let Some(scope) = r.scope {
                if !keys.contains(&(scope, r.metric)) {
                    keys.push((scope, r.metric));
                }
            }
        }
    }
    keys.into_iter()
        .map(|(scope, metric)| {
            let values: Vec<(i64, PhaseValues)> = ranks
                .iter()
                .filter_map(|(rank, c)| {
                    c.rows
                        .iter()
                        .find(|r| {
                            r.level == PhaseLevel::Scope
                                && r.scope == Some(scope)
                                && r.metric == metric
                        })
                        .map(|r| (*rank, r.values))
                })
                .collect();
            let term = |f: fn(&PhaseValues) -> Option<i64>| {
                let v: Vec<(i64, i64)> = values
                    .iter()
                    .filter_map(|(r, x)| f(x).map(|x| (*r, x)))
                    .collect();
                MetricExtrema::of(&v)
            };
            GroupPhaseAggregate {
                scope,
                metric: public_metric_name(metric),
                rank_count: values.len(),
                identity_holds: values
                    .iter()
                    .all(|(_, v)| v.identity_holds() != Some(false)),
                terms: TermExtrema {
                    baseline_change: term(PhaseValues::baseline_change),
                    candidate_change: term(PhaseValues::candidate_change),
                    start_gap: term(PhaseValues::start_gap),
                    end_gap: term(PhaseValues::end_gap),
                    change_gap: term(change_gap),
                },
            }
        })
        .collect()
}
