//! Replay, cohorts and selections on hand-built states and windows whose answers are
//! known by construction.

use std::sync::Arc;

use super::*;
use crate::model::{
    Block, BlockState, Event, Frame, HistoryStatus, HistoryWindow, Segment, StackTable,
};
use crate::state::{MemoryState, StateIdentity};

const DEFAULT_BASE: i64 = 0x1000_0000;
const PRIVATE_BASE: i64 = 0x2000_0000;
const SEGMENT: i64 = 1 << 24;

struct World {
    stacks: StackTable,
    states: Vec<Arc<MemoryState>>,
    events: Vec<(i64, Event)>,
    /// Segments present at the next point: (address, pool).
    segments: Vec<(i64, (i64, i64))>,
}

type B = (i64, i64, i64, BlockState, Option<u32>);

impl World {
    fn new() -> World {
        World {
            stacks: StackTable::default(),
            states: Vec::new(),
            events: Vec::new(),
            segments: vec![(DEFAULT_BASE, (0, 0)), (PRIVATE_BASE, (1, 0))],
        }
    }

    fn stack(&mut self, name: &str) -> u32 {
        let f = self.stacks.frame_id(Frame {
            filename: "model.py".into(),
            line: name.len() as i64,
            name: name.into(),
            fx: None,
        });
        self.stacks.stack_id(&[f])
    }

    fn ev(&mut self, action: &str, address: i64, size: i64, stack: Option<u32>) {
        self.ev_pool(action, address, size, stack, None);
    }

    fn ev_pool(
        &mut self,
        action: &str,
        address: i64,
        size: i64,
        stack: Option<u32>,
        pool: Option<(i64, i64)>,
    ) {
        let point = self.states.len() as i64;
        self.events.push((
            point,
            Event {
                device: 0,
                ring_index: self.events.len() as i64,
                action: action.into(),
                address: Some(address),
                size,
                stream: 0,
                time_us: None,
                pool,
                user_metadata: None,
                compile_context: None,
                device_free: None,
                stack,
            },
        ));
    }

    fn point(&mut self, blocks: &[B]) {
        let status = if self.states.is_empty() {
            HistoryStatus::FirstPoint
        } else {
            HistoryStatus::Complete
        };
        self.point_with(blocks, status);
    }

    fn point_with(&mut self, blocks: &[B], status: HistoryStatus) {
        let segments: Vec<Segment> = self
            .segments
            .iter()
            .map(|&(address, pool)| Segment {
                device: 0,
                address: Some(address),
                total_size: SEGMENT,
                allocated_size: None,
                active_size: None,
                requested_size: None,
                stream: 0,
                pool,
                segment_type: "large".into(),
                is_expandable: false,
                stack: None,
            })
            .collect();
        let blocks: Vec<Block> = blocks
            .iter()
            .map(|&(address, size, requested, state, stack)| Block {
                segment: segments
                    .iter()
                    .position(|s| {
                        let a = s.address.unwrap();
                        a <= address && address < a + SEGMENT
                    })
                    .expect("block in a segment") as u32,
                address: Some(address),
                address_inferred: false,
                size,
                requested_size: requested,
                state,
                stack,
            })
            .collect();
        let index = self.states.len() as i64;
        let identity = StateIdentity {
            origin: "run-1".into(),
            name: "train".into(),
            label: format!("p{index}"),
            index,
            boundary_recorded: true,
            ..StateIdentity::default()
        };
        let windows = vec![HistoryWindow {
            device: 0,
            status,
            ring_entries: 0,
            events: 0,
            first_time_us: None,
            last_time_us: None,
        }];
        let state = MemoryState::new(
            identity,
            vec![0],
            Vec::new(),
            segments,
            blocks,
            Vec::new(),
            windows,
            Vec::new(),
            Arc::new(self.stacks.clone()),
        )
        .expect("valid state");
        self.states.push(Arc::new(state));
    }

    fn run(&self, selection: Selection, through: Option<i64>) -> Result<LifetimeAnalysis> {
        analyze(
            &self.states,
            &self.stacks,
            &VecEvents(self.events.clone()),
            selection,
            through,
        )
    }

    fn all(&self) -> LifetimeAnalysis {
        self.run(Selection::All, None).expect("analysis")
    }
}

use BlockState::{ActiveAllocated as Owner, ActiveAwaitingFree as Awaiting};

fn reconciliation(r: Result<LifetimeAnalysis>) -> String {
    match r {
        Err(MemoryError::Reconciliation(m)) => m,
        other => panic!("expected a reconciliation error, got {other:?}"),
    }
}

#[test]
fn transient_between_points_shows_only_in_event_peaks() {
    let mut w = World::new();
    let s = w.stack("tmp");
    w.point(&[]);
    let a = DEFAULT_BASE + 4096;
    w.ev("alloc", a, 1 << 20, Some(s));
    w.ev("free_requested", a, 1 << 20, Some(s));
    w.ev("free_completed", a, 1 << 20, Some(s));
    w.point(&[]);
    let r = w.all();
    assert_eq!(r.cohorts.len(), 1);
    let c = &r.cohorts[0];
    assert_eq!(
        c.pool_id,
        Some((0, 0)),
        "anchored to both endpoints' segment"
    );
    assert_eq!(c.peaks.peak_active_bytes, 0);
    assert_eq!(c.peaks.peak_block_count, 0);
    assert_eq!(c.peaks.event_owner_peak_bytes, 1 << 20);
    assert_eq!(c.peaks.event_unreusable_peak_bytes, 1 << 20);
    assert_eq!((c.totals.born_bytes, c.totals.born_count), (1 << 20, 1));
    assert_eq!(c.totals.free_completed_count, 1);
    assert_eq!(c.transitions.births[0].origin, Origin::Event);
    assert_eq!(
        c.transitions.births[0].start_point.as_ref().unwrap().label,
        "p0"
    );
    assert_eq!(c.transitions.births[0].end_point.label, "p1");
    assert_eq!(c.size_outcomes[0].outcome, Outcome::FreeCompleted);
    assert_eq!(c.totals.terminal_owner_active_bytes, 0);
    assert_eq!(r.tracked.tracked_generations, 1);
    assert_eq!(r.tracked.instance_stack_coverage, 1.0);
}

#[test]
fn a_leak_grows_point_after_point() {
    let mut w = World::new();
    let s = w.stack("leak");
    w.point(&[]);
    let mut live: Vec<B> = Vec::new();
    for i in 0..3 {
        let a = DEFAULT_BASE + i * 4096;
        w.ev("alloc", a, 4096, Some(s));
        live.push((a, 4096, 4096, Owner, Some(s)));
        w.point(&live);
    }
    let c = &w.all().cohorts[0];
    let owner: Vec<i64> = c.points.iter().map(|p| p.owner_active_bytes).collect();
    assert_eq!(owner, vec![0, 4096, 8192, 12288]);
    assert_eq!(c.peaks.peak_active_bytes, 12288);
    assert_eq!(c.peaks.peak_block_count, 3);
    assert_eq!(c.peaks.active_span_bytes, 12288);
    assert_eq!(c.peaks.event_owner_peak_bytes, 12288);
    assert_eq!(c.totals.terminal_owner_active_count, 3);
    assert_eq!(c.span.first_sampled_point.as_ref().unwrap().label, "p1");
    assert_eq!(c.transitions.births.len(), 3, "one birth row per interval");
}

#[test]
fn address_reuse_starts_a_new_generation() {
    let mut w = World::new();
    let s = w.stack("reuse");
    w.point(&[]);
    let a = DEFAULT_BASE;
    w.ev("alloc", a, 1024, Some(s));
    w.point(&[(a, 1024, 1000, Owner, Some(s))]);
    w.ev("free_requested", a, 1000, Some(s)); // torch may report the requested size
    w.ev("free_completed", a, 1024, Some(s));
    w.ev("alloc", a, 2048, Some(s));
    w.point(&[(a, 2048, 2048, Owner, Some(s))]);
    let r = w.all();
    assert_eq!(r.tracked.tracked_generations, 2);
    let c = &r.cohorts[0];
    assert_eq!(c.generation_count, 2);
    let sizes: Vec<(i64, i64, i64)> = c
        .size_histogram
        .iter()
        .map(|b| (b.size_bytes, b.requested_size_bytes, b.count))
        .collect();
    assert_eq!(sizes, vec![(1024, 1000, 1), (2048, 2048, 1)]);
    let outcomes: Vec<Outcome> = c.size_outcomes.iter().map(|o| o.outcome).collect();
    assert_eq!(outcomes, vec![Outcome::FreeCompleted, Outcome::OwnerActive]);
    // The second generation is born after the first one's completion: never both.
    assert_eq!(c.peaks.event_unreusable_peak_bytes, 2048);
}

#[test]
fn awaiting_free_is_split_from_owner_active() {
    let mut w = World::new();
    let s = w.stack("stream");
    let a = DEFAULT_BASE;
    w.point(&[(a, 512, 512, Awaiting, Some(s))]);
    w.ev("free_completed", a, 512, Some(s));
    let b = DEFAULT_BASE + 512;
    w.ev("alloc", b, 512, Some(s));
    w.ev("free_requested", b, 512, Some(s));
    w.point(&[(b, 512, 512, Awaiting, Some(s))]);
    let r = w.all();
    let c = &r.cohorts[0];
    assert_eq!(c.points[0].awaiting_free_bytes, 512);
    assert_eq!(c.points[0].owner_active_bytes, 0);
    assert_eq!(c.points[1].awaiting_free_count, 1);
    let boundary: Vec<Origin> = c
        .transitions
        .free_requests
        .iter()
        .map(|t| t.origin)
        .collect();
    assert_eq!(boundary, vec![Origin::RangeBoundary, Origin::Event]);
    assert_eq!(c.transitions.free_requests[0].start_point, None);
    assert_eq!(c.peaks.event_owner_peak_bytes, 512);
    assert_eq!(
        c.peaks.event_unreusable_peak_bytes, 512,
        "the first completes before the second is born"
    );
    assert_eq!(c.totals.terminal_awaiting_free_bytes, 512);
}

#[test]
fn selections_active_at_and_born_between() {
    let mut w = World::new();
    let (old, new) = (w.stack("old"), w.stack("new"));
    let a = DEFAULT_BASE;
    w.ev("alloc", a, 4096, Some(old));
    w.point(&[(a, 4096, 4096, Owner, Some(old))]);
    let b = DEFAULT_BASE + 4096;
    w.ev("alloc", b, 8192, Some(new));
    w.point(&[
        (a, 4096, 4096, Owner, Some(old)),
        (b, 8192, 8192, Owner, Some(new)),
    ]);
    w.ev("free_requested", a, 4096, Some(old));
    w.ev("free_completed", a, 4096, Some(old));
    w.point(&[(b, 8192, 8192, Owner, Some(new))]);

    let active = w.run(Selection::ActiveAt { point: 0 }, None).unwrap();
    assert_eq!(active.tracked.tracked_generations, 1);
    assert_eq!(active.cohorts[0].stack_frames[0].name, "old");
    assert_eq!(active.cohorts[0].totals.free_completed_bytes, 4096);
    assert_eq!(active.range.points.len(), 3);

    let born = w
        .run(Selection::BornBetween { start: 0, end: 1 }, Some(2))
        .unwrap();
    assert_eq!(born.tracked.tracked_generations, 1);
    assert_eq!(born.cohorts[0].stack_frames[0].name, "new");
    let empty = w
        .run(Selection::BornBetween { start: 1, end: 2 }, None)
        .unwrap();
    assert_eq!(
        empty.tracked.tracked_generations, 0,
        "(start, end] is half-open"
    );

    let all = w.all();
    assert_eq!(all.tracked.tracked_generations, 2);
    assert_eq!(all.cohorts[0].display_rank, 1);
    assert_eq!(all.cohorts[0].stack_frames[0].name, "new", "largest first");

    let through = w.run(Selection::ActiveAt { point: 2 }, Some(1));
    assert!(matches!(through, Err(MemoryError::InvalidInput(_))));
    let through = w.run(Selection::BornBetween { start: 0, end: 2 }, Some(1));
    assert!(matches!(through, Err(MemoryError::InvalidInput(_))));
}

#[test]
fn cohort_ids_are_stable_fingerprints() {
    let build = |extra: bool| {
        let mut w = World::new();
        if extra {
            w.stack("unrelated");
        }
        let s = w.stack("site");
        w.ev("alloc", DEFAULT_BASE, 64, Some(s));
        w.point(&[(DEFAULT_BASE, 64, 64, Owner, Some(s))]);
        w.all().cohorts[0].cohort_id.clone()
    };
    assert_eq!(
        build(false),
        build(true),
        "stack ids differ, identity does not"
    );
}

#[test]
fn unframed_allocations_are_split_by_size() {
    let mut w = World::new();
    w.point(&[
        (DEFAULT_BASE, 512, 500, Owner, None),
        (DEFAULT_BASE + 512, 512, 500, Owner, None),
        (DEFAULT_BASE + 1024, 1024, 1024, Owner, None),
    ]);
    let r = w.all();
    assert_eq!(r.cohorts.len(), 2);
    let mut sizes: Vec<(Option<i64>, i64)> = r
        .cohorts
        .iter()
        .map(|c| (c.block_size_bytes, c.generation_count))
        .collect();
    sizes.sort();
    assert_eq!(sizes, vec![(Some(512), 2), (Some(1024), 1)]);
    assert_eq!(r.tracked.instance_stack_coverage, 0.0);
    assert_eq!(r.cohorts[0].stack_key, "<unattributed>");
}

#[test]
fn reported_pool_is_used_and_unanchorable_transients_are_unknown() {
    let mut w = World::new();
    let s = w.stack("t");
    w.point(&[]);
    // A reported pool wins even without any segment.
    let far = 0x7000_0000;
    w.ev_pool("alloc", far, 256, Some(s), Some((5, 0)));
    w.ev("free_requested", far, 256, Some(s));
    w.ev("free_completed", far, 256, Some(s));
    // A segment made and released inside the window: neither endpoint testifies.
    let seg = 0x4000_0000;
    w.ev("segment_alloc", seg, SEGMENT, None);
    w.ev("alloc", seg, 128, Some(s));
    w.ev("free_requested", seg, 128, Some(s));
    w.ev("free_completed", seg, 128, Some(s));
    w.ev("segment_free", seg, SEGMENT, None);
    w.point(&[]);
    let r = w.all();
    let mut pools: Vec<String> = r.cohorts.iter().map(|c| c.pool_label.clone()).collect();
    pools.sort();
    assert_eq!(pools, vec!["pool[5,0]", "pool[unknown]"]);
    let json = serde_json::to_value(&r).unwrap();
    let unknown = json["cohorts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["pool_label"] == "pool[unknown]")
        .unwrap();
    assert_eq!(unknown["pool_id"], serde_json::json!(["unknown"]));
}

#[test]
fn invisible_birth_address_is_a_contradiction() {
    let mut w = World::new();
    w.point(&[]);
    w.ev("alloc", 0x6000_0000, 64, None);
    w.ev("free_requested", 0x6000_0000, 64, None);
    w.ev("free_completed", 0x6000_0000, 64, None);
    w.point(&[]);
    let m = reconciliation(w.run(Selection::All, None));
    assert!(m.contains("birth address invisible"), "{m}");
    assert!(m.contains("0x60000000"), "{m}");
}

#[test]
fn contradictions_are_summarised_by_reason_with_examples() {
    let mut w = World::new();
    w.point(&[]);
    for i in 0..5 {
        w.ev("free_requested", DEFAULT_BASE + i * 16, 16, None);
    }
    w.point(&[]);
    let m = reconciliation(w.run(Selection::All, None));
    assert!(
        m.contains("free_requested for an address with no live generation on device 0: 5"),
        "{m}"
    );
    assert!(
        m.contains("0x10000000, 0x10000010, 0x10000020)"),
        "three examples: {m}"
    );
    assert!(!m.contains("0x10000030"), "{m}");
}

/// One step of a test world: a point with these blocks, or a history event
/// `(action, size)` at `DEFAULT_BASE`.
enum Step {
    Point(&'static [B]),
    Ev(&'static str, i64),
}

#[test]
fn snapshot_disagreements_are_contradictions() {
    use Step::{Ev, Point};
    const OWNER: &[B] = &[(DEFAULT_BASE, 64, 64, Owner, None)];
    const AWAITING: &[B] = &[(DEFAULT_BASE, 64, 64, Awaiting, None)];
    let cases: [(&[Step], &str); 8] = [
        // A block the history never allocated.
        (&[Point(&[]), Point(OWNER)], "no live generation"),
        // A live generation the snapshot does not show.
        (
            &[Point(&[]), Ev("alloc", 64), Point(&[])],
            "missing from the snapshot",
        ),
        // Duplicate free request.
        (
            &[
                Point(OWNER),
                Ev("free_requested", 64),
                Ev("free_requested", 64),
                Point(AWAITING),
            ],
            "duplicate free_requested",
        ),
        // A free whose size is neither the block's nor the requested one.
        (
            &[
                Point(&[(DEFAULT_BASE, 64, 60, Owner, None)]),
                Ev("free_requested", 32),
                Ev("free_completed", 64),
                Point(&[]),
            ],
            "free size matches neither",
        ),
        // The block state says awaiting free, the history says owner-active.
        (&[Point(OWNER), Point(AWAITING)], "block state disagrees"),
        // Identity changed without completion and reuse.
        (
            &[
                Point(OWNER),
                Point(&[(DEFAULT_BASE, 128, 128, Owner, None)]),
            ],
            "changed identity",
        ),
        // Alloc over a live generation.
        (
            &[Point(OWNER), Ev("alloc", 64), Point(OWNER)],
            "not free_completed",
        ),
        // Completion without request.
        (
            &[Point(OWNER), Ev("free_completed", 64), Point(&[])],
            "without free_requested",
        ),
    ];
    for (steps, contradiction) in cases {
        let mut w = World::new();
        for step in steps {
            match *step {
                Point(blocks) => w.point(blocks),
                Ev(action, size) => w.ev(action, DEFAULT_BASE, size, None),
            }
        }
        assert!(
            reconciliation(w.run(Selection::All, None)).contains(contradiction),
            "{contradiction}"
        );
    }
}

#[test]
fn incomplete_history_is_refused_with_typed_errors() {
    for (status, check) in [
        (
            HistoryStatus::Disabled,
            (|e: &MemoryError| matches!(e, MemoryError::HistoryDisabled(_)))
                as fn(&MemoryError) -> bool,
        ),
        (HistoryStatus::Truncated, |e| {
            matches!(e, MemoryError::HistoryTruncated(_))
        }),
        (HistoryStatus::BoundaryUnavailable, |e| {
            matches!(e, MemoryError::HistoryBoundary(_))
        }),
        (HistoryStatus::InvalidOrder, |e| {
            matches!(e, MemoryError::Reconciliation(_))
        }),
    ] {
        let mut w = World::new();
        w.point(&[]);
        w.point_with(&[], status);
        let err = w.run(Selection::All, None).unwrap_err();
        assert!(check(&err), "{status:?}: {err:?}");
        let message = err.to_string();
        assert!(message.contains("device 0"), "{message}");
        assert!(
            message.contains("'p0'") || message.contains("'p1'"),
            "{message}"
        );
        // A range that does not cross the bad window is fine.
        assert!(w.run(Selection::All, Some(0)).is_ok());
    }
    let mut w = World::new();
    w.point_with(&[], HistoryStatus::Disabled);
    assert!(matches!(
        w.run(Selection::All, None),
        Err(MemoryError::HistoryDisabled(_))
    ));
}

#[test]
fn unknown_actions_warn_instead_of_failing() {
    let mut w = World::new();
    w.point(&[]);
    w.ev("future_action", DEFAULT_BASE, 1, None);
    w.point(&[]);
    let r = w.all();
    assert_eq!(r.warnings.len(), 1);
    assert!(r.warnings[0].contains("future_action"));
}
