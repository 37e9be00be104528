//! Memory runs on disk: each point's state as rows of the memory tables of tcgd-store
//! (same manifest, same crash-safe commit), and the way back.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, Int64Builder, ListBuilder, RecordBatch,
    StringArray, StringBuilder,
};
use arrow::datatypes::{DataType, Field, Int64Type};
use tcgd_store::{
    now_micros, CommitPolicy, CommitQueue, Manifest, OnDamage, PointInput, RunHeader, RunKind,
    RunReader, RunSelector, RunWriter, StoreError, Table,
};

/// Points waiting for the writer thread at most; one more waits for the oldest to commit.
const QUEUE_DEPTH: usize = 2;

use crate::error::{MemoryError, Result};
use crate::ingest::{ingest, HistoryCursor, IngestOptions, Ingested};
use crate::model::{
    Block, BlockState, DeviceMemory, Event, Frame, HistoryStatus, HistoryWindow, Segment,
    StackMark, StackTable,
};
use crate::owners::{DevicePeaks, OwnerKind, PoolOwner};
use crate::state::{MemoryState, StateIdentity};
use crate::stats::PoolKind;
use crate::tree::SnapshotTree;

/// How a point was taken, beyond its snapshot.
#[derive(Debug, Clone, Default)]
pub struct PointMeta {
    pub label: String,
    /// JSON text of the user's metadata.
    pub metadata: String,
    pub timestamp_us: Option<i64>,
    pub source: String,
    pub source_path: Option<String>,
    pub synchronized: bool,
    pub during_capture: bool,
    pub torch_version: Option<String>,
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
            store: CommitQueue::start(writer, QUEUE_DEPTH)?,
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
            source: meta.source.clone(),
            source_path: meta.source_path.clone(),
            marker: marker.filter(|_| ingested.boundary_recorded),
            boundary_recorded: ingested.boundary_recorded,
            synchronized: meta.synchronized,
            during_capture: meta.during_capture,
            torch_version: meta.torch_version.clone(),
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

struct RowIds {
    run_id: String,
    point_index: i64,
}

fn batch(table: Table, columns: Vec<ArrayRef>) -> Result<(Table, RecordBatch)> {
    let batch = RecordBatch::try_new(table.schema(), columns)
        .map_err(|e| MemoryError::invalid(format!("{}: {e}", table.dir_name())))?;
    Ok((table, batch))
}

fn identity_columns(ids: &RowIds, n: usize) -> Vec<ArrayRef> {
    vec![
        Arc::new(StringArray::from(vec![ids.run_id.as_str(); n])),
        Arc::new(Int64Array::from(vec![ids.point_index; n])),
    ]
}

fn ints(values: impl IntoIterator<Item = i64>) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(values))
}

fn opt_ints(values: impl IntoIterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(values.into_iter().collect::<Int64Array>())
}

fn strs<'a>(values: impl IntoIterator<Item = &'a str>) -> ArrayRef {
    Arc::new(values.into_iter().map(Some).collect::<StringArray>())
}

fn opt_strs<'a>(values: impl IntoIterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(values.into_iter().collect::<StringArray>())
}

fn bools(values: impl IntoIterator<Item = bool>) -> ArrayRef {
    Arc::new(values.into_iter().map(Some).collect::<BooleanArray>())
}

/// Every memory table's rows for one state on its own (its origin as `run_id`, its index
/// as `point_index`, all of its frames and stacks).
pub fn state_tables(state: &MemoryState) -> Result<Vec<(Table, RecordBatch)>> {
    let ids = RowIds {
        run_id: state.identity.origin.clone(),
        point_index: state.identity.index,
    };
    state_batches(state, &ids, StackMark::default())
}

/// The rows a point adds to each memory table.
fn state_batches(
    state: &MemoryState,
    ids: &RowIds,
    committed: StackMark,
) -> Result<Vec<(Table, RecordBatch)>> {
    let id = &state.identity;
    let mut out = Vec::new();

    let mut warnings = ListBuilder::new(StringBuilder::new()).with_field(Arc::new(Field::new(
        "element",
        DataType::Utf8,
        false,
    )));
    for w in &state.warnings {
        warnings.values().append_value(w);
    }
    warnings.append(true);
    let mut columns = identity_columns(ids, 1);
    columns.extend([
        strs([id.label.as_str()]),
        strs([id.source.as_str()]),
        opt_strs([id.source_path.as_deref()]),
        opt_strs([id.marker.as_deref()]),
        bools([id.boundary_recorded]),
        bools([id.synchronized]),
        bools([id.during_capture]),
        opt_strs([id.torch_version.as_deref()]),
        Arc::new(warnings.finish()) as ArrayRef,
    ]);
    out.push(batch(Table::MemoryPoints, columns)?);

    let devices: Vec<DeviceMemory> = state.device_memory.values().copied().collect();
    let window = |d: i64| state.windows.iter().find(|w| w.device == d);
    let n = devices.len();
    let mut columns = identity_columns(ids, n);
    columns.extend([
        ints(devices.iter().map(|d| d.device)),
        opt_ints(devices.iter().map(|d| d.free_bytes)),
        opt_ints(devices.iter().map(|d| d.total_bytes)),
        opt_ints(devices.iter().map(|d| d.cuda_used())),
        ints(
            devices
                .iter()
                .map(|d| state.device_stats(d.device).reserved),
        ),
        opt_ints(devices.iter().map(|d| state.residual(d.device))),
        opt_ints(devices.iter().map(|d| d.probe_device_bytes)),
        opt_ints(devices.iter().map(|d| d.probe_pinned_bytes)),
        strs(devices.iter().map(|d| {
            window(d.device)
                .map_or(HistoryStatus::Disabled, |w| w.status)
                .as_str()
        })),
        ints(
            devices
                .iter()
                .map(|d| window(d.device).map_or(0, |w| w.ring_entries)),
        ),
        ints(
            devices
                .iter()
                .map(|d| window(d.device).map_or(0, |w| w.events)),
        ),
        opt_ints(
            devices
                .iter()
                .map(|d| window(d.device).and_then(|w| w.first_time_us)),
        ),
        opt_ints(
            devices
                .iter()
                .map(|d| window(d.device).and_then(|w| w.last_time_us)),
        ),
    ]);
    let peaks = |d: i64| state.device_peaks(d);
    for field in [
        |p: &DevicePeaks| p.peak_reserved_bytes,
        |p: &DevicePeaks| p.peak_allocated_bytes,
        |p: &DevicePeaks| p.peak_active_bytes,
        |p: &DevicePeaks| p.num_alloc_retries,
        |p: &DevicePeaks| p.num_ooms,
    ] {
        columns.push(opt_ints(
            devices.iter().map(|d| peaks(d.device).and_then(field)),
        ));
    }
    columns.push(Arc::new(
        devices
            .iter()
            .map(|d| peaks(d.device).map(|p| p.since_previous_point))
            .collect::<BooleanArray>(),
    ) as ArrayRef);
    out.push(batch(Table::MemoryDevices, columns)?);

    let owners = &state.pool_owners;
    let mut graph_ids = ListBuilder::new(Int64Builder::new()).with_field(Arc::new(Field::new(
        "element",
        DataType::Int64,
        false,
    )));
    let string_list = || {
        ListBuilder::new(StringBuilder::new()).with_field(Arc::new(Field::new(
            "element",
            DataType::Utf8,
            false,
        )))
    };
    let (mut kinds, mut compile_ids) = (string_list(), string_list());
    for o in owners {
        graph_ids.values().append_slice(&o.graph_ids);
        graph_ids.append(true);
        for k in &o.function_kinds {
            kinds.values().append_value(k);
        }
        kinds.append(true);
        for c in &o.compile_ids {
            compile_ids.values().append_value(c);
        }
        compile_ids.append(true);
    }
    let descriptions: Vec<String> = owners.iter().map(PoolOwner::describe).collect();
    let mut columns = identity_columns(ids, owners.len());
    columns.extend([
        ints(owners.iter().map(|o| o.device)),
        ints(owners.iter().map(|o| o.pool.0)),
        ints(owners.iter().map(|o| o.pool.1)),
        strs(owners.iter().map(|o| o.kind.as_str())),
        opt_strs(owners.iter().map(|o| o.name.as_deref())),
        Arc::new(graph_ids.finish()) as ArrayRef,
        Arc::new(kinds.finish()) as ArrayRef,
        Arc::new(compile_ids.finish()) as ArrayRef,
        strs(descriptions.iter().map(String::as_str)),
    ]);
    out.push(batch(Table::MemoryPoolOwners, columns)?);

    let obs = &state.observations;
    let mut columns = identity_columns(ids, obs.len());
    columns.extend([
        strs(obs.iter().map(|_| id.label.as_str())),
        ints(0..obs.len() as i64),
        ints(obs.iter().map(|(k, _)| k.device)),
        ints(obs.iter().map(|(k, _)| k.pool.0)),
        ints(obs.iter().map(|(k, _)| k.pool.1)),
        strs(obs.iter().map(|(k, _)| PoolKind::of(k.pool).as_str())),
        ints(obs.iter().map(|(k, _)| k.stream)),
    ]);
    for i in 0..14 {
        columns.push(ints(obs.iter().map(|(_, s)| s.columns()[i].1)));
    }
    out.push(batch(Table::MemoryStats, columns)?);

    let segs = &state.segments;
    let mut columns = identity_columns(ids, segs.len());
    columns.extend([
        ints(0..segs.len() as i64),
        ints(segs.iter().map(|s| s.device)),
        opt_ints(segs.iter().map(|s| s.address)),
        ints(segs.iter().map(|s| s.total_size)),
        opt_ints(segs.iter().map(|s| s.allocated_size)),
        opt_ints(segs.iter().map(|s| s.active_size)),
        opt_ints(segs.iter().map(|s| s.requested_size)),
        ints(segs.iter().map(|s| s.stream)),
        ints(segs.iter().map(|s| s.pool.0)),
        ints(segs.iter().map(|s| s.pool.1)),
        strs(segs.iter().map(|s| s.segment_type.as_str())),
        bools(segs.iter().map(|s| s.is_expandable)),
        opt_ints(segs.iter().map(|s| s.stack.map(i64::from))),
    ]);
    out.push(batch(Table::MemorySegments, columns)?);

    let blocks = &state.blocks;
    let seg = |b: &Block| &segs[b.segment as usize];
    let mut block_index = Vec::with_capacity(blocks.len());
    let mut last_segment = u32::MAX;
    let mut k = 0i64;
    for b in blocks {
        if b.segment != last_segment {
            last_segment = b.segment;
            k = 0;
        }
        block_index.push(k);
        k += 1;
    }
    let mut columns = identity_columns(ids, blocks.len());
    columns.extend([
        ints(blocks.iter().map(|b| i64::from(b.segment))),
        ints(block_index),
        ints(blocks.iter().map(|b| seg(b).device)),
        ints(blocks.iter().map(|b| seg(b).pool.0)),
        ints(blocks.iter().map(|b| seg(b).pool.1)),
        ints(blocks.iter().map(|b| seg(b).stream)),
        opt_ints(blocks.iter().map(|b| b.address)),
        bools(blocks.iter().map(|b| b.address_inferred)),
        ints(blocks.iter().map(|b| b.size)),
        ints(blocks.iter().map(|b| b.requested_size)),
        strs(blocks.iter().map(|b| b.state.as_str())),
        opt_ints(blocks.iter().map(|b| b.stack.map(i64::from))),
    ]);
    out.push(batch(Table::MemoryBlocks, columns)?);

    let ev = &state.events;
    let mut columns = identity_columns(ids, ev.len());
    columns.extend([
        ints(ev.iter().map(|e| e.device)),
        ints(ev.iter().map(|e| e.ring_index)),
        strs(ev.iter().map(|e| e.action.as_str())),
        opt_ints(ev.iter().map(|e| e.address)),
        ints(ev.iter().map(|e| e.size)),
        ints(ev.iter().map(|e| e.stream)),
        opt_ints(ev.iter().map(|e| e.time_us)),
        opt_ints(ev.iter().map(|e| e.pool.map(|p| p.0))),
        opt_ints(ev.iter().map(|e| e.pool.map(|p| p.1))),
        opt_strs(ev.iter().map(|e| e.user_metadata.as_deref())),
        opt_strs(ev.iter().map(|e| e.compile_context.as_deref())),
        opt_ints(ev.iter().map(|e| e.device_free)),
        opt_ints(ev.iter().map(|e| e.stack.map(i64::from))),
    ]);
    out.push(batch(Table::MemoryEvents, columns)?);

    let frames = &state.stacks.frames()[committed.frames.min(state.stacks.frames().len())..];
    let first = committed.frames as i64;
    let mut columns = identity_columns(ids, frames.len());
    columns.extend([
        ints((0..frames.len() as i64).map(|i| first + i)),
        strs(frames.iter().map(|f| f.filename.as_str())),
        ints(frames.iter().map(|f| f.line)),
        strs(frames.iter().map(|f| f.name.as_str())),
    ]);
    out.push(batch(Table::MemoryFrames, columns)?);

    let stacks = &state.stacks.stacks()[committed.stacks.min(state.stacks.stacks().len())..];
    let first = committed.stacks as i64;
    let mut lists = ListBuilder::new(Int64Builder::new()).with_field(Arc::new(Field::new(
        "element",
        DataType::Int64,
        false,
    )));
    for s in stacks {
        lists
            .values()
            .append_slice(&s.iter().map(|&f| i64::from(f)).collect::<Vec<_>>());
        lists.append(true);
    }
    let mut columns = identity_columns(ids, stacks.len());
    columns.extend([
        ints((0..stacks.len() as i64).map(|i| first + i)),
        Arc::new(lists.finish()) as ArrayRef,
    ]);
    out.push(batch(Table::MemoryStacks, columns)?);
    Ok(out)
}

// ---------------------------------------------------------------------- reading

/// Typed access to the columns of one stored table.
struct Columns<'a> {
    batch: &'a RecordBatch,
    table: Table,
}

impl<'a> Columns<'a> {
    fn column(&self, name: &str) -> Result<&'a ArrayRef> {
        self.batch.column_by_name(name).ok_or_else(|| {
            MemoryError::invalid(format!("{} has no column '{name}'", self.table.dir_name()))
        })
    }

    fn int(&self, name: &str) -> Result<&'a Int64Array> {
        self.column(name)?
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| {
                MemoryError::invalid(format!("{}.{name} is not int64", self.table.dir_name()))
            })
    }

    fn str(&self, name: &str) -> Result<&'a StringArray> {
        self.column(name)?.as_string_opt::<i32>().ok_or_else(|| {
            MemoryError::invalid(format!("{}.{name} is not a string", self.table.dir_name()))
        })
    }

    fn bool(&self, name: &str) -> Result<&'a BooleanArray> {
        self.column(name)?.as_boolean_opt().ok_or_else(|| {
            MemoryError::invalid(format!("{}.{name} is not a bool", self.table.dir_name()))
        })
    }
}

fn opt_i64(a: &Int64Array, i: usize) -> Option<i64> {
    (!a.is_null(i)).then(|| a.value(i))
}

fn opt_string(a: &StringArray, i: usize) -> Option<String> {
    (!a.is_null(i)).then(|| a.value(i).to_owned())
}

fn stack_id(a: &Int64Array, i: usize) -> Option<u32> {
    opt_i64(a, i).and_then(|v| u32::try_from(v).ok())
}

/// Row numbers of a table, grouped by `point_index`.
fn rows_by_point(c: &Columns) -> Result<BTreeMap<i64, Vec<usize>>> {
    let points = c.int("point_index")?;
    let mut out: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for i in 0..points.len() {
        out.entry(points.value(i)).or_default().push(i);
    }
    Ok(out)
}

pub struct MemoryRunReader {
    store: RunReader,
    states: Vec<Arc<MemoryState>>,
    stacks: Arc<StackTable>,
}

impl MemoryRunReader {
    /// Opens a memory run and rebuilds every point's state (events are read on demand).
    pub fn open(dir: &Path) -> Result<MemoryRunReader> {
        MemoryRunReader::open_with(dir, OnDamage::Raise)
    }

    /// `open`, choosing what a damaged part does (`tcgd_store::OnDamage`); with `Skip`
    /// the states are those of the points left whole.
    pub fn open_with(dir: &Path, on_damage: OnDamage) -> Result<MemoryRunReader> {
        let selector = RunSelector {
            kind: Some(RunKind::Memory),
            ..RunSelector::default()
        };
        MemoryRunReader::open_selected(dir, &selector, on_damage)
    }

    /// Opens the run of the job root `dir` that `selector` picks.
    pub fn open_selected(
        dir: &Path,
        selector: &RunSelector,
        on_damage: OnDamage,
    ) -> Result<MemoryRunReader> {
        let store = RunReader::open_selected(dir, selector, on_damage)?;
        let header = &store.manifest().header;
        if header.kind != RunKind::Memory {
            return Err(MemoryError::invalid(format!(
                "'{}' is a {:?} run, not a memory run",
                dir.display(),
                header.kind
            )));
        }
        let stacks = Arc::new(read_stacks(&store)?);
        let points = store.table(Table::Points)?;
        let mpoints = store.table(Table::MemoryPoints)?;
        let devices = store.table(Table::MemoryDevices)?;
        let segments = store.table(Table::MemorySegments)?;
        let blocks = store.table(Table::MemoryBlocks)?;
        let owners = store.table(Table::MemoryPoolOwners)?;
        let ow = Columns {
            batch: &owners,
            table: Table::MemoryPoolOwners,
        };
        let ow_rows = rows_by_point(&ow)?;
        let p = Columns {
            batch: &points,
            table: Table::Points,
        };
        let mp = Columns {
            batch: &mpoints,
            table: Table::MemoryPoints,
        };
        let dv = Columns {
            batch: &devices,
            table: Table::MemoryDevices,
        };
        let sg = Columns {
            batch: &segments,
            table: Table::MemorySegments,
        };
        let bl = Columns {
            batch: &blocks,
            table: Table::MemoryBlocks,
        };
        let mp_rows = rows_by_point(&mp)?;
        let dv_rows = rows_by_point(&dv)?;
        let sg_rows = rows_by_point(&sg)?;
        let bl_rows = rows_by_point(&bl)?;
        let empty = Vec::new();

        let (p_index, p_label) = (p.int("point_index")?, p.str("label")?);
        let mut states = Vec::with_capacity(points.num_rows());
        for row in 0..points.num_rows() {
            let index = p_index.value(row);
            let label = p_label.value(row).to_owned();
            let Some(&m) = mp_rows.get(&index).and_then(|r| r.first()) else {
                return Err(MemoryError::invalid(format!(
                    "point {index} ('{label}') has no memory_points row; the run is damaged"
                )));
            };
            let warnings_col = mp
                .column("warnings")?
                .as_list_opt::<i32>()
                .ok_or_else(|| MemoryError::invalid("memory_points.warnings is not a list"))?;
            let warning_values = warnings_col.value(m);
            let warning_strings = warning_values
                .as_string_opt::<i32>()
                .ok_or_else(|| MemoryError::invalid("memory_points.warnings is not strings"))?;
            let warnings = (0..warning_strings.len())
                .map(|i| warning_strings.value(i).to_owned())
                .collect();
            let identity = StateIdentity {
                origin: header.run_id.clone(),
                name: header.name.clone(),
                label,
                index,
                source: mp.str("source")?.value(m).to_owned(),
                source_path: opt_string(mp.str("source_path")?, m),
                marker: opt_string(mp.str("marker")?, m),
                boundary_recorded: mp.bool("boundary_recorded")?.value(m),
                synchronized: mp.bool("synchronized")?.value(m),
                during_capture: mp.bool("during_capture")?.value(m),
                torch_version: opt_string(mp.str("torch_version")?, m),
            };

            let mut device_memory = Vec::new();
            let mut windows = Vec::new();
            let mut peaks = Vec::new();
            for &i in dv_rows.get(&index).unwrap_or(&empty) {
                let device = dv.int("device")?.value(i);
                let since = dv.bool("peak_since_previous_point")?;
                if !since.is_null(i) {
                    peaks.push(DevicePeaks {
                        device,
                        peak_reserved_bytes: opt_i64(dv.int("peak_reserved_bytes")?, i),
                        peak_allocated_bytes: opt_i64(dv.int("peak_allocated_bytes")?, i),
                        peak_active_bytes: opt_i64(dv.int("peak_active_bytes")?, i),
                        num_alloc_retries: opt_i64(dv.int("num_alloc_retries")?, i),
                        num_ooms: opt_i64(dv.int("num_ooms")?, i),
                        since_previous_point: since.value(i),
                    });
                }
                device_memory.push(DeviceMemory {
                    device,
                    free_bytes: opt_i64(dv.int("free_bytes")?, i),
                    total_bytes: opt_i64(dv.int("total_bytes")?, i),
                    probe_device_bytes: opt_i64(dv.int("probe_device_bytes")?, i),
                    probe_pinned_bytes: opt_i64(dv.int("probe_pinned_bytes")?, i),
                });
                let status = dv.str("history_status")?.value(i);
                windows.push(HistoryWindow {
                    device,
                    status: HistoryStatus::parse(status).ok_or_else(|| {
                        MemoryError::invalid(format!("unknown history status '{status}'"))
                    })?,
                    ring_entries: dv.int("ring_entries")?.value(i),
                    events: dv.int("window_events")?.value(i),
                    first_time_us: opt_i64(dv.int("window_first_time_us")?, i),
                    last_time_us: opt_i64(dv.int("window_last_time_us")?, i),
                });
            }

            let seg_rows = sg_rows.get(&index).unwrap_or(&empty);
            let mut segs = Vec::with_capacity(seg_rows.len());
            for &i in seg_rows {
                segs.push(Segment {
                    device: sg.int("device")?.value(i),
                    address: opt_i64(sg.int("address")?, i),
                    total_size: sg.int("total_size")?.value(i),
                    allocated_size: opt_i64(sg.int("allocated_size")?, i),
                    active_size: opt_i64(sg.int("active_size")?, i),
                    requested_size: opt_i64(sg.int("requested_size")?, i),
                    stream: sg.int("stream")?.value(i),
                    pool: (sg.int("pool_id_0")?.value(i), sg.int("pool_id_1")?.value(i)),
                    segment_type: sg.str("segment_type")?.value(i).to_owned(),
                    is_expandable: sg.bool("is_expandable")?.value(i),
                    stack: stack_id(sg.int("stack_id")?, i),
                });
            }
            let block_rows = bl_rows.get(&index).unwrap_or(&empty);
            let mut blks = Vec::with_capacity(block_rows.len());
            for &i in block_rows {
                let segment = bl.int("segment_index")?.value(i);
                let state_name = bl.str("state")?.value(i);
                if segment < 0 || segment as usize >= segs.len() {
                    return Err(MemoryError::invalid(format!(
                        "memory_blocks row {i} names segment {segment} of point {index}, which \
                         does not exist; the run is damaged"
                    )));
                }
                blks.push(Block {
                    segment: segment as u32,
                    address: opt_i64(bl.int("address")?, i),
                    address_inferred: bl.bool("address_inferred")?.value(i),
                    size: bl.int("size")?.value(i),
                    requested_size: bl.int("requested_size")?.value(i),
                    state: BlockState::parse(state_name).ok_or_else(|| {
                        MemoryError::invalid(format!("unknown block state '{state_name}'"))
                    })?,
                    stack: stack_id(bl.int("stack_id")?, i),
                });
            }
            let mut state = MemoryState::new(
                identity,
                Vec::new(),
                device_memory,
                segs,
                blks,
                Vec::new(),
                windows,
                warnings,
                stacks.clone(),
            )?;
            state.peaks = peaks;
            state.pool_owners = read_owners(&ow, ow_rows.get(&index).unwrap_or(&empty))?;
            states.push(Arc::new(state));
        }
        Ok(MemoryRunReader {
            store,
            states,
            stacks,
        })
    }

    pub fn manifest(&self) -> &Manifest {
        self.store.manifest()
    }

    pub fn store(&self) -> &RunReader {
        &self.store
    }

    pub fn states(&self) -> &[Arc<MemoryState>] {
        &self.states
    }

    pub fn stacks(&self) -> &Arc<StackTable> {
        &self.stacks
    }

    /// The history entries a point stored (its window).
    pub fn events(&self, point_index: i64) -> Result<Vec<Event>> {
        let table = self.store.table(Table::MemoryEvents)?;
        let c = Columns {
            batch: &table,
            table: Table::MemoryEvents,
        };
        let points = c.int("point_index")?;
        let (device, ring, action, address, size, stream, time) = (
            c.int("device")?,
            c.int("ring_index")?,
            c.str("action")?,
            c.int("address")?,
            c.int("size")?,
            c.int("stream")?,
            c.int("time_us")?,
        );
        let (p0, p1, meta, ctx, free, stack) = (
            c.int("pool_id_0")?,
            c.int("pool_id_1")?,
            c.str("user_metadata")?,
            c.str("compile_context")?,
            c.int("device_free")?,
            c.int("stack_id")?,
        );
        let mut out = Vec::new();
        for i in (0..table.num_rows()).filter(|&i| points.value(i) == point_index) {
            out.push(Event {
                device: device.value(i),
                ring_index: ring.value(i),
                action: action.value(i).to_owned(),
                address: opt_i64(address, i),
                size: size.value(i),
                stream: stream.value(i),
                time_us: opt_i64(time, i),
                pool: opt_i64(p0, i).zip(opt_i64(p1, i)),
                user_metadata: opt_string(meta, i),
                compile_context: opt_string(ctx, i),
                device_free: opt_i64(free, i),
                stack: stack_id(stack, i),
            });
        }
        Ok(out)
    }
}

fn string_list(a: &ArrayRef, what: &str) -> Result<Vec<String>> {
    let strings = a
        .as_string_opt::<i32>()
        .ok_or_else(|| MemoryError::invalid(format!("memory_pool_owners.{what} is not strings")))?;
    Ok((0..strings.len())
        .map(|i| strings.value(i).to_owned())
        .collect())
}

fn read_owners(c: &Columns, rows: &[usize]) -> Result<Vec<PoolOwner>> {
    let list = |name: &str| {
        c.column(name)?
            .as_list_opt::<i32>()
            .ok_or_else(|| MemoryError::invalid(format!("memory_pool_owners.{name} is not a list")))
    };
    let (graphs, kinds, compiles) = (
        list("graph_ids")?,
        list("function_kinds")?,
        list("compile_ids")?,
    );
    let mut out = Vec::with_capacity(rows.len());
    for &i in rows {
        let kind = c.str("owner_kind")?.value(i);
        let ids = graphs.value(i);
        let ids = ids
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| MemoryError::invalid("memory_pool_owners.graph_ids is not int64"))?;
        out.push(PoolOwner {
            device: c.int("device")?.value(i),
            pool: (c.int("pool_id_0")?.value(i), c.int("pool_id_1")?.value(i)),
            kind: OwnerKind::parse(kind)
                .ok_or_else(|| MemoryError::invalid(format!("unknown pool owner kind '{kind}'")))?,
            name: opt_string(c.str("owner_name")?, i),
            graph_ids: ids.values().to_vec(),
            function_kinds: string_list(&kinds.value(i), "function_kinds")?,
            compile_ids: string_list(&compiles.value(i), "compile_ids")?,
        });
    }
    Ok(out)
}

fn read_stacks(store: &RunReader) -> Result<StackTable> {
    let frames = store.table(Table::MemoryFrames)?;
    let f = Columns {
        batch: &frames,
        table: Table::MemoryFrames,
    };
    let (ids, file, line, name) = (
        f.int("frame_id")?,
        f.str("filename")?,
        f.int("line")?,
        f.str("name")?,
    );
    let mut by_id: BTreeMap<i64, Frame> = BTreeMap::new();
    for i in 0..frames.num_rows() {
        by_id.insert(
            ids.value(i),
            Frame {
                filename: file.value(i).to_owned(),
                line: line.value(i),
                name: name.value(i).to_owned(),
            },
        );
    }
    let dense = by_id.keys().enumerate().all(|(i, &k)| i as i64 == k);
    if !dense {
        return Err(MemoryError::invalid(
            "memory_frames ids are not 0, 1, 2, ...; the run is damaged",
        ));
    }
    let stacks_batch = store.table(Table::MemoryStacks)?;
    let s = Columns {
        batch: &stacks_batch,
        table: Table::MemoryStacks,
    };
    let sid = s.int("stack_id")?;
    let lists = s
        .column("frame_ids")?
        .as_list_opt::<i32>()
        .ok_or_else(|| MemoryError::invalid("memory_stacks.frame_ids is not a list"))?;
    let mut stacks: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
    for i in 0..stacks_batch.num_rows() {
        let values = lists.value(i);
        let values = values
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| MemoryError::invalid("memory_stacks.frame_ids is not int64"))?;
        let frames: Vec<u32> = values
            .values()
            .iter()
            .map(|&v| u32::try_from(v).unwrap_or(u32::MAX))
            .collect();
        if frames.iter().any(|&f| f as usize >= by_id.len()) {
            return Err(MemoryError::invalid(
                "memory_stacks names a frame that memory_frames does not hold; the run is damaged",
            ));
        }
        stacks.insert(sid.value(i), frames);
    }
    if !stacks.keys().enumerate().all(|(i, &k)| i as i64 == k) {
        return Err(MemoryError::invalid(
            "memory_stacks ids are not 0, 1, 2, ...; the run is damaged",
        ));
    }
    Ok(StackTable::from_rows(
        by_id.into_values().collect(),
        stacks.into_values().collect(),
    ))
}

/// Reads a `_dump_snapshot` pickle file.
pub fn read_pickle_file(path: &Path) -> Result<crate::tree::PickleSnapshot> {
    let bytes = std::fs::read(path).map_err(|source| MemoryError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let tree = crate::pickle::parse(&bytes).map_err(|source| MemoryError::Pickle {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(crate::tree::PickleSnapshot::new(tree))
}
