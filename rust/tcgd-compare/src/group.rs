//! Run groups: one run per rank of a multi-process job, checked to belong together.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use arrow::array::AsArray;
use serde::Serialize;
use tcgd_store::group::{self, RankRun};
use tcgd_store::{list_runs, OnDamage, RunKind, RunReader, RunSelector, Table};

use crate::error::{CompareError, Result};

/// One rank's tensor run: its identity and labels, and what each point holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupMember {
    #[serde(flatten)]
    pub run: RankRun,
    /// Per point, in order: what was recorded there.
    pub points: Vec<MemberPoint>,
}

/// One point of one rank: how many observations it holds and with which payload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberPoint {
    pub index: i64,
    pub label: String,
    pub replay_index: Option<i64>,
    pub observations: i64,
    /// Observations whose bytes were stored.
    pub full: u64,
    /// Observations stored as a summary only.
    pub summary: u64,
}

/// The runs of one job, by rank, with what is wrong with the set as a whole.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunGroup {
    pub name: String,
    pub root: Option<PathBuf>,
    /// The largest `world_size` any member declares (at least the member count).
    pub world_size: i64,
    /// By rank, ascending.
    pub members: Vec<GroupMember>,
    /// Ranks below `world_size` with no run.
    pub missing_ranks: Vec<i64>,
    /// Every rank below `world_size` has a run and every run finished (`complete` in its
    /// manifest). The one definition of a group's completeness: summaries and
    /// comparisons both report this value.
    pub complete: bool,
    /// Crashed (shorter) ranks, missing ranks, inconsistent declarations.
    pub warnings: Vec<String>,
}

impl RunGroup {
    /// The runs named `name` in the job root `root`, one per rank. `name` may be left
    /// out when the root's tensor runs all share one name.
    pub fn load(root: &Path, name: Option<&str>) -> Result<RunGroup> {
        let runs: Vec<_> = list_runs(root)?
            .into_iter()
            .filter(|r| r.kind == RunKind::Tensor)
            .collect();
        let names: BTreeSet<&str> = runs.iter().map(|r| r.name.as_str()).collect();
        let name = match name {
            Some(name) => name.to_owned(),
            None if names.len() == 1 => names
                .iter()
                .next()
                .map(|n| (*n).to_owned())
                .unwrap_or_default(),
            None if names.is_empty() => {
                return Err(CompareError::InvalidInput(format!(
                    "'{}' holds no tensor run",
                    root.display()
                )))
            }
            None => {
                return Err(CompareError::InvalidInput(format!(
                    "'{}' holds tensor runs named {}; choose one with name=",
                    root.display(),
                    quoted(&names)
                )))
            }
        };
        let found: Vec<(PathBuf, RunSelector)> = runs
            .iter()
            .filter(|r| r.name == name)
            .map(|r| (root.to_path_buf(), selector(&name, r.rank)))
            .collect();
        if found.is_empty() {
            return Err(CompareError::InvalidInput(format!(
                "'{}' holds no tensor run named '{name}'{}",
                root.display(),
                if names.is_empty() {
                    String::new()
                } else {
                    format!("; it holds {}", quoted(&names))
                }
            )));
        }
        RunGroup::build(Some(root.to_path_buf()), found)
    }

    /// A group from runs given one by one: `(root, selector)` each, any roots.
    pub fn from_runs(runs: &[(PathBuf, RunSelector)]) -> Result<RunGroup> {
        if runs.is_empty() {
            return Err(CompareError::InvalidInput(
                "a run group needs at least one run".into(),
            ));
        }
        RunGroup::build(None, runs.to_vec())
    }

    fn build(root: Option<PathBuf>, found: Vec<(PathBuf, RunSelector)>) -> Result<RunGroup> {
        let mut warnings = Vec::new();
        let mut loaded: Vec<GroupMember> = Vec::new();
        for (path, wanted) in found {
            let reader = RunReader::open_selected(&path, &wanted, OnDamage::Raise)?;
            let manifest = reader.manifest();
            if manifest.header.kind != RunKind::Tensor {
                return Err(CompareError::InvalidInput(format!(
                    "'{}' is a memory run; a tensor run group holds tensor runs",
                    path.display()
                )));
            }
            let points = reader.table(Table::Points)?;
            let labels: Vec<String> = points
                .column_by_name("label")
                .and_then(|c| c.as_string_opt::<i32>())
                .map(|a| a.iter().map(|s| s.unwrap_or_default().to_owned()).collect())
                .unwrap_or_default();
            let member_points =
                member_points(&points, &reader.table(Table::Observations)?, &labels);
            loaded.push(GroupMember {
                run: RankRun::new(&path, manifest, manifest.rank(), labels),
                points: member_points,
            });
        }
        if let (Some(first), Some(other)) = (loaded.first(), group::other_name(&loaded)) {
            return Err(CompareError::InvalidInput(format!(
                "runs of one group must share a name: '{}' is named '{}', '{}' is named '{}'",
                first.run.path.display(),
                first.run.name,
                other.run.path.display(),
                other.run.name
            )));
        }
        let name = loaded
            .first()
            .map(|m| m.run.name.clone())
            .unwrap_or_default();
        let members = group::by_rank(loaded)
            .map_err(|problem| CompareError::InvalidInput(problem.to_string()))?;
        let Some(longest) = group::longest(&members) else {
            return Err(CompareError::InvalidInput(
                "a run group needs at least one run".into(),
            ));
        };
        for m in &members {
            if let Some(at) = group::label_mismatch(&m.run, &longest.run) {
                return Err(CompareError::InvalidInput(format!(
                    "the ranks of a group record the same points: rank {}'s point {at} is \
                     '{}', rank {}'s is '{}'",
                    m.run.rank, m.run.labels[at], longest.run.rank, longest.run.labels[at]
                )));
            }
            if m.run.labels.len() < longest.run.labels.len() {
                warnings.push(format!(
                    "rank {} has {} of {} points ({}); its labels are a prefix of rank {}'s",
                    m.run.rank,
                    m.run.labels.len(),
                    longest.run.labels.len(),
                    if m.run.complete {
                        "the run says it is complete"
                    } else {
                        "the run is incomplete: it may have crashed"
                    },
                    longest.run.rank
                ));
            }
        }
        let declared: Vec<i64> = members.iter().filter_map(|m| m.run.world_size).collect();
        if declared.iter().any(|&w| w != declared[0]) {
            warnings.push(format!("ranks declare different world sizes: {declared:?}"));
        }
        let max_rank = members.iter().map(|m| m.run.rank).max().unwrap_or(0);
        let world_size = declared
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(members.len() as i64)
            .max(max_rank + 1);
        let missing_ranks = group::missing_ranks(&members, world_size);
        if !missing_ranks.is_empty() {
            warnings.push(format!(
                "rank{} {} of world size {world_size} {} no run",
                if missing_ranks.len() == 1 { "" } else { "s" },
                missing_ranks
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                if missing_ranks.len() == 1 {
                    "has"
                } else {
                    "have"
                }
            ));
        }
        let complete = missing_ranks.is_empty() && members.iter().all(|m| m.run.complete);
        Ok(RunGroup {
            name,
            root,
            world_size,
            members,
            missing_ranks,
            complete,
            warnings,
        })
    }

    pub fn member(&self, rank: i64) -> Option<&GroupMember> {
        self.members.iter().find(|m| m.run.rank == rank)
    }
}

/// Each point's facts from a run's points and observations tables (columns the store
/// always writes; a point with no row in either reads as empty).
fn member_points(
    points: &arrow::record_batch::RecordBatch,
    observations: &arrow::record_batch::RecordBatch,
    labels: &[String],
) -> Vec<MemberPoint> {
    use arrow::array::Array;
    use arrow::datatypes::Int64Type;
    let int = |batch: &arrow::record_batch::RecordBatch, name: &str| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_primitive_opt::<Int64Type>())
            .cloned()
    };
    let index = int(points, "point_index");
    let replay = int(points, "replay_index");
    let count = int(points, "observation_count");
    let mut payloads: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
    if let (Some(at), Some(payload)) = (
        int(observations, "point_index"),
        observations
            .column_by_name("payload")
            .and_then(|c| c.as_string_opt::<i32>()),
    ) {
        for (at, payload) in at.iter().zip(payload.iter()) {
            let entry = payloads.entry(at.unwrap_or(-1)).or_default();
            match payload {
                Some("full") => entry.0 += 1,
                _ => entry.1 += 1,
            }
        }
    }
    labels
        .iter()
        .enumerate()
        .map(|(row, label)| {
            let index = index.as_ref().map_or(row as i64, |a| a.value(row));
            let (full, summary) = payloads.get(&index).copied().unwrap_or_default();
            MemberPoint {
                index,
                label: label.clone(),
                replay_index: replay
                    .as_ref()
                    .filter(|a| a.is_valid(row))
                    .map(|a| a.value(row)),
                observations: count
                    .as_ref()
                    .map_or((full + summary) as i64, |a| a.value(row)),
                full,
                summary,
            }
        })
        .collect()
}

impl AsRef<RankRun> for GroupMember {
    fn as_ref(&self) -> &RankRun {
        &self.run
    }
}

impl GroupMember {
    /// How to open this member again.
    pub fn selector(&self) -> RunSelector {
        selector(&self.run.name, self.run.rank)
    }
}

/// `'a', 'b'`: run names as error messages list them.
fn quoted(names: &BTreeSet<&str>) -> String {
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn selector(name: &str, rank: i64) -> RunSelector {
    RunSelector {
        name: Some(name.to_owned()),
        rank: Some(rank),
        kind: Some(RunKind::Tensor),
    }
}
