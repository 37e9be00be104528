//! A run's facts as this crate hands them around: its identity (the `runs` table's row)
//! and the committed data files of each table (from the tables' Delta logs). Nothing of
//! it is a file any more; `to_json` is what Python's run objects read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use serde::{Deserialize, Serialize};

use crate::clock::parse_rfc3339;
use crate::error::{Result, StoreError};
use crate::schema::{Table, FORMAT_VERSION, RUNS, SCHEMA_NAME};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    Tensor,
    Memory,
}

impl RunKind {
    /// The name the manifest and the `runs` table's `kind` column give it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Tensor => "tensor",
            RunKind::Memory => "memory",
        }
    }

    /// The kind `as_str` names; `None` for any other text.
    pub fn from_name(name: &str) -> Option<RunKind> {
        [RunKind::Tensor, RunKind::Memory]
            .into_iter()
            .find(|k| k.as_str() == name)
    }

    /// The tables a run of this kind writes; their directories exist from its creation.
    pub fn tables(self) -> &'static [Table] {
        match self {
            RunKind::Tensor => &Table::TENSOR,
            RunKind::Memory => &Table::MEMORY,
        }
    }
}

/// What the producer knows when a run starts.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "RunHeader",
        module = "torch_cudagraph_debug._native",
        subclass,
        frozen,
        from_py_object
    )
)]
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

    /// The run's row of the `runs` table: what the writer commits at each group and what a
    /// reader shows of a run it opened.
    pub fn runs_row(&self) -> Result<RecordBatch> {
        let h = &self.header;
        let created = parse_rfc3339(&self.created_at).unwrap_or_default();
        let finished = self.finished_at.as_deref().and_then(parse_rfc3339);
        // Provenance and run metadata are user JSON: an absent one reads as `{}`.
        let json = |v: &serde_json::Value| {
            if v.is_null() {
                "{}".to_owned()
            } else {
                v.to_string()
            }
        };
        let text = |v: &str| -> ArrayRef { Arc::new(StringArray::from(vec![v])) };
        let timestamp = |v: Option<i64>| -> ArrayRef {
            Arc::new(TimestampMicrosecondArray::from(vec![v]).with_timezone("UTC"))
        };
        let columns: Vec<ArrayRef> = vec![
            text(&h.run_id),
            text(&h.name),
            text(h.kind.as_str()),
            text(&h.execution),
            Arc::new(StringArray::from(vec![h.group_id.as_deref()])),
            Arc::new(Int64Array::from(vec![h.world_size])),
            timestamp(Some(created)),
            timestamp(finished),
            Arc::new(BooleanArray::from(vec![self.complete])),
            Arc::new(Int64Array::from(vec![self.point_count as i64])),
            Arc::new(Int64Array::from(vec![i64::from(FORMAT_VERSION)])),
            text(&self.producer),
            text(&json(&h.provenance)),
            text(&json(&h.run_metadata)),
        ];
        RecordBatch::try_new(RUNS.clone(), columns)
            .map_err(|e| StoreError::invalid("runs row", e.to_string()))
    }
}

/// Resolves a part path (checked when the log was read) against the job root.
pub fn part_path(root: &Path, part: &PartEntry) -> PathBuf {
    root.join(&part.path)
}
