//! The reference's row models, built by `tcgd_memory::rows` from the capture fixture:
//! every expected value is known by construction (a default pool of 2 MiB with 1 KiB
//! allocated, then a private pool (1, 0) of 16 MiB, fully allocated, and 106 MiB more CUDA
//! used memory).

mod common;

use common::*;
use serde_json::{json, Value};
use tcgd_memory::compare::{compare, CompareOptions};
use tcgd_memory::report::{render_timeline, Depth, Format, ReportOptions};
use tcgd_memory::rows::comparison::{DeviceMetric, DeviceSide};
use tcgd_memory::rows::{ComparisonRows, MatchKind, OriginKind, PhaseRows, PoolRef, TimelineRows};
use tcgd_memory::{compare_phases, timeline, MemoryState};

const PRIVATE: PoolRef = PoolRef {
    device_index: 0,
    pool_id: (1, 0),
};

fn before_after(origin_a: &str, origin_b: &str) -> (MemoryState, MemoryState) {
    let before = state(
        &before_capture(),
        origin_a,
        "before",
        0,
        vec![memory(0, 434 * MIB, None)],
    );
    let after = state(
        &after_capture(),
        origin_b,
        "after",
        1,
        vec![memory(0, 540 * MIB, None)],
    );
    (before, after)
}

fn rows(a: &MemoryState, b: &MemoryState, options: &CompareOptions) -> ComparisonRows {
    let c = compare(a, b, options).unwrap();
    ComparisonRows::build(&c, a, b, options, OriginKind::Run).unwrap()
}

#[test]
fn same_run_rows_pair_by_identity_and_the_new_pool_is_one_sided() {
    let (a, b) = before_after("run-a", "run-a");
    let r = rows(&a, &b, &CompareOptions::default());
    let private = r
        .pools
        .iter()
        .find(|p| p.keys.candidate == Some(PRIVATE))
        .unwrap();
    assert_eq!(private.match_kind, MatchKind::CandidateOnly);
    assert_eq!(private.stats.reference, None);
    assert_eq!(private.delta.reserved_bytes, 16 * MIB);
    assert_eq!(private.lifecycle.unwrap().new_segment_bytes, 16 * MIB);
    let default = r.pools.iter().find(|p| p.keys.reference.is_some()).unwrap();
    assert_eq!(default.match_kind, MatchKind::SameRun);
    assert!(!default.changed());

    let d = &r.device_comparisons[0];
    assert_eq!(d.match_kind, MatchKind::SameRun);
    let m = |side, metric| d.metric(side, metric);
    assert_eq!(
        m(DeviceSide::Reference, DeviceMetric::Used),
        Some(434 * MIB)
    );
    assert_eq!(m(DeviceSide::Delta, DeviceMetric::Used), Some(106 * MIB));
    assert_eq!(m(DeviceSide::Delta, DeviceMetric::Free), Some(-106 * MIB));
    assert_eq!(
        m(DeviceSide::Delta, DeviceMetric::AllocatorReserved),
        Some(16 * MIB)
    );
    // Residual: used minus what the allocator reserved (2 MiB, then 18 MiB).
    assert_eq!(
        m(DeviceSide::Candidate, DeviceMetric::CudaAllocatorResidual),
        Some(522 * MIB)
    );
    assert_eq!(
        m(DeviceSide::Delta, DeviceMetric::CudaAllocatorResidual),
        Some(90 * MIB)
    );
}

#[test]
fn cross_run_rows_pair_default_pools_and_map_private_ones() {
    // Run a's point has no device sample; run b's has one.
    let a = state(&after_capture(), "run-a", "after", 1, vec![]);
    let (_, b) = before_after("run-b", "run-b");
    let plain = rows(&a, &b, &CompareOptions::default());
    let kinds: Vec<MatchKind> = plain.pools.iter().map(|p| p.match_kind).collect();
    assert_eq!(
        kinds,
        [
            MatchKind::Default,
            MatchKind::ReferenceOnly,
            MatchKind::CandidateOnly
        ]
    );
    // Streams of independent runs never pair.
    assert!(plain
        .observations
        .iter()
        .all(|o| o.keys.reference.is_none() != o.keys.candidate.is_none()));
    assert_eq!(plain.device_comparisons[0].match_kind, MatchKind::SameIndex);

    let mapped = CompareOptions {
        pool_mapping: vec![((0, (1, 0)), (0, (1, 0)))],
        device_mapping: vec![],
    };
    let r = rows(&a, &b, &mapped);
    let private = r
        .pools
        .iter()
        .find(|p| p.keys.reference == Some(PRIVATE))
        .unwrap();
    assert_eq!(
        (private.match_kind, private.keys.candidate),
        (MatchKind::Mapped, Some(PRIVATE))
    );
    assert_eq!(private.lifecycle, None);
    // A state without a device sample has no used bytes, and no made-up change.
    let d = &r.device_comparisons[0];
    assert_eq!(d.metric(DeviceSide::Reference, DeviceMetric::Used), None);
    assert_eq!(d.metric(DeviceSide::Delta, DeviceMetric::Used), None);
    assert!(d.changed());
}

#[test]
fn rows_serialise_as_the_reference_dicts_and_csv_files() {
    let (a, b) = before_after("run-a", "run-a");
    let r = rows(&a, &b, &CompareOptions::default());
    let doc = serde_json::to_value(&r).unwrap();
    let private = doc["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["candidate_pool_id"] == json!([1, 0]))
        .unwrap();
    assert_eq!(private["reference_pool_id"], Value::Null);
    assert_eq!(private["match"], "candidate_only");
    assert_eq!(private["delta"]["reserved_bytes"], 16 * MIB);
    assert_eq!(private["delta"]["inactive_bytes"], 0);
    assert_eq!(private["lifecycle"]["new_segment_bytes"], 16 * MIB);
    let device = &doc["device_comparisons"][0];
    assert_eq!(device["candidate"]["sample"]["used_bytes"], 540 * MIB);
    assert_eq!(device["delta"]["allocator"]["reserved_bytes"], 16 * MIB);
    assert_eq!(device["changed"], true);

    let files = r.csv_files();
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "allocator_scopes.csv",
            "pools.csv",
            "observations.csv",
            "devices.csv"
        ]
    );
    let pools = &files[1].1;
    let header: Vec<&str> = pools.lines().next().unwrap().split(',').collect();
    assert_eq!(
        &header[..6],
        [
            "reference_device_index",
            "reference_pool_id",
            "candidate_device_index",
            "candidate_pool_id",
            "pool_kind",
            "match"
        ]
    );
    assert_eq!(header.len(), 6 + 3 * 14);
    assert!(pools.contains(",,0,\"1,0\",private,candidate_only,"));
}

#[test]
fn timeline_rows_keep_a_vanished_observation_and_the_sample_changes() {
    let (a, b) = before_after("run-a", "run-a");
    let c = state(&before_capture(), "run-a", "released", 2, vec![]);
    let t = timeline(&[&a, &b, &c]).unwrap();
    let r = TimelineRows::build(&t, &[&a, &b, &c]).unwrap();
    let private: Vec<(i64, Option<i64>)> = r
        .observation_entries
        .iter()
        .filter(|e| e.subject.pool_id == (1, 0))
        .map(|e| (e.stats.reserved_bytes, e.delta.map(|d| d.reserved_bytes)))
        .collect();
    assert_eq!(private, [(16 * MIB, Some(16 * MIB)), (0, Some(-16 * MIB))]);
    let deltas: Vec<Option<i64>> = r
        .device_entries
        .iter()
        .map(|e| e.delta_used_bytes())
        .collect();
    // No sample at the third point: no change is made up.
    assert_eq!(deltas, [None, Some(106 * MIB), None]);
    assert_eq!(
        r.device_entries[1].cuda_allocator_residual_bytes(),
        Some(522 * MIB)
    );
}

#[test]
fn timeline_page_charts_bytes_per_point() {
    let (a, b) = before_after("run-a", "run-a");
    let t = timeline(&[&a, &b]).unwrap();
    let options = ReportOptions {
        include_unchanged: true,
        depth: Depth::Stream,
    };
    let html = render_timeline(&t, Format::Html, options);
    let chart = &html[html.find("<svg class=\"timeline-chart\"").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    // All pools reserved and allocated, then one line per pool (default and private).
    assert_eq!(chart.matches("<polyline").count(), 4);
    assert!(chart.contains("<title>reserved, device 0 pool[1,0]</title>"));
    assert!(chart.contains("peak 18.00 MiB"));
}

#[test]
fn phase_rows_name_device_metrics_and_hold_the_identity() {
    let (a0, a1) = before_after("run-a", "run-a");
    let (b0, b1) = before_after("run-b", "run-b");
    let options = CompareOptions {
        pool_mapping: vec![((0, (1, 0)), (0, (1, 0)))],
        device_mapping: vec![],
    };
    let p = compare_phases((&a0, &a1), (&b0, &b1), &options).unwrap();
    let r = PhaseRows::build(&p);
    assert_eq!(r.allocator_scope_decomposition.len(), 3 * 9);
    let all = r
        .allocator_scope_decomposition
        .iter()
        .chain(&r.pool_decomposition)
        .chain(&r.device_decomposition);
    assert!(all
        .clone()
        .all(|row| row.0.values.identity_holds() == Some(true)));
    let metrics: Vec<String> = r.device_decomposition.iter().map(|d| d.metric()).collect();
    assert_eq!(
        &metrics[..3],
        [
            "used_bytes",
            "cuda_allocator_residual_bytes",
            "allocator_reserved_bytes"
        ]
    );
    let private = r
        .pool_decomposition
        .iter()
        .find(|d| d.baseline_pool() == Some(PRIVATE) && d.metric() == "reserved_bytes")
        .unwrap();
    let doc = serde_json::to_value(private).unwrap();
    assert_eq!(doc["baseline_pool_id"], json!([1, 0]));
    assert_eq!(doc["baseline_change_bytes"], 16 * MIB);
    assert_eq!(doc["end_gap_bytes"], 0);
    assert_eq!(doc["identity_holds"], true);
    let devices = &r.csv_files()[2];
    assert_eq!(devices.0, "device_decomposition.csv");
    assert!(devices.1.lines().nth(1).unwrap().ends_with(",true"));
}
