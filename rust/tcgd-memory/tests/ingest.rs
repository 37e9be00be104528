//! Ingestion: statistics from blocks, the field policy, history windows, and the pickle
//! reader on real `_dump_snapshot` files.

mod common;

use std::path::PathBuf;

use common::*;
use serde_json::json;
use tcgd_memory::model::HistoryStatus;
use tcgd_memory::pickle::{parse, PickleError};
use tcgd_memory::{
    ingest, HistoryCursor, IngestOptions, JsonSnapshot, MemoryError, MemoryStats, ObservationKey,
    SnapshotTree, StackTable,
};

fn run_ingest(snap: &serde_json::Value) -> Result<tcgd_memory::Ingested, MemoryError> {
    let mut stacks = StackTable::default();
    ingest(
        &JsonSnapshot(snap),
        &snap,
        &IngestOptions {
            torch_version: Some("2.11.0".into()),
            ..IngestOptions::default()
        },
        &HistoryCursor::new(),
        &mut stacks,
    )
}

#[test]
fn statistics_come_from_blocks() {
    let snap = snapshot(
        vec![
            segment(
                0,
                0x1000_0000,
                (0, 0),
                0,
                vec![
                    block(512, "active_allocated", 500),
                    block(1536, "active_pending_free", 1000),
                    block(2048, "inactive", 0),
                    block(4096, "inactive", 0),
                ],
            ),
            segment(
                0,
                0x2000_0000,
                (3, 1),
                7,
                vec![block(8192, "active_allocated", 8000)],
            ),
        ],
        vec![vec![]],
    );
    let s = on_device(&snap, "run", "p", 0, 100 * MIB, None);
    assert_eq!(s.observations.len(), 2);
    let default = s
        .stats(&ObservationKey {
            device: 0,
            pool: (0, 0),
            stream: 0,
        })
        .unwrap();
    assert_eq!(
        *default,
        MemoryStats {
            reserved_bytes: 8192,
            allocated_bytes: 512,
            active_bytes: 2048,
            requested_bytes: 1500,
            segment_count: 1,
            block_count: 4,
            inactive_block_count: 2,
            largest_inactive_block_bytes: 4096,
            ..MemoryStats::default()
        }
    );
    assert_eq!(default.awaiting_free_bytes(), 1536);
    assert_eq!(default.inactive_bytes(), 6144);
    assert_eq!(default.internal_fragmentation_bytes(), 548);
    // Report order: default pool first, then private pools.
    assert_eq!(s.observations[1].0.pool, (3, 1));
    assert_eq!(s.device_stats(0).reserved_bytes, 8192 + 8192);
    assert_eq!(s.residual(0), Some(100 * MIB - 16384));
    // Torch's "active_pending_free" is stored under the documented name.
    assert_eq!(s.blocks[1].state.as_str(), "active_awaiting_free");
}

#[test]
fn block_addresses_are_inferred_when_absent() {
    let mut snap = before_capture();
    for b in snap["segments"][0]["blocks"].as_array_mut().unwrap() {
        b.as_object_mut().unwrap().remove("address");
    }
    let ingested = run_ingest(&snap).unwrap();
    assert_eq!(ingested.blocks[0].address, Some(0x7f00_0000_0000));
    assert_eq!(ingested.blocks[1].address, Some(0x7f00_0000_0000 + 1024));
    assert!(ingested.blocks.iter().all(|b| b.address_inferred));
    // One warning for the field, not one per block.
    let about: Vec<_> = ingested
        .warnings
        .iter()
        .filter(|w| w.contains("'block.address'"))
        .collect();
    assert_eq!(about.len(), 1, "{:?}", ingested.warnings);
    assert!(about[0].contains("torch 2.11.0"));
}

#[test]
fn optional_fields_default_with_one_warning_each() {
    let mut snap = after_capture();
    for seg in snap["segments"].as_array_mut().unwrap() {
        let seg = seg.as_object_mut().unwrap();
        seg.remove("segment_pool_id");
        seg.remove("is_expandable");
    }
    let ingested = run_ingest(&snap).unwrap();
    assert!(ingested
        .segments
        .iter()
        .all(|s| s.pool == (0, 0) && !s.is_expandable));
    assert_eq!(ingested.warnings.len(), 2, "{:?}", ingested.warnings);
    assert!(ingested.warnings[0].contains("segment.segment_pool_id"));
    assert!(ingested.warnings[1].contains("segment.is_expandable"));
}

#[test]
fn missing_required_field_names_it() {
    let mut snap = after_capture();
    snap["segments"][1]
        .as_object_mut()
        .unwrap()
        .remove("total_size");
    match run_ingest(&snap) {
        Err(MemoryError::MissingField { field, torch }) => {
            assert_eq!(field, "segments[1].total_size");
            assert_eq!(torch.0.as_deref(), Some("2.11.0"));
        }
        other => panic!("{other:?}"),
    }
    let mut snap = after_capture();
    snap["segments"][0]["blocks"][1]
        .as_object_mut()
        .unwrap()
        .remove("state");
    let err = run_ingest(&snap).unwrap_err();
    assert!(
        err.to_string().contains("'segments[0].blocks[1].state'"),
        "{err}"
    );
    let snap = json!({"device_traces": []});
    let err = run_ingest(&snap).unwrap_err();
    assert!(err.to_string().contains("'segments'"), "{err}");
}

#[test]
fn wrong_types_name_the_field() {
    let mut snap = after_capture();
    snap["segments"][0]["blocks"][0]["size"] = json!("1024");
    match run_ingest(&snap) {
        Err(MemoryError::WrongType {
            field,
            expected,
            found,
            ..
        }) => {
            assert_eq!(field, "segments[0].blocks[0].size");
            assert_eq!(expected, "int");
            assert_eq!(found, "str");
        }
        other => panic!("{other:?}"),
    }
    let mut snap = after_capture();
    snap["segments"][1]["segment_pool_id"] = json!([1]);
    let err = run_ingest(&snap).unwrap_err();
    assert!(
        err.to_string().contains("segments[1].segment_pool_id"),
        "{err}"
    );
    let mut snap = after_capture();
    snap["device_traces"][0][2]["action"] = json!(5);
    let err = run_ingest(&snap).unwrap_err();
    assert!(
        err.to_string().contains("device_traces[0][2].action"),
        "{err}"
    );
}

#[test]
fn contradictory_blocks_are_refused() {
    let mut snap = before_capture();
    snap["segments"][0]["blocks"][0]["requested_size"] = json!(4096);
    let err = run_ingest(&snap).unwrap_err();
    assert!(
        err.to_string()
            .contains("segments[0].blocks[0].requested_size"),
        "{err}"
    );
    let mut snap = before_capture();
    snap["segments"][0]["total_size"] = json!(1024);
    let err = run_ingest(&snap).unwrap_err();
    assert!(
        err.to_string()
            .contains("more than the segment's total_size"),
        "{err}"
    );
}

/// A ring as torch keeps it: `n` alloc/free triples at increasing times, several entries
/// sharing each microsecond, then a marker entry.
fn ring(entries: usize, t0: i64, marker: Option<&str>) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for i in 0..entries {
        let action = ["alloc", "free_requested", "free_completed"][i % 3];
        out.push(trace(
            action,
            0x1000 + (i as i64 / 3) * 512,
            512,
            t0 + i as i64 / 4,
            "",
        ));
    }
    if let Some(m) = marker {
        let t = out.last().map_or(t0, |e| e["time_us"].as_i64().unwrap());
        out.push(trace("snapshot", 0, 0, t, m));
    }
    out
}

fn ingest_with(
    snap: &serde_json::Value,
    cursor: &HistoryCursor,
    marker: Option<&str>,
) -> tcgd_memory::Ingested {
    let mut stacks = StackTable::default();
    ingest(
        &JsonSnapshot(snap),
        &snap,
        &IngestOptions {
            marker: marker.map(str::to_owned),
            ..IngestOptions::default()
        },
        cursor,
        &mut stacks,
    )
    .unwrap()
}

/// A snapshot holding only `traces`, device 0's history ring.
fn ingest_ring(
    traces: &[serde_json::Value],
    cursor: &HistoryCursor,
    marker: Option<&str>,
) -> tcgd_memory::Ingested {
    ingest_with(&snapshot(vec![], vec![traces.to_vec()]), cursor, marker)
}

/// Torch 2.11 records a snapshot's own `snapshot` entry after gathering the traces: the
/// marker of point N shows up in the ring of point N + 1.
fn push_marker(traces: &mut Vec<serde_json::Value>, marker: &str) {
    let t = traces.last().map_or(0, |e| e["time_us"].as_i64().unwrap());
    traces.push(trace("snapshot", 0, 0, t, marker));
}

#[test]
fn each_point_stores_only_new_history() {
    let mut traces = ring(30, 1000, None);
    let first = ingest_ring(&traces, &HistoryCursor::new(), Some("tcgd:0"));
    assert_eq!(first.windows[0].status, HistoryStatus::FirstPoint);
    assert_eq!(first.events.len(), 30);
    assert!(first.boundary_recorded);
    push_marker(&mut traces, "tcgd:0");

    // 20 more entries, some sharing the marker's microsecond.
    let t = traces.last().unwrap()["time_us"].as_i64().unwrap();
    for i in 0..20 {
        traces.push(trace("alloc", 0x9000 + i * 512, 512, t + i / 8, ""));
    }
    let second = ingest_ring(&traces, &first.next_cursor, Some("tcgd:1"));
    assert_eq!(second.windows[0].status, HistoryStatus::Complete);
    assert_eq!(second.events.len(), 20);
    assert_eq!(second.events[0].address, Some(0x9000));
    assert_eq!(second.events[0].ring_index, 31);
    push_marker(&mut traces, "tcgd:1");

    // The ring dropped its oldest 40 entries (max_entries): the marker is still there.
    let mut third_traces: Vec<_> = traces[40..].to_vec();
    third_traces.push(trace("alloc", 0xa000, 64, t + 4, ""));
    let third = ingest_ring(&third_traces, &second.next_cursor, Some("tcgd:2"));
    assert_eq!(third.windows[0].status, HistoryStatus::Complete);
    assert_eq!(third.events.len(), 1);
    assert_eq!(third.events[0].address, Some(0xa000));
    push_marker(&mut third_traces, "tcgd:2");

    // The ring overwrote the marker and more: truncated, everything kept is stored.
    let lost = vec![
        trace("alloc", 0xb000, 64, t + 100, ""),
        trace("alloc", 0xb100, 64, t + 101, ""),
    ];
    let fourth = ingest_ring(&lost, &third.next_cursor, Some("tcgd:3"));
    assert_eq!(fourth.windows[0].status, HistoryStatus::Truncated);
    assert_eq!(fourth.events.len(), 2);
}

#[test]
fn a_marker_inside_the_snapshot_closes_the_window() {
    // Torch releases that record the snapshot entry before gathering the traces.
    let mut traces = ring(9, 10, Some("tcgd:0"));
    let first = ingest_ring(&traces, &HistoryCursor::new(), Some("tcgd:0"));
    assert_eq!(first.events.len(), 10);
    traces.push(trace("alloc", 0x77, 8, 100, ""));
    traces.push(trace("snapshot", 0, 0, 100, "tcgd:1"));
    let second = ingest_ring(&traces, &first.next_cursor, Some("tcgd:1"));
    assert_eq!(second.windows[0].status, HistoryStatus::Complete);
    let actions: Vec<_> = second.events.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, vec!["alloc", "snapshot"]);
}

#[test]
fn an_empty_ring_at_the_first_point_is_not_yet_disabled() {
    let first = ingest_ring(&[], &HistoryCursor::new(), Some("tcgd:0"));
    assert_eq!(first.windows[0].status, HistoryStatus::FirstPoint);
    // History was switched on right after: the ring starts with our marker.
    let traces = vec![
        trace("snapshot", 0, 0, 5, "tcgd:0"),
        trace("alloc", 0x10, 8, 6, ""),
    ];
    let second = ingest_ring(&traces, &first.next_cursor, Some("tcgd:1"));
    assert_eq!(second.windows[0].status, HistoryStatus::Complete);
    assert_eq!(second.events.len(), 1);
    // Still empty at a later point: history is off.
    let third = ingest_ring(&[], &first.next_cursor, Some("tcgd:1"));
    assert_eq!(third.windows[0].status, HistoryStatus::Disabled);
}

#[test]
fn without_markers_the_boundary_is_found_by_fingerprint() {
    let traces = ring(30, 1000, None);
    let first = ingest_ring(&traces, &HistoryCursor::new(), None);
    assert!(!first.boundary_recorded);
    let mut more = traces.clone();
    let t = more.last().unwrap()["time_us"].as_i64().unwrap();
    // Same microsecond as the boundary: only a count plus fingerprint tells them apart.
    more.push(trace("alloc", 0x5555, 64, t, ""));
    more.push(trace("alloc", 0x6666, 64, t + 1, ""));
    let second = ingest_ring(&more, &first.next_cursor, None);
    assert_eq!(second.windows[0].status, HistoryStatus::Complete);
    let addresses: Vec<_> = second.events.iter().map(|e| e.address).collect();
    assert_eq!(addresses, vec![Some(0x5555), Some(0x6666)]);
}

#[test]
fn no_history_is_reported_as_disabled() {
    let first = ingest_with(
        &before_capture_without_traces(),
        &HistoryCursor::new(),
        Some("m"),
    );
    assert!(first.events.is_empty());
    let got = ingest_with(
        &before_capture_without_traces(),
        &first.next_cursor,
        Some("m2"),
    );
    assert_eq!(got.windows[0].status, HistoryStatus::Disabled);
    assert!(got.events.is_empty());
}

fn before_capture_without_traces() -> serde_json::Value {
    let mut s = before_capture();
    s["device_traces"] = json!([[]]);
    s
}

#[test]
fn timestamps_going_backwards_are_flagged() {
    let traces = vec![trace("alloc", 1, 1, 50, ""), trace("alloc", 2, 1, 40, "")];
    let got = ingest_ring(&traces, &HistoryCursor::new(), None);
    assert_eq!(got.windows[0].status, HistoryStatus::InvalidOrder);
}

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data")
}

#[test]
fn real_dump_snapshot_pickles_parse_and_ingest() {
    for variant in ["default", "expandable"] {
        let before = tcgd_memory::run::read_pickle_file(
            &data_dir().join(format!("memory_{variant}_before.pickle")),
        )
        .unwrap();
        let after = tcgd_memory::run::read_pickle_file(
            &data_dir().join(format!("memory_{variant}_after.pickle")),
        )
        .unwrap();
        let mut stacks = StackTable::default();
        let opts = IngestOptions::default();
        let b = ingest(
            &before,
            &before.root(),
            &opts,
            &HistoryCursor::new(),
            &mut stacks,
        )
        .unwrap();
        let a = ingest(&after, &after.root(), &opts, &b.next_cursor, &mut stacks).unwrap();
        // The capture's 16 MiB went into a private pool.
        let private: i64 = a
            .segments
            .iter()
            .filter(|s| s.pool != (0, 0))
            .map(|s| s.total_size)
            .sum();
        assert!(private >= 16 * MIB, "{variant}: {private}");
        assert!(b.segments.iter().all(|s| s.pool == (0, 0)), "{variant}");
        assert_eq!(
            a.segments.iter().any(|s| s.is_expandable),
            variant == "expandable"
        );
        // Torch 2.11 reports no pool_id in traces: no warnings for by-design absences.
        assert!(a.warnings.is_empty(), "{variant}: {:?}", a.warnings);
        assert_eq!(a.windows[0].status, HistoryStatus::Complete, "{variant}");
        assert!(a.events.iter().all(|e| e.ring_index >= b.windows[0].events));
        assert!(before.seq_len(&before.root()).is_none());
    }
}

#[test]
fn pickle_with_code_is_refused() {
    // pickle.dumps of os.system-style reduce at protocol 4, hand-assembled.
    let data = b"\x80\x04\x95\x1a\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system\x94\x93\x94\x8c\x02id\x94\x85\x94R\x94.";
    match parse(data) {
        Err(PickleError::Unsafe { name, .. }) => assert_eq!(name, "STACK_GLOBAL"),
        other => panic!("{other:?}"),
    }
    let err = parse(b"\x80\x02}q\x00X\x01\x00\x00\x00aq\x01cbuiltins\neval\nq\x02s.").unwrap_err();
    assert!(err.to_string().contains("GLOBAL"), "{err}");
    assert!(err.to_string().contains("refused"), "{err}");
}
