//! Run groups: the memory runs of one multi-process job, one per rank, checked to belong
//! together, summarised per point across ranks and compared phase by phase rank by rank.
//!
//! GPU memory is never summed across ranks: each rank owns its devices, so a sum would
//! add bytes of different GPUs (or of one GPU shared by several processes) into a number
//! that no device holds. Cross-rank views are extrema (minimum, maximum, the ranks that
//! hold them, the spread) and per-rank rows.
//!
//! Loading and checking a group is here; [`summary`] and [`phases`] are its two analyses.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use tcgd_store::group::{self, RankRun};
use tcgd_store::{list_runs, RunKind, RunSelector};

use crate::error::{MemoryError, Result};
use crate::run::MemoryRunReader;
use crate::state::MemoryState;

mod phases;
#[cfg(feature = "python")]
mod python;
mod summary;

pub use phases::*;
pub use summary::*;

/// Provenance facts that say which software produced a run; the others (host name,
/// process id, devices) differ between ranks by nature and are not compared.
const PROVENANCE_KEYS: [&str; 5] = ["producer_version", "python", "torch", "cuda", "platform"];

/// One rank's run as the group holds it: identity from its manifest and its states.
#[derive(Debug, Clone, Serialize)]
pub struct GroupMember {
    #[serde(flatten)]
    pub run: RankRun,
    pub group_id: Option<String>,
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
        let labels = states.iter().map(|s| s.identity.label.clone()).collect();
        Ok(GroupMember {
            run: RankRun::new(path, manifest, rank, labels),
            group_id: header.group_id.clone(),
            provenance: header.provenance.clone(),
            run_metadata: header.run_metadata.clone(),
            states,
        })
    }

    fn state(&self, label: &str) -> Option<&Arc<MemoryState>> {
        self.states.iter().find(|s| s.identity.label == label)
    }
}

impl AsRef<RankRun> for GroupMember {
    fn as_ref(&self) -> &RankRun {
        &self.run
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

/// The ranks, as text, whose `value` is not the first member's.
fn differing<T: PartialEq>(
    members: &[GroupMember],
    value: impl Fn(&GroupMember) -> T,
) -> Vec<String> {
    let first = value(&members[0]);
    members
        .iter()
        .filter(|m| value(m) != first)
        .map(|m| m.run.rank.to_string())
        .collect()
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
        let name = members[0].run.name.clone();
        if let Some(other) = group::other_name(&members) {
            return Err(MemoryError::invalid(format!(
                "the runs of a group share one name: '{}' holds run '{name}', '{}' holds \
                 run '{}'; load each name as its own group",
                members[0].run.path.display(),
                other.run.path.display(),
                other.run.name
            )));
        }
        let members =
            group::by_rank(members).map_err(|problem| MemoryError::invalid(problem.to_string()))?;

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
            .map(|m| m.run.rank)
            .collect();
        if group_id.is_some() && !no_id.is_empty() {
            warnings.push(format!(
                "rank(s) {} declare no group id; the others declare '{}'",
                list(no_id.iter().map(i64::to_string)),
                group_id.as_deref().unwrap_or_default()
            ));
        }
        let sizes: BTreeSet<i64> = members.iter().filter_map(|m| m.run.world_size).collect();
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
                if let Some(m) = members.iter().find(|m| m.run.rank >= w) {
                    return Err(MemoryError::invalid(format!(
                        "run '{}' in '{}' has rank {} but the world size is {w}",
                        m.run.name,
                        m.run.path.display(),
                        m.run.rank
                    )));
                }
                let undeclared: Vec<i64> = members
                    .iter()
                    .filter(|m| m.run.world_size.is_none())
                    .map(|m| m.run.rank)
                    .collect();
                if !undeclared.is_empty() {
                    warnings.push(format!(
                        "rank(s) {} declare no world size; the others declare {w}",
                        list(undeclared.iter().map(i64::to_string))
                    ));
                }
            }
        }
        let missing_ranks = world_size.map_or_else(Vec::new, |w| group::missing_ranks(&members, w));
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
        let longest = group::longest(&members).expect("a group has a run");
        for m in &members {
            if let Some(at) = group::label_mismatch(&m.run, &longest.run) {
                return Err(MemoryError::invalid(format!(
                    "the ranks of a group record the same points in the same order: rank {}'s \
                     point {at} is '{}', rank {}'s is '{}'",
                    m.run.rank, m.run.labels[at], longest.run.rank, longest.run.labels[at]
                )));
            }
            if m.run.labels.len() < longest.run.labels.len() {
                if m.run.complete {
                    return Err(MemoryError::invalid(format!(
                        "rank {} finished with {} of the group's {} points (rank {} recorded \
                         '{}' after them); a complete run records every point",
                        m.run.rank,
                        m.run.labels.len(),
                        longest.run.labels.len(),
                        longest.run.rank,
                        longest.run.labels[m.run.labels.len()]
                    )));
                }
                warnings.push(format!(
                    "rank {} is incomplete (it may have crashed): it recorded {} of {} points, \
                     up to '{}'",
                    m.run.rank,
                    m.run.labels.len(),
                    longest.run.labels.len(),
                    m.run.labels.last().map_or("(none)", String::as_str)
                ));
            } else if !m.run.complete {
                warnings.push(format!(
                    "rank {} is incomplete: its run did not finish, though it holds every \
                     point",
                    m.run.rank
                ));
            }
        }

        let labels = longest.run.labels.clone();
        let first = &members[0];
        for key in PROVENANCE_KEYS {
            let value = |m: &GroupMember| m.provenance.get(key).cloned();
            let differing = differing(&members, value);
            if !differing.is_empty() {
                warnings.push(format!(
                    "provenance '{key}' differs: rank {} has {}, rank(s) {} differ",
                    first.run.rank,
                    value(first).unwrap_or(serde_json::Value::Null),
                    differing.join(", ")
                ));
            }
        }
        let differing = differing(&members, |m| m.run_metadata.clone());
        if !differing.is_empty() {
            warnings.push(format!(
                "run metadata differs from rank {}'s on rank(s) {}",
                first.run.rank,
                differing.join(", ")
            ));
        }
        let complete = missing_ranks.is_empty()
            && world_size.is_some()
            && members.iter().all(|m| m.run.complete);
        Ok(MemoryRunGroup {
            name,
            root,
            group_id,
            world_size,
            members,
            missing_ranks,
            labels,
            complete,
            warnings,
        })
    }

    pub fn ranks(&self) -> Vec<i64> {
        self.members.iter().map(|m| m.run.rank).collect()
    }

    pub fn member(&self, rank: i64) -> Option<&GroupMember> {
        self.members.iter().find(|m| m.run.rank == rank)
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

#[cfg(test)]
mod tests;
