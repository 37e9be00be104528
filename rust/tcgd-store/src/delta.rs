//! One Delta Lake table per kind of row, committed through the Delta Kernel for Rust.
//!
//! This module is the only one that speaks to the kernel. The rest of the store writes its
//! own Parquet files (layout tuned per table, see `parts.rs`), moves them into the table
//! directory and asks this module to commit them: an `add` action per file, `remove`
//! actions for the files a compaction or a replacement retires. Each table is partitioned
//! by `rank`, so the rank lives in the path only (`rank=3/part-....parquet`).
//!
//! Several processes append to one table at once with no lock server: a commit is a
//! put-if-absent of the next log file, a process that loses the race refreshes its
//! snapshot and tries the next version (appends never conflict with each other).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{DataType as ArrowType, Field};
use delta_kernel::committer::FileSystemCommitter;
use delta_kernel::engine::arrow_conversion::TryFromArrow;
use delta_kernel::engine::arrow_data::ArrowEngineData;
use delta_kernel::expressions::Scalar;
use delta_kernel::schema::{DataType, StructField, StructType};
use delta_kernel::table_properties::TableProperties;
use delta_kernel::transaction::create_table::create_table;
use delta_kernel::transaction::data_layout::DataLayout;
use delta_kernel::transaction::{CommitResult, UpdateTableOperation};
use delta_kernel::{FileMeta, FilteredEngineData, KernelError, Snapshot, SnapshotRef};
use delta_kernel_default_engine::executor::tokio::TokioMultiThreadExecutor;
use delta_kernel_default_engine::parquet::DataFileMetadata;
use delta_kernel_default_engine::storage::store_from_url;
use delta_kernel_default_engine::{build_add_file_metadata, DefaultEngine, DefaultEngineBuilder};
use url::Url;

use crate::error::{Result, StoreError};
use crate::schema::{Table, FORMAT_VERSION, KV_FORMAT_VERSION, KV_TABLE};
pub use crate::stats::{FileStats, StatsCollector};

/// The partition column of every table.
pub const RANK_COLUMN: &str = "rank";
/// What the kernel writes as `engineInfo` in each commit.
const ENGINE_INFO: &str = concat!("torch-cudagraph-debug/", env!("CARGO_PKG_VERSION"));
/// A checkpoint every this many versions keeps opening a table fast however long a job
/// records (the log is replayed from the newest checkpoint).
const CHECKPOINT_INTERVAL: u64 = 100;
/// Commit attempts before giving up: each failed attempt means another writer took the
/// version, so this bounds how long a writer waits behind the others.
const COMMIT_ATTEMPTS: u32 = 1000;
/// Reads of a log that lost a file between listing and reading (log cleanup) before the
/// log is called damaged.
const OPEN_ATTEMPTS: u32 = 3;
/// Delta's table property: how long a log file is kept once a newer checkpoint makes it
/// unneeded for the versions committed within that time (see `log_cleanup.rs`).
pub const LOG_RETENTION: &str = "delta.logRetentionDuration";
/// Delta's switch: `false` keeps every log file.
pub const EXPIRED_LOG_CLEANUP: &str = "delta.enableExpiredLogCleanup";
/// The retention of tables this package creates, unless the job root's `runs` table says
/// otherwise. Delta's own default is 30 days, which keeps every commit of a month (86,400 a
/// day per writer at one commit a second). Readers of this package never read old
/// versions, and data files a compaction retires are deleted at once, so old versions of a
/// compacted run cannot be read anyway; the retention only has to outlast a reader that
/// has listed the log and not yet read it, and the clock differences of hosts sharing the
/// root.
pub const DEFAULT_LOG_RETENTION: &str = "interval 10 minutes";

type Engine = DefaultEngine<TokioMultiThreadExecutor>;

/// One engine per process: it owns the kernel's I/O runtime. Local files only; object
/// stores come through the same `store_from_url` when they are wanted. The runtime has two
/// worker threads, not the default engine's one: writing a checkpoint blocks on a task
/// that itself blocks on reading the log, which deadlocks a single background thread.
static ENGINE: LazyLock<std::result::Result<Engine, String>> = LazyLock::new(|| {
    let root = Url::parse("file:///").map_err(|e| e.to_string())?;
    let store = store_from_url(&root).map_err(|e| e.to_string())?;
    let executor =
        TokioMultiThreadExecutor::new_owned_runtime(Some(2), None).map_err(|e| e.to_string())?;
    Ok(DefaultEngineBuilder::new(store)
        .with_task_executor(Arc::new(executor))
        .build())
});

fn engine() -> Result<&'static Engine> {
    ENGINE.as_ref().map_err(|reason| StoreError::Delta {
        table: PathBuf::new(),
        reason: format!("the Delta engine could not start: {reason}"),
    })
}

/// A file the store wrote and moved into the table directory, waiting for its commit.
#[derive(Debug, Clone)]
pub struct StagedFile {
    /// Relative to the table directory, `/`-separated (`rank=0/part-....parquet`).
    pub path: String,
    pub rank: i64,
    pub size: u64,
    /// The statistics of the file's rows, for the `add` action, collected while it was
    /// written.
    pub stats: FileStats,
}

/// A file the table's log lists now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedFile {
    /// Relative to the table directory, `/`-separated.
    pub path: String,
    pub rank: Option<i64>,
    pub size: u64,
    pub rows: Option<u64>,
}

pub struct DeltaTable {
    table: Table,
    dir: PathBuf,
    url: Url,
    snapshot: SnapshotRef,
}

fn kernel_error<E: std::fmt::Display>(dir: &Path, what: &str) -> impl Fn(E) -> StoreError {
    let (dir, what) = (dir.to_path_buf(), what.to_owned());
    move |e| StoreError::Delta {
        table: dir.clone(),
        reason: format!("{what}: {}", first_line(&e)),
    }
}

/// The kernel's message without the backtrace it may carry.
fn first_line(error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    text.lines().next().unwrap_or_default().trim().to_owned()
}

/// The first commit of every table: present once the table exists.
const FIRST_COMMIT: &str = "00000000000000000000.json";

/// The kernel's ways of saying a log has no commit yet.
fn no_first_commit(error: &KernelError) -> bool {
    let text = error.to_string();
    text.contains("No files in log segment") || text.contains("No table version found")
}

/// Whether `log_dir` holds a commit or a checkpoint: a table exists even when its first
/// commit is gone (removed by log cleanup once a checkpoint covers it).
fn has_log_files(log_dir: &Path) -> bool {
    if log_dir.join(FIRST_COMMIT).is_file() {
        return true;
    }
    let Ok(entries) = std::fs::read_dir(log_dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        name.len() > 21
            && name.as_bytes()[..20].iter().all(u8::is_ascii_digit)
            && (name.ends_with(".json") || name.ends_with(".parquet"))
    })
}

/// A `delta.logRetentionDuration` value as Delta reads it (`interval <n> <unit>`, units
/// from nanoseconds to weeks), or an error saying what is accepted.
pub fn parse_log_retention(value: &str) -> Result<Duration> {
    TableProperties::from([(LOG_RETENTION, value)])
        .log_retention_duration
        .ok_or_else(|| {
            StoreError::invalid(
                LOG_RETENTION,
                format!(
                    "'{value}' is not a Delta interval; write 'interval <n> <unit>' with a \
                     whole number n >= 0 and a unit of second(s), minute(s), hour(s), day(s) \
                     or week(s) (e.g. '{DEFAULT_LOG_RETENTION}', 'interval 30 days')"
                ),
            )
        })
}

fn table_url(dir: &Path) -> Result<Url> {
    let absolute = std::path::absolute(dir).map_err(StoreError::io(dir))?;
    Url::from_directory_path(&absolute).map_err(|()| StoreError::Delta {
        table: dir.to_path_buf(),
        reason: "the path cannot be written as a file URL".into(),
    })
}

/// The table's logical schema as the log records it: the data columns, then `rank`.
fn delta_schema(table: Table, dir: &Path) -> Result<Arc<StructType>> {
    let arrow = table.schema();
    let mut fields = Vec::with_capacity(arrow.fields().len() + 1);
    for field in arrow.fields() {
        // The kernel has no large binary type; Delta's `binary` reads as either.
        let field = match field.data_type() {
            ArrowType::LargeBinary => {
                Field::new(field.name(), ArrowType::Binary, field.is_nullable())
            }
            _ => field.as_ref().clone().with_metadata(HashMap::new()),
        };
        fields.push(StructField::try_from_arrow(&field).map_err(kernel_error(dir, "schema"))?);
    }
    fields.push(StructField::not_null(RANK_COLUMN, DataType::LONG));
    Ok(Arc::new(
        StructType::try_new(fields).map_err(kernel_error(dir, "schema"))?,
    ))
}

impl DeltaTable {
    /// Opens the table of `root`, or `None` when there is none (no run of its kind ever
    /// wrote there). A table of a newer layout than this version knows is refused.
    pub fn open(root: &Path, table: Table) -> Result<Option<DeltaTable>> {
        let dir = root.join(table.dir_name());
        let log = dir.join("_delta_log");
        if !log.is_dir() {
            return Ok(None);
        }
        let url = table_url(&dir)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let error = match Snapshot::builder_for(url.as_str()).build(engine()?) {
                Ok(snapshot) => {
                    let opened = DeltaTable {
                        table,
                        dir,
                        url,
                        snapshot,
                    };
                    opened.check_version()?;
                    return Ok(Some(opened));
                }
                Err(e) => e,
            };
            let missing = matches!(error, KernelError::FileNotFound(_)) || no_first_commit(&error);
            if missing && !has_log_files(&log) {
                // A log directory without a commit: a creation that did not finish, or one
                // another process is making right now.
                return Ok(None);
            }
            // A file listed and then gone: log cleanup removed it meanwhile (the listing
            // is read again), or the log is damaged.
            if missing && attempt < OPEN_ATTEMPTS {
                continue;
            }
            return Err(StoreError::CorruptLog {
                log,
                reason: first_line(&error),
            });
        }
    }

    /// Opens the table, creating it first when `root` has none. Processes that create the
    /// same table at once agree: one creation wins, the others open what it made.
    pub fn open_or_create(root: &Path, table: Table) -> Result<DeltaTable> {
        if let Some(opened) = DeltaTable::open(root, table)? {
            return Ok(opened);
        }
        let dir = root.join(table.dir_name());
        std::fs::create_dir_all(&dir).map_err(StoreError::io(&dir))?;
        let url = table_url(&dir)?;
        let engine = engine()?;
        // A job root has one log retention: a table created after it was set (a memory run
        // after tensor runs) takes the `runs` table's.
        let retention = match table {
            Table::Runs => None,
            _ => DeltaTable::open(root, Table::Runs)?
                .and_then(|runs| runs.property(LOG_RETENTION).map(str::to_owned)),
        }
        .unwrap_or_else(|| DEFAULT_LOG_RETENTION.to_owned());
        let created = create_table(url.as_str(), delta_schema(table, &dir)?, ENGINE_INFO, true)
            .with_data_layout(DataLayout::partitioned([RANK_COLUMN]))
            .with_table_properties([
                (KV_FORMAT_VERSION, FORMAT_VERSION.to_string()),
                (KV_TABLE, table.dir_name().to_owned()),
                (LOG_RETENTION, retention),
            ])
            .build(engine, Box::new(FileSystemCommitter::new()))
            .and_then(|txn| txn.commit(engine));
        match created {
            Ok(CommitResult::Committed(_)) => {}
            // Another process created it first: what it made is the table.
            Ok(_) | Err(KernelError::TableAlreadyExistsAtPath(_)) => {}
            Err(e) if DeltaTable::open(root, table)?.is_some() => drop(e),
            Err(e) => return Err(kernel_error(&dir, "cannot create the table")(e)),
        }
        // The winner's first commit may not be visible yet on a slow filesystem.
        for _ in 0..100 {
            if let Some(opened) = DeltaTable::open(root, table)? {
                return Ok(opened);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(StoreError::Delta {
            table: dir,
            reason: "the table was created but its first commit cannot be read".into(),
        })
    }

    fn check_version(&self) -> Result<()> {
        let configuration = self
            .snapshot
            .table_configuration()
            .metadata()
            .configuration();
        let Some(found) = configuration.get(KV_FORMAT_VERSION) else {
            return Err(StoreError::NotOurs {
                path: self.dir.clone(),
                reason: format!(
                    "a Delta table without the '{KV_FORMAT_VERSION}' property is not a table \
                     of torch-cudagraph-debug"
                ),
            });
        };
        match found.parse::<u32>() {
            Ok(v) if v <= FORMAT_VERSION => Ok(()),
            Ok(v) => Err(StoreError::NewerFormat {
                path: self.dir.clone(),
                found: v,
                supported: FORMAT_VERSION,
            }),
            Err(_) => Err(StoreError::NotOurs {
                path: self.dir.clone(),
                reason: format!("its '{KV_FORMAT_VERSION}' property is '{found}', not a number"),
            }),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A table property as this snapshot's metadata holds it.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.snapshot
            .table_configuration()
            .metadata()
            .configuration()
            .get(key)
            .map(String::as_str)
    }

    /// How long expired log files are kept: the table's `delta.logRetentionDuration`, or
    /// `DEFAULT_LOG_RETENTION` when it has none (or one that is not an interval).
    pub fn log_retention(&self) -> Duration {
        self.snapshot
            .table_properties()
            .log_retention_duration
            .or_else(|| parse_log_retention(DEFAULT_LOG_RETENTION).ok())
            .unwrap_or(Duration::from_secs(600))
    }

    /// Removes the log files that expired (see `log_cleanup.rs`): those below the newest
    /// checkpoint older than the table's log retention, and older than it themselves.
    /// Returns how many went. With `delta.enableExpiredLogCleanup = false`, none.
    pub fn remove_expired_log_files(&self) -> Result<u64> {
        if self.snapshot.table_properties().enable_expired_log_cleanup == Some(false) {
            return Ok(0);
        }
        let now = std::time::SystemTime::now();
        let cutoff = now
            .checked_sub(self.log_retention())
            .unwrap_or(std::time::UNIX_EPOCH);
        let removed = crate::log_cleanup::remove_expired(&self.dir.join("_delta_log"), cutoff)?;
        Ok(removed.len() as u64)
    }

    /// Sets a table property: a commit whose `metaData` action is the table's metadata
    /// with `key` set to `value`. Returns `false` when it already had that value. The
    /// kernel has no way to change metadata, so the commit file is written here, with the
    /// same put-if-absent as every commit (a lost race reads the winner and tries again).
    pub fn set_property(&mut self, key: &str, value: &str) -> Result<bool> {
        for attempt in 0..COMMIT_ATTEMPTS {
            self.refresh()?;
            if self.property(key) == Some(value) {
                return Ok(false);
            }
            if self.snapshot.table_properties().enable_in_commit_timestamps == Some(true) {
                return Err(StoreError::Delta {
                    table: self.dir.clone(),
                    reason: "the table records in-commit timestamps, which this package does \
                             not write; change its properties with a Delta engine that does"
                        .into(),
                });
            }
            let metadata = self.snapshot.table_configuration().metadata();
            let mut metadata = serde_json::to_value(metadata).map_err(|e| StoreError::Delta {
                table: self.dir.clone(),
                reason: format!("cannot write the table's metadata: {e}"),
            })?;
            let configuration = metadata
                .get_mut("configuration")
                .and_then(serde_json::Value::as_object_mut)
                .ok_or_else(|| StoreError::Delta {
                    table: self.dir.clone(),
                    reason: "the table's metadata has no configuration".into(),
                })?;
            configuration.insert(key.to_owned(), value.into());
            let now_ms = crate::clock::now_micros() / 1000;
            let commit_info = serde_json::json!({"commitInfo": {
                "timestamp": now_ms,
                "operation": "SET TBLPROPERTIES",
                "operationParameters": {
                    "properties": serde_json::json!({key: value}).to_string(),
                },
                "engineInfo": ENGINE_INFO,
                "isBlindAppend": false,
            }});
            let text = format!(
                "{commit_info}\n{}\n",
                serde_json::json!({ "metaData": metadata })
            );
            let version = self.snapshot.version() + 1;
            if crate::durable::write_new_file(&self.dir.join("_delta_log"), version, &text)? {
                self.refresh()?;
                if version % CHECKPOINT_INTERVAL == 0 {
                    self.checkpoint();
                }
                return Ok(true);
            }
            if attempt > 8 {
                std::thread::sleep(Duration::from_millis(u64::from(attempt.min(50))));
            }
        }
        Err(StoreError::Delta {
            table: self.dir.clone(),
            reason: format!(
                "{COMMIT_ATTEMPTS} commit attempts lost to other writers; the job root has more \
                 writers than it can take"
            ),
        })
    }

    pub fn table(&self) -> Table {
        self.table
    }

    pub fn version(&self) -> u64 {
        self.snapshot.version()
    }

    /// Reads the commits made since this snapshot (by this process or another).
    pub fn refresh(&mut self) -> Result<()> {
        self.snapshot = Snapshot::builder_from(self.snapshot.clone())
            .build(engine()?)
            .map_err(kernel_error(&self.dir, "cannot refresh the table's log"))?;
        Ok(())
    }

    /// The files the log lists at this snapshot.
    pub fn files(&self) -> Result<Vec<CommittedFile>> {
        let engine = engine()?;
        let scan = self
            .snapshot
            .clone()
            .scan_builder()
            .build()
            .map_err(kernel_error(&self.dir, "cannot scan the table"))?;
        let mut files = Vec::new();
        let metadata = scan
            .scan_metadata(engine)
            .map_err(kernel_error(&self.dir, "cannot read the table's files"))?;
        for batch in metadata {
            let batch = batch.map_err(kernel_error(&self.dir, "cannot read the table's files"))?;
            files = batch
                .visit_scan_files(files, |files, file| {
                    files.push(CommittedFile {
                        path: file.path,
                        rank: file
                            .partition_values
                            .get(RANK_COLUMN)
                            .and_then(|v| v.parse().ok()),
                        size: u64::try_from(file.size).unwrap_or(0),
                        rows: file.stats.map(|s| s.num_records),
                    });
                })
                .map_err(kernel_error(&self.dir, "cannot read the table's files"))?;
        }
        Ok(files)
    }

    /// A collector of the statistics a commit of this table records for a file of rank
    /// `rank` (the columns its configuration names, as of this snapshot).
    pub fn stats_collector(&self, rank: i64) -> Result<StatsCollector> {
        let fail = kernel_error(&self.dir, "cannot collect statistics");
        let txn = self
            .snapshot
            .clone()
            .update_table(Operation::Append.kernel(), ENGINE_INFO, true)
            .build(engine()?, Box::new(FileSystemCommitter::new()))
            .map_err(&fail)?;
        let write_state = txn.write_state().map_err(&fail)?;
        let context = write_state
            .write_context_builder()
            .with_partition_values(HashMap::from([(
                RANK_COLUMN.to_owned(),
                Scalar::Long(rank),
            )]))
            .build()
            .map_err(&fail)?;
        Ok(StatsCollector::new(
            write_state.stats_columns(),
            context.physical_data_schema(),
            self.table,
            &self.dir,
        ))
    }

    /// Commits `adds` and `removes` as one version: readers see all of it or none of it.
    /// Files to remove must be listed by the log (paths as `files()` gives them).
    pub fn commit(
        &mut self,
        adds: &[StagedFile],
        removes: &[String],
        operation: Operation,
    ) -> Result<u64> {
        let engine = engine()?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let outcome = self.try_commit(engine, adds, removes, operation)?;
            match outcome {
                Some(version) => {
                    if version > 0 && version % CHECKPOINT_INTERVAL == 0 {
                        self.checkpoint();
                        // As Delta engines do after a checkpoint: the log of a long job
                        // stays at about the retention's worth of commits. Best effort, as
                        // the checkpoint: a failure costs disk space, never data.
                        let _ = self.remove_expired_log_files();
                    }
                    return Ok(version);
                }
                None if attempt < COMMIT_ATTEMPTS => {
                    // Another writer took the version: read its commit and go after it.
                    self.refresh()?;
                    if attempt > 8 {
                        std::thread::sleep(Duration::from_millis(u64::from(attempt.min(50))));
                    }
                }
                None => {
                    return Err(StoreError::Delta {
                        table: self.dir.clone(),
                        reason: format!(
                            "{COMMIT_ATTEMPTS} commit attempts lost to other writers; the job \
                             root has more writers than it can take"
                        ),
                    })
                }
            }
        }
    }

    /// One attempt: the new version, or `None` when another writer took it first.
    fn try_commit(
        &mut self,
        engine: &Engine,
        adds: &[StagedFile],
        removes: &[String],
        operation: Operation,
    ) -> Result<Option<u64>> {
        let fail = kernel_error(&self.dir, "cannot commit");
        let mut builder = self.snapshot.clone().update_table(
            operation.kernel(),
            ENGINE_INFO,
            operation.changes_data(),
        );
        if removes.is_empty() && operation.changes_data() {
            builder = builder.with_blind_append();
        }
        let mut txn = builder
            .build(engine, Box::new(FileSystemCommitter::new()))
            .map_err(&fail)?;
        let write_state = txn.write_state().map_err(&fail)?;
        for add in adds {
            let context = write_state
                .write_context_builder()
                .with_partition_values(HashMap::from([(
                    RANK_COLUMN.to_owned(),
                    Scalar::Long(add.rank),
                )]))
                .build()
                .map_err(&fail)?;
            // Collected while the file was written; should the table have changed which
            // columns it keeps statistics of since (a concurrent change of its properties),
            // they are collected again from the file.
            let stats = if add.stats.columns == write_state.stats_columns()
                && add.stats.schema == *context.physical_data_schema()
            {
                add.stats.stats.clone()
            } else {
                let mut collector = StatsCollector::new(
                    write_state.stats_columns(),
                    context.physical_data_schema(),
                    self.table,
                    &self.dir,
                );
                for rows in crate::parts::read_part(&self.dir.join(&add.path), self.table)? {
                    collector.merge(&rows)?;
                }
                collector.finish()?.stats
            };
            let location = self.url.join(&add.path).map_err(|e| StoreError::Delta {
                table: self.dir.clone(),
                reason: format!("file path '{}': {e}", add.path),
            })?;
            let meta = FileMeta::new(location, crate::clock::now_micros() / 1000, add.size);
            txn.add_files(
                build_add_file_metadata(DataFileMetadata::new(meta, stats), &context)
                    .map_err(&fail)?,
            );
        }
        if !removes.is_empty() {
            self.stage_removes(&mut txn, removes)?;
        }
        match txn.commit(engine).map_err(&fail)? {
            CommitResult::Committed(done) => {
                if let Some(snapshot) = done.post_commit_snapshot() {
                    self.snapshot = snapshot.clone();
                } else {
                    self.refresh()?;
                }
                Ok(Some(done.commit_version()))
            }
            CommitResult::Conflicted(_) | CommitResult::Retryable(_) => Ok(None),
        }
    }

    /// Selects, in the snapshot's file list, the files to remove.
    fn stage_removes(
        &self,
        txn: &mut delta_kernel::transaction::Transaction,
        removes: &[String],
    ) -> Result<()> {
        let engine = engine()?;
        let fail = kernel_error(&self.dir, "cannot remove files");
        let wanted: HashSet<&str> = removes.iter().map(String::as_str).collect();
        let mut found = 0usize;
        let scan = self
            .snapshot
            .clone()
            .scan_builder()
            .build()
            .map_err(&fail)?;
        for metadata in scan.scan_metadata(engine).map_err(&fail)? {
            let metadata = metadata.map_err(&fail)?;
            let (data, selection) = metadata.scan_files.into_parts();
            let arrow = ArrowEngineData::try_from_engine_data(data).map_err(&fail)?;
            let batch: &RecordBatch = arrow.record_batch();
            let paths = batch
                .column_by_name("path")
                .and_then(|c| c.as_string_opt::<i32>())
                .ok_or_else(|| StoreError::Delta {
                    table: self.dir.clone(),
                    reason: "the kernel's file list has no path column".into(),
                })?;
            let keep: Vec<bool> = (0..batch.num_rows())
                .map(|i| {
                    let listed = selection.get(i).copied().unwrap_or(true);
                    let take = listed && wanted.contains(paths.value(i));
                    found += usize::from(take);
                    take
                })
                .collect();
            if keep.iter().any(|&k| k) {
                txn.remove_files(FilteredEngineData::try_new(arrow, keep).map_err(&fail)?);
            }
        }
        if found != wanted.len() {
            return Err(StoreError::Delta {
                table: self.dir.clone(),
                reason: format!(
                    "{} of the {} files to remove are no longer in the table (another process \
                     changed it)",
                    wanted.len() - found,
                    wanted.len()
                ),
            });
        }
        Ok(())
    }

    /// Best effort: a failed checkpoint costs later openers time, never data.
    fn checkpoint(&mut self) {
        if let Ok(engine) = engine() {
            if let Ok((_, snapshot)) = self.snapshot.checkpoint(engine, None) {
                self.snapshot = snapshot;
            }
        }
    }
}

/// Why a commit is made; recorded in the log's `commitInfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// New rows.
    Append,
    /// The same rows in fewer files.
    Compact,
    /// A run's rows removed, or replaced by others (its final `runs` row, an overwrite).
    Replace,
}

impl Operation {
    fn kernel(self) -> UpdateTableOperation {
        match self {
            Operation::Append => UpdateTableOperation::Write,
            Operation::Compact => UpdateTableOperation::Optimize,
            Operation::Replace => UpdateTableOperation::Update,
        }
    }

    fn changes_data(self) -> bool {
        !matches!(self, Operation::Compact)
    }
}
