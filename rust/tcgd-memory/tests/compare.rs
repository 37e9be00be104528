//! Comparisons: lifecycle labels, pairing rules across runs, phase identity, timelines.

mod common;

use common::*;
use serde_json::json;
use tcgd_memory::compare::{compare, CompareOptions, Relation};
use tcgd_memory::lifecycle::LifecycleLabel;
use tcgd_memory::stats::PoolKind;
use tcgd_memory::{compare_phases, timeline, Lifecycle, MemoryError};

#[test]
fn same_run_lifecycle_is_exact() {
    let (before, after) = capture_points(
        "run-a",
        ["before", "after"],
        [500 * MIB, 520 * MIB],
        Some(8 * MIB),
    );
    let c = compare(&before, &after, &CompareOptions::default()).unwrap();
    assert_eq!(c.relation, Relation::SameOrigin);
    assert_eq!(c.lifecycle, LifecycleLabel::Exact);
    let device = &c.devices[0];
    assert_eq!(device.pools.len(), 2);
    let private = &device.pools[1];
    assert_eq!(private.kind, PoolKind::Private);
    assert_eq!(private.reference_pool, None);
    assert_eq!(private.candidate_pool, Some((1, 0)));
    assert_eq!(
        private.lifecycle,
        Some(Lifecycle {
            new_segment_bytes: 16 * MIB,
            removed_segment_bytes: 0,
            newly_active_bytes: 16 * MIB,
            became_inactive_bytes: 0,
        })
    );
    assert_eq!(device.pools[0].lifecycle, Some(Lifecycle::default()));
    // Residual arithmetic: CUDA used = residual + allocator reserved; probe slots are part
    // of the residual and shown apart from the rest.
    let reserved = device.allocator.candidate.reserved_bytes;
    assert_eq!(reserved, 18 * MIB);
    assert_eq!(device.residual.candidate, Some(520 * MIB - reserved));
    assert_eq!(device.probe_slots.candidate, Some(8 * MIB));
    assert_eq!(
        device.residual_other.candidate,
        Some(520 * MIB - reserved - 8 * MIB)
    );
}

#[test]
fn freeing_shows_as_became_inactive_and_removed() {
    let mut freed = after_capture();
    freed["segments"][0]["blocks"][0]["state"] = json!("inactive");
    freed["segments"].as_array_mut().unwrap().remove(1);
    let a = state(&after_capture(), "r", "a", 0, vec![]);
    let b = state(&freed, "r", "b", 1, vec![]);
    let c = compare(&a, &b, &CompareOptions::default()).unwrap();
    let d = &c.devices[0];
    assert_eq!(d.lifecycle.unwrap().became_inactive_bytes, 1024);
    assert_eq!(d.lifecycle.unwrap().removed_segment_bytes, 16 * MIB);
    // The private pool is gone from the candidate but stays in the comparison.
    assert_eq!(d.pools[1].candidate_pool, None);
    assert_eq!(d.pools[1].stats.candidate.reserved_bytes, 0);
}

#[test]
fn expandable_segments_match_by_mapped_ranges() {
    let seg = |size: i64| {
        let mut s = segment(
            0,
            0x4000_0000,
            (0, 0),
            0,
            vec![block(size, "active_allocated", size)],
        );
        s["is_expandable"] = json!(true);
        s
    };
    let a = state(
        &snapshot(vec![seg(20 * MIB)], vec![vec![]]),
        "r",
        "a",
        0,
        vec![],
    );
    let b = state(
        &snapshot(vec![seg(22 * MIB)], vec![vec![]]),
        "r",
        "b",
        1,
        vec![],
    );
    let c = compare(&a, &b, &CompareOptions::default()).unwrap();
    let l = c.devices[0].lifecycle.unwrap();
    assert_eq!(l.new_segment_bytes, 2 * MIB);
    assert_eq!(l.removed_segment_bytes, 0);
    assert_eq!(l.newly_active_bytes, 2 * MIB);
    assert_eq!(
        c.devices[0].allocator.candidate.expandable_reserved_bytes,
        22 * MIB
    );
}

#[test]
fn missing_addresses_make_lifecycle_approximate() {
    let mut snap = after_capture();
    for s in snap["segments"].as_array_mut().unwrap() {
        s.as_object_mut().unwrap().remove("address");
        for b in s["blocks"].as_array_mut().unwrap() {
            b.as_object_mut().unwrap().remove("address");
        }
    }
    let a = state(&before_capture(), "r", "a", 0, vec![]);
    let b = state(&snap, "r", "b", 1, vec![]);
    let c = compare(&a, &b, &CompareOptions::default()).unwrap();
    assert_eq!(c.lifecycle, LifecycleLabel::Approximate);
    assert!(
        c.warnings.iter().any(|w| w.contains("approximate")),
        "{:?}",
        c.warnings
    );
    assert_eq!(
        c.devices[0].pools[1].lifecycle.unwrap().new_segment_bytes,
        16 * MIB
    );
    assert_eq!(
        c.devices[0].pools[0].lifecycle.unwrap().new_segment_bytes,
        0
    );
}

#[test]
fn independent_runs_pair_default_pools_only() {
    let a = state(&after_capture(), "run-a", "x", 0, vec![]);
    let b = state(&after_capture(), "run-b", "y", 0, vec![]);
    let c = compare(&a, &b, &CompareOptions::default()).unwrap();
    assert_eq!(c.relation, Relation::CrossRun);
    assert_eq!(c.lifecycle, LifecycleLabel::Unavailable);
    let pools = &c.devices[0].pools;
    // default paired; private pool once per side, unpaired.
    assert_eq!(pools.len(), 3);
    assert_eq!(
        (pools[0].reference_pool, pools[0].candidate_pool),
        (Some((0, 0)), Some((0, 0)))
    );
    assert_eq!(
        (pools[1].reference_pool, pools[1].candidate_pool),
        (Some((1, 0)), None)
    );
    assert_eq!(
        (pools[2].reference_pool, pools[2].candidate_pool),
        (None, Some((1, 0)))
    );
    // Streams never pair across runs.
    assert!(pools[0]
        .streams
        .iter()
        .all(|s| s.reference_stream.is_none() != s.candidate_stream.is_none()));
    assert!(pools.iter().all(|p| p.lifecycle.is_none()));
    assert_eq!(c.suggested_pool_mapping, vec![((0, (1, 0)), (0, (1, 0)))]);

    // With the mapping the private pools pair.
    let mapped = compare(&a, &b, &mapping(vec![((0, (1, 0)), (0, (1, 0)))], vec![])).unwrap();
    let pools = &mapped.devices[0].pools;
    assert_eq!(pools.len(), 2);
    assert_eq!(pools[1].stats.reference.reserved_bytes, 16 * MIB);
    assert_eq!(pools[1].stats.candidate.reserved_bytes, 16 * MIB);
    assert!(mapped.suggested_pool_mapping.is_empty());
}

#[test]
fn device_mapping_pairs_devices_and_is_checked() {
    let mut on_1 = after_capture();
    for s in on_1["segments"].as_array_mut().unwrap() {
        s["device"] = json!(1);
    }
    on_1["device_traces"] = json!([[], []]);
    let a = state(&after_capture(), "run-a", "x", 0, vec![]);
    let b = state(&on_1, "run-b", "y", 0, vec![]);
    let unmapped = compare(&a, &b, &CompareOptions::default()).unwrap();
    assert_eq!(unmapped.devices.len(), 2);
    let mapped = compare(
        &a,
        &b,
        &mapping(vec![((0, (1, 0)), (1, (1, 0)))], vec![(0, 1)]),
    )
    .unwrap();
    assert_eq!(mapped.devices.len(), 1);
    assert_eq!(mapped.devices[0].candidate_device, Some(1));
    assert_eq!(mapped.devices[0].pools.len(), 2);
    let bad = compare(&a, &b, &mapping(vec![((0, (9, 9)), (1, (1, 0)))], vec![])).unwrap_err();
    assert!(
        matches!(bad, MemoryError::InvalidInput(ref m) if m.contains("(9, 9)")),
        "{bad}"
    );
    let crossing = compare(&a, &b, &mapping(vec![((0, (1, 0)), (1, (1, 0)))], vec![])).unwrap_err();
    assert!(
        crossing.to_string().contains("device_mapping"),
        "{crossing}"
    );
}

#[test]
fn phase_identity_holds_on_every_row() {
    let (a0, a1) = capture_points("run-a", ["start", "end"], [400 * MIB, 430 * MIB], None);
    let mut bigger = after_capture();
    bigger["segments"][1]["blocks"] = json!([block(32 * MIB, "active_allocated", 32 * MIB)]);
    bigger["segments"][1]["total_size"] = json!(32 * MIB);
    let b0 = on_device(&before_capture(), "run-b", "start", 0, 410 * MIB, None);
    let b1 = on_device(&bigger, "run-b", "end", 1, 460 * MIB, None);
    let phases = compare_phases(
        (&a0, &a1),
        (&b0, &b1),
        &mapping(vec![((0, (1, 0)), (0, (1, 0)))], vec![]),
    )
    .unwrap();
    assert!(phases.identity_failures().is_empty());
    let checked = phases
        .rows
        .iter()
        .filter(|r| r.values.identity_holds() == Some(true))
        .count();
    assert_eq!(checked, phases.rows.len());
    let private = phases
        .rows
        .iter()
        .find(|r| r.baseline_pool == Some((1, 0)) && r.metric == "reserved")
        .unwrap();
    assert_eq!(private.values.baseline_change(), Some(16 * MIB));
    assert_eq!(private.values.candidate_change(), Some(32 * MIB));
    assert_eq!(private.values.start_gap(), Some(0));
    assert_eq!(private.values.end_gap(), Some(16 * MIB));
    let used = phases
        .rows
        .iter()
        .find(|r| r.metric == "cuda_used")
        .unwrap();
    assert_eq!(used.values.start_gap(), Some(10 * MIB));
    assert_eq!(used.values.end_gap(), Some(30 * MIB));

    // A range must stay inside one run.
    let err = compare_phases((&a0, &b1), (&b0, &b1), &CompareOptions::default()).unwrap_err();
    assert!(err.to_string().contains("different runs"), "{err}");
}

#[test]
fn timeline_keeps_vanished_pools_at_zero() {
    let s0 = state(&before_capture(), "r", "p0", 0, vec![]);
    let s1 = state(&after_capture(), "r", "p1", 1, vec![]);
    let s2 = state(&before_capture(), "r", "p2", 2, vec![]);
    let t = timeline(&[&s0, &s1, &s2]).unwrap();
    let private: Vec<_> = t.rows.iter().filter(|r| r.pool == Some((1, 0))).collect();
    assert_eq!(private.len(), 2);
    assert_eq!(private[0].stats.reserved_bytes, 16 * MIB);
    assert_eq!(private[1].point_index, 2);
    assert_eq!(private[1].stats.reserved_bytes, 0);
    assert_eq!(private[1].change.unwrap().reserved_bytes, -16 * MIB);
    let all: Vec<_> = t
        .rows
        .iter()
        .filter(|r| r.scope.is_some_and(|s| s.as_str() == "all"))
        .map(|r| r.stats.reserved_bytes)
        .collect();
    assert_eq!(all, vec![2 * MIB, 18 * MIB, 2 * MIB]);
}
