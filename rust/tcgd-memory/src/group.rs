//! Run groups: the memory runs of one multi-process job, one per rank, checked to belong
//! together, summarised per point across ranks and compared phase by phase rank by rank.
//!
//! GPU memory is never summed across ranks: each rank owns its devices, so a sum would
//! add bytes of different GPUs (or of one GPU shared by several processes) into a number
//! that no device holds. Cross-rank views are extrema (minimum, maximum, the ranks that
//! hold them, the spread) and per-rank rows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use tcgd_store::{list_runs, RunKind, RunSelector};

use crate::compare::{CompareOptions, PoolKey};
use crate::error::{MemoryError, Result};
use crate::phases::{compare_phases, PhaseComparison, PhaseLevel, PhaseRow, PhaseValues};
use crate::run::MemoryRunReader;
use crate::state::MemoryState;
use crate::stats::{MemoryStats, Scope};

/// Provenance facts that say which software produced a run; the others (host name,
/// process id, devices) differ between ranks by nature and are not compared.
const PROVENANCE_KEYS: [&str; 5] = ["producer_version", "python", "torch", "cuda", "platform"];

/// One rank's run as the group holds it: identity from its manifest and its states.
#[derive(Debug, Clone, Serialize)]
pub struct GroupMember {
    pub rank: i64,
    /// The job root holding the run.
    pub path: PathBuf,
    pub name: String,
    pub run_id: String,
    pub complete: bool,
    pub world_size: Option<i64>,
    pub group_id: Option<String>,
    pub labels: Vec<String>,
    #[serde(skip)]
    pub provenance: serde_json::Value,
    #[serde(skip)]
    pub run_metadata: serde_json::Value,
    #[serde(skip)]
    pub states: Vec<Arc<MemoryState>>,
}

impl GroupMember {
    /// A member from an opened run; a run without a rank cannot be placed in a group.
    pub fn from_reader(path: &Path, reader: &MemoryRunReader) -> Result<GroupMember> {
        let manifest = reader.manifest();
        let header = &manifest.header;
        let rank = header.rank.ok_or_else(|| {
            MemoryError::invalid(format!(
                "run '{}' in '{}' has no rank; a run group needs every run's rank (record \
                 with rank= or the RANK environment variable)",
                header.name,
                path.display()
            ))
        })?;
        let states = reader.states().to_vec();
        Ok(GroupMember {
            rank,
            path: path.to_path_buf(),
            name: header.name.clone(),
            run_id: header.run_id.clone(),
            complete: manifest.complete,
            world_size: header.world_size,
            group_id: header.group_id.clone(),
            labels: states.iter().map(|s| s.identity.label.clone()).collect(),
            provenance: header.provenance.clone(),
            run_metadata: header.run_metadata.clone(),
            states,
        })
    }

    fn state(&self, label: &str) -> Option<&Arc<MemoryState>> {
        self.states.iter().find(|s| s.identity.label == label)
    }
}

/// The runs of one job, by rank, with what is doubtful about the set as a whole.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryRunGroup {
    pub name: String,
    pub root: Option<PathBuf>,
    pub group_id: Option<String>,
    /// The world size the runs declare (`None` when none does).
    pub world_size: Option<i64>,
    /// By rank, ascending.
    pub members: Vec<GroupMember>,
    /// Ranks below the declared world size with no run.
    pub missing_ranks: Vec<i64>,
    /// The longest rank's labels: every rank's labels are this sequence or a prefix.
    pub labels: Vec<String>,
    /// Every declared rank has a run and every run finished.
    pub complete: bool,
    pub warnings: Vec<String>,
}

fn list(items: impl IntoIterator<Item = String>) -> String {
    items.into_iter().collect::<Vec<_>>().join(", ")
}

/// Where the memory runs under `root` are: the runs of `root` itself when it is a job
/// root, and those of each direct child directory that is one. In path, name and rank
/// order.
pub fn discover(root: &Path) -> Result<Vec<(PathBuf, RunSelector)>> {
    if !root.is_dir() {
        return Err(MemoryError::invalid(format!(
            "'{}' is not a directory; a run group is a job root holding one memory run per \
             rank, or a directory of such roots",
            root.display()
        )));
    }
    let mut found = Vec::new();
    let mut add = |dir: &Path| -> Result<()> {
        for run in list_runs(dir)? {
            if run.kind == RunKind::Memory {
                found.push((
                    dir.to_path_buf(),
                    RunSelector {
                        name: Some(run.name.clone()),
                        rank: Some(run.rank),
                        kind: Some(RunKind::Memory),
                    },
                ));
            }
        }
        Ok(())
    };
    let is_root = |dir: &Path| dir.join("runs").join("_delta_log").is_dir();
    if is_root(root) {
        add(root)?;
    }
    let mut children: Vec<PathBuf> = std::fs::read_dir(root)
        .map_err(|source| MemoryError::Io {
            path: root.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && is_root(p))
        .collect();
    children.sort();
    for child in children {
        add(&child)?;
    }
    if found.is_empty() {
        return Err(MemoryError::invalid(format!(
            "'{}' holds no memory run (neither it nor a directory in it is a job root with \
             memory runs)",
            root.display()
        )));
    }
    Ok(found)
}

impl MemoryRunGroup {
    /// Opens every memory run under `root` (`discover`) and checks them as a group.
    pub fn load(root: &Path) -> Result<MemoryRunGroup> {
        let mut members = Vec::new();
        for (path, selector) in discover(root)? {
            let reader =
                MemoryRunReader::open_selected(&path, &selector, tcgd_store::OnDamage::Raise)?;
            members.push(GroupMember::from_reader(&path, &reader)?);
        }
        MemoryRunGroup::build(Some(root.to_path_buf()), members)
    }

    /// Checks runs as one group: unique ranks, one name, one ordered label sequence (an
    /// incomplete run may stop early), consistent group ids and world sizes.
    pub fn build(root: Option<PathBuf>, members: Vec<GroupMember>) -> Result<MemoryRunGroup> {
        if members.is_empty() {
            return Err(MemoryError::invalid("a run group needs at least one run"));
        }
        let mut warnings = Vec::new();
        let name = members[0].name.clone();
        if let Some(other) = members.iter().find(|m| m.name != name) {
            return Err(MemoryError::invalid(format!(
                "the runs of a group share one name: '{}' holds run '{name}', '{}' holds \
                 run '{}'; load each name as its own group",
                members[0].path.display(),
                other.path.display(),
                other.name
            )));
        }
        let mut by_rank: BTreeMap<i64, GroupMember> = BTreeMap::new();
        for m in members {
            if m.rank < 0 {
                return Err(MemoryError::invalid(format!(
                    "run '{}' in '{}' has rank {}; ranks are 0 or more",
                    m.name,
                    m.path.display(),
                    m.rank
                )));
            }
            let (rank, path) = (m.rank, m.path.clone());
            if let Some(other) = by_rank.insert(rank, m) {
                return Err(MemoryError::invalid(format!(
                    "rank {rank} has two runs ('{}' and '{}'); a group holds one run per rank",
                    other.path.display(),
                    path.display()
                )));
            }
        }
        let members: Vec<GroupMember> = by_rank.into_values().collect();

        let ids: BTreeSet<&str> = members
            .iter()
            .filter_map(|m| m.group_id.as_deref())
            .collect();
        if ids.len() > 1 {
            return Err(MemoryError::invalid(format!(
                "the runs name different group ids ({}); they come from different jobs",
                list(ids.iter().map(|i| format!("'{i}'")))
            )));
        }
        let group_id = ids.iter().next().map(|s| (*s).to_owned());
        let no_id: Vec<i64> = members
            .iter()
            .filter(|m| m.group_id.is_none())
            .map(|m| m.rank)
            .collect();
        if group_id.is_some() && !no_id.is_empty() {
            warnings.push(format!(
                "rank(s) {} declare no group id; the others declare '{}'",
                list(no_id.iter().map(i64::to_string)),
                group_id.as_deref().unwrap_or_default()
            ));
        }
        let sizes: BTreeSet<i64> = members.iter().filter_map(|m| m.world_size).collect();
        if sizes.len() > 1 {
            return Err(MemoryError::invalid(format!(
                "the runs declare different world sizes ({}); they come from different jobs",
                list(sizes.iter().map(i64::to_string))
            )));
        }
        let world_size = sizes.iter().next().copied();
        match world_size {
            None => warnings.push(
                "no run declares a world size; ranks that recorded nothing cannot be told \
                 apart from ranks that never existed"
                    .to_owned(),
            ),
            Some(w) => {
                if let Some(m) = members.iter().find(|m| m.rank >= w) {
                    return Err(MemoryError::invalid(format!(
                        "run '{}' in '{}' has rank {} but the world size is {w}",
                        m.name,
                        m.path.display(),
                        m.rank
                    )));
                }
                let undeclared: Vec<i64> = members
                    .iter()
                    .filter(|m| m.world_size.is_none())
                    .map(|m| m.rank)
                    .collect();
                if !undeclared.is_empty() {
                    warnings.push(format!(
                        "rank(s) {} declare no world size; the others declare {w}",
                        list(undeclared.iter().map(i64::to_string))
                    ));
                }
            }
        }
        let missing_ranks: Vec<i64> = match world_size {
            Some(w) => (0..w)
                .filter(|r| !members.iter().any(|m| m.rank == *r))
                .collect(),
            None => Vec::new(),
        };
        if !missing_ranks.is_empty() {
            warnings.push(format!(
                "rank(s) {} of world size {} have no run",
                list(missing_ranks.iter().map(i64::to_string)),
                world_size.unwrap_or_default()
            ));
        }

        // Label sequences: every rank records the same points in the same order; a rank
        // that crashed stops early (its labels are a prefix), and says so by being
        // incomplete.
        let longest = members
            .iter()
            .max_by_key(|m| (m.labels.len(), std::cmp::Reverse(m.rank)))
            .map(|m| (m.rank, m.labels.clone()))
            .unwrap_or_default();
        for m in &members {
            if let Some(at) = m.labels.iter().zip(&longest.1).position(|(a, b)| a != b) {
                return Err(MemoryError::invalid(format!(
                    "the ranks of a group record the same points in the same order: rank {}'s \
                     point {at} is '{}', rank {}'s is '{}'",
                    m.rank, m.labels[at], longest.0, longest.1[at]
                )));
            }
            if m.labels.len() < longest.1.len() {
                if m.complete {
                    return Err(MemoryError::invalid(format!(
                        "rank {} finished with {} of the group's {} points (rank {} recorded \
                         '{}' after them); a complete run records every point",
                        m.rank,
                        m.labels.len(),
                        longest.1.len(),
                        longest.0,
                        longest.1[m.labels.len()]
                    )));
                }
                warnings.push(format!(
                    "rank {} is incomplete (it may have crashed): it recorded {} of {} points, \
                     up to '{}'",
                    m.rank,
                    m.labels.len(),
                    longest.1.len(),
                    m.labels.last().map_or("(none)", String::as_str)
                ));
            } else if !m.complete {
                warnings.push(format!(
                    "rank {} is incomplete: its run did not finish, though it holds every \
                     point",
                    m.rank
                ));
            }
        }

        let first = &members[0];
        for key in PROVENANCE_KEYS {
            let value = |m: &GroupMember| m.provenance.get(key).cloned();
            let differing: Vec<String> = members
                .iter()
                .filter(|m| value(m) != value(first))
                .map(|m| m.rank.to_string())
                .collect();
            if !differing.is_empty() {
                warnings.push(format!(
                    "provenance '{key}' differs: rank {} has {}, rank(s) {} differ",
                    first.rank,
                    value(first).unwrap_or(serde_json::Value::Null),
                    differing.join(", ")
                ));
            }
        }
        let differing: Vec<String> = members
            .iter()
            .filter(|m| m.run_metadata != first.run_metadata)
            .map(|m| m.rank.to_string())
            .collect();
        if !differing.is_empty() {
            warnings.push(format!(
                "run metadata differs from rank {}'s on rank(s) {}",
                first.rank,
                differing.join(", ")
            ));
        }
        let complete =
            missing_ranks.is_empty() && world_size.is_some() && members.iter().all(|m| m.complete);
        Ok(MemoryRunGroup {
            name,
            root,
            group_id,
            world_size,
            members,
            missing_ranks,
            labels: longest.1,
            complete,
            warnings,
        })
    }

    pub fn ranks(&self) -> Vec<i64> {
        self.members.iter().map(|m| m.rank).collect()
    }

    pub fn member(&self, rank: i64) -> Option<&GroupMember> {
        self.members.iter().find(|m| m.rank == rank)
    }

    /// The group's label for a point named by label, or by index into the group's
    /// sequence (negative from the end).
    pub fn resolve(&self, point: &PointRef, what: &str) -> Result<String> {
        let n = self.labels.len() as i64;
        match point {
            PointRef::Label(label) if self.labels.contains(label) => Ok(label.clone()),
            PointRef::Index(i) if -n <= *i && *i < n => {
                Ok(self.labels[i.rem_euclid(n.max(1)) as usize].clone())
            }
            _ => Err(MemoryError::invalid(format!(
                "{what} {point} is not a point of group '{}'; its points are {}",
                self.name,
                list(self.labels.iter().map(|l| format!("'{l}'")))
            ))),
        }
    }

    pub fn summary(&self) -> GroupSummary {
        summarise(self)
    }
}

/// A point named by label or by position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PointRef {
    Label(String),
    Index(i64),
}

impl std::fmt::Display for PointRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PointRef::Label(l) => write!(f, "'{l}'"),
            PointRef::Index(i) => write!(f, "{i}"),
        }
    }
}

// ---------------------------------------------------------------------- summary

/// A metric's public name: bytes end in `_bytes`, counts keep their name.
pub fn metric_name(column: &str) -> String {
    if column.ends_with("_count") {
        column.to_owned()
    } else {
        format!("{column}_bytes")
    }
}

/// Every metric of a stats row under its public name, in the store's column order.
pub fn stats_metrics(stats: &MemoryStats) -> Vec<(String, i64)> {
    stats
        .columns()
        .iter()
        .map(|(n, v)| (metric_name(n), *v))
        .collect()
}

/// The byte metrics a cross-rank aggregate covers (counts are point diagnostics).
pub fn byte_metrics(stats: &MemoryStats) -> Vec<(String, i64)> {
    stats_metrics(stats)
        .into_iter()
        .filter(|(n, _)| n.ends_with("_bytes"))
        .collect()
}

/// One rank's allocator state of one scope at one point.
#[derive(Debug, Clone, Serialize)]
pub struct RankPointState {
    pub rank: i64,
    pub point_index: i64,
    pub label: String,
    pub scope: Scope,
    pub observation_count: usize,
    pub pool_count: usize,
    pub stats: Vec<(String, i64)>,
}

/// One rank's device at one point: the allocator's rollup and the CUDA Runtime sample.
#[derive(Debug, Clone, Serialize)]
pub struct RankDevicePointState {
    pub rank: i64,
    pub point_index: i64,
    pub label: String,
    pub device_index: i64,
    pub free_bytes: Option<i64>,
    pub total_bytes: Option<i64>,
    pub used_bytes: Option<i64>,
    pub cuda_allocator_residual_bytes: Option<i64>,
    pub stats: Vec<(String, i64)>,
}

/// Minimum and maximum of one value across ranks, with the ranks holding them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetricExtrema {
    pub min_bytes: i64,
    /// The lowest rank holding the minimum; `min_ranks` lists every rank holding it.
    pub min_rank: i64,
    pub min_ranks: Vec<i64>,
    pub max_bytes: i64,
    pub max_rank: i64,
    pub max_ranks: Vec<i64>,
    pub spread_bytes: i64,
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
    pub group: GroupDescriptor,
    pub rank_points: Vec<RankPointState>,
    pub rank_devices: Vec<RankDevicePointState>,
    pub point_aggregates: Vec<RankPointAggregate>,
    pub warnings: Vec<String>,
}

/// What identifies a group in its reports.
#[derive(Debug, Clone, Serialize)]
pub struct GroupDescriptor {
    pub name: String,
    pub root: Option<PathBuf>,
    pub group_id: Option<String>,
    pub world_size: Option<i64>,
    pub ranks: Vec<i64>,
    pub missing_ranks: Vec<i64>,
    pub complete: bool,
    pub labels: Vec<String>,
    pub members: Vec<GroupMember>,
}

impl MemoryRunGroup {
    pub fn descriptor(&self) -> GroupDescriptor {
        GroupDescriptor {
            name: self.name.clone(),
            root: self.root.clone(),
            group_id: self.group_id.clone(),
            world_size: self.world_size,
            ranks: self.ranks(),
            missing_ranks: self.missing_ranks.clone(),
            complete: self.complete,
            labels: self.labels.clone(),
            members: self.members.clone(),
        }
    }
}

fn summarise(group: &MemoryRunGroup) -> GroupSummary {
    let mut rank_points = Vec::new();
    let mut rank_devices = Vec::new();
    for m in &group.members {
        for s in &m.states {
            let id = &s.identity;
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
                    rank: m.rank,
                    point_index: id.index,
                    label: id.label.clone(),
                    scope,
                    observation_count: observations,
                    pool_count: pools,
                    stats: stats_metrics(&s.scope_stats(None, scope)),
                });
            }
            for &d in &s.devices {
                let memory = s.memory(d);
                rank_devices.push(RankDevicePointState {
                    rank: m.rank,
                    point_index: id.index,
                    label: id.label.clone(),
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
                .filter(|r| r.point_index == index as i64 && r.scope == scope)
                .collect();
            let Some(first) = rows.first() else { continue };
            for (metric, _) in first.stats.iter().filter(|(n, _)| n.ends_with("_bytes")) {
                let values: Vec<(i64, i64)> = rows
                    .iter()
                    .filter_map(|r| {
                        r.stats
                            .iter()
                            .find(|(n, _)| n == metric)
                            .map(|(_, v)| (r.rank, *v))
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
        group: group.descriptor(),
        rank_points,
        rank_devices,
        point_aggregates,
        warnings: group.warnings.clone(),
    }
}

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
    pub baseline_change: Option<MetricExtrema>,
    pub candidate_change: Option<MetricExtrema>,
    pub start_gap: Option<MetricExtrema>,
    pub end_gap: Option<MetricExtrema>,
    pub change_gap: Option<MetricExtrema>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GroupPhaseComparison {
    pub baseline: GroupDescriptor,
    pub candidate: GroupDescriptor,
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

fn endpoint<'a>(
    member: &'a GroupMember,
    label: &str,
    side: &str,
) -> Result<Option<&'a Arc<MemoryState>>> {
    match member.state(label) {
        Some(s) => Ok(Some(s)),
        None if !member.complete => Ok(None),
        None => Err(MemoryError::invalid(format!(
            "{side} rank {} has no point '{label}' though its run is complete",
            member.rank
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
        baseline: baseline.descriptor(),
        candidate: candidate.descriptor(),
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

fn aggregate_phases(ranks: &[(i64, PhaseComparison)]) -> Vec<GroupPhaseAggregate> {
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
                metric: phase_metric_name(metric),
                rank_count: values.len(),
                baseline_change: term(PhaseValues::baseline_change),
                candidate_change: term(PhaseValues::candidate_change),
                start_gap: term(PhaseValues::start_gap),
                end_gap: term(PhaseValues::end_gap),
                change_gap: term(change_gap),
            }
        })
        .collect()
}

/// A phase row's metric under its public name (`reserved` -> `reserved_bytes`).
pub fn phase_metric_name(metric: &str) -> String {
    if metric.ends_with("_bytes") || metric.ends_with("_count") {
        metric.to_owned()
    } else {
        format!("{metric}_bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(rank: i64, labels: &[&str], complete: bool) -> GroupMember {
        GroupMember {
            rank,
            path: PathBuf::from(format!("/job/{rank}")),
            name: "job".into(),
            run_id: format!("run{rank}"),
            complete,
            world_size: Some(2),
            group_id: None,
            labels: labels.iter().map(|s| (*s).to_owned()).collect(),
            provenance: serde_json::json!({"torch": "2.11"}),
            run_metadata: serde_json::Value::Null,
            states: Vec::new(),
        }
    }

    #[test]
    fn extrema_keep_every_owning_rank_and_never_sum() {
        let e = MetricExtrema::of(&[(0, 5), (1, 9), (2, 5), (3, 9)]).unwrap();
        assert_eq!(
            (e.min_bytes, e.min_rank, e.min_ranks.clone()),
            (5, 0, vec![0, 2])
        );
        assert_eq!(
            (e.max_bytes, e.max_rank, e.max_ranks.clone()),
            (9, 1, vec![1, 3])
        );
        assert_eq!((e.spread_bytes, e.rank_count), (4, 4));
        let wide = MetricExtrema::of(&[(0, i64::MIN), (1, i64::MAX)]).unwrap();
        assert_eq!(wide.spread_bytes, i64::MAX);
        assert!(MetricExtrema::of(&[]).is_none());
    }

    #[test]
    fn labels_prefix_rules() {
        let ok = MemoryRunGroup::build(
            None,
            vec![
                member(0, &["a", "b", "c"], true),
                member(1, &["a", "b"], false),
            ],
        )
        .unwrap();
        assert_eq!(ok.labels, ["a", "b", "c"]);
        assert!(!ok.complete);
        assert!(ok
            .warnings
            .iter()
            .any(|w| w.contains("rank 1 is incomplete")));
        let short = MemoryRunGroup::build(
            None,
            vec![
                member(0, &["a", "b", "c"], true),
                member(1, &["a", "b"], true),
            ],
        );
        assert!(short.unwrap_err().to_string().contains("finished with 2"));
        let order = MemoryRunGroup::build(
            None,
            vec![member(0, &["a", "b"], true), member(1, &["b", "a"], true)],
        );
        assert!(order.unwrap_err().to_string().contains("same order"));
        let twice =
            MemoryRunGroup::build(None, vec![member(0, &["a"], true), member(0, &["a"], true)]);
        assert!(twice.unwrap_err().to_string().contains("two runs"));
        let missing = MemoryRunGroup::build(None, vec![member(1, &["a"], true)]).unwrap();
        assert_eq!(missing.missing_ranks, [0]);
        let mut other = member(1, &["a"], true);
        other.provenance = serde_json::json!({"torch": "2.12"});
        let prov = MemoryRunGroup::build(None, vec![member(0, &["a"], true), other]).unwrap();
        assert!(prov.complete);
        assert!(prov
            .warnings
            .iter()
            .any(|w| w.contains("provenance 'torch' differs")));
    }

    #[test]
    fn public_metric_names() {
        assert_eq!(metric_name("allocated"), "allocated_bytes");
        assert_eq!(metric_name("segment_count"), "segment_count");
        assert_eq!(phase_metric_name("reserved"), "reserved_bytes");
        assert_eq!(phase_metric_name("active_bytes"), "active_bytes");
    }
}
