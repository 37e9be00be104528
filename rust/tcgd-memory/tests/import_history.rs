//! History windows of snapshots taken without a marker (imported `_dump_snapshot` files):
//! the boundary is the `snapshot` entry torch records right after gathering the traces,
//! whose `size` is the bytes the snapshot saw active on that device.

mod common;

use common::*;
use serde_json::Value;
use tcgd_memory::model::HistoryStatus;
use tcgd_memory::{ingest, HistoryCursor, IngestOptions, Ingested, JsonSnapshot, StackTable};

/// A process whose allocator behaves as torch 2.11's does for what the windows need: one
/// device, one default-pool segment of 16 MiB cut into 1 MiB blocks, a history ring of
/// at most `max_entries`, and snapshots that record their own entry after the traces.
struct Process {
    ring: Vec<Value>,
    /// Every entry ever recorded, in order (what the windows must add up to).
    recorded: Vec<Value>,
    active: [bool; 16],
    time: i64,
    max_entries: usize,
    history: bool,
}

const BASE: i64 = 0x7f00_0000_0000;

impl Process {
    fn new(max_entries: usize) -> Process {
        Process {
            ring: Vec::new(),
            recorded: Vec::new(),
            active: [false; 16],
            time: 1_000_000,
            max_entries,
            history: true,
        }
    }

    fn record(&mut self, action: &str, addr: i64, size: i64) {
        if !self.history {
            return;
        }
        self.time += 1;
        let entry = trace(action, addr, size, self.time, "");
        self.recorded.push(entry.clone());
        self.ring.push(entry);
        if self.ring.len() > self.max_entries {
            self.ring.remove(0);
        }
    }

    fn alloc(&mut self, slot: usize) {
        self.active[slot] = true;
        self.record("alloc", BASE + slot as i64 * MIB, MIB);
    }

    fn free(&mut self, slot: usize) {
        self.active[slot] = false;
        self.record("free_requested", BASE + slot as i64 * MIB, MIB);
        self.record("free_completed", BASE + slot as i64 * MIB, MIB);
    }

    fn active_bytes(&self) -> i64 {
        self.active.iter().filter(|a| **a).count() as i64 * MIB
    }

    /// `_snapshot()`: the ring as it is, then the segments, then the snapshot's own entry.
    fn snapshot(&mut self) -> Value {
        let blocks = self
            .active
            .iter()
            .map(|&a| {
                if a {
                    block(MIB, "active_allocated", MIB)
                } else {
                    block(MIB, "inactive", 0)
                }
            })
            .collect();
        let snap = snapshot(
            vec![segment(0, BASE, (0, 0), 0, blocks)],
            vec![self.ring.clone()],
        );
        self.record("snapshot", 0, self.active_bytes());
        snap
    }
}

fn ingest_file(snap: &Value, cursor: &HistoryCursor, stacks: &mut StackTable) -> Ingested {
    ingest(
        &JsonSnapshot(snap),
        &snap,
        &IngestOptions::default(),
        cursor,
        stacks,
    )
    .unwrap()
}

/// Ingests the snapshots in order, as an import does.
fn import(snaps: &[Value]) -> Vec<Ingested> {
    let mut stacks = StackTable::default();
    let mut cursor = HistoryCursor::new();
    let mut out = Vec::new();
    for snap in snaps {
        let got = ingest_file(snap, &cursor, &mut stacks);
        cursor = got.next_cursor.clone();
        out.push(got);
    }
    out
}

fn key(e: &Value) -> (String, i64, i64) {
    (
        e["action"].as_str().unwrap().to_owned(),
        e["addr"].as_i64().unwrap(),
        e["time_us"].as_i64().unwrap(),
    )
}

fn keys(events: &[tcgd_memory::model::Event]) -> Vec<(String, i64, i64)> {
    events
        .iter()
        .map(|e| (e.action.clone(), e.address.unwrap(), e.time_us.unwrap()))
        .collect()
}

fn statuses(points: &[Ingested]) -> Vec<HistoryStatus> {
    points.iter().map(|p| p.windows[0].status).collect()
}

#[test]
fn overlapping_rings_are_merged_once_without_the_snapshot_entries() {
    let mut p = Process::new(1000);
    let mut snaps = Vec::new();
    p.alloc(0);
    p.alloc(1);
    snaps.push(p.snapshot());
    p.alloc(2);
    p.free(0);
    snaps.push(p.snapshot());
    p.alloc(3);
    p.free(1);
    p.free(2);
    snaps.push(p.snapshot());
    let points = import(&snaps);
    assert_eq!(
        statuses(&points),
        vec![
            HistoryStatus::FirstPoint,
            HistoryStatus::Complete,
            HistoryStatus::Complete
        ]
    );
    // Every entry recorded before the last snapshot, each in exactly one window, except
    // the snapshots' own entries after the first window (boundaries).
    let stored: Vec<_> = points.iter().flat_map(|p| keys(&p.events)).collect();
    let expected: Vec<_> = p.recorded[..p.recorded.len() - 1]
        .iter()
        .filter(|e| e["action"] != "snapshot")
        .map(key)
        .collect();
    assert_eq!(stored, expected);
    assert_eq!(points[1].events.len(), 3);
    assert_eq!(points[2].events.len(), 5);
    assert_eq!(points[2].windows[0].events, 5);
    assert!(points.iter().all(|p| p.warnings.is_empty()));
}

#[test]
fn an_empty_first_ring_joins_through_the_snapshot_entry() {
    // History switched on just before the first snapshot: its ring is empty, and only
    // its own entry, first in the next ring, says that nothing was lost in between.
    let mut p = Process::new(1000);
    let first = p.snapshot();
    p.alloc(4);
    let second = p.snapshot();
    let points = import(&[first, second]);
    assert_eq!(
        statuses(&points),
        vec![HistoryStatus::FirstPoint, HistoryStatus::Complete]
    );
    let actions: Vec<_> = points[1].events.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, vec!["alloc"]);
}

#[test]
fn an_empty_ring_then_history_switched_on_has_no_boundary() {
    let mut p = Process::new(1000);
    p.history = false;
    let first = p.snapshot();
    p.history = true;
    p.alloc(4);
    let second = p.snapshot();
    let points = import(&[first, second]);
    assert_eq!(
        points[1].windows[0].status,
        HistoryStatus::BoundaryUnavailable
    );
    assert_eq!(points[1].events.len(), 1);
}

#[test]
fn a_snapshot_entry_of_another_size_is_not_the_boundary() {
    let mut p = Process::new(1000);
    let first = p.snapshot();
    p.alloc(4);
    let mut second = p.snapshot();
    // The entry first in the ring does not say what the first snapshot saw active.
    second["device_traces"][0][0]["size"] = serde_json::json!(3 * MIB);
    let points = import(&[first, second]);
    assert_eq!(
        points[1].windows[0].status,
        HistoryStatus::BoundaryUnavailable
    );
    assert_eq!(points[1].events.len(), 2);
}

#[test]
fn entries_of_another_thread_before_the_snapshot_entry_are_kept_once() {
    let mut p = Process::new(1000);
    p.alloc(0);
    let first = p.snapshot();
    // Another thread allocated between torch gathering the trace and recording the
    // snapshot's entry: move that entry after the allocation.
    let own = p.ring.pop().unwrap();
    p.recorded.pop();
    p.alloc(5);
    p.ring.push(own.clone());
    p.recorded.push(own);
    p.alloc(6);
    let second = p.snapshot();
    let points = import(&[first, second]);
    assert_eq!(points[1].windows[0].status, HistoryStatus::Complete);
    let addresses: Vec<_> = points[1].events.iter().map(|e| e.address).collect();
    assert_eq!(addresses, vec![Some(BASE + 5 * MIB), Some(BASE + 6 * MIB)]);
    assert!(points[1]
        .warnings
        .iter()
        .any(|w| w.contains("1 allocator history entry")));
}

#[test]
fn a_ring_that_does_not_reach_back_is_truncated() {
    let mut p = Process::new(6);
    p.alloc(0);
    let first = p.snapshot();
    for slot in 1..8 {
        p.alloc(slot);
    }
    let second = p.snapshot();
    let points = import(&[first, second]);
    assert_eq!(points[1].windows[0].status, HistoryStatus::Truncated);
}

#[test]
fn without_snapshot_entries_the_last_entry_still_joins_the_rings() {
    // `_record_memory_history(skip_actions=["snapshot"])`: no entry to find, the
    // fingerprint of the previous ring's last entry decides alone.
    let mut p = Process::new(1000);
    p.alloc(0);
    let first = p.snapshot();
    p.ring.pop();
    p.alloc(1);
    let second = p.snapshot();
    let points = import(&[first, second]);
    assert_eq!(points[1].windows[0].status, HistoryStatus::Complete);
    assert_eq!(points[1].events.len(), 1);
}
