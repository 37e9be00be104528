//! The run writer: one process, one run, points committed one at a time.
//!
//! Commit protocol for point N (parts are named `part-{N+1:06}.parquet`):
//! 1. payloads, observations, points parts: each written hidden, fsynced, renamed;
//! 2. the table directories are fsynced;
//! 3. `run.parquet` and then `run.json` are replaced atomically.
//!
//! A crash before step 3 leaves the previous manifest, which does not list the new parts:
//! the point is not part of the run. A crash after it leaves the point whole.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, Int64Builder, LargeBinaryArray, ListBuilder,
    RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field};
use rayon::prelude::*;
use tcgd_tensor::{summarize, TensorSummary};

use crate::claim::DirClaim;
use crate::digest::content_digest;
use crate::durable::{replace_file, sync_dir};
use crate::error::{Result, StoreError};
use crate::manifest::{Manifest, PartEntry, RunHeader, MANIFEST_FILE};
use crate::parts::write_part;
use crate::record::{CommittedPoint, ObservationInput, PayloadKind, PointInput, Value};
use crate::schema::{Table, FORMAT_VERSION, PAYLOAD_CHUNK_BYTES, RUNS, SCHEMA_NAME};

pub const RUN_TABLE_FILE: &str = "run.parquet";

pub struct RunWriter {
    dir: PathBuf,
    manifest: Manifest,
    labels: HashSet<String>,
    /// Digests whose bytes are already committed in this run: stored once, referenced often.
    stored_payloads: HashSet<String>,
    closed: bool,
    /// This writer's claim on `dir`, held until the run is closed or discarded.
    claim: DirClaim,
    /// Whether files of this writer's run exist (so a failed creation removes them).
    owns_files: bool,
}

/// Where a run's files are moved before they are deleted (replaced or discarded runs): a
/// crash while deleting leaves a hidden directory that the next writer removes, never a
/// mix of two runs' parts.
const REPLACED_PREFIX: &str = ".tcgd-replaced-";

/// An observation after the writer has looked at its value.
struct Digested<'a> {
    input: &'a ObservationInput<'a>,
    summary: TensorSummary,
    digest: Option<String>,
    nbytes: i64,
}

pub fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

pub fn rfc3339(micros: i64) -> String {
    chrono::DateTime::from_timestamp_micros(micros)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn parse_rfc3339(s: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_micros())
}

impl RunWriter {
    /// Creates a run in `dir` (which must not hold a run yet) and commits an empty,
    /// incomplete run, so even a process killed before its first point leaves a run.
    pub fn create(dir: &Path, header: RunHeader, producer: &str) -> Result<RunWriter> {
        RunWriter::create_with(dir, header, producer, false)
    }

    /// `create`, claiming `dir` first (see `claim.rs`): two writers never share a
    /// directory. With `overwrite`, a run already in `dir` is replaced (its own files only;
    /// anything else in the directory is kept). A creation that fails leaves the directory
    /// as it found it: no half-made run blocks the next attempt.
    pub fn create_with(
        dir: &Path,
        header: RunHeader,
        producer: &str,
        overwrite: bool,
    ) -> Result<RunWriter> {
        // A finished run is refused before a lock file of ours appears in it.
        if !overwrite && dir.join(MANIFEST_FILE).exists() {
            return Err(match crate::claim::holder(dir) {
                Some(holder) => StoreError::RunInUse {
                    path: dir.to_path_buf(),
                    holder,
                },
                None => StoreError::RunExists {
                    path: dir.to_path_buf(),
                },
            });
        }
        let claim = DirClaim::acquire(dir)?;
        let trash = dir.join(format!("{REPLACED_PREFIX}{}", header.run_id));
        let mut writer = RunWriter {
            dir: dir.to_path_buf(),
            manifest: Manifest::new(header, producer, rfc3339(now_micros())),
            labels: HashSet::new(),
            stored_payloads: HashSet::new(),
            closed: false,
            claim,
            owns_files: false,
        };
        if let Err(e) = writer.initialize(overwrite, &trash) {
            // Only what this writer made goes; a run it refused to replace stays whole.
            if writer.owns_files {
                let _ = remove_run_files(&writer.dir, &trash);
            }
            writer.closed = true;
            writer.claim.release_and_remove_created();
            return Err(e);
        }
        Ok(writer)
    }

    fn initialize(&mut self, overwrite: bool, trash: &Path) -> Result<()> {
        remove_leftovers(&self.dir)?;
        if fs::symlink_metadata(self.dir.join(MANIFEST_FILE)).is_ok() {
            if !overwrite {
                return Err(StoreError::RunExists {
                    path: self.dir.clone(),
                });
            }
            check_replaceable(&self.dir)?;
            remove_run_files(&self.dir, trash)?;
        }
        self.owns_files = true;
        for table in self.manifest.header.kind.tables() {
            let sub = self.dir.join(table.dir_name());
            fs::create_dir_all(&sub).map_err(StoreError::io(&sub))?;
        }
        self.publish(&self.manifest)?;
        if let Some(parent) = self.dir.parent() {
            // The run directory entry itself must survive a crash.
            sync_dir(if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            })?;
        }
        Ok(())
    }

    /// Ends the run by removing it: every file of the run goes, and the directories its
    /// creation made, when nothing else is in them. For a run whose recording failed as a
    /// whole (an import that stopped halfway), so that retrying it finds no run in the way.
    pub fn discard(&mut self) -> Result<()> {
        if !self.claim.is_held() {
            return Err(StoreError::RunFinished {
                path: self.dir.clone(),
            });
        }
        self.closed = true;
        let trash = self
            .dir
            .join(format!("{REPLACED_PREFIX}{}", self.manifest.header.run_id));
        let removed = remove_run_files(&self.dir, &trash);
        self.claim.release_and_remove_created();
        removed
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn point_count(&self) -> u64 {
        self.manifest.point_count
    }

    /// Labels of the committed points.
    pub fn labels(&self) -> impl Iterator<Item = &String> {
        self.labels.iter()
    }

    pub fn has_label(&self, label: &str) -> bool {
        self.labels.contains(label)
    }

    fn ensure_open(&self) -> Result<()> {
        if self.closed {
            return Err(StoreError::RunFinished {
                path: self.dir.clone(),
            });
        }
        Ok(())
    }

    /// Commits one point durably. On error nothing of the point is visible and the writer
    /// can commit the next point (the failed point's index is reused).
    pub fn commit_point(
        &mut self,
        point: &PointInput,
        observations: &[ObservationInput<'_>],
    ) -> Result<CommittedPoint> {
        self.ensure_open()?;
        self.check_new_point(point)?;
        check_point(point, observations)?;

        let digested: Vec<Digested> = observations
            .par_iter()
            .map(digest_observation)
            .collect::<Result<_>>()?;

        let point_index = self.manifest.point_count;
        let file_name = format!("part-{:06}.parquet", point_index + 1);
        let timestamp = point.timestamp_us.unwrap_or_else(now_micros);
        let next = self.manifest.clone();
        let mut new_payloads = HashSet::new();
        let mut deduplicated = 0u64;

        let payload_batch = {
            let mut rows = PayloadRows::default();
            for d in &digested {
                let (PayloadKind::Full, Value::Bytes(bytes), Some(digest)) =
                    (d.input.payload, d.input.value, &d.digest)
                else {
                    continue;
                };
                if self.stored_payloads.contains(digest) || !new_payloads.insert(digest.clone()) {
                    deduplicated += 1;
                    continue;
                }
                rows.push(digest, bytes);
            }
            rows.finish()?
        };
        let payload_chunks = payload_batch.as_ref().map_or(0, |b| b.num_rows() as u64);
        let observation_batch =
            observations_batch(&self.manifest, point_index, &point.label, &digested)?;
        let points_batch = points_batch(
            &self.manifest,
            point_index,
            point,
            timestamp,
            digested.len(),
        )?;

        let batches = vec![
            (Table::Payloads, payload_batch),
            (
                Table::Observations,
                Some(observation_batch).filter(|b| b.num_rows() > 0),
            ),
            (Table::Points, Some(points_batch)),
        ];
        self.write_point_parts(next, &point.label, &file_name, batches)?;
        self.stored_payloads.extend(new_payloads);
        Ok(CommittedPoint {
            point_index,
            observations: digested.len() as u64,
            payload_chunks_written: payload_chunks,
            payloads_deduplicated: deduplicated,
        })
    }

    /// Writes one point's parts (hidden, fsynced, renamed), fsyncs the table directories
    /// and publishes the manifest that lists them: the point becomes visible all at once.
    fn write_point_parts(
        &mut self,
        mut next: Manifest,
        label: &str,
        file_name: &str,
        batches: Vec<(Table, Option<RecordBatch>)>,
    ) -> Result<()> {
        let point_index = self.manifest.point_count;
        let mut written = Vec::new();
        for (table, batch) in batches {
            let Some(batch) = batch else { continue };
            written.push(table);
            let rel = format!("{}/{}", table.dir_name(), file_name);
            let committed = write_part(&self.dir.join(&rel), table, &batch)?;
            next.parts.push(PartEntry {
                table: table.dir_name().to_owned(),
                path: rel,
                rows: batch.num_rows() as u64,
                bytes: committed.bytes,
                digest: committed.digest,
                point_index,
            });
        }
        // Only directories that gained a file have a rename to make durable.
        for table in written {
            sync_dir(&self.dir.join(table.dir_name()))?;
        }
        next.point_count = point_index + 1;
        self.publish(&next)?;
        self.manifest = next;
        self.labels.insert(label.to_owned());
        Ok(())
    }

    /// The index the next committed point will get; producers of memory tables write it
    /// into their rows.
    pub fn next_point_index(&self) -> u64 {
        self.manifest.point_count
    }

    /// Commits one point of a memory run: its `points` row plus the memory tables the
    /// producer built (each batch must have its table's schema and carry
    /// `point_index == next_point_index()`). An empty batch writes no part. Same
    /// durability and visibility rules as `commit_point`.
    pub fn commit_tables(
        &mut self,
        point: &PointInput,
        observation_count: usize,
        tables: Vec<(Table, RecordBatch)>,
    ) -> Result<u64> {
        self.ensure_open()?;
        self.check_new_point(point)?;
        check_point(point, &[])?;
        let kind_tables = self.manifest.header.kind.tables();
        let mut seen = HashSet::new();
        for (table, batch) in &tables {
            if matches!(table, Table::Points | Table::Observations | Table::Payloads)
                || !kind_tables.contains(table)
                || !seen.insert(*table)
            {
                return Err(StoreError::invalid(
                    "table",
                    format!(
                        "{} cannot be committed here (a {:?} run, once per point)",
                        table.dir_name(),
                        self.manifest.header.kind
                    ),
                ));
            }
            if batch.schema().fields() != table.schema().fields() {
                return Err(StoreError::invalid(
                    table.dir_name(),
                    "the batch's columns differ from the table's schema",
                ));
            }
        }
        let point_index = self.manifest.point_count;
        let file_name = format!("part-{:06}.parquet", point_index + 1);
        let timestamp = point.timestamp_us.unwrap_or_else(now_micros);
        let points = points_batch(
            &self.manifest,
            point_index,
            point,
            timestamp,
            observation_count,
        )?;
        let mut batches: Vec<(Table, Option<RecordBatch>)> = tables
            .into_iter()
            .map(|(table, batch)| (table, Some(batch).filter(|b| b.num_rows() > 0)))
            .collect();
        // The `points` row goes last, like in tensor runs: a glob over `points/` never
        // shows a point whose other parts are missing.
        batches.push((Table::Points, Some(points)));
        let next = self.manifest.clone();
        self.write_point_parts(next, &point.label, &file_name, batches)?;
        Ok(point_index)
    }

    fn check_new_point(&self, point: &PointInput) -> Result<()> {
        if self.labels.contains(&point.label) {
            return Err(StoreError::invalid(
                "label",
                format!(
                    "point label '{}' is already used in this run; labels are unique",
                    point.label
                ),
            ));
        }
        Ok(())
    }

    /// Ends the run. `complete=false` keeps a run that ended by an error: its points are
    /// intact, but it did not reach its end. Idempotent.
    pub fn close(&mut self, complete: bool) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        let mut next = self.manifest.clone();
        next.complete = complete;
        next.finished_at = Some(rfc3339(now_micros()));
        self.publish(&next)?;
        self.manifest = next;
        self.closed = true;
        // The run takes no more writes: another writer may replace it from now on.
        self.claim.release();
        Ok(())
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Makes `manifest` the run's state: the run table first, then the manifest, which is
    /// what readers trust.
    fn publish(&self, manifest: &Manifest) -> Result<()> {
        let run_table = run_batch(manifest)?;
        write_part_plain(&self.dir.join(RUN_TABLE_FILE), &run_table)?;
        replace_file(&self.dir.join(MANIFEST_FILE), &manifest.to_json()?)
    }
}

/// Everything about a point that can be checked without the run: metadata is JSON, every
/// observation is consistent (dtype, shape, bytes), no (name, invocation) twice. A commit
/// handed to a background writer is checked with this first, so a bad point is refused
/// on the caller's thread.
pub fn check_point(point: &PointInput, observations: &[ObservationInput<'_>]) -> Result<()> {
    serde_json::from_str::<serde_json::Value>(&point.metadata)
        .map_err(|e| StoreError::invalid("metadata", format!("not JSON: {e}")))?;
    let mut keys = HashSet::new();
    for obs in observations {
        obs.validate()?;
        if !keys.insert((obs.name.as_str(), obs.invocation_index)) {
            return Err(StoreError::invalid(
                "observation",
                format!(
                    "('{}', invocation {}) appears twice in point '{}'",
                    obs.name, obs.invocation_index, point.label
                ),
            ));
        }
    }
    Ok(())
}

fn digest_observation<'a>(input: &'a ObservationInput<'a>) -> Result<Digested<'a>> {
    match input.value {
        Value::Bytes(bytes) => Ok(Digested {
            input,
            summary: summarize(input.dtype, bytes)?,
            digest: Some(content_digest(bytes)),
            nbytes: bytes.len() as i64,
        }),
        Value::Summary(summary) => Ok(Digested {
            input,
            summary,
            digest: None,
            nbytes: i64::try_from(summary.numel * input.dtype.itemsize() as u64)
                .unwrap_or(i64::MAX),
        }),
    }
}

#[derive(Default)]
struct PayloadRows<'a> {
    digests: Vec<&'a str>,
    chunk_index: Vec<i64>,
    chunk_count: Vec<i64>,
    total: Vec<i64>,
    data: Vec<&'a [u8]>,
}

impl<'a> PayloadRows<'a> {
    fn push(&mut self, digest: &'a str, bytes: &'a [u8]) {
        // An empty tensor still gets one (empty) row, so every full observation's digest
        // resolves.
        let chunks: Vec<&[u8]> = if bytes.is_empty() {
            vec![bytes]
        } else {
            bytes.chunks(PAYLOAD_CHUNK_BYTES).collect()
        };
        let count = chunks.len() as i64;
        for (i, chunk) in chunks.into_iter().enumerate() {
            self.digests.push(digest);
            self.chunk_index.push(i as i64);
            self.chunk_count.push(count);
            self.total.push(bytes.len() as i64);
            self.data.push(chunk);
        }
    }

    fn finish(self) -> Result<Option<RecordBatch>> {
        if self.digests.is_empty() {
            return Ok(None);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(self.digests)),
            Arc::new(Int64Array::from(self.chunk_index)),
            Arc::new(Int64Array::from(self.chunk_count)),
            Arc::new(Int64Array::from(self.total)),
            Arc::new(LargeBinaryArray::from_vec(self.data)),
        ];
        batch(Table::Payloads.schema(), columns).map(Some)
    }
}

fn batch(schema: arrow::datatypes::SchemaRef, columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    RecordBatch::try_new(schema, columns)
        .map_err(|e| StoreError::invalid("record batch", e.to_string()))
}

fn int64_lists<'a>(lists: impl Iterator<Item = &'a [i64]>) -> ArrayRef {
    let mut builder = ListBuilder::new(Int64Builder::new()).with_field(Arc::new(Field::new(
        "item",
        DataType::Int64,
        false,
    )));
    for list in lists {
        builder.values().append_slice(list);
        builder.append(true);
    }
    Arc::new(builder.finish())
}

fn repeated_str(value: &str, n: usize) -> ArrayRef {
    Arc::new(StringArray::from(vec![value; n]))
}

fn repeated_opt_i64(value: Option<i64>, n: usize) -> ArrayRef {
    Arc::new(Int64Array::from(vec![value; n]))
}

fn observations_batch(
    manifest: &Manifest,
    point_index: u64,
    label: &str,
    rows: &[Digested],
) -> Result<RecordBatch> {
    let n = rows.len();
    let site = |f: fn(&crate::record::Site) -> &Option<String>| -> ArrayRef {
        Arc::new(StringArray::from(
            rows.iter()
                .map(|d| f(&d.input.site).as_deref())
                .collect::<Vec<_>>(),
        ))
    };
    let ints = |f: fn(&Digested) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from(rows.iter().map(f).collect::<Vec<_>>()))
    };
    let floats = |f: fn(&TensorSummary) -> Option<f64>| -> ArrayRef {
        Arc::new(Float64Array::from(
            rows.iter().map(|d| f(&d.summary)).collect::<Vec<_>>(),
        ))
    };
    fn strs<'a>(rows: &'a [Digested<'a>], f: impl Fn(&'a Digested<'a>) -> &'a str) -> ArrayRef {
        Arc::new(StringArray::from(rows.iter().map(f).collect::<Vec<_>>()))
    }
    let count = |c: u64| i64::try_from(c).unwrap_or(i64::MAX);
    let columns: Vec<ArrayRef> = vec![
        repeated_str(&manifest.header.run_id, n),
        repeated_opt_i64(manifest.header.rank, n),
        Arc::new(Int64Array::from(vec![point_index as i64; n])),
        repeated_str(label, n),
        ints(|d| d.input.order),
        strs(rows, |d| &d.input.name),
        ints(|d| d.input.invocation_index),
        site(|s| &s.site_id),
        site(|s| &s.graph_kind),
        site(|s| &s.node_name),
        site(|s| &s.aten_op),
        site(|s| &s.module_path),
        site(|s| &s.source_location),
        site(|s| &s.compile_id),
        Arc::new(BooleanArray::from(
            rows.iter()
                .map(|d| d.input.site.materialized_by_probe)
                .collect::<Vec<_>>(),
        )),
        strs(rows, |d| d.input.dtype.torch_name()),
        int64_lists(rows.iter().map(|d| d.input.shape.as_slice())),
        int64_lists(rows.iter().map(|d| d.input.stride.as_slice())),
        strs(rows, |d| &d.input.source_device),
        ints(|d| d.nbytes),
        strs(rows, |d| d.input.payload.as_str()),
        Arc::new(StringArray::from(
            rows.iter().map(|d| d.digest.as_deref()).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter()
                .map(|d| count(d.summary.numel))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter()
                .map(|d| count(d.summary.finite))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter()
                .map(|d| count(d.summary.nan))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter()
                .map(|d| count(d.summary.pos_inf))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter()
                .map(|d| count(d.summary.neg_inf))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter()
                .map(|d| count(d.summary.zero))
                .collect::<Vec<_>>(),
        )),
        floats(|s| s.min),
        floats(|s| s.max),
        floats(|s| s.mean),
        floats(|s| s.std),
        floats(|s| Some(s.l2)),
    ];
    batch(Table::Observations.schema(), columns)
}

fn points_batch(
    manifest: &Manifest,
    point_index: u64,
    point: &PointInput,
    timestamp: i64,
    observation_count: usize,
) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        repeated_str(&manifest.header.run_id, 1),
        repeated_opt_i64(manifest.header.rank, 1),
        Arc::new(Int64Array::from(vec![point_index as i64])),
        repeated_str(&point.label, 1),
        Arc::new(TimestampMicrosecondArray::from(vec![timestamp]).with_timezone("UTC")),
        repeated_opt_i64(point.replay_index, 1),
        Arc::new(Int64Array::from(vec![observation_count as i64])),
        repeated_str(&point.metadata, 1),
    ];
    batch(Table::Points.schema(), columns)
}

/// The manifest as the one-row `run.parquet` table.
pub fn run_batch(manifest: &Manifest) -> Result<RecordBatch> {
    let h = &manifest.header;
    let created = parse_rfc3339(&manifest.created_at).unwrap_or_default();
    let finished = manifest.finished_at.as_deref().and_then(parse_rfc3339);
    let json = |v: &serde_json::Value| {
        if v.is_null() {
            "{}".to_owned()
        } else {
            v.to_string()
        }
    };
    let kind = match h.kind {
        crate::manifest::RunKind::Tensor => "tensor",
        crate::manifest::RunKind::Memory => "memory",
    };
    let columns: Vec<ArrayRef> = vec![
        repeated_str(&h.run_id, 1),
        repeated_str(&h.name, 1),
        repeated_str(kind, 1),
        repeated_str(&h.execution, 1),
        repeated_opt_i64(h.rank, 1),
        Arc::new(StringArray::from(vec![h.group_id.as_deref()])),
        repeated_opt_i64(h.world_size, 1),
        Arc::new(TimestampMicrosecondArray::from(vec![created]).with_timezone("UTC")),
        Arc::new(TimestampMicrosecondArray::from(vec![finished]).with_timezone("UTC")),
        Arc::new(BooleanArray::from(vec![manifest.complete])),
        Arc::new(Int64Array::from(vec![manifest.point_count as i64])),
        Arc::new(Int64Array::from(vec![i64::from(FORMAT_VERSION)])),
        repeated_str(&manifest.producer, 1),
        repeated_str(&json(&h.provenance), 1),
        repeated_str(&json(&h.run_metadata), 1),
    ];
    batch(RUNS.clone(), columns)
}

/// `run.parquet` is a view of the manifest, replaced whole on every publish.
fn write_part_plain(target: &Path, batch: &RecordBatch) -> Result<()> {
    crate::parts::write_run_table(target, batch)?;
    sync_dir(target.parent().unwrap_or(Path::new(".")))
}

/// Removes what a crash left of an earlier replacement or discard (see `REPLACED_PREFIX`).
/// Runs under the claim, so no other writer is using them.
fn remove_leftovers(dir: &Path) -> Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io(dir)(e)),
    };
    for entry in entries.flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(REPLACED_PREFIX)
        {
            let path = entry.path();
            fs::remove_dir_all(&path).map_err(StoreError::io(&path))?;
        }
    }
    Ok(())
}

/// Whether the run in `dir` may be replaced: its manifest must be one of ours, of a layout
/// this version knows (so it knows which files are the run's), and its table directories
/// must hold only parts. Anything else is the user's, and is not deleted.
fn check_replaceable(dir: &Path) -> Result<()> {
    let refuse = |reason: String| StoreError::NotReplaceable {
        path: dir.to_path_buf(),
        reason,
    };
    let manifest_path = dir.join(MANIFEST_FILE);
    let loose: Option<serde_json::Value> = fs::read(&manifest_path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let ours = loose
        .as_ref()
        .and_then(|m| m.get("schema"))
        .and_then(|s| s.as_str())
        == Some(SCHEMA_NAME);
    if !ours {
        return Err(refuse(format!(
            "'{}' is not a torch-cudagraph-debug manifest; delete the directory yourself if \
             nothing in it is needed",
            manifest_path.display()
        )));
    }
    let version = loose
        .as_ref()
        .and_then(|m| m.get("format_version"))
        .and_then(|v| v.as_u64());
    if version.is_none_or(|v| v > u64::from(FORMAT_VERSION)) {
        return Err(refuse(format!(
            "it was written with format_version {version:?}, which this version does not \
             know; upgrade torch-cudagraph-debug, or delete the directory yourself"
        )));
    }
    for table in Table::ALL {
        let sub = dir.join(table.dir_name());
        let Ok(entries) = fs::read_dir(&sub) else {
            continue;
        };
        for entry in entries {
            let entry = entry.map_err(StoreError::io(&sub))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if !(is_file && is_part_file_name(&name)) {
                return Err(refuse(format!(
                    "'{}' is not a file of the run; move it out of the run directory first",
                    entry.path().display()
                )));
            }
        }
    }
    Ok(())
}

/// A committed part (`part-000001.parquet`) or one being written (its hidden temporary).
fn is_part_file_name(name: &str) -> bool {
    (name.starts_with("part-") && name.ends_with(".parquet"))
        || (name.starts_with(".part-") && name.ends_with(".parquet.tmp"))
}

/// Moves the run's files into `trash` (its table directories and `run.parquet` first,
/// `run.json` last, so the directory is a run until the manifest goes), then deletes the
/// trash. Other files in `dir` are not touched.
fn remove_run_files(dir: &Path, trash: &Path) -> Result<()> {
    fs::create_dir(trash).map_err(StoreError::io(trash))?;
    let root_files = [
        RUN_TABLE_FILE.to_owned(),
        format!(".{RUN_TABLE_FILE}.tmp"),
        format!(".{MANIFEST_FILE}.tmp"),
        MANIFEST_FILE.to_owned(),
    ];
    let names = Table::ALL
        .iter()
        .map(|t| t.dir_name().to_owned())
        .chain(root_files);
    for name in names {
        let from = dir.join(&name);
        if fs::symlink_metadata(&from).is_err() {
            continue;
        }
        fs::rename(&from, trash.join(&name)).map_err(StoreError::io(&from))?;
    }
    sync_dir(dir)?;
    fs::remove_dir_all(trash).map_err(StoreError::io(trash))
}
