//! A point as the pickle PyTorch's memory viewer opens: the `_snapshot()` dict shape
//! (`segments` with their blocks, `device_traces` with the point's history window),
//! written by [`crate::pickle_write`].

use std::path::Path;

use crate::error::{MemoryError, Result};
use crate::model::{BlockState, Event, StackTable};
use crate::pickle_write::{self, Value};
use crate::state::MemoryState;

/// What a rebuilt `_snapshot()` value is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotShape {
    /// The stored facts as they are: an address the snapshot lacked is `None`, history
    /// entries without a stack have no `frames`, frames carry no FX node fields.
    Stored,
    /// What PyTorch's memory viewer opens: blocks laid out by address (one the snapshot
    /// lacked follows the one before it), `frames` on every entry, frames with the FX
    /// node fields torch added.
    Viewer,
}

fn frames(stacks: &StackTable, stack: Option<u32>, shape: SnapshotShape) -> Value {
    let Some(ids) = stack.and_then(|s| stacks.stack(s)) else {
        return Value::List(Vec::new());
    };
    Value::List(
        ids.iter()
            .filter_map(|&f| stacks.frame(f))
            .map(|f| {
                let mut entries = vec![
                    ("filename", Value::str(f.filename.as_str())),
                    ("line", Value::Int(f.line)),
                    ("name", Value::str(f.name.as_str())),
                ];
                // The FX node fields torch added, written back as it wrote them.
                if let Some(fx) = f.fx.as_deref().filter(|_| shape == SnapshotShape::Viewer) {
                    for (key, value) in [
                        ("fx_node_op", &fx.op),
                        ("fx_node_name", &fx.name),
                        ("fx_node_target", &fx.target),
                        ("fx_original_trace", &fx.original_trace),
                    ] {
                        if let Some(value) = value {
                            entries.push((key, Value::str(value.as_str())));
                        }
                    }
                }
                Value::dict(entries)
            })
            .collect(),
    )
}

fn pool(p: (i64, i64)) -> Value {
    Value::Tuple(vec![Value::Int(p.0), Value::Int(p.1)])
}

/// The `_snapshot()`-shaped value of a state and the history entries it stored (pass the
/// point's window: `MemoryRunReader::events`, or `state.events` for a fresh state).
pub fn snapshot_value(state: &MemoryState, events: &[Event], shape: SnapshotShape) -> Value {
    let viewer = shape == SnapshotShape::Viewer;
    let stacks = &state.stacks;
    let mut blocks_of: Vec<Vec<usize>> = vec![Vec::new(); state.segments.len()];
    for (i, b) in state.blocks.iter().enumerate() {
        if let Some(list) = blocks_of.get_mut(b.segment as usize) {
            list.push(i);
        }
    }
    let segments = state
        .segments
        .iter()
        .zip(&blocks_of)
        .map(|(s, blocks)| {
            let (mut allocated, mut active, mut requested) = (0i64, 0i64, 0i64);
            let mut address = s.address.unwrap_or(0);
            let blocks: Vec<Value> = blocks
                .iter()
                .map(|&bi| {
                    let b = &state.blocks[bi];
                    if b.state == BlockState::ActiveAllocated {
                        allocated = allocated.saturating_add(b.size);
                    }
                    if b.state.is_active() {
                        active = active.saturating_add(b.size);
                        requested = requested.saturating_add(b.requested_size);
                    }
                    let at = b.address.or(viewer.then_some(address));
                    address = at.unwrap_or(address).saturating_add(b.size);
                    Value::dict([
                        ("address", Value::opt_int(at)),
                        ("size", Value::Int(b.size)),
                        ("requested_size", Value::Int(b.requested_size)),
                        (
                            "state",
                            Value::str(match b.state {
                                // The name `_snapshot()` itself uses.
                                BlockState::ActiveAwaitingFree => "active_pending_free",
                                other => other.as_str(),
                            }),
                        ),
                        ("frames", frames(stacks, b.stack, shape)),
                    ])
                })
                .collect();
            Value::dict([
                ("device", Value::Int(s.device)),
                ("address", Value::opt_int(s.address.or(viewer.then_some(0)))),
                ("total_size", Value::Int(s.total_size)),
                (
                    "allocated_size",
                    Value::Int(s.allocated_size.unwrap_or(allocated)),
                ),
                ("active_size", Value::Int(s.active_size.unwrap_or(active))),
                (
                    "requested_size",
                    Value::Int(s.requested_size.unwrap_or(requested)),
                ),
                ("stream", Value::Int(s.stream)),
                ("segment_type", Value::str(s.segment_type.as_str())),
                ("segment_pool_id", pool(s.pool)),
                ("is_expandable", Value::Bool(s.is_expandable)),
                ("frames", frames(stacks, s.stack, shape)),
                ("blocks", Value::List(blocks)),
            ])
        })
        .collect();
    let device_count = state
        .devices
        .iter()
        .copied()
        .chain(events.iter().map(|e| e.device))
        .max()
        .map_or(0, |d| usize::try_from(d + 1).unwrap_or(0));
    let mut traces: Vec<Vec<Value>> = vec![Vec::new(); device_count];
    for e in events {
        let Some(list) = usize::try_from(e.device)
            .ok()
            .and_then(|d| traces.get_mut(d))
        else {
            continue;
        };
        let mut d = vec![("action".to_owned(), Value::str(e.action.as_str()))];
        if e.action == "oom" {
            d.push(("device_free".into(), Value::opt_int(e.device_free)));
        } else {
            d.push(("addr".into(), Value::opt_int(e.address)));
        }
        d.push(("size".into(), Value::Int(e.size)));
        d.push(("stream".into(), Value::Int(e.stream)));
        d.push(("time_us".into(), Value::opt_int(e.time_us)));
        if let Some(m) = &e.user_metadata {
            d.push(("user_metadata".into(), Value::str(m.as_str())));
        }
        if let Some(c) = &e.compile_context {
            d.push(("compile_context".into(), Value::str(c.as_str())));
        }
        if let Some(p) = e.pool {
            d.push(("pool_id".into(), pool(p)));
        }
        // The viewer reads `frames` of every entry.
        if viewer || e.stack.is_some() {
            d.push(("frames".into(), frames(stacks, e.stack, shape)));
        }
        list.push(Value::Dict(d));
    }
    Value::dict([
        ("segments", Value::List(segments)),
        (
            "device_traces",
            Value::List(traces.into_iter().map(Value::List).collect()),
        ),
    ])
}

/// Writes the memory-viewer pickle of a state to `path` (replacing a file there).
pub fn write_memory_viz(path: &Path, state: &MemoryState, events: &[Event]) -> Result<()> {
    let bytes = pickle_write::to_bytes(&snapshot_value(state, events, SnapshotShape::Viewer));
    let io = |source| MemoryError::Io {
        path: path.to_path_buf(),
        source,
    };
    // Written beside and renamed, so a reader never opens half a file.
    let tmp = path.with_extension("tcgd-partial");
    std::fs::write(&tmp, &bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}
