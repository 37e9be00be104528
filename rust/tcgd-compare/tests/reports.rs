//! Golden reports (insta): a change to the text or JSON a user reads is a reviewed diff.
//! Also: HTML escaping, CSV content, and the rules for writing a report directory.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use tcgd_compare::report::{self, REPORT_FILES};
use tcgd_compare::{
    compare_point_series, compare_runs, compare_sets, CompareOptions, Comparison, ComparisonKind,
    Mode, PointMapping, RunData, RunGroup, Silent, SiteLocation,
};
use tcgd_store::PayloadKind;
use tcgd_tensor::DType;

/// Temporary directories differ between runs; goldens show stable stand-ins.
fn scrub(c: &mut Comparison) {
    for (subject, stand_in) in [
        (&mut c.reference, "runs/reference"),
        (&mut c.candidate, "runs/candidate"),
    ] {
        if subject.path.is_some() {
            subject.path = Some(stand_in.to_owned());
        }
    }
    for r in &mut c.ranks {
        if let Some(inner) = r.comparison.as_deref_mut() {
            scrub(inner);
        }
    }
}

fn mixed_sets() -> (tcgd_compare::ObservationSet, tcgd_compare::ObservationSet) {
    let site = SiteLocation {
        module_path: Some("model.layers.0.<mlp>".into()),
        aten_op: Some("aten.mm.default".into()),
        source_location: Some("model.py:42".into()),
        ..SiteLocation::default()
    };
    // Both sides record the same observations in the same order and differ only in
    // these values; the candidate also records one more.
    let step1 = |hidden: [f32; 6], last_id: i64, logits: Obs, loss: f32, stats: [f32; 2]| {
        let mut hidden = obs("hidden", DType::Float32, &[2, 3], f32_bytes(&hidden));
        hidden.site = Some(site.clone());
        let mut stats = obs("stats", DType::Float32, &[2], f32_bytes(&stats));
        stats.payload = PayloadKind::Summary;
        vec![
            obs(
                "embed",
                DType::Float32,
                &[4],
                f32_bytes(&[1.0, 2.0, 3.0, 4.0]),
            ),
            hidden,
            obs("ids", DType::Int64, &[3], i64_bytes(&[7, 8, last_id])),
            logits,
            obs("loss", DType::Float32, &[], f32_bytes(&[loss])),
            stats,
            one_f32("<script>alert(1)</script>", 1.0),
        ]
    };
    let reference = step1(
        [0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
        9,
        obs(
            "logits",
            DType::Float32,
            &[2, 2],
            f32_bytes(&[0.1, 0.2, 0.3, 0.4]),
        ),
        1.234_567_8,
        [1.0, 2.0],
    );
    let mut candidate = step1(
        [0.5, 1.0, 1.5, 2.0, 2.75, f32::NAN],
        10,
        obs("logits", DType::Float16, &[2, 2], vec![0; 8]),
        1.234_567_9,
        [1.0, 2.5],
    );
    candidate.push(one_f32("extra", 0.0));
    (set("step1", reference), set("step1", candidate))
}

fn points_comparison(options: &CompareOptions) -> Comparison {
    let (reference, candidate) = mixed_sets();
    compare_sets(
        ComparisonKind::Points,
        (&reference, subject("point", "step1")),
        (&candidate, subject("point", "step1")),
        options,
        &Silent,
    )
    .unwrap()
}

#[test]
fn points_text_report() {
    let c = points_comparison(&CompareOptions::default());
    insta::assert_snapshot!("points_text", report::to_text(&c, None));
}

#[test]
fn points_text_report_in_exact_mode_with_a_limit() {
    let options = CompareOptions {
        mode: Mode::Exact,
        limit: 3,
        ..CompareOptions::default()
    };
    let c = points_comparison(&options);
    insta::assert_snapshot!("points_exact_text", report::to_text(&c, None));
}

#[test]
fn points_json_report_is_complete() {
    let options = CompareOptions {
        limit: 1,
        ..CompareOptions::default()
    };
    let c = points_comparison(&options);
    let json = report::to_json(&c).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    // The display limit never truncates JSON.
    assert_eq!(
        parsed["points"][0]["observations"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
    insta::assert_snapshot!("points_json", json);
}

fn run_fixture(dir: &Path) -> (RunData, RunData) {
    let point = |x: f32, y: i64| {
        vec![
            obs("x", DType::Float32, &[2], f32_bytes(&[x, 1.0])),
            obs("y", DType::Int64, &[1], i64_bytes(&[y])),
        ]
    };
    let baseline = single_rank_run(
        &dir.join("a"),
        "baseline",
        &[
            ("warmup", point(0.0, 0)),
            ("step0", point(1.0, 1)),
            ("step1", point(2.0, 2)),
            ("step2", point(3.0, 3)),
        ],
        true,
    );
    let graphed = single_rank_run(
        &dir.join("b"),
        "graphed",
        &[
            ("step0", point(1.0, 1)),
            ("step1", point(2.0 + 1e-3, 2)),
            ("extra", point(9.0, 9)),
        ],
        false,
    );
    (baseline, graphed)
}

#[test]
fn runs_text_report() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = run_fixture(dir.path());
    let mut c = compare_runs(
        &a,
        &b,
        &PointMapping::ByLabel,
        &CompareOptions::default(),
        &Silent,
    )
    .unwrap();
    scrub(&mut c);
    insta::assert_snapshot!("runs_text", report::to_text(&c, None));
}

#[test]
fn series_text_report() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = run_fixture(dir.path());
    let reference = a.points[1].clone();
    let mut c = compare_point_series(
        (&reference, subject("point", "step0")),
        &a,
        &CompareOptions::default(),
        &Silent,
    )
    .unwrap();
    scrub(&mut c);
    insta::assert_snapshot!("series_text", report::to_text(&c, None));
    let html = report::to_html(&c, None);
    assert!(
        html.contains("<svg id=\"chart-drift\""),
        "drift chart missing"
    );
    assert!(
        html.contains("first divergence: &#39;warmup&#39; (replay 1)"),
        "divergence marker missing"
    );
}

#[test]
fn run_groups_text_report() {
    let dir = tempfile::tempdir().unwrap();
    let point = |v: f32| vec![one_f32("x", v)];
    for (root, ranks) in [("ref", vec![0, 1, 2]), ("cand", vec![0, 1])] {
        for rank in ranks {
            let v = if root == "cand" && rank == 1 {
                2.5
            } else {
                2.0
            };
            write_run(
                &dir.path().join(root),
                "job",
                rank,
                3,
                &[("s0", point(1.0)), ("s1", point(v))],
                true,
            );
        }
    }
    let reference = RunGroup::load(&dir.path().join("ref"), None).unwrap();
    let candidate = RunGroup::load(&dir.path().join("cand"), None).unwrap();
    let mut c = compare_groups(&reference, &candidate);
    scrub(&mut c);
    c.reference.path = Some("jobs/reference".into());
    c.candidate.path = Some("jobs/candidate".into());
    insta::assert_snapshot!("groups_text", report::to_text(&c, None));
    let csv = report::csv_tables(&c);
    let ranks = &csv
        .iter()
        .find(|(n, _)| *n == "rank_comparisons.csv")
        .unwrap()
        .1;
    assert!(
        ranks.contains("2,inconclusive,rank 2 has no run in the candidate group"),
        "{ranks}"
    );
}

#[test]
fn html_escapes_every_user_string_and_has_no_script() {
    let c = points_comparison(&CompareOptions::default());
    let html = report::to_html(&c, None);
    assert!(!html.contains("<script"), "raw script tag in the report");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;[0]"));
    assert!(html.contains("model.layers.0.&lt;mlp&gt;"));
    assert!(html.contains("Content-Security-Policy"));
    assert!(html.contains("<svg id=\"chart-sites\""));
    // One bar per observation.
    assert_eq!(html.matches("<rect class=\"bar-").count(), 8);
}

#[test]
fn csv_tables_hold_every_row_at_full_precision() {
    let c = points_comparison(&CompareOptions {
        limit: 1,
        ..CompareOptions::default()
    });
    let tables = report::csv_tables(&c);
    let names: Vec<&str> = tables.iter().map(|t| t.0).collect();
    assert_eq!(names, vec!["observations.csv", "points.csv"]);
    let obs_csv = &tables[0].1;
    assert_eq!(obs_csv.lines().count(), 1 + 8);
    assert!(obs_csv.contains("hidden,0,mismatch,values"), "{obs_csv}");
    // The first mismatch of `hidden` at full precision.
    assert!(obs_csv.contains(",4,\"(1, 1)\",2.5,2.75,"), "{obs_csv}");
}

#[test]
fn write_needs_overwrite_for_a_non_empty_directory_and_keeps_other_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let c = points_comparison(&CompareOptions::default());
    let written = report::write(&c, &out, false, None).unwrap();
    let names: Vec<String> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        vec![
            "report.txt",
            "report.json",
            "report.html",
            "observations.csv",
            "points.csv"
        ]
    );
    let err = report::write(&c, &out, false, None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("not empty") && err.contains("overwrite"),
        "{err}"
    );

    fs::write(out.join("notes.md"), "mine").unwrap();
    fs::write(out.join("rank_comparisons.csv"), "stale").unwrap();
    report::write(&c, &out, true, None).unwrap();
    assert_eq!(fs::read_to_string(out.join("notes.md")).unwrap(), "mine");
    assert!(
        !out.join("rank_comparisons.csv").exists(),
        "a stale report file was kept"
    );
    let mut left: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert!(left
        .iter()
        .all(|n| n == "notes.md" || REPORT_FILES.contains(&n.as_str())));
}
