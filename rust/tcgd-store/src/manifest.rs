//! A run's facts as this crate hands them around: its identity (the `runs` table's row)
//! and the committed data files of each table (from the tables' Delta logs). Nothing of
//! it is a file any more; `to_json` is what Python's run objects read.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::schema::{Table, FORMAT_VERSION, SCHEMA_NAME};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    Tensor,
    Memory,
}

impl RunKind {
    /// The tables a run of this kind writes; their directories exist from its creation.
    pub fn tables(self) -> &'static [Table] {
        match self {
            RunKind::Tensor => &Table::TENSOR,
            RunKind::Memory => &Table::MEMORY,
        }
    }
}

/// What the producer knows when a run starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunHeader {
    pub run_id: String,
    pub name: String,
    pub kind: RunKind,
    pub execution: String,
    pub rank: Option<i64>,
    pub group_id: Option<String>,
    pub world_size: Option<i64>,
    #[serde(default)]
    pub provenance: serde_json::Value,
    #[serde(default)]
    pub run_metadata: serde_json::Value,
}

impl RunHeader {
    /// The header of a single-process run without provenance or metadata (`{}`); set the
    /// other fields on the result where they are known.
    pub fn new(run_id: &str, name: &str, kind: RunKind, execution: &str) -> RunHeader {
        RunHeader {
            run_id: run_id.to_owned(),
            name: name.to_owned(),
            kind,
            execution: execution.to_owned(),
            rank: None,
            group_id: None,
            world_size: None,
            provenance: serde_json::json!({}),
            run_metadata: serde_json::json!({}),
        }
    }
}

/// One committed part file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartEntry {
    pub table: String,
    /// Relative to the job root, `/`-separated: `<table>/rank=<r>/<file>`.
    pub path: String,
    pub rows: u64,
    pub bytes: u64,
    /// Start of the blake3 hex of the whole file (its name carries it), checked by
    /// `validate()` and when a damaged run is opened with `OnDamage::Skip`.
    pub digest: String,
    /// The first point whose rows this part holds.
    pub point_index: u64,
    /// The last point whose rows this part holds (parts hold the points of one group
    /// commit, or of the whole run once compacted).
    pub last_point_index: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: String,
    pub format_version: u32,
    pub producer: String,
    #[serde(flatten)]
    pub header: RunHeader,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub finished_at: Option<String>,
    pub complete: bool,
    pub point_count: u64,
    pub parts: Vec<PartEntry>,
}

impl Manifest {
    pub fn new(header: RunHeader, producer: &str, created_at: String) -> Manifest {
        Manifest {
            schema: SCHEMA_NAME.to_owned(),
            format_version: FORMAT_VERSION,
            producer: producer.to_owned(),
            header,
            created_at,
            finished_at: None,
            complete: false,
            point_count: 0,
            parts: Vec::new(),
        }
    }

    pub fn parts_of(&self, table: Table) -> impl Iterator<Item = &PartEntry> {
        self.parts
            .iter()
            .filter(move |p| p.table == table.dir_name())
    }

    pub fn to_json(&self) -> Result<Vec<u8>> {
        serde_json::to_vec_pretty(self).map_err(|e| StoreError::invalid("manifest", e.to_string()))
    }

    /// The run's rank: its partition in every table (`rank=0` for a single process).
    pub fn rank(&self) -> i64 {
        self.header.rank.unwrap_or(0)
    }
}

/// Resolves a part path (checked when the log was read) against the job root.
pub fn part_path(root: &Path, part: &PartEntry) -> PathBuf {
    root.join(&part.path)
}
