//! Run groups: one run per rank of a multi-process job, checked to belong together.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use arrow::array::AsArray;
use serde::Serialize;
use tcgd_store::{RunKind, RunReader, Table, MANIFEST_FILE};

use crate::error::{CompareError, Result};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupMember {
    pub rank: i64,
    pub path: PathBuf,
    pub run_id: String,
    pub complete: bool,
    pub world_size: Option<i64>,
    pub labels: Vec<String>,
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
    /// Finds the runs of a job directory: `root/rank=<r>/` holding a `run.json` each (the
    /// layout a recorder with `world_size > 1` writes). A root that is itself a run is a
    /// group of one.
    pub fn load(root: &Path) -> Result<RunGroup> {
        let mut found: Vec<(Option<i64>, PathBuf)> = Vec::new();
        if root.join(MANIFEST_FILE).is_file() {
            found.push((None, root.to_path_buf()));
        } else {
            let entries = fs::read_dir(root).map_err(CompareError::io(root))?;
            for entry in entries {
                let entry = entry.map_err(CompareError::io(root))?;
                let name = entry.file_name();
                let Some(rank) = name
                    .to_str()
                    .and_then(|n| n.strip_prefix("rank="))
                    .and_then(|r| r.parse::<i64>().ok())
                else {
                    continue;
                };
                let path = entry.path();
                if path.join(MANIFEST_FILE).is_file() {
                    found.push((Some(rank), path));
                }
            }
        }
        if found.is_empty() {
            return Err(CompareError::InvalidInput(format!(
                "'{}' holds no run: expected run directories named rank=<r>/ (each with a \
                 run.json), as a recorder with world_size > 1 writes them",
                root.display()
            )));
        }
        found.sort();
        RunGroup::build(Some(root.to_path_buf()), found)
    }

    /// A group from runs given one by one (any directory layout).
    pub fn from_paths(paths: &[PathBuf]) -> Result<RunGroup> {
        if paths.is_empty() {
            return Err(CompareError::InvalidInput(
                "a run group needs at least one run".into(),
            ));
        }
        RunGroup::build(None, paths.iter().map(|p| (None, p.clone())).collect())
    }

    fn build(root: Option<PathBuf>, found: Vec<(Option<i64>, PathBuf)>) -> Result<RunGroup> {
        let mut warnings = Vec::new();
        let mut by_rank: BTreeMap<i64, GroupMember> = BTreeMap::new();
        let mut name: Option<(String, PathBuf)> = None;
        for (dir_rank, path) in found {
            let reader = RunReader::open(&path)?;
            let manifest = reader.manifest();
            if manifest.header.kind != RunKind::Tensor {
                return Err(CompareError::InvalidInput(format!(
                    "'{}' is a memory run; a tensor run group holds tensor runs",
                    path.display()
                )));
            }
            let rank = match (manifest.header.rank, dir_rank) {
                (Some(r), Some(d)) if r != d => {
                    warnings.push(format!(
                        "'{}' is named rank={d} but its run says rank {r}; using rank {r}",
                        path.display()
                    ));
                    r
                }
                (Some(r), _) => r,
                (None, Some(d)) => d,
                (None, None) => 0,
            };
            match &name {
                None => name = Some((manifest.header.name.clone(), path.clone())),
                Some((first, first_path)) if *first != manifest.header.name => {
                    return Err(CompareError::InvalidInput(format!(
                        "runs of one group must share a name: '{}' is named '{}', '{}' is \
                         named '{}'",
                        first_path.display(),
                        first,
                        path.display(),
                        manifest.header.name
                    )));
                }
                Some(_) => {}
            }
            let points = reader.table(Table::Points)?;
            let labels = points
                .column_by_name("label")
                .and_then(|c| c.as_string_opt::<i32>())
                .map(|a| a.iter().map(|s| s.unwrap_or_default().to_owned()).collect())
                .unwrap_or_default();
            let member = GroupMember {
                rank,
                path: path.clone(),
                run_id: manifest.header.run_id.clone(),
                complete: manifest.complete,
                world_size: manifest.header.world_size,
                labels,
            };
            if let Some(other) = by_rank.insert(rank, member) {
                return Err(CompareError::InvalidInput(format!(
                    "rank {rank} has two runs, '{}' and '{}'; a group holds one run per rank",
                    other.path.display(),
                    path.display()
                )));
            }
        }
        let members: Vec<GroupMember> = by_rank.into_values().collect();
        let Some(longest) = members.iter().max_by_key(|m| m.labels.len()) else {
            return Err(CompareError::InvalidInput(
                "a run group needs at least one run".into(),
            ));
        };
        for m in &members {
            if let Some(at) = m
                .labels
                .iter()
                .zip(&longest.labels)
                .position(|(a, b)| a != b)
            {
                return Err(CompareError::InvalidInput(format!(
                    "the ranks of a group record the same points: rank {}'s point {at} is \
                     '{}', rank {}'s is '{}'",
                    m.rank, m.labels[at], longest.rank, longest.labels[at]
                )));
            }
            if m.labels.len() < longest.labels.len() {
                warnings.push(format!(
                    "rank {} has {} of {} points ({}); its labels are a prefix of rank {}'s",
                    m.rank,
                    m.labels.len(),
                    longest.labels.len(),
                    if m.complete {
                        "the run says it is complete"
                    } else {
                        "the run is incomplete: it may have crashed"
                    },
                    longest.rank
                ));
            }
        }
        let declared: Vec<i64> = members.iter().filter_map(|m| m.world_size).collect();
        if declared.iter().any(|&w| w != declared[0]) {
            warnings.push(format!("ranks declare different world sizes: {declared:?}"));
        }
        let max_rank = members.iter().map(|m| m.rank).max().unwrap_or(0);
        let world_size = declared
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(members.len() as i64)
            .max(max_rank + 1);
        let present: Vec<i64> = members.iter().map(|m| m.rank).collect();
        let missing_ranks: Vec<i64> = (0..world_size).filter(|r| !present.contains(r)).collect();
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
        let name = name.map(|(n, _)| n).unwrap_or_default();
        let complete = missing_ranks.is_empty() && members.iter().all(|m| m.complete);
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
        self.members.iter().find(|m| m.rank == rank)
    }
}
