//! The run writer: one process, one run of a job root, points committed in groups.
//!
//! A point is checked, digested and summarised when it is handed over, then its rows wait
//! with the other points of its group: its observations already encoded into the group's
//! `observations` file (on the thread pool, a block of rows at a time, see
//! `observations.rs`), the rest in memory. A group is committed when it is
//! `commit_interval` old, when it holds `commit_bytes`, at `flush()` and at `close()`:
//! per table one Parquet file, written under `_staging/`, fsynced, moved into the table
//! and added to the table's Delta log. Tables are committed payloads first and `points`
//! last, so a point is in the run once its `points` row is committed; the rows another
//! table committed for points whose `points` rows never were (a crash between the two
//! commits) are left out by readers and removed by `compact_root`.
//!
//! A SIGKILL therefore loses at most the group being gathered: the points of the last
//! `commit_interval`.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{
    ArrayRef, Int64Array, Int64Builder, LargeBinaryArray, ListBuilder, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field};
use rayon::prelude::*;
use tcgd_tensor::{summarize, TensorSummary};

use crate::claim::DirClaim;
use crate::delta::{DeltaTable, Operation};
use crate::digest::content_digest;
use crate::durable::sync_dir;
use crate::error::{Result, StoreError};
use crate::layout::{self, PartName};
use crate::manifest::{Manifest, RunHeader};
use crate::parts::write_part;
use crate::reader::{list_runs, RunRow};
use crate::record::{CommittedPoint, ObservationInput, PayloadKind, PointInput, Value};
use crate::schema::{Table, PAYLOAD_CHUNK_BYTES};

mod commit;
mod files;
mod observations;
mod rows;
pub use files::*;
use observations::ObservationStream;
pub use rows::check_point;
use rows::*;

/// Bytes of values in one point from which they are digested on the thread pool.
const PARALLEL_DIGEST_BYTES: usize = 1 << 20;

/// How long points wait for their group commit by default.
pub const DEFAULT_COMMIT_INTERVAL: Duration = Duration::from_secs(1);
/// A group is committed early once its rows hold this many bytes (tensor payloads
/// mostly), which bounds the memory waiting points hold.
pub const DEFAULT_COMMIT_BYTES: usize = 256 << 20;
/// Compaction writes files of about this size.
pub const COMPACT_TARGET_BYTES: u64 = 256 << 20;

/// When groups are committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitPolicy {
    pub interval: Duration,
    pub max_bytes: usize,
}

impl Default for CommitPolicy {
    fn default() -> CommitPolicy {
        CommitPolicy {
            interval: DEFAULT_COMMIT_INTERVAL,
            max_bytes: DEFAULT_COMMIT_BYTES,
        }
    }
}

/// Rows of points handed over but not committed yet.
#[derive(Default)]
struct Group {
    first_point: u64,
    points: u64,
    labels: Vec<String>,
    /// Rows of `points`, column by column, built into one batch at the commit.
    point_rows: PointColumns,
    /// The `observations` file, written while its points arrive (opened by the first).
    observations: Option<ObservationStream>,
    /// Rows of the other tables, as the producer's batches.
    tables: BTreeMap<Table, Vec<RecordBatch>>,
    bytes: usize,
    started: Option<Instant>,
}

/// A data file of this run that a table's log lists.
#[derive(Debug, Clone)]
struct OwnFile {
    table: Table,
    /// Relative to the table directory.
    logged: String,
    name: PartName,
    size: u64,
}

pub struct RunWriter {
    root: PathBuf,
    manifest: Manifest,
    labels: HashSet<String>,
    /// Digests whose bytes this run already stores: stored once, referenced often.
    stored_payloads: HashSet<String>,
    closed: bool,
    /// A group commit failed: the run takes no more points (its later points would
    /// assume the failed ones).
    failed: bool,
    claim: DirClaim,
    tables: BTreeMap<Table, DeltaTable>,
    group: Group,
    files: Vec<OwnFile>,
    /// The runs table's file holding this run's row, replaced when the run ends.
    run_row: Option<OwnFile>,
    policy: CommitPolicy,
    /// Whether `close(true)` compacts the run's files (default: yes).
    compact_on_close: bool,
    committed_points: u64,
    staged_files: u64,
}

impl RunWriter {
    /// Starts a run in the job root `root` (created when missing) and commits its `runs`
    /// row, so even a process killed before its first point leaves a run.
    pub fn create(root: &Path, header: RunHeader, producer: &str) -> Result<RunWriter> {
        RunWriter::create_with(root, header, producer, false)
    }

    /// `create`, claiming the run's name and rank in the root first (see `claim.rs`): two
    /// writers never record the same run. A run of that name and rank already in the
    /// root is `RunExists`, unless `overwrite`: then its rows are removed from every
    /// table first (other runs of the root are not touched).
    pub fn create_with(
        root: &Path,
        header: RunHeader,
        producer: &str,
        overwrite: bool,
    ) -> Result<RunWriter> {
        refuse_version_one(root)?;
        check_run_id(&header.run_id)?;
        let rank = header.rank.unwrap_or(0);
        if rank < 0 {
            return Err(StoreError::invalid("rank", format!("{rank} is negative")));
        }
        let claim = DirClaim::acquire(&layout::claim_dir(root, &header.name, rank)).map_err(
            |e| match e {
                StoreError::RunInUse { holder, .. } => StoreError::RunInUse {
                    path: run_path(root, &header.name, rank),
                    holder,
                },
                other => other,
            },
        )?;
        let mut writer = RunWriter {
            root: root.to_path_buf(),
            manifest: Manifest::new(header, producer, rfc3339(now_micros())),
            labels: HashSet::new(),
            stored_payloads: HashSet::new(),
            closed: false,
            failed: false,
            claim,
            tables: BTreeMap::new(),
            group: Group::default(),
            files: Vec::new(),
            run_row: None,
            policy: CommitPolicy::default(),
            compact_on_close: true,
            committed_points: 0,
            staged_files: 0,
        };
        if let Err(e) = writer.initialize(overwrite) {
            writer.closed = true;
            writer.claim.release();
            return Err(e);
        }
        Ok(writer)
    }

    fn initialize(&mut self, overwrite: bool) -> Result<()> {
        self.table(Table::Runs)?;
        let existing: Vec<RunRow> = list_runs(&self.root)?
            .into_iter()
            .filter(|r| r.name == self.manifest.header.name && r.rank == self.rank())
            .collect();
        if !existing.is_empty() {
            if !overwrite {
                return Err(StoreError::RunExists {
                    path: run_path(&self.root, &self.manifest.header.name, self.rank()),
                });
            }
            let ids: HashSet<String> = existing.into_iter().map(|r| r.run_id).collect();
            self.remove_runs(&ids)?;
        }
        for table in self.manifest.header.kind.tables() {
            self.table(*table)?;
        }
        self.publish_run_row()
    }

    /// Removes every row of the runs `ids` (this writer's name and rank, claimed) from
    /// every table of the root: `runs` last, so an interrupted removal is still a run
    /// that the next overwrite finds.
    fn remove_runs(&mut self, ids: &HashSet<String>) -> Result<()> {
        let mut order: Vec<Table> = Table::ALL
            .into_iter()
            .filter(|t| *t != Table::Runs)
            .collect();
        order.push(Table::Runs);
        for table in order {
            let Some(delta) = DeltaTable::open(&self.root, table)? else {
                continue;
            };
            let doomed: Vec<String> = delta
                .files()?
                .into_iter()
                .filter(|f| {
                    file_run_id(&f.path).is_some_and(|id| ids.contains(&id))
                        && f.rank == Some(self.rank())
                })
                .map(|f| f.path)
                .collect();
            if doomed.is_empty() {
                continue;
            }
            let mut delta = delta;
            delta.commit(&[], &doomed, Operation::Replace)?;
            delete_files(delta.dir(), &doomed);
        }
        Ok(())
    }

    /// The table, opened (and created in the root when missing) on first use.
    fn table(&mut self, table: Table) -> Result<&mut DeltaTable> {
        if !self.tables.contains_key(&table) {
            let opened = DeltaTable::open_or_create(&self.root, table)?;
            self.tables.insert(table, opened);
        }
        Ok(self.tables.get_mut(&table).expect("inserted above"))
    }

    pub fn set_commit_policy(&mut self, policy: CommitPolicy) -> Result<()> {
        if policy.interval.is_zero() && policy.max_bytes == 0 {
            return Err(StoreError::invalid(
                "commit_interval",
                "a zero interval and a zero size leave nothing to decide when to commit",
            ));
        }
        self.policy = policy;
        Ok(())
    }

    pub fn commit_policy(&self) -> CommitPolicy {
        self.policy
    }

    /// Whether finishing the run compacts its files; a run closed incomplete (by an
    /// error) never is, so what it left is as it was committed.
    pub fn set_compact_on_close(&mut self, compact: bool) {
        self.compact_on_close = compact;
    }

    /// Ends the run by removing it: every row of the run goes from every table, and the
    /// claim's directories when nothing else is in them. For a run whose recording failed
    /// as a whole (an import that stopped halfway), so that retrying it finds no run in
    /// the way.
    pub fn discard(&mut self) -> Result<()> {
        if !self.claim.is_held() {
            return Err(StoreError::RunFinished { path: self.path() });
        }
        self.closed = true;
        self.group = Group::default();
        let ids = HashSet::from([self.manifest.header.run_id.clone()]);
        let removed = self.remove_runs(&ids);
        self.claim.release();
        removed
    }

    /// The job root.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// How messages name this run: `<root> (run '<name>', rank <r>)`.
    pub fn path(&self) -> PathBuf {
        run_path(&self.root, &self.manifest.header.name, self.rank())
    }

    pub fn rank(&self) -> i64 {
        self.manifest.rank()
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Points handed over (committed or waiting for their group commit).
    pub fn point_count(&self) -> u64 {
        self.manifest.point_count
    }

    /// Points whose group is committed.
    pub fn committed_point_count(&self) -> u64 {
        self.committed_points
    }

    /// Labels of the points handed over.
    pub fn labels(&self) -> impl Iterator<Item = &String> {
        self.labels.iter()
    }

    pub fn has_label(&self, label: &str) -> bool {
        self.labels.contains(label)
    }

    fn ensure_open(&self) -> Result<()> {
        if self.closed || self.failed {
            return Err(StoreError::RunFinished { path: self.path() });
        }
        Ok(())
    }

    /// Takes one point into the current group (committing the group when it is due).
    /// A point refused here leaves nothing behind and uses up no index.
    pub fn commit_point(
        &mut self,
        point: &PointInput,
        observations: &[ObservationInput<'_>],
    ) -> Result<CommittedPoint> {
        self.ensure_open()?;
        self.check_new_point(point)?;
        check_point(point, observations)?;

        // Digests and summaries of bytes in parallel; a point of summaries (or of a few
        // small values) is cheaper on this thread than a hand-off to the pool and back.
        let bytes: usize = observations
            .iter()
            .map(|o| match o.value {
                Value::Bytes(b) => b.len(),
                Value::Summary(_) => 0,
            })
            .sum();
        let digested: Vec<Digested> = if bytes >= PARALLEL_DIGEST_BYTES {
            observations
                .par_iter()
                .map(digest_observation)
                .collect::<Result<_>>()?
        } else {
            observations
                .iter()
                .map(digest_observation)
                .collect::<Result<_>>()?
        };

        let point_index = self.manifest.point_count;
        let timestamp = point.timestamp_us.unwrap_or_else(now_micros);
        let mut new_payloads = HashSet::new();
        let mut deduplicated = 0u64;

        let payload_batch = {
            let mut rows = PayloadRows {
                run_id: &self.manifest.header.run_id,
                ..PayloadRows::default()
            };
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
        let observations = digested.len() as u64;
        let tables = payload_batch
            .map(|payloads| (Table::Payloads, payloads))
            .into_iter()
            .collect();
        self.take_point(point, timestamp, digested.len(), &digested, tables)?;
        self.stored_payloads.extend(new_payloads);
        self.commit_if_due()?;
        Ok(CommittedPoint {
            point_index,
            observations,
            payload_chunks_written: payload_chunks,
            payloads_deduplicated: deduplicated,
        })
    }

    /// Adds a point's rows to the group: its `points` row (`observation_count` says how
    /// many rows it has elsewhere), its observations (`digested`, none for a memory point)
    /// and the other tables' batches. A failure to write the group's observations (a full
    /// disk) fails the group, as its commit would have.
    fn take_point(
        &mut self,
        point: &PointInput,
        timestamp: i64,
        observation_count: usize,
        observations: &[Digested<'_>],
        tables: Vec<(Table, RecordBatch)>,
    ) -> Result<()> {
        let point_index = self.manifest.point_count;
        if !observations.is_empty() {
            let pushed = self
                .observation_stream()
                .and_then(|stream| stream.push_point(point_index, &point.label, observations));
            if let Err(e) = pushed {
                self.failed = true;
                self.group = Group::default();
                return Err(e);
            }
        }
        let group = &mut self.group;
        if group.points == 0 {
            group.first_point = point_index;
            group.started = Some(Instant::now());
        }
        // What the waiting rows hold, roughly: enough to bound the group's memory.
        group.bytes += 256 * (observations.len() + 1) + point.metadata.len();
        group
            .point_rows
            .push(point_index, point, timestamp, observation_count);
        for (table, batch) in tables {
            group.bytes += batch.get_array_memory_size();
            group.tables.entry(table).or_default().push(batch);
        }
        group.points += 1;
        group.labels.push(point.label.clone());
        self.manifest.point_count += 1;
        self.labels.insert(point.label.clone());
        Ok(())
    }

    /// The group's `observations` stream, opened when its first observation arrives.
    fn observation_stream(&mut self) -> Result<&mut ObservationStream> {
        if self.group.observations.is_none() {
            let rank = self.rank();
            let stats = self.table(Table::Observations)?.stats_collector(rank)?;
            let target = self.staging_path(Table::Observations)?;
            let run_id = &self.manifest.header.run_id;
            self.group.observations = Some(ObservationStream::open(&target, run_id, stats)?);
        }
        Ok(self.group.observations.as_mut().expect("opened above"))
    }

    /// The index the next point will get; producers of memory tables write it into their
    /// rows.
    pub fn next_point_index(&self) -> u64 {
        self.manifest.point_count
    }

    /// Takes one point of a memory run: its `points` row plus the memory tables the
    /// producer built (each batch must have its table's schema and carry
    /// `point_index == next_point_index()`). An empty batch adds no rows. Same group
    /// commit and visibility rules as `commit_point`.
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
            if matches!(
                table,
                Table::Runs | Table::Points | Table::Observations | Table::Payloads
            ) || !kind_tables.contains(table)
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
        let timestamp = point.timestamp_us.unwrap_or_else(now_micros);
        let rows: Vec<(Table, RecordBatch)> = tables
            .into_iter()
            .filter(|(_, batch)| batch.num_rows() > 0)
            .collect();
        self.take_point(point, timestamp, observation_count, &[], rows)?;
        self.commit_if_due()?;
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

    /// Commits the run's row: the first when the run starts, the final one when it ends
    /// (replacing the first in one commit, so readers always see one row per run).
    fn publish_run_row(&mut self) -> Result<()> {
        let row = self.manifest.runs_row()?;
        let last = self.manifest.point_count.saturating_sub(1);
        let retire: Vec<OwnFile> = self.run_row.iter().cloned().collect();
        let operation = if retire.is_empty() {
            Operation::Append
        } else {
            Operation::Replace
        };
        let file = self.commit_file(
            Table::Runs,
            std::iter::once(Ok(row)),
            0,
            last,
            operation,
            &retire,
        )?;
        self.run_row = Some(file);
        Ok(())
    }

    /// Rewrites this run's files of each table into as few files as the target size
    /// allows, one commit per table (remove + add, so readers never see a mix).
    fn compact(&mut self) -> Result<()> {
        let tables: Vec<Table> = self
            .files
            .iter()
            .map(|f| f.table)
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        for table in tables {
            let mut own: Vec<OwnFile> = self
                .files
                .iter()
                .filter(|f| f.table == table)
                .cloned()
                .collect();
            own.sort_by_key(|f| f.name.first_point);
            for bin in compaction_bins(&own, |f| f.size, COMPACT_TARGET_BYTES) {
                if bin.len() < 2 {
                    continue;
                }
                let dir = self.root.join(table.dir_name());
                let mut batches = Vec::new();
                for file in &bin {
                    batches.extend(crate::parts::read_part(&dir.join(&file.logged), table)?);
                }
                let rows = arrow::compute::concat_batches(&table.schema(), &batches)
                    .map_err(|e| StoreError::invalid(table.dir_name(), e.to_string()))?;
                let first = bin.first().map_or(0, |f| f.name.first_point);
                let last = bin.iter().map(|f| f.name.last_point).max().unwrap_or(first);
                let rows = std::iter::once(Ok(rows));
                self.commit_file(table, rows, first, last, Operation::Compact, &bin)?;
            }
        }
        Ok(())
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Ends the run: commits what waits, compacts the run's files, and replaces its row
    /// with the final one. `complete=false` keeps a run that ended by an error: its points
    /// are intact, but it did not reach its end. Idempotent.
    pub fn close(&mut self, complete: bool) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        let committed = if self.failed {
            Ok(())
        } else {
            self.commit_group()
        };
        // A failed group leaves the run incomplete, with the points committed before it.
        self.manifest.point_count = self.committed_points;
        let compact = complete && self.compact_on_close && !self.failed;
        let compacted = committed.and_then(|()| if compact { self.compact() } else { Ok(()) });
        self.manifest.complete = complete && compacted.is_ok() && !self.failed;
        self.manifest.finished_at = Some(rfc3339(now_micros()));
        let published = self.publish_run_row();
        self.closed = true;
        // The run takes no more writes: another writer may replace it from now on.
        self.claim.release();
        // Housekeeping, best effort: expired log files cost file count, never data.
        // Read at the newest version, so a retention changed meanwhile is the one obeyed.
        for delta in self.tables.values_mut() {
            let _ = delta
                .refresh()
                .and_then(|()| delta.remove_expired_log_files());
        }
        compacted.and(published)
    }
}

impl Drop for RunWriter {
    /// A writer dropped without `close` commits what waits and leaves the run incomplete.
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.close(false);
        }
    }
}
