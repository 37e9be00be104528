//! Stack and event attribution: coverage, `<unattributed>`, stack deltas within and
//! across runs, event windows and their typed failures, pool confidence.

mod common;

use std::sync::Arc;

/// (action, bytes, count, pool, confidence) of an event row.
type EventRow<'a> = (&'a str, i64, i64, Option<(i64, i64)>, PoolConfidence);
/// (action, confidence, pool) of an event row.
type ConfidenceRow<'a> = (&'a str, PoolConfidence, Option<(i64, i64)>);

use common::*;
use serde_json::{json, Value};
use tcgd_memory::attribution::events::{event_window, WindowStatus};
use tcgd_memory::attribution::{
    attribute, stacks, AttributionRequest, BlockFilter, PointWindow, PoolConfidence, UNATTRIBUTED,
};
use tcgd_memory::compare::{compare, CompareOptions, Comparison};
use tcgd_memory::{
    ingest, HistoryCursor, IngestOptions, JsonSnapshot, MemoryError, MemoryState, StackTable,
};

fn framed(size: i64, requested: i64, frames: Vec<Value>) -> Value {
    json!({"size": size, "requested_size": requested, "state": "active_allocated", "frames": frames})
}

fn unframed(size: i64) -> Value {
    json!({"size": size, "requested_size": size, "state": "active_allocated", "frames": []})
}

fn free(size: i64) -> Value {
    json!({"size": size, "requested_size": 0, "state": "inactive", "frames": []})
}

/// Ingests snapshots in order as points of one run (shared cursor and stack table), each
/// with its own marker.
fn chain(snaps: &[Value]) -> Vec<MemoryState> {
    let mut stacks = StackTable::default();
    let mut cursor = HistoryCursor::new();
    let mut out = Vec::new();
    for (i, snap) in snaps.iter().enumerate() {
        let tree = JsonSnapshot(snap);
        let options = IngestOptions {
            marker: Some(format!("m{i}")),
            ..IngestOptions::default()
        };
        let ingested = ingest(&tree, &snap, &options, &cursor, &mut stacks).unwrap();
        cursor = ingested.next_cursor.clone();
        out.push(
            MemoryState::from_ingested(
                identity("run-e", &format!("p{i}"), i as i64),
                ingested,
                vec![],
                Arc::new(stacks.clone()),
            )
            .unwrap(),
        );
    }
    out
}

/// The comparison of a run's first two points.
fn compared(states: &[MemoryState]) -> Comparison {
    compare(&states[0], &states[1], &CompareOptions::default()).unwrap()
}

fn windows(states: &[MemoryState]) -> Vec<PointWindow<'_>> {
    states
        .iter()
        .map(|s| PointWindow {
            label: &s.identity.label,
            index: s.identity.index,
            events: &s.events,
            windows: &s.windows,
        })
        .collect()
}

/// Stack deltas only.
const STACKS: AttributionRequest = AttributionRequest {
    stacks: true,
    events: false,
    lifetimes: false,
};
/// Event summaries only.
const EVENTS: AttributionRequest = AttributionRequest {
    stacks: false,
    events: true,
    lifetimes: false,
};

const A: i64 = 0x7f00_0000_0000;
const B: i64 = 0x7f10_0000_0000;

fn ring0() -> Vec<Value> {
    vec![
        trace("segment_alloc", A, 4 * MIB, 100, ""),
        trace("alloc", A, MIB, 101, ""),
    ]
}

/// p0: default segment A with 1 MiB at `forward`; p1 adds private pool (1, 0) segment B
/// with 3 MiB at `capture` and 1 MiB without frames, and frees nothing.
fn two_points() -> Vec<MemoryState> {
    let s0 = snapshot(
        vec![segment(
            0,
            A,
            (0, 0),
            0,
            vec![
                framed(MIB, MIB - 8, vec![frame("forward", 10)]),
                free(3 * MIB),
            ],
        )],
        vec![ring0()],
    );
    let mut s1 = s0.clone();
    s1["segments"].as_array_mut().unwrap().push(segment(
        0,
        B,
        (1, 0),
        7,
        vec![
            framed(
                3 * MIB,
                3 * MIB,
                vec![frame("capture", 20), frame("main", 1)],
            ),
            unframed(MIB),
        ],
    ));
    let mut ring = ring0();
    ring.push(trace("snapshot", 0, MIB, 102, "m0"));
    ring.push(trace("segment_alloc", B, 4 * MIB, 103, ""));
    ring.push(trace("alloc", B, 3 * MIB, 104, ""));
    ring.push(trace("alloc", B + 3 * MIB, MIB, 105, ""));
    s1["device_traces"] = json!([ring]);
    chain(&[s0, s1])
}

/// [`two_points`] and their comparison.
fn two_points_compared() -> (Vec<MemoryState>, Comparison) {
    let states = two_points();
    let c = compared(&states);
    (states, c)
}

#[test]
fn coverage_and_unattributed_bucket() {
    let states = two_points();
    let c = stacks::coverage(&states[1], BlockFilter::default()).unwrap();
    assert_eq!(c.active_bytes, 5 * MIB);
    assert_eq!(c.attributed_bytes, 4 * MIB);
    assert_eq!(c.unattributed_bytes, MIB);
    assert_eq!((c.active_blocks, c.attributed_blocks), (3, 2));
    assert!((c.coverage - 0.8).abs() < 1e-12);
    let rows = stacks::summarize(&states[1], BlockFilter::default(), true).unwrap();
    let keys: Vec<(String, i64, Option<i64>)> = rows
        .iter()
        .map(|r| (r.stack_frames.key(), r.size_bytes, r.stream))
        .collect();
    assert_eq!(
        keys,
        vec![
            (
                "model.py:20:capture <- model.py:1:main".to_owned(),
                3 * MIB,
                Some(7)
            ),
            ("model.py:10:forward".to_owned(), MIB, Some(0)),
            (UNATTRIBUTED.to_owned(), MIB, Some(7)),
        ]
    );
    assert_eq!(rows[1].requested_bytes, MIB - 8);
    // Zero active bytes count as fully covered.
    let empty = stacks::coverage(
        &states[1],
        BlockFilter {
            pool: Some((9, 9)),
            ..BlockFilter::default()
        },
    )
    .unwrap();
    assert_eq!((empty.active_bytes, empty.coverage), (0, 1.0));
}

#[test]
fn stack_deltas_and_events_within_one_run() {
    let (states, c) = two_points_compared();
    let request = AttributionRequest {
        stacks: true,
        ..EVENTS
    };
    let w = windows(&states[1..]);
    let a = attribute(&states[0], &states[1], &c, &request, Some(&w)).unwrap();
    assert!(a.status.stacks.requested && a.status.stacks.available);
    assert!(!a.status.stacks.complete, "1 MiB has no frames");
    assert!(a.status.events.complete);
    assert!(!a.status.lifetimes.requested);
    let changed: Vec<(String, i64)> = a
        .stack_deltas
        .iter()
        .filter(|d| d.changed())
        .map(|d| (d.stack_frames.key(), d.delta_size_bytes))
        .collect();
    assert_eq!(
        changed,
        vec![
            ("model.py:20:capture <- model.py:1:main".to_owned(), 3 * MIB),
            (UNATTRIBUTED.to_owned(), MIB),
        ]
    );
    // The unchanged forward stack stays in the structured result.
    assert!(a
        .stack_deltas
        .iter()
        .any(|d| !d.changed() && d.reference_size_bytes == MIB));
    let events: Vec<EventRow<'_>> = a
        .events
        .iter()
        .map(|e| {
            (
                e.action.as_str(),
                e.total_bytes,
                e.count,
                e.pool_id,
                e.attribution_confidence,
            )
        })
        .collect();
    assert_eq!(
        events,
        vec![
            ("alloc", 4 * MIB, 2, Some((1, 0)), PoolConfidence::Matched),
            (
                "segment_alloc",
                4 * MIB,
                1,
                Some((1, 0)),
                PoolConfidence::Matched
            ),
        ]
    );
    assert_eq!(a.events[0].stack_frames.key(), "model.py:3:step");
}

#[test]
fn sections_join_each_report_format_where_it_belongs() {
    use tcgd_memory::report::attribution::{with_sections, Display};
    use tcgd_memory::report::Format;
    let (states, c) = two_points_compared();
    let a = attribute(&states[0], &states[1], &c, &STACKS, None).unwrap();
    let items = [&a];
    let with = |rendered: &str, format| {
        with_sections(
            rendered.to_owned(),
            format,
            &items,
            Display::default(),
            true,
        )
    };
    let text = with("state tree\n\n", Format::Text).unwrap();
    assert!(
        text.starts_with("state tree\n\nattribution test@p0"),
        "{text}"
    );
    assert!(text.contains("model.py:20:capture"));
    let html = with("<html><body><p>tree</p></body></html>", Format::Html).unwrap();
    let (body, tail) = html.split_at(html.find("</body>").unwrap());
    assert!(
        body.starts_with("<html><body><p>tree</p><h2>Attribution"),
        "{html}"
    );
    assert_eq!(tail, "</body></html>");
    let json: Value =
        serde_json::from_str(&with("{\"rows\": [1]}", Format::Json).unwrap()).unwrap();
    assert_eq!(json["rows"], json!([1]));
    let sections = json["attribution"].as_array().unwrap();
    assert_eq!(sections.len(), 1);
    assert_eq!(
        sections[0]["attribution_status"]["stacks"]["requested"],
        json!(true)
    );
    // CSV reports stay as they are, and so does any report without attributions.
    assert_eq!(with("a,b\n", Format::Csv).unwrap(), "a,b\n");
    let none = with_sections(
        "[1]".to_owned(),
        Format::Json,
        &[],
        Display::default(),
        true,
    );
    assert_eq!(none.unwrap(), "[1]");
    // A JSON report that is not an object is refused, never returned without its sections.
    assert!(with("[1]", Format::Json).is_err());
}

#[test]
fn zero_coverage_is_history_disabled() {
    let s = snapshot(
        vec![segment(0, A, (0, 0), 0, vec![unframed(MIB), free(MIB)])],
        vec![vec![]],
    );
    let states = chain(&[s.clone(), s]);
    let c = compared(&states);
    let err = attribute(&states[0], &states[1], &c, &STACKS, None).unwrap_err();
    assert!(matches!(err, MemoryError::HistoryDisabled(_)), "{err}");
}

#[test]
fn window_failures_are_typed() {
    let (states, c) = two_points_compared();
    use tcgd_memory::model::{HistoryStatus, HistoryWindow};
    let cases = [
        (HistoryStatus::Disabled, "disabled"),
        (HistoryStatus::BoundaryUnavailable, "boundary"),
        (HistoryStatus::Truncated, "truncated"),
        (HistoryStatus::InvalidOrder, "reconciliation"),
    ];
    for (status, kind) in cases {
        let bad = [HistoryWindow {
            status,
            ..states[1].windows[0].clone()
        }];
        let w = [PointWindow {
            label: "p1",
            index: 1,
            events: &states[1].events,
            windows: &bad,
        }];
        let err = attribute(&states[0], &states[1], &c, &EVENTS, Some(&w)).unwrap_err();
        let got = match err {
            MemoryError::HistoryDisabled(_) => "disabled",
            MemoryError::HistoryBoundary(_) => "boundary",
            MemoryError::HistoryTruncated(_) => "truncated",
            MemoryError::Reconciliation(_) => "reconciliation",
            other => panic!("{other}"),
        };
        assert_eq!(got, kind);
    }
    // Stacks alone never look at the windows.
    assert!(attribute(&states[0], &states[1], &c, &STACKS, None).is_ok());
}

#[test]
fn oom_is_not_applicable_and_reported_pools_win() {
    let states = two_points();
    let mut events = states[1].events.clone();
    let mut oom = events[0].clone();
    oom.action = "oom".into();
    oom.address = None;
    oom.size = 2 * MIB;
    oom.device_free = Some(123);
    let mut reported = events[1].clone();
    reported.pool = Some((5, 5));
    let mut nowhere = events[1].clone();
    nowhere.address = Some(1);
    events = vec![oom, reported, nowhere];
    let ranges = tcgd_memory::attribution::events::segment_ranges(&[&states[0], &states[1]]);
    let rows =
        tcgd_memory::attribution::events::summarize_events(&events, &states[1].stacks, &ranges);
    let got: Vec<ConfidenceRow<'_>> = rows
        .iter()
        .map(|r| (r.action.as_str(), r.attribution_confidence, r.pool_id))
        .collect();
    assert_eq!(
        got,
        vec![
            ("alloc", PoolConfidence::Unknown, None),
            ("alloc", PoolConfidence::Reported, Some((5, 5))),
            ("oom", PoolConfidence::NotApplicable, None),
        ]
    );
}

#[test]
fn cross_run_stacks_use_matched_pools_only_and_events_are_refused() {
    let a = two_points();
    let b = two_points();
    let mut other = b[1].clone();
    other.identity.origin = "run-f".into();
    let c = compare(&a[0], &other, &CompareOptions::default()).unwrap();
    let err = attribute(&a[0], &other, &c, &EVENTS, None).unwrap_err();
    assert!(matches!(err, MemoryError::CrossRun(_)), "{err}");
    // Reference a[1] and candidate `other` both hold private pool (1, 0), but it is not
    // mapped, so only the default pool is compared.
    let c = compare(&a[1], &other, &CompareOptions::default()).unwrap();
    let att = attribute(&a[1], &other, &c, &STACKS, None).unwrap();
    assert!(att
        .stack_deltas
        .iter()
        .all(|d| d.reference_key == Some((0, (0, 0)))));
    let mapped = CompareOptions {
        pool_mapping: vec![((0, (1, 0)), (0, (1, 0)))],
        ..CompareOptions::default()
    };
    let c = compare(&a[1], &other, &mapped).unwrap();
    let att = attribute(&a[1], &other, &c, &STACKS, None).unwrap();
    assert!(att
        .stack_deltas
        .iter()
        .any(|d| d.candidate_key == Some((0, (1, 0))) && d.candidate_size_bytes == 3 * MIB));
    assert!(att.stack_deltas.iter().all(|d| !d.changed()));
}

#[test]
fn event_windows_cut_at_the_last_markers() {
    let meta = [
        None,
        Some("a"),
        None,
        Some("a"),
        None,
        None,
        Some("b"),
        None,
    ];
    assert_eq!(
        event_window(&meta, "a", Some("b")),
        (4, 6, WindowStatus::Complete)
    );
    assert_eq!(
        event_window(&meta, "a", None),
        (4, 8, WindowStatus::Complete)
    );
    assert_eq!(event_window(&meta, "z", None).2, WindowStatus::Truncated);
    assert_eq!(
        event_window(&meta, "a", Some("z")).2,
        WindowStatus::Truncated
    );
    assert_eq!(
        event_window(&meta, "b", Some("a")).2,
        WindowStatus::InvalidOrder
    );
}

#[test]
fn stack_identity_helpers() {
    use tcgd_memory::attribution::{StackFrame, StackFrames};
    let f = |name: &str| StackFrame {
        filename: "m.py".into(),
        line: 1,
        name: name.into(),
        ..StackFrame::default()
    };
    let a = StackFrames(vec![f("x"), f("y"), f("z")]);
    assert_eq!(a.key(), "m.py:1:x <- m.py:1:y <- m.py:1:z");
    assert_eq!(a.key_at_depth(1), "m.py:1:x (+2 frames)");
    assert_eq!(
        a.to_json(),
        r#"[{"filename":"m.py","line":1,"name":"x"},{"filename":"m.py","line":1,"name":"y"},{"filename":"m.py","line":1,"name":"z"}]"#
    );
    assert_eq!(a.fingerprint().len(), 16);
    assert_ne!(a.fingerprint(), StackFrames(vec![f("x")]).fingerprint());
    assert_eq!(StackFrames::default().key(), UNATTRIBUTED);
    // A frame of generated code with its FX node: the location key is unchanged, the
    // canonical JSON and the fingerprint carry the node, the display names it.
    let fx = StackFrame {
        fx_node_op: Some("call_function".into()),
        fx_node_name: Some("addmm".into()),
        fx_original_trace: Some("model.py:12 in forward".into()),
        ..f("x")
    };
    let with_fx = StackFrames(vec![fx.clone()]);
    assert_eq!(with_fx.key(), StackFrames(vec![f("x")]).key());
    assert_ne!(
        with_fx.fingerprint(),
        StackFrames(vec![f("x")]).fingerprint()
    );
    assert!(with_fx.to_json().contains(r#""fx_node_name":"addmm""#));
    assert!(!with_fx.to_json().contains("fx_node_target"));
    assert_eq!(fx.display(), "m.py:1:x [fx call_function addmm]");
    assert_eq!(f("x").display(), "m.py:1:x");
}
