//! What a reader found damaged, how it reacts (`OnDamage`), and `validate()`, which checks every part and payload.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use arrow::array::Array;

use crate::error::{Result, StoreError};
use crate::layout::PartName;
use crate::manifest::{part_path, PartEntry};
use crate::parts::differs_from_committed;
use crate::schema::Table;

use super::*;

/// One problem found by `validate()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationIssue {
    pub path: PathBuf,
    pub problem: String,
}

/// What opening a run does with a damaged part (missing, truncated, or not the bytes that
/// were committed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDamage {
    /// The first damaged part is an error naming it (`CorruptPart`).
    #[default]
    Raise,
    /// Every part's file digest is checked; the points with a damaged part are left out
    /// (in memory runs, also the points after a damaged part of the run-wide stack
    /// tables, which may name its stacks) and listed in `damage()`. A damaged manifest is
    /// still an error: without it nothing is known to be intact.
    Skip,
}

impl OnDamage {
    pub fn parse(value: &str) -> Result<OnDamage> {
        match value {
            "raise" => Ok(OnDamage::Raise),
            "skip" => Ok(OnDamage::Skip),
            other => Err(StoreError::invalid(
                "on_damage",
                format!("'{other}' is not one of \"raise\", \"skip\""),
            )),
        }
    }
}

/// One thing `OnDamage::Skip` left out of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The damaged file.
    pub path: PathBuf,
    /// Its table.
    pub table: String,
    /// The point left out, or whose observation lost its payload.
    pub point_index: Option<u64>,
    /// That point's label, when its `points` part is intact.
    pub label: Option<String>,
    pub problem: String,
}

impl Damage {
    /// One line: the problem and the point it costs.
    pub fn describe(&self) -> String {
        match (self.point_index, &self.label) {
            (Some(i), Some(label)) => format!("{} (point {i} '{label}')", self.problem),
            (Some(i), None) => format!("{} (point {i})", self.problem),
            _ => self.problem.clone(),
        }
    }
}

/// Why a listed part cannot be used.
pub(super) enum PartProblem {
    /// Not a regular file: refused unread, whatever the mode.
    Unsafe,
    Damaged(String),
    Io(std::io::Error),
}

/// Checks one listed part: present, a regular file, its committed size, and (with
/// `digest`) its committed bytes.
pub(super) fn check_part(dir: &Path, part: &PartEntry, digest: bool) -> Result<(), PartProblem> {
    let path = part_path(dir, part);
    let meta = match fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(PartProblem::Damaged(
                "the file is missing: the table's log lists it, the directory does not hold it"
                    .into(),
            ))
        }
        Err(e) => return Err(PartProblem::Io(e)),
    };
    if !meta.is_file() {
        return Err(PartProblem::Unsafe);
    }
    if meta.len() != part.bytes {
        return Err(PartProblem::Damaged(format!(
            "{} bytes on disk, {} committed (truncated or overwritten)",
            meta.len(),
            part.bytes
        )));
    }
    if digest {
        match file_digest(&path) {
            Ok(d) if PartName::digest_prefix_of(&d) == part.digest => {}
            Ok(d) => {
                return Err(PartProblem::Damaged(differs_from_committed(
                    &d,
                    &part.digest,
                )))
            }
            Err(StoreError::Io { source, .. }) => return Err(PartProblem::Io(source)),
            Err(e) => return Err(PartProblem::Damaged(e.to_string())),
        }
    }
    Ok(())
}

/// Checks one listed part as `check_part` does with its digest, as the error opening the
/// run with `OnDamage::Raise` would give.
pub(crate) fn check_committed_part(dir: &Path, part: &PartEntry) -> Result<()> {
    let path = part_path(dir, part);
    match check_part(dir, part, true) {
        Ok(()) => Ok(()),
        Err(PartProblem::Unsafe) => Err(StoreError::UnsafePath {
            manifest: dir.join(&part.table).join("_delta_log"),
            part: part.path.clone(),
        }),
        Err(PartProblem::Damaged(reason)) => Err(StoreError::CorruptPart { path, reason }),
        Err(PartProblem::Io(source)) => Err(StoreError::Io { path, source }),
    }
}

/// Tables whose rows later points refer to (frames and stacks are stored once per run):
/// a damaged part of theirs costs the later points too.
pub(super) fn shared_with_later_points(table: &str) -> bool {
    table == Table::MemoryFrames.dir_name() || table == Table::MemoryStacks.dir_name()
}

pub(super) fn file_digest(path: &Path) -> Result<String> {
    let mut file = fs::File::open(path).map_err(StoreError::io(path))?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(StoreError::io(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(format!("blake3:{}", hasher.finalize().to_hex()))
}

impl RunReader {
    /// Checks everything: each part's file digest, each payload's digest, and that every
    /// full observation's payload is present. Returns the problems found (empty: valid),
    /// beginning with what `OnDamage::Skip` left out.
    pub fn validate(&self) -> Result<Vec<ValidationIssue>> {
        let mut issues: Vec<ValidationIssue> = self
            .damage
            .iter()
            .map(|d| ValidationIssue {
                path: d.path.clone(),
                problem: d.describe(),
            })
            .collect();
        if !self.digests_checked {
            let mut damaged = Vec::new();
            for part in &self.manifest.parts {
                let path = part_path(&self.dir, part);
                match file_digest(&path) {
                    Ok(d) if PartName::digest_prefix_of(&d) == part.digest => {}
                    Ok(d) => damaged.push(ValidationIssue {
                        path,
                        problem: differs_from_committed(&d, &part.digest),
                    }),
                    Err(e) => damaged.push(ValidationIssue {
                        path,
                        problem: e.to_string(),
                    }),
                }
            }
            if !damaged.is_empty() {
                issues.extend(damaged);
                return Ok(issues);
            }
        }
        let observations = self.table(Table::Observations)?;
        let payload_kind = named_strings(&observations, "payload")?;
        let digests = named_strings(&observations, "digest")?;
        let mut wanted: Vec<&str> = (0..observations.num_rows())
            .filter(|&i| payload_kind.value(i) == "full" && !digests.is_null(i))
            .map(|i| digests.value(i))
            // Already listed with the damage that made them unreadable.
            .filter(|d| !self.unreadable_payloads.contains(*d))
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        for digest in wanted {
            if let Err(e) = self.payload(digest) {
                issues.push(ValidationIssue {
                    path: self.dir.join(Table::Payloads.dir_name()),
                    problem: e.to_string(),
                });
            }
        }
        Ok(issues)
    }
}
