//! A point's state as rows of the memory tables (one record batch per table).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Int64Array, Int64Builder, ListBuilder, RecordBatch, StringArray,
    StringBuilder,
};
use arrow::datatypes::{DataType, Field};
use tcgd_store::Table;

use crate::error::{MemoryError, Result};
use crate::model::{Block, DeviceMemory, FxNode, HistoryStatus, StackMark};
use crate::owners::{DevicePeaks, PoolOwner};
use crate::state::MemoryState;
use crate::stats::PoolKind;

pub(crate) struct RowIds {
    pub(crate) run_id: String,
    pub(crate) point_index: i64,
}

pub(crate) fn batch(table: Table, columns: Vec<ArrayRef>) -> Result<(Table, RecordBatch)> {
    let batch = RecordBatch::try_new(table.schema(), columns)
        .map_err(|e| MemoryError::invalid(format!("{}: {e}", table.dir_name())))?;
    Ok((table, batch))
}

pub(crate) fn identity_columns(ids: &RowIds, n: usize) -> Vec<ArrayRef> {
    vec![
        Arc::new(StringArray::from(vec![ids.run_id.as_str(); n])),
        Arc::new(Int64Array::from(vec![ids.point_index; n])),
    ]
}

pub(crate) fn ints(values: impl IntoIterator<Item = i64>) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(values))
}

pub(crate) fn opt_ints(values: impl IntoIterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(values.into_iter().collect::<Int64Array>())
}

pub(crate) fn strs<'a>(values: impl IntoIterator<Item = &'a str>) -> ArrayRef {
    Arc::new(values.into_iter().map(Some).collect::<StringArray>())
}

pub(crate) fn opt_strs<'a>(values: impl IntoIterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(values.into_iter().collect::<StringArray>())
}

pub(crate) fn bools(values: impl IntoIterator<Item = bool>) -> ArrayRef {
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
pub(crate) fn state_batches(
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
        strs([id.taken.source.as_str()]),
        opt_strs([id.taken.source_path.as_deref()]),
        opt_strs([id.marker.as_deref()]),
        bools([id.boundary_recorded]),
        bools([id.taken.synchronized]),
        bools([id.taken.during_capture]),
        opt_strs([id.taken.torch_version.as_deref()]),
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
                .map(|d| state.device_stats(d.device).reserved_bytes),
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
        |p: &DevicePeaks| p.bytes.peak_reserved_bytes,
        |p: &DevicePeaks| p.bytes.peak_allocated_bytes,
        |p: &DevicePeaks| p.bytes.peak_active_bytes,
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
    let fx = |field: fn(&FxNode) -> &Option<String>| {
        opt_strs(
            frames
                .iter()
                .map(move |f| f.fx.as_deref().and_then(|n| field(n).as_deref())),
        )
    };
    columns.extend([
        fx(|n| &n.op),
        fx(|n| &n.name),
        fx(|n| &n.target),
        fx(|n| &n.original_trace),
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
