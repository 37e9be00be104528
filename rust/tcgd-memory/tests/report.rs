//! Golden reports (insta) and the arithmetic every report level must satisfy.

mod common;

use common::*;
use serde_json::{json, Value};
use tcgd_memory::compare::{compare, summary, CompareOptions};
use tcgd_memory::report::{
    render_comparison, render_phases, render_timeline, Depth, Format, ReportOptions,
};
use tcgd_memory::{compare_phases, timeline, MemoryState};

fn capture_pair() -> (MemoryState, MemoryState) {
    capture_points(
        "probe:graph-capture",
        ["snapshot-0", "snapshot-1"],
        [434 * MIB, 540 * MIB],
        Some(4 * MIB),
    )
}

fn all(include_unchanged: bool) -> ReportOptions {
    ReportOptions {
        include_unchanged,
        depth: Depth::Stream,
    }
}

#[test]
fn capture_comparison_text() {
    let (before, after) = capture_pair();
    let c = compare(&before, &after, &CompareOptions::default()).unwrap();
    insta::assert_snapshot!(
        "capture_text_all",
        render_comparison(&c, Format::Text, all(true))
    );
    insta::assert_snapshot!(
        "capture_text_changed",
        render_comparison(&c, Format::Text, all(false))
    );
    insta::assert_snapshot!(
        "capture_text_pool_depth",
        render_comparison(
            &c,
            Format::Text,
            ReportOptions {
                include_unchanged: false,
                depth: Depth::Pool
            }
        )
    );
    insta::assert_snapshot!("capture_csv", render_comparison(&c, Format::Csv, all(true)));
    insta::assert_snapshot!(
        "capture_json",
        render_comparison(&c, Format::Json, all(false))
    );
}

#[test]
fn capture_comparison_html_escapes_and_charts() {
    let (mut before, mut after) = capture_pair();
    before.identity.name = "<script>alert(1)</script>".into();
    after.identity.name = before.identity.name.clone();
    let c = compare(&before, &after, &CompareOptions::default()).unwrap();
    let html = render_comparison(&c, Format::Html, all(true));
    assert!(!html.contains("<script>"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("<svg"));
    assert!(html.contains("device 0 pool[1,0] (private)"));
    insta::assert_snapshot!("capture_html", html);
}

#[test]
fn cross_run_text() {
    let a = on_device(&after_capture(), "run-a", "step-10", 3, 600 * MIB, None);
    let b = on_device(&after_capture(), "run-b", "step-10", 3, 640 * MIB, None);
    let c = compare(&a, &b, &CompareOptions::default()).unwrap();
    insta::assert_snapshot!(
        "cross_run_text",
        render_comparison(&c, Format::Text, all(true))
    );
}

#[test]
fn summary_and_timeline_and_phases_text() {
    let (before, after) = capture_pair();
    insta::assert_snapshot!(
        "summary_text",
        render_comparison(&summary(&after), Format::Text, all(true))
    );
    let t = timeline(&[&before, &after]).unwrap();
    insta::assert_snapshot!(
        "timeline_text",
        render_timeline(&t, Format::Text, all(true))
    );
    insta::assert_snapshot!("timeline_csv", render_timeline(&t, Format::Csv, all(true)));
    let (b0, b1) = capture_points("run-b", ["start", "end"], [400 * MIB, 430 * MIB], None);
    let p = compare_phases((&before, &after), (&b0, &b1), &CompareOptions::default()).unwrap();
    insta::assert_snapshot!("phases_text", render_phases(&p, Format::Text, all(false)));
}

fn value(v: &Value, side: &str) -> i64 {
    v[side].as_i64().unwrap_or(0)
}

/// Every level of the JSON tree sums to its parent, for both sides and the change.
fn check_sums(report: &Value) {
    for device in report["devices"].as_array().unwrap() {
        for side in ["reference", "candidate", "change"] {
            let used = &device["cuda_used"];
            if !used[side].is_null() {
                assert_eq!(
                    value(used, side),
                    value(&device["residual"], side)
                        + value(&device["allocator"]["reserved"], side),
                    "CUDA used = residual + reserved ({side})"
                );
                if !device["probe_slots"][side].is_null() {
                    assert_eq!(
                        value(&device["residual"], side),
                        value(&device["probe_slots"], side)
                            + value(&device["residual_other"], side)
                    );
                }
            }
            for metric in [
                "reserved",
                "allocated",
                "active",
                "requested",
                "segment_count",
                "block_count",
                "inactive",
            ] {
                // The sum of the metric over a node's children.
                let children = |node: &Value, level: &str| -> i64 {
                    node[level]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|child| value(&child["stats"][metric], side))
                        .sum()
                };
                let pools = children(device, "pools");
                assert_eq!(
                    value(&device["allocator"][metric], side),
                    pools,
                    "{metric} {side}"
                );
                for pool in device["pools"].as_array().unwrap() {
                    let streams = children(pool, "streams");
                    assert_eq!(
                        value(&pool["stats"][metric], side),
                        streams,
                        "{metric} {side}"
                    );
                }
            }
        }
    }
}

#[test]
fn every_level_sums_to_its_parent() {
    let (before, after) = capture_pair();
    let mut more = after_capture();
    more["segments"].as_array_mut().unwrap().push(segment(
        0,
        0x7f20_0000_0000,
        (1, 0),
        0x77,
        vec![
            block(3 * MIB, "active_pending_free", 3 * MIB - 5),
            block(MIB, "inactive", 0),
        ],
    ));
    let third = on_device(
        &more,
        "probe:graph-capture",
        "snapshot-2",
        2,
        560 * MIB,
        Some(4 * MIB),
    );
    for (a, b) in [(&before, &after), (&after, &third), (&before, &third)] {
        let c = compare(a, b, &CompareOptions::default()).unwrap();
        for include_unchanged in [true, false] {
            let json: Value =
                serde_json::from_str(&render_comparison(&c, Format::Json, all(include_unchanged)))
                    .unwrap();
            if include_unchanged {
                check_sums(&json);
            } else {
                // Pruned rows have no change: changes still sum.
                for device in json["devices"].as_array().unwrap() {
                    let pools: i64 = device["pools"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|p| value(&p["stats"]["reserved"], "change"))
                        .sum();
                    assert_eq!(value(&device["allocator"]["reserved"], "change"), pools);
                }
            }
        }
        // CSV carries the same numbers as JSON.
        let csv = render_comparison(&c, Format::Csv, all(true));
        let json: Value =
            serde_json::from_str(&render_comparison(&c, Format::Json, all(true))).unwrap();
        let reserved_line = csv
            .lines()
            .find(|l| l.starts_with("allocator,") && l.contains(",reserved,"))
            .unwrap();
        let fields: Vec<&str> = reserved_line.split(',').collect();
        assert_eq!(
            fields[10].parse::<i64>().unwrap(),
            value(&json["devices"][0]["allocator"]["reserved"], "candidate")
        );
    }
    let s: Value = serde_json::from_str(&render_comparison(
        &summary(&third),
        Format::Json,
        all(true),
    ))
    .unwrap();
    check_sums(&s);
    assert_eq!(
        s["devices"][0]["allocator"]["reserved"]["candidate"],
        json!(22 * MIB)
    );
}
