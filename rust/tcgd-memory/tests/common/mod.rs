//! Snapshots shaped exactly like `torch.cuda.memory._snapshot()`'s, built as JSON, and the
//! helpers the tests share.
#![allow(dead_code)]

use std::sync::Arc;

use serde_json::{json, Value};
use tcgd_memory::state::SnapshotSource;
use tcgd_memory::{
    ingest, CompareOptions, DeviceMemory, HistoryCursor, IngestOptions, JsonSnapshot, MemoryState,
    PoolKey, StackTable, StateIdentity,
};

pub const KIB: i64 = 1024;
pub const MIB: i64 = 1024 * 1024;

pub fn frame(name: &str, line: i64) -> Value {
    json!({"filename": "model.py", "line": line, "name": name})
}

/// A block: (size, state, requested).
pub fn block(size: i64, state: &str, requested: i64) -> Value {
    json!({"size": size, "requested_size": requested, "state": state, "frames": [frame("forward", 10)]})
}

pub fn segment(
    device: i64,
    address: i64,
    pool: (i64, i64),
    stream: i64,
    blocks: Vec<Value>,
) -> Value {
    let total: i64 = blocks.iter().map(|b| b["size"].as_i64().unwrap()).sum();
    let mut at = address;
    let mut allocated = 0;
    let mut active = 0;
    let mut requested = 0;
    let blocks: Vec<Value> = blocks
        .into_iter()
        .map(|mut b| {
            b["address"] = json!(at);
            let size = b["size"].as_i64().unwrap();
            at += size;
            match b["state"].as_str().unwrap() {
                "active_allocated" => {
                    allocated += size;
                    active += size;
                    requested += b["requested_size"].as_i64().unwrap();
                }
                "active_pending_free" => {
                    active += size;
                    requested += b["requested_size"].as_i64().unwrap();
                }
                _ => {}
            }
            b
        })
        .collect();
    json!({
        "device": device,
        "address": address,
        "total_size": total,
        "allocated_size": allocated,
        "active_size": active,
        "requested_size": requested,
        "stream": stream,
        "segment_type": if total >= 1 << 20 { "large" } else { "small" },
        "segment_pool_id": [pool.0, pool.1],
        "is_expandable": false,
        "frames": [],
        "blocks": blocks,
    })
}

pub fn trace(action: &str, addr: i64, size: i64, time_us: i64, meta: &str) -> Value {
    json!({
        "action": action, "addr": addr, "size": size, "stream": 0, "time_us": time_us,
        "compile_context": "N/A", "user_metadata": meta, "frames": [frame("step", 3)],
    })
}

pub fn snapshot(segments: Vec<Value>, traces: Vec<Vec<Value>>) -> Value {
    json!({"segments": segments, "device_traces": traces, "allocator_settings": {}, "external_annotations": []})
}

/// Before a hand capture: a default-pool segment of 2 MiB with 1 KiB allocated.
pub fn before_capture() -> Value {
    snapshot(
        vec![segment(
            0,
            0x7f00_0000_0000,
            (0, 0),
            0,
            vec![
                block(1024, "active_allocated", 16),
                block(2 * MIB - 1024, "inactive", 0),
            ],
        )],
        vec![vec![
            trace("segment_alloc", 0x7f00_0000_0000, 2 * MIB, 100, ""),
            trace("alloc", 0x7f00_0000_0000, 1024, 101, ""),
            trace("snapshot", 0, 1024, 102, "m0"),
        ]],
    )
}

/// After it: the same default segment, plus a private pool (1, 0) holding 16 MiB.
pub fn after_capture() -> Value {
    let mut s = before_capture();
    s["segments"].as_array_mut().unwrap().push(segment(
        0,
        0x7f10_0000_0000,
        (1, 0),
        0x55aa,
        vec![block(16 * MIB, "active_allocated", 16 * MIB)],
    ));
    let traces = s["device_traces"][0].as_array_mut().unwrap();
    traces.push(trace("segment_alloc", 0x7f10_0000_0000, 16 * MIB, 150, ""));
    traces.push(trace("alloc", 0x7f10_0000_0000, 16 * MIB, 150, ""));
    traces.push(trace("snapshot", 0, 16 * MIB + 1024, 151, "m1"));
    s
}

pub fn identity(origin: &str, label: &str, index: i64) -> StateIdentity {
    StateIdentity {
        origin: origin.into(),
        name: "test".into(),
        label: label.into(),
        index,
        taken: SnapshotSource {
            source: "dict".into(),
            ..SnapshotSource::default()
        },
        ..StateIdentity::default()
    }
}

pub fn memory(device: i64, used: i64, probe: Option<i64>) -> DeviceMemory {
    let total = 80 * 1024 * MIB;
    DeviceMemory {
        device,
        free_bytes: Some(total - used),
        total_bytes: Some(total),
        probe_device_bytes: probe,
        probe_pinned_bytes: probe.map(|_| 4096),
    }
}

/// Ingests a JSON snapshot as a standalone state (fresh cursor).
pub fn state(
    snap: &Value,
    origin: &str,
    label: &str,
    index: i64,
    devices: Vec<DeviceMemory>,
) -> MemoryState {
    let mut stacks = StackTable::default();
    let tree = JsonSnapshot(snap);
    let ingested = ingest(
        &tree,
        &snap,
        &IngestOptions::default(),
        &HistoryCursor::new(),
        &mut stacks,
    )
    .unwrap();
    MemoryState::from_ingested(
        identity(origin, label, index),
        ingested,
        devices,
        Arc::new(stacks),
    )
    .unwrap()
}

/// A standalone state of device 0, CUDA using `used` bytes of it.
pub fn on_device(
    snap: &Value,
    origin: &str,
    label: &str,
    index: i64,
    used: i64,
    probe: Option<i64>,
) -> MemoryState {
    state(snap, origin, label, index, vec![memory(0, used, probe)])
}

/// [`before_capture`] and [`after_capture`] as points 0 and 1 of `origin`, CUDA using
/// `used[i]` bytes of device 0 at each.
pub fn capture_points(
    origin: &str,
    labels: [&str; 2],
    used: [i64; 2],
    probe: Option<i64>,
) -> (MemoryState, MemoryState) {
    (
        on_device(&before_capture(), origin, labels[0], 0, used[0], probe),
        on_device(&after_capture(), origin, labels[1], 1, used[1], probe),
    )
}

/// Comparison options pairing `pools` and `devices`.
pub fn mapping(pools: Vec<(PoolKey, PoolKey)>, devices: Vec<(i64, i64)>) -> CompareOptions {
    CompareOptions {
        pool_mapping: pools,
        device_mapping: devices,
    }
}
