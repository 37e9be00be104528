//! Reading a memory run back: the memory tables' rows as states, stacks and pool owners.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, ListArray, RecordBatch, StringArray,
};
use arrow::datatypes::Int64Type;
use tcgd_store::{Manifest, OnDamage, RunKind, RunReader, RunSelector, Table};

use crate::error::{MemoryError, Result};
use crate::model::{
    Block, BlockState, DeviceMemory, Event, Frame, FxNode, HistoryStatus, HistoryWindow, Segment,
    StackTable,
};
use crate::owners::{DevicePeaks, OwnerKind, PeakBytes, PoolOwner};
use crate::state::{MemoryState, SnapshotSource, StateIdentity};

// ---------------------------------------------------------------------- reading

/// One stored table of the run, read through the store's typed column access (a missing
/// or mistyped column is a damaged part of the run), with the memory reader's row helpers.
pub(crate) struct Columns {
    batch: RecordBatch,
    dir: PathBuf,
}

impl Columns {
    /// Reads one table of a run.
    fn read(store: &RunReader, table: Table) -> Result<Columns> {
        Ok(Columns {
            batch: store.table(table)?,
            dir: store.dir().to_path_buf(),
        })
    }

    fn typed(&self) -> tcgd_store::Columns<'_> {
        tcgd_store::Columns::new(&self.dir, &self.batch)
    }

    fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// Row numbers, grouped by `point_index`.
    fn rows_by_point(&self) -> Result<BTreeMap<i64, Vec<usize>>> {
        let points = self.int("point_index")?;
        let mut out: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
        for i in 0..points.len() {
            out.entry(points.value(i)).or_default().push(i);
        }
        Ok(out)
    }

    /// The int64 columns `names`.
    fn ints<const N: usize>(&self, names: [&str; N]) -> Result<[&Int64Array; N]> {
        let columns: Vec<_> = names.iter().map(|n| self.int(n)).collect::<Result<_>>()?;
        Ok(columns.try_into().expect("one column per name"))
    }

    /// The string columns `names`.
    fn strs<const N: usize>(&self, names: [&str; N]) -> Result<[&StringArray; N]> {
        let columns: Vec<_> = names.iter().map(|n| self.str(n)).collect::<Result<_>>()?;
        Ok(columns.try_into().expect("one column per name"))
    }

    /// Row `i` of the optional int columns `names`.
    fn opt_ints<const N: usize>(&self, names: [&str; N], i: usize) -> Result<[Option<i64>; N]> {
        let mut out = [None; N];
        for (slot, name) in out.iter_mut().zip(names) {
            *slot = opt_i64(self.int(name)?, i);
        }
        Ok(out)
    }

    fn int(&self, name: &str) -> Result<&Int64Array> {
        Ok(self.typed().ints(name)?)
    }

    fn str(&self, name: &str) -> Result<&StringArray> {
        Ok(self.typed().strings(name)?)
    }

    fn bool(&self, name: &str) -> Result<&BooleanArray> {
        Ok(self.typed().booleans(name)?)
    }

    /// A list column (its items are checked where they are read).
    fn list(&self, name: &str) -> Result<&ListArray> {
        let typed = self.typed();
        Ok(typed
            .column(name)?
            .as_list_opt::<i32>()
            .ok_or_else(|| typed.bad(name))?)
    }
}

pub(crate) fn opt_i64(a: &Int64Array, i: usize) -> Option<i64> {
    (!a.is_null(i)).then(|| a.value(i))
}

pub(crate) fn opt_string(a: &StringArray, i: usize) -> Option<String> {
    (!a.is_null(i)).then(|| a.value(i).to_owned())
}

pub(crate) fn stack_id(a: &Int64Array, i: usize) -> Option<u32> {
    opt_i64(a, i).and_then(|v| u32::try_from(v).ok())
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
        let read = |table| Columns::read(&store, table);
        let p = read(Table::Points)?;
        let [mp, dv, sg, bl, ow] = [
            read(Table::MemoryPoints)?,
            read(Table::MemoryDevices)?,
            read(Table::MemorySegments)?,
            read(Table::MemoryBlocks)?,
            read(Table::MemoryPoolOwners)?,
        ];
        let [mp_rows, dv_rows, sg_rows, bl_rows, ow_rows] = [
            mp.rows_by_point()?,
            dv.rows_by_point()?,
            sg.rows_by_point()?,
            bl.rows_by_point()?,
            ow.rows_by_point()?,
        ];
        let empty = Vec::new();

        let (p_index, p_label) = (p.int("point_index")?, p.str("label")?);
        let mut states = Vec::with_capacity(p.num_rows());
        for row in 0..p.num_rows() {
            let index = p_index.value(row);
            let label = p_label.value(row).to_owned();
            let Some(&m) = mp_rows.get(&index).and_then(|r| r.first()) else {
                return Err(MemoryError::invalid(format!(
                    "point {index} ('{label}') has no memory_points row; the run is damaged"
                )));
            };
            let warning_values = mp.list("warnings")?.value(m);
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
                taken: SnapshotSource {
                    source: mp.str("source")?.value(m).to_owned(),
                    source_path: opt_string(mp.str("source_path")?, m),
                    synchronized: mp.bool("synchronized")?.value(m),
                    during_capture: mp.bool("during_capture")?.value(m),
                    torch_version: opt_string(mp.str("torch_version")?, m),
                },
                marker: opt_string(mp.str("marker")?, m),
                boundary_recorded: mp.bool("boundary_recorded")?.value(m),
            };

            let mut device_memory = Vec::new();
            let mut windows = Vec::new();
            let mut peaks = Vec::new();
            for &i in dv_rows.get(&index).unwrap_or(&empty) {
                let device = dv.int("device")?.value(i);
                let since = dv.bool("peak_since_previous_point")?;
                if !since.is_null(i) {
                    let [peak_reserved_bytes, peak_allocated_bytes, peak_active_bytes, num_alloc_retries, num_ooms] =
                        dv.opt_ints(
                            [
                                "peak_reserved_bytes",
                                "peak_allocated_bytes",
                                "peak_active_bytes",
                                "num_alloc_retries",
                                "num_ooms",
                            ],
                            i,
                        )?;
                    peaks.push(DevicePeaks {
                        device,
                        bytes: PeakBytes {
                            peak_reserved_bytes,
                            peak_allocated_bytes,
                            peak_active_bytes,
                        },
                        num_alloc_retries,
                        num_ooms,
                        since_previous_point: since.value(i),
                    });
                }
                let [free_bytes, total_bytes, probe_device_bytes, probe_pinned_bytes] = dv
                    .opt_ints(
                        [
                            "free_bytes",
                            "total_bytes",
                            "probe_device_bytes",
                            "probe_pinned_bytes",
                        ],
                        i,
                    )?;
                device_memory.push(DeviceMemory {
                    device,
                    free_bytes,
                    total_bytes,
                    probe_device_bytes,
                    probe_pinned_bytes,
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
                let [address, allocated_size, active_size, requested_size] = sg.opt_ints(
                    ["address", "allocated_size", "active_size", "requested_size"],
                    i,
                )?;
                segs.push(Segment {
                    device: sg.int("device")?.value(i),
                    address,
                    total_size: sg.int("total_size")?.value(i),
                    allocated_size,
                    active_size,
                    requested_size,
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
        let c = Columns::read(&self.store, Table::MemoryEvents)?;
        let [points, device, ring, address, size, stream, time, p0, p1, free, stack] = c.ints([
            "point_index",
            "device",
            "ring_index",
            "address",
            "size",
            "stream",
            "time_us",
            "pool_id_0",
            "pool_id_1",
            "device_free",
            "stack_id",
        ])?;
        let [action, meta, ctx] = c.strs(["action", "user_metadata", "compile_context"])?;
        let mut out = Vec::new();
        for i in (0..c.num_rows()).filter(|&i| points.value(i) == point_index) {
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

pub(crate) fn string_list(a: &ArrayRef, what: &str) -> Result<Vec<String>> {
    let strings = a
        .as_string_opt::<i32>()
        .ok_or_else(|| MemoryError::invalid(format!("memory_pool_owners.{what} is not strings")))?;
    Ok((0..strings.len())
        .map(|i| strings.value(i).to_owned())
        .collect())
}

pub(crate) fn read_owners(c: &Columns, rows: &[usize]) -> Result<Vec<PoolOwner>> {
    let (graphs, kinds, compiles) = (
        c.list("graph_ids")?,
        c.list("function_kinds")?,
        c.list("compile_ids")?,
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

pub(crate) fn read_stacks(store: &RunReader) -> Result<StackTable> {
    let f = Columns::read(store, Table::MemoryFrames)?;
    let (ids, file, line, name) = (
        f.int("frame_id")?,
        f.str("filename")?,
        f.int("line")?,
        f.str("name")?,
    );
    let fx = [
        f.str("fx_node_op")?,
        f.str("fx_node_name")?,
        f.str("fx_node_target")?,
        f.str("fx_original_trace")?,
    ];
    let mut by_id: BTreeMap<i64, Frame> = BTreeMap::new();
    for i in 0..f.num_rows() {
        by_id.insert(
            ids.value(i),
            Frame {
                filename: file.value(i).to_owned(),
                line: line.value(i),
                name: name.value(i).to_owned(),
                fx: FxNode::of(
                    opt_string(fx[0], i),
                    opt_string(fx[1], i),
                    opt_string(fx[2], i),
                    opt_string(fx[3], i),
                ),
            },
        );
    }
    let dense = by_id.keys().enumerate().all(|(i, &k)| i as i64 == k);
    if !dense {
        return Err(MemoryError::invalid(
            "memory_frames ids are not 0, 1, 2, ...; the run is damaged",
        ));
    }
    let s = Columns::read(store, Table::MemoryStacks)?;
    let sid = s.int("stack_id")?;
    let lists = s.list("frame_ids")?;
    let mut stacks: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
    for i in 0..s.num_rows() {
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
