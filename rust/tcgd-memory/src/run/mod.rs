//! Memory runs on disk: each point's state as rows of the memory tables of tcgd-store
//! (same manifest, same crash-safe commit), and the way back.
//!
//! The writer is here; [`rows`] turns a state into one record batch per memory table and
//! [`read`] turns the committed rows back into states, stacks and pool owners.

use std::path::Path;
use std::sync::Arc;

use tcgd_store::{
    now_micros, CommitPolicy, CommitQueue, PointInput, RunHeader, RunKind, RunWriter, StoreError,
};

use crate::error::{MemoryError, Result};
use crate::ingest::{ingest, HistoryCursor, IngestOptions, Ingested};
use crate::model::{DeviceMemory, StackMark, StackTable};
use crate::owners::{DevicePeaks, PoolOwner};
use crate::state::{MemoryState, SnapshotSource, StateIdentity};
use crate::tree::SnapshotTree;

/// Points waiting for the writer thread at most; one more waits for the oldest to commit.
const QUEUE_DEPTH: usize = 2;

mod read;
mod rows;

pub use read::*;
pub use rows::*;

/// How a point was taken, beyond its snapshot.
#[derive(Debug, Clone, Default)]
pub struct PointMeta {
    pub label: String,
    /// JSON text of the user's metadata.
    pub metadata: String,
    pub timestamp_us: Option<i64>,
    pub taken: SnapshotSource,
}

/// What a point carries beyond its snapshot and device readings: the owners of its
/// private pools and the `memory_stats()` peaks (both read in Python at point time).
#[derive(Debug, Clone, Default)]
pub struct PointExtras {
    pub pool_owners: Vec<PoolOwner>,
    pub peaks: Vec<DevicePeaks>,
}

/// A snapshot read against the run's history cursor and stack table, not yet committed.
pub struct PendingPoint {
    ingested: Ingested,
    mark: StackMark,
    marker: Option<String>,
}

/// Reads the files of an import in order, each against the history of the ones before it,
/// as `ingest` and `commit` will, and writes nothing: a file that cannot be imported (not a
/// pickle, one that would run code, a snapshot lacking a field, sizes that do not add up)
/// is found before the run is created, so a refused import leaves nothing in the job root.
/// `files`: each path with its device readings. Each file is dropped before the next is
/// read, so this holds one snapshot at a time.
pub fn check_pickle_import(files: &[(std::path::PathBuf, Vec<DeviceMemory>)]) -> Result<()> {
    let mut cursor = HistoryCursor::new();
    let mut stacks = Arc::new(StackTable::default());
    for (index, (path, device_memory)) in files.iter().enumerate() {
        let snapshot = read_pickle_file(path)?;
        let ingested = ingest(
            &snapshot,
            &snapshot.root(),
            &IngestOptions::default(),
            &cursor,
            Arc::make_mut(&mut stacks),
        )?;
        let next = ingested.next_cursor.clone();
        let identity = StateIdentity {
            index: index as i64,
            taken: SnapshotSource::import(path),
            boundary_recorded: ingested.boundary_recorded,
            ..StateIdentity::default()
        };
        // The state holds a reference to the stacks; dropped here, so the next file's
        // ingest extends the table in place.
        MemoryState::from_ingested(identity, ingested, device_memory.clone(), stacks.clone())?;
        cursor = next;
    }
    Ok(())
}

pub struct MemoryRunWriter {
    /// Points are committed on the queue's writer thread: a point returns once its state
    /// is built, while Parquet encoding and the fsyncs run behind it.
    store: CommitQueue,
    cursor: HistoryCursor,
    stacks: Arc<StackTable>,
    /// What of `stacks` is already committed.
    committed: StackMark,
}

impl MemoryRunWriter {
    pub fn create(dir: &Path, header: RunHeader, producer: &str) -> Result<MemoryRunWriter> {
        MemoryRunWriter::create_with(dir, header, producer, false)
    }

    /// `create`; with `overwrite`, a run already in `dir` is replaced
    /// (`RunWriter::create_with`).
    pub fn create_with(
        dir: &Path,
        header: RunHeader,
        producer: &str,
        overwrite: bool,
    ) -> Result<MemoryRunWriter> {
        MemoryRunWriter::create_with_policy(
            dir,
            header,
            producer,
            overwrite,
            CommitPolicy::default(),
            true,
        )
    }

    /// `create_with`, committing groups of points as `policy` says, and compacting the
    /// run's files when it finishes (`compact`).
    pub fn create_with_policy(
        dir: &Path,
        header: RunHeader,
        producer: &str,
        overwrite: bool,
        policy: CommitPolicy,
        compact: bool,
    ) -> Result<MemoryRunWriter> {
        if header.kind != RunKind::Memory {
            return Err(MemoryError::invalid("a memory run needs kind \"memory\""));
        }
        let mut writer = RunWriter::create_with(dir, header, producer, overwrite)?;
        writer.set_commit_policy(policy)?;
        writer.set_compact_on_close(compact);
        Ok(MemoryRunWriter {
            store: CommitQueue::start(writer, QUEUE_DEPTH, usize::MAX)?,
            cursor: HistoryCursor::new(),
            stacks: Arc::new(StackTable::default()),
            committed: StackMark::default(),
        })
    }

    pub fn dir(&self) -> &Path {
        self.store.dir()
    }

    pub fn header(&self) -> &RunHeader {
        self.store.header()
    }

    pub fn has_label(&self, label: &str) -> bool {
        self.store.has_label(label)
    }

    pub fn point_count(&self) -> u64 {
        self.store.point_count()
    }

    pub fn is_closed(&self) -> bool {
        self.store.is_closed()
    }

    /// Waits until every recorded point is durable on disk.
    pub fn flush(&mut self) -> Result<()> {
        Ok(self.store.flush()?)
    }

    /// Commits what is still queued, then ends the run.
    pub fn close(&mut self, complete: bool) -> Result<()> {
        Ok(self.store.close(complete)?)
    }

    /// Removes the run instead of ending it (`CommitQueue::discard`).
    pub fn discard(&mut self) -> Result<()> {
        Ok(self.store.discard()?)
    }

    /// Reads a snapshot against this run's history: only entries after the previous
    /// point's boundary are kept.
    pub fn ingest<T: SnapshotTree>(
        &mut self,
        tree: &T,
        root: &T::Node,
        options: &IngestOptions,
    ) -> Result<PendingPoint> {
        let stacks = Arc::make_mut(&mut self.stacks);
        let mark = stacks.mark();
        match ingest(tree, root, options, &self.cursor, stacks) {
            Ok(ingested) => Ok(PendingPoint {
                ingested,
                mark,
                marker: options.marker.clone(),
            }),
            Err(e) => {
                stacks.rollback(mark);
                Err(e)
            }
        }
    }

    /// Builds a pending point's state and hands it to the writer thread, which commits it
    /// durably (`flush` waits for that). On an error here nothing of it is visible, the
    /// history cursor does not move, and its new stacks are forgotten; an error on the
    /// writer thread is returned by the next call.
    pub fn commit(
        &mut self,
        pending: PendingPoint,
        meta: PointMeta,
        device_memory: Vec<DeviceMemory>,
    ) -> Result<Arc<MemoryState>> {
        self.commit_with(pending, meta, device_memory, PointExtras::default())
    }

    /// `commit`, storing the point's pool owners and peaks with it.
    pub fn commit_with(
        &mut self,
        pending: PendingPoint,
        meta: PointMeta,
        device_memory: Vec<DeviceMemory>,
        extras: PointExtras,
    ) -> Result<Arc<MemoryState>> {
        let result = self.commit_inner(
            pending.ingested,
            pending.marker,
            meta,
            device_memory,
            extras,
        );
        match result {
            Ok((state, cursor)) => {
                self.cursor = cursor;
                self.committed = self.stacks.mark();
                Ok(state)
            }
            Err(e) => {
                Arc::make_mut(&mut self.stacks).rollback(pending.mark);
                Err(e)
            }
        }
    }

    fn commit_inner(
        &mut self,
        ingested: Ingested,
        marker: Option<String>,
        meta: PointMeta,
        device_memory: Vec<DeviceMemory>,
        extras: PointExtras,
    ) -> Result<(Arc<MemoryState>, HistoryCursor)> {
        if self.store.is_closed() {
            return Err(StoreError::RunFinished {
                path: self.store.dir().to_path_buf(),
            }
            .into());
        }
        let header = self.store.header();
        let point_index = self.store.next_point_index();
        let identity = StateIdentity {
            origin: header.run_id.clone(),
            name: header.name.clone(),
            label: meta.label.clone(),
            index: point_index as i64,
            taken: meta.taken.clone(),
            marker: marker.filter(|_| ingested.boundary_recorded),
            boundary_recorded: ingested.boundary_recorded,
        };
        let cursor = ingested.next_cursor.clone();
        let mut state =
            MemoryState::from_ingested(identity, ingested, device_memory, self.stacks.clone())?;
        state.pool_owners = extras.pool_owners;
        state.peaks = extras.peaks;
        let ids = RowIds {
            run_id: header.run_id.clone(),
            point_index: point_index as i64,
        };
        let state = Arc::new(state);
        let point = PointInput {
            label: meta.label,
            metadata: if meta.metadata.is_empty() {
                "{}".to_owned()
            } else {
                meta.metadata
            },
            replay_index: None,
            timestamp_us: Some(meta.timestamp_us.unwrap_or_else(now_micros)),
        };
        let (job_state, committed) = (Arc::clone(&state), self.committed);
        let label = point.label.clone();
        self.store.submit(
            &label,
            0,
            Box::new(move |store: &mut RunWriter| {
                let tables = state_batches(&job_state, &ids, committed).map_err(|e| {
                    StoreError::InvalidInput {
                        field: "memory point".into(),
                        reason: e.to_string(),
                    }
                })?;
                store.commit_tables(&point, job_state.observations.len(), tables)?;
                Ok(())
            }),
        )?;
        Ok((state, cursor))
    }
}
