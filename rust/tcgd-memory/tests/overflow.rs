//! Sizes that do not add up in 64 bits: every sum and difference of values read from a
//! snapshot is checked, so a damaged or made-up snapshot is refused with the field named
//! instead of reporting wrapped numbers.

mod common;

use std::sync::Arc;

use common::*;
use serde_json::{json, Value};
use tcgd_memory::model::{Block, BlockState, Segment};
use tcgd_memory::phases::PhaseValues;
use tcgd_memory::{
    compare, compare_phases, ingest, timeline, CompareOptions, DeviceMemory, HistoryCursor,
    IngestOptions, JsonSnapshot, MemoryError, MemoryState, StackTable,
};

const MAX: i64 = i64::MAX;

/// A segment of `size` bytes holding one block of `block_state`, written out by hand (the
/// shared helper adds sizes itself, which these sizes would overflow).
fn raw_segment(device: i64, stream: i64, address: i64, size: i64, block_state: &str) -> Value {
    json!({
        "device": device, "address": address, "total_size": size, "allocated_size": 0,
        "active_size": 0, "requested_size": 0, "stream": stream, "segment_type": "large",
        "segment_pool_id": [0, 0], "is_expandable": false, "frames": [],
        "blocks": [{"address": address, "size": size, "requested_size": size,
                    "state": block_state, "frames": []}],
    })
}

fn state_of(snap: &Value, devices: Vec<DeviceMemory>) -> Result<MemoryState, MemoryError> {
    let mut stacks = StackTable::default();
    let ingested = ingest(
        &JsonSnapshot(snap),
        &snap,
        &IngestOptions::default(),
        &HistoryCursor::new(),
        &mut stacks,
    )?;
    MemoryState::from_ingested(identity("run", "p", 0), ingested, devices, Arc::new(stacks))
}

fn overflow_field(result: Result<MemoryState, MemoryError>) -> (String, String) {
    match result {
        Err(MemoryError::Overflow { field, what, .. }) => (field, what),
        Err(other) => panic!("expected an overflow error, got {other}"),
        Ok(s) => panic!(
            "expected an overflow error, got a state with reserved {}",
            s.scope_stats(None, tcgd_memory::Scope::All).reserved_bytes
        ),
    }
}

fn inconsistent_field(result: Result<MemoryState, MemoryError>) -> (String, String) {
    match result {
        Err(MemoryError::Inconsistent { field, reason, .. }) => (field, reason),
        Err(other) => panic!("expected an inconsistency, got {other}"),
        Ok(_) => panic!("expected an inconsistency, got a state"),
    }
}

#[test]
fn fault9_four_segments_of_2_pow_62_are_refused_not_reserved_zero() {
    let size = 1i64 << 62;
    let segments = (0..4)
        .map(|_| raw_segment(0, 0, 0, size, "inactive"))
        .collect();
    let (field, what) = overflow_field(state_of(&snapshot(segments, vec![]), vec![]));
    assert_eq!(field, "segments of device 0 pool (0, 0) stream 0: reserved");
    assert_eq!(what, "the sum of reserved");
    let message = state_of(
        &snapshot(
            (0..4)
                .map(|_| raw_segment(0, 0, 0, size, "inactive"))
                .collect(),
            vec![],
        ),
        vec![],
    )
    .unwrap_err()
    .to_string();
    assert!(
        message.contains("does not fit in a signed 64-bit integer"),
        "{message}"
    );
}

#[test]
fn fault9_sums_across_streams_and_devices_are_checked_too() {
    let size = 1i64 << 62;
    // One segment per stream: each observation fits, the device's total does not.
    let per_stream = (0..4)
        .map(|s| raw_segment(0, s, 0, size, "inactive"))
        .collect();
    let (field, _) = overflow_field(state_of(&snapshot(per_stream, vec![]), vec![]));
    assert_eq!(field, "segments of device 0 pool (0, 0): reserved");
    // One segment per device: each device fits, the sum over every device does not.
    let per_device = (0..4)
        .map(|d| raw_segment(d, 0, 0, size, "inactive"))
        .collect();
    let (field, _) = overflow_field(state_of(&snapshot(per_device, vec![]), vec![]));
    assert_eq!(field, "segments of every device, all pools: reserved");
}

#[test]
fn fault9_two_segments_of_i64_max_are_refused_not_active_gt_reserved() {
    let segments = (0..2)
        .map(|_| raw_segment(0, 0, 0, MAX, "active_allocated"))
        .collect();
    let (field, _) = overflow_field(state_of(&snapshot(segments, vec![]), vec![]));
    assert_eq!(field, "segments of device 0 pool (0, 0) stream 0: reserved");
}

#[test]
fn fault9_block_sizes_that_wrap_inside_a_segment_are_refused() {
    // Saturating at i64::MAX would have made these "add up" to the segment's size.
    let mut seg = raw_segment(0, 0, 0, MAX, "inactive");
    seg["blocks"] = json!([
        {"size": MAX, "requested_size": 0, "state": "inactive", "frames": []},
        {"size": MAX, "requested_size": 0, "state": "inactive", "frames": []},
    ]);
    let (field, what) = overflow_field(state_of(&snapshot(vec![seg], vec![]), vec![]));
    assert_eq!(field, "segments[0].blocks");
    assert!(what.contains("the sum of the block sizes"), "{what}");
}

#[test]
fn fault9_ranges_past_the_address_space_are_refused() {
    let seg = raw_segment(0, 0, MAX - 10, 1024, "inactive");
    let (field, what) = overflow_field(state_of(&snapshot(vec![seg], vec![]), vec![]));
    assert_eq!(field, "segments[0].total_size");
    assert!(
        what.contains("address 9223372036854775797 + total_size 1024"),
        "{what}"
    );

    let mut seg = raw_segment(0, 0, 0, 1024, "inactive");
    seg["blocks"][0]["address"] = json!(MAX - 1);
    let (field, _) = overflow_field(state_of(&snapshot(vec![seg], vec![]), vec![]));
    assert_eq!(field, "segments[0].blocks[0].size");
}

#[test]
fn fault9_negative_sizes_are_refused_at_ingest() {
    let base = || raw_segment(0, 0, 4096, 1024, "inactive");
    let cases: Vec<(Value, &str)> = vec![
        (
            {
                let mut s = base();
                s["total_size"] = json!(-1024);
                s
            },
            "segments[0].total_size",
        ),
        (
            {
                let mut s = base();
                s["allocated_size"] = json!(-1);
                s
            },
            "segments[0].allocated_size",
        ),
        (
            {
                let mut s = base();
                s["address"] = json!(-4096);
                s
            },
            "segments[0].address",
        ),
        (
            {
                let mut s = base();
                s["blocks"][0]["size"] = json!(-1);
                s
            },
            "segments[0].blocks[0].size",
        ),
    ];
    for (seg, expected) in cases {
        let (field, reason) = inconsistent_field(state_of(&snapshot(vec![seg], vec![]), vec![]));
        assert_eq!(field, expected);
        assert!(reason.contains("negative"), "{reason}");
    }
    let traces = vec![vec![trace("alloc", 4096, -512, 1, "")]];
    let (field, _) = inconsistent_field(state_of(&snapshot(vec![base()], traces), vec![]));
    assert_eq!(field, "device_traces[0][0].size");
}

fn plain_segment(total_size: i64) -> Segment {
    Segment {
        device: 0,
        address: Some(0),
        total_size,
        allocated_size: None,
        active_size: None,
        requested_size: None,
        stream: 0,
        pool: (0, 0),
        segment_type: "large".into(),
        is_expandable: false,
        stack: None,
    }
}

fn made(segments: Vec<Segment>, blocks: Vec<Block>, memory: Vec<DeviceMemory>) -> MemoryState {
    try_made(segments, blocks, memory).unwrap()
}

fn try_made(
    segments: Vec<Segment>,
    blocks: Vec<Block>,
    memory: Vec<DeviceMemory>,
) -> Result<MemoryState, MemoryError> {
    MemoryState::new(
        identity("run", "p", 0),
        vec![0],
        memory,
        segments,
        blocks,
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Arc::new(StackTable::default()),
    )
}

#[test]
fn fault9_states_made_from_stored_rows_are_checked_as_well() {
    let (field, _) = inconsistent_field(try_made(vec![plain_segment(-1)], vec![], vec![]));
    assert_eq!(field, "segments[0].total_size");
    let block = Block {
        segment: 0,
        address: Some(0),
        address_inferred: false,
        size: 2048,
        requested_size: 0,
        state: BlockState::Inactive,
        stack: None,
    };
    let (field, _) = inconsistent_field(try_made(vec![plain_segment(1024)], vec![block], vec![]));
    assert_eq!(field, "segments[0].blocks");
    let memory = DeviceMemory {
        device: 0,
        free_bytes: Some(-1),
        total_bytes: Some(10),
        ..DeviceMemory::default()
    };
    let (field, _) = inconsistent_field(try_made(vec![], vec![], vec![memory]));
    assert_eq!(field, "device_memory[0].free_bytes");
}

/// A device whose CUDA reading is `used` bytes of `i64::MAX`.
fn device(used: i64, probe: Option<i64>) -> DeviceMemory {
    DeviceMemory {
        device: 0,
        free_bytes: Some(MAX - used),
        total_bytes: Some(MAX),
        probe_device_bytes: probe,
        probe_pinned_bytes: None,
    }
}

#[test]
fn fault9_residual_minus_probe_slots_that_wrap_are_refused() {
    // Residual = 0 - i64::MAX; minus the probe slots it no longer fits.
    let result = try_made(vec![plain_segment(MAX)], vec![], vec![device(0, Some(10))]);
    let (field, what) = overflow_field(result);
    assert_eq!(field, "device_memory[0].probe_device_bytes");
    assert!(
        what.contains("the residual -9223372036854775807 - probe slots 10"),
        "{what}"
    );
}

#[test]
fn fault9_changes_of_signed_readings_are_checked() {
    // Residual -i64::MAX, then +i64::MAX: the change needs 65 bits.
    let low = made(vec![plain_segment(MAX)], vec![], vec![device(0, None)]);
    let high = made(vec![], vec![], vec![device(MAX, None)]);
    assert_eq!(low.residual(0), Some(-MAX));
    assert_eq!(high.residual(0), Some(MAX));
    match compare(&low, &high, &CompareOptions::default()) {
        Err(MemoryError::Overflow { field, what, .. }) => {
            assert_eq!(field, "device_memory[0].residual");
            assert!(what.contains("from -9223372036854775807 to 9223372036854775807"));
        }
        other => panic!(
            "expected an overflow, got {:?}",
            other.map(|c| c.devices.len())
        ),
    }
    match timeline(&[&low, &high]) {
        Err(MemoryError::Overflow { field, .. }) => assert_eq!(field, "device_memory[0].residual"),
        other => panic!(
            "expected an overflow, got {:?}",
            other.map(|t| t.rows.len())
        ),
    }
    match compare_phases((&low, &high), (&low, &low), &CompareOptions::default()) {
        Err(MemoryError::Overflow { field, what, .. }) => {
            assert_eq!(field, "device_memory[0].residual");
            assert!(what.contains("baseline change"), "{what}");
        }
        other => panic!(
            "expected an overflow, got {:?}",
            other.map(|p| p.rows.len())
        ),
    }
    // Readings that fit still compare.
    let c = compare(&low, &low, &CompareOptions::default()).unwrap();
    assert_eq!(c.devices[0].residual.change(), Some(0));
}

#[test]
fn fault9_phase_identity_is_exact_even_when_its_terms_pass_64_bits() {
    // start gap + candidate change is 2^63 on the way; the identity still holds.
    let v = PhaseValues {
        baseline_start: Some(-1),
        baseline_end: Some(0),
        candidate_start: Some(MAX - 1),
        candidate_end: Some(MAX),
    };
    assert_eq!(v.start_gap(), Some(MAX));
    assert_eq!(v.candidate_change(), Some(1));
    assert_eq!(v.identity_holds(), Some(true));
}
