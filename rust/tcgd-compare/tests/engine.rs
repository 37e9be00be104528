//! The order of the per-observation rules, alignment, status precedence, runs, series and
//! groups, checked on small inputs whose answers are known.

mod common;

use common::*;
use tcgd_compare::{
    compare_point_series, compare_runs, compare_sets, CompareOptions, ComparisonKind, DtypePolicy,
    Kind, LayoutPolicy, Mode, PointMapping, PointSelector, RunGroup, Scalar, Silent, Status,
};
use tcgd_store::PayloadKind;
use tcgd_tensor::DType;

fn compare(
    reference: &tcgd_compare::ObservationSet,
    candidate: &tcgd_compare::ObservationSet,
    options: &CompareOptions,
) -> tcgd_compare::Comparison {
    compare_sets(
        ComparisonKind::Points,
        (reference, subject("point", "r")),
        (candidate, subject("point", "c")),
        options,
        &Silent,
    )
    .unwrap()
}

#[test]
fn alignment_keeps_execution_order_and_reports_one_sided_keys() {
    let r = set(
        "p",
        vec![one_f32("a", 1.0), one_f32("b", 2.0), one_f32("c", 3.0)],
    );
    let c = set(
        "p",
        vec![one_f32("a", 1.0), one_f32("new", 9.0), one_f32("c", 3.0)],
    );
    let result = compare(&r, &c, &CompareOptions::default());
    let rows: Vec<(String, Status, Kind)> = result.points[0]
        .observations
        .iter()
        .map(|o| (o.name.clone(), o.status, o.kind))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("a".into(), Status::Match, Kind::Digest),
            // Right after the key that precedes it in the candidate.
            ("new".into(), Status::Mismatch, Kind::CandidateOnly),
            ("b".into(), Status::Mismatch, Kind::ReferenceOnly),
            ("c".into(), Status::Match, Kind::Digest),
        ]
    );
    assert_eq!(result.status, Status::Mismatch);
    let issue = result.first_issue.unwrap();
    assert_eq!((issue.point, issue.observation), (Some(0), Some(1)));
    assert_eq!(result.counts.mismatch, 2);
}

#[test]
fn metadata_rules_follow_the_policies() {
    let r = set(
        "p",
        vec![obs("x", DType::Float32, &[2], f32_bytes(&[1.0, 2.0]))],
    );
    let mut c = set(
        "p",
        vec![obs(
            "x",
            DType::Float64,
            &[2],
            [1.0f64, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect(),
        )],
    );
    c.observations[0].descriptor.stride = vec![2];
    let strict = compare(&r, &c, &CompareOptions::default());
    let o = &strict.points[0].observations[0];
    assert_eq!((o.status, o.kind), (Status::Mismatch, Kind::Metadata));
    assert_eq!(o.reason, "stride [1] vs [2]; dtype float32 vs float64");

    let relaxed = CompareOptions {
        dtype_policy: DtypePolicy::Promote,
        layout_policy: LayoutPolicy::Ignore,
        ..CompareOptions::default()
    };
    let promoted = compare(&r, &c, &relaxed);
    let o = &promoted.points[0].observations[0];
    assert_eq!((o.status, o.kind), (Status::Match, Kind::Values));

    let wrong_shape = set(
        "p",
        vec![obs("x", DType::Float32, &[1, 2], f32_bytes(&[1.0, 2.0]))],
    );
    let o = &compare(&r, &wrong_shape, &relaxed).points[0].observations[0];
    assert_eq!(o.kind, Kind::Metadata);
    assert_eq!(o.reason, "shape [2] vs [1, 2]");
}

#[test]
fn equal_digests_match_unless_nan_without_equal_nan() {
    let values = f32_bytes(&[1.0, f32::NAN]);
    let r = set("p", vec![obs("x", DType::Float32, &[2], values.clone())]);
    let c = set("p", vec![obs("x", DType::Float32, &[2], values.clone())]);
    let o = compare(&r, &c, &CompareOptions::default()).points[0].observations[0].clone();
    // Full payloads: compared element-wise, so the NaN is located.
    assert_eq!((o.status, o.kind), (Status::Mismatch, Kind::Values));
    let m = o.metrics.unwrap();
    assert_eq!(m.mismatch_count, 1);
    assert_eq!(m.first_mismatch.unwrap().coordinate, vec![1]);

    let with_nan = CompareOptions {
        equal_nan: true,
        ..CompareOptions::default()
    };
    let o = compare(&r, &c, &with_nan).points[0].observations[0].clone();
    assert_eq!((o.status, o.kind), (Status::Match, Kind::Digest));

    // Summary only: the NaN count is known exactly, its place is not.
    let mut rs = r.clone();
    let mut cs = c.clone();
    rs.observations[0].descriptor.payload = PayloadKind::Summary;
    cs.observations[0].descriptor.payload = PayloadKind::Summary;
    let o = compare(&rs, &cs, &CompareOptions::default()).points[0].observations[0].clone();
    assert_eq!((o.status, o.kind), (Status::Mismatch, Kind::Digest));
    let m = o.metrics.unwrap();
    assert_eq!((m.mismatch_count, m.first_mismatch), (1, None));
}

#[test]
fn summary_only_pairs_are_inconclusive_or_decided_by_their_summaries() {
    let mut r = set(
        "p",
        vec![obs("x", DType::Float32, &[2], f32_bytes(&[1.0, 2.0]))],
    );
    let c = set(
        "p",
        vec![obs("x", DType::Float32, &[2], f32_bytes(&[1.0, 2.5]))],
    );
    r.observations[0].descriptor.payload = PayloadKind::Summary;
    let allclose = compare(&r, &c, &CompareOptions::default());
    let o = &allclose.points[0].observations[0];
    assert_eq!((o.status, o.kind), (Status::Inconclusive, Kind::Summary));
    assert!(
        o.reason.contains("the reference has only a summary"),
        "{}",
        o.reason
    );
    assert_eq!(allclose.status, Status::Inconclusive);
    assert!(!allclose.conclusive && !allclose.ok);

    let exact = CompareOptions {
        mode: Mode::Exact,
        ..CompareOptions::default()
    };
    let o = &compare(&r, &c, &exact).points[0].observations[0];
    assert_eq!((o.status, o.kind), (Status::Mismatch, Kind::Digest));

    // Without digests (values never reached the host) exact mode cannot decide either.
    let mut no_digest = r.clone();
    no_digest.observations[0].digest = None;
    let o = &compare(&no_digest, &c, &exact).points[0].observations[0];
    assert_eq!(o.status, Status::Inconclusive);

    // A NaN on one side only is a mismatch whatever the tolerance.
    let nan = set(
        "p",
        vec![obs("x", DType::Float32, &[2], f32_bytes(&[1.0, f32::NAN]))],
    );
    let o = &compare(&r, &nan, &CompareOptions::default()).points[0].observations[0];
    assert_eq!((o.status, o.kind), (Status::Mismatch, Kind::Summary));
    assert_eq!(o.reason, "summaries differ: NaN count 0 vs 1");
}

#[test]
fn status_precedence_is_mismatch_then_inconclusive_then_match() {
    let mut r = set(
        "p",
        vec![
            one_f32("ok", 1.0),
            one_f32("open", 1.0),
            one_f32("bad", 1.0),
        ],
    );
    let c = set(
        "p",
        vec![
            one_f32("ok", 1.0),
            one_f32("open", 2.0),
            one_f32("bad", 3.0),
        ],
    );
    r.observations[1].descriptor.payload = PayloadKind::Summary;
    let result = compare(&r, &c, &CompareOptions::default());
    assert_eq!(result.status, Status::Mismatch);
    assert_eq!(
        (
            result.counts.r#match,
            result.counts.inconclusive,
            result.counts.mismatch
        ),
        (1, 1, 1)
    );
    // The first issue is the first non-match in execution order, inconclusive or not.
    assert_eq!(result.first_issue.as_ref().unwrap().observation, Some(1));
    let worst: Vec<&str> = result
        .worst(None)
        .iter()
        .map(|(_, _, o)| o.name.as_str())
        .collect();
    assert_eq!(worst, vec!["bad", "open", "ok"]);
}

#[test]
fn int64_values_beyond_f64_precision_are_compared_exactly() {
    let big = (1i64 << 62) + 1;
    let r = set(
        "p",
        vec![obs("ids", DType::Int64, &[2], i64_bytes(&[big, 0]))],
    );
    let c = set(
        "p",
        vec![obs("ids", DType::Int64, &[2], i64_bytes(&[big + 1, 0]))],
    );
    let o = compare(&r, &c, &CompareOptions::default()).points[0].observations[0].clone();
    let first = o.metrics.unwrap().first_mismatch.unwrap();
    assert_eq!(first.reference, Scalar::Int(i128::from(big)));
    assert_eq!(first.candidate, Scalar::Int(i128::from(big) + 1));
}

#[test]
fn runs_align_points_by_label_index_or_explicit_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let point = |v: f32| vec![one_f32("x", v)];
    let ra = single_rank_run(
        &dir.path().join("a"),
        "m",
        &[("s0", point(1.0)), ("s1", point(2.0)), ("s2", point(3.0))],
        true,
    );
    let rb = single_rank_run(
        &dir.path().join("b"),
        "m",
        &[("s0", point(1.0)), ("s1", point(2.5))],
        false,
    );
    let o = CompareOptions::default();

    let by_label = compare_runs(&ra, &rb, &PointMapping::ByLabel, &o, &Silent).unwrap();
    let statuses: Vec<Status> = by_label.points.iter().map(|p| p.status).collect();
    // s2 is missing from an incomplete candidate that stopped before it: inconclusive.
    assert_eq!(
        statuses,
        vec![Status::Match, Status::Mismatch, Status::Inconclusive]
    );
    assert!(by_label.warnings[0].contains("candidate run is incomplete"));

    let pairs = PointMapping::Pairs(vec![(
        PointSelector::Label("s1".into()),
        PointSelector::Index(0),
    )]);
    let explicit = compare_runs(&ra, &rb, &pairs, &o, &Silent).unwrap();
    assert_eq!(explicit.points.len(), 1);
    assert_eq!(explicit.status, Status::Mismatch);

    let bad = PointMapping::Pairs(vec![(
        PointSelector::Label("nope".into()),
        PointSelector::Index(0),
    )]);
    let err = compare_runs(&ra, &rb, &bad, &o, &Silent)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no point labelled 'nope'") && err.contains("s2"),
        "{err}"
    );

    // Reversed and by index: the point is missing from the incomplete reference.
    let reversed = compare_runs(&rb, &ra, &PointMapping::ByIndex, &o, &Silent).unwrap();
    assert_eq!(reversed.points[2].status, Status::Inconclusive);

    // Missing from a complete run, a point is a mismatch.
    let rc = single_rank_run(
        &dir.path().join("c"),
        "m",
        &[("s0", point(1.0)), ("s1", point(2.0))],
        true,
    );
    let short = compare_runs(&ra, &rc, &PointMapping::ByLabel, &o, &Silent).unwrap();
    assert_eq!(short.points[2].status, Status::Mismatch);
    assert_eq!(
        short.points[2].reason.as_deref(),
        Some("recorded in the reference run only")
    );
    assert_eq!(short.first_issue.unwrap().scope, "point");
}

#[test]
fn series_reports_the_first_diverging_point_per_observation() {
    let dir = tempfile::tempdir().unwrap();
    let point = |x: f32, y: f32| vec![one_f32("x", x), one_f32("y", y)];
    let data = single_rank_run(
        &dir.path().join("run"),
        "m",
        &[
            ("r1", point(1.0, 5.0)),
            ("r2", point(1.0, 6.0)),
            ("r3", point(2.0, 6.0)),
        ],
        true,
    );
    let reference = data.points[0].clone();
    let result = compare_point_series(
        (&reference, subject("point", "r1")),
        &data,
        &CompareOptions::default(),
        &Silent,
    )
    .unwrap();
    let series = result.series.unwrap();
    let first = |name: &str| {
        series
            .observations
            .iter()
            .find(|d| d.name == name)
            .and_then(|d| d.first_mismatch.clone())
            .map(|p| (p.label.unwrap(), p.replay_index))
    };
    assert_eq!(first("x"), Some(("r3".into(), Some(3))));
    assert_eq!(first("y"), Some(("r2".into(), Some(2))));
    assert_eq!(series.first_divergence.unwrap().point, 1);
    let x = series.observations.iter().find(|d| d.name == "x").unwrap();
    assert_eq!((x.mismatched_points, x.max_abs_error), (1, Some(1.0)));
}

#[test]
fn groups_warn_about_crashed_ranks_and_missing_ranks_are_inconclusive() {
    let dir = tempfile::tempdir().unwrap();
    let point = |v: f32| vec![one_f32("x", v)];
    let job = |root: &std::path::Path, ranks: &[(i64, usize, bool)]| {
        for &(rank, points, complete) in ranks {
            let labels = [("s0", point(1.0)), ("s1", point(2.0)), ("s2", point(3.0))];
            write_run(root, "job", rank, 3, &labels[..points], complete);
        }
    };
    let (ref_root, cand_root) = (dir.path().join("ref"), dir.path().join("cand"));
    job(&ref_root, &[(0, 3, true), (1, 3, true), (2, 3, true)]);
    job(&cand_root, &[(0, 3, true), (1, 2, false)]);
    let reference = RunGroup::load(&ref_root, None).unwrap();
    let candidate = RunGroup::load(&cand_root, None).unwrap();
    assert!(reference.warnings.is_empty(), "{:?}", reference.warnings);
    assert_eq!(candidate.missing_ranks, vec![2]);
    assert!(
        candidate
            .warnings
            .iter()
            .any(|w| w.contains("rank 1 has 2 of 3 points")),
        "{:?}",
        candidate.warnings
    );
    let result = compare_groups(&reference, &candidate);
    let statuses: Vec<Status> = result.ranks.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        vec![Status::Match, Status::Inconclusive, Status::Inconclusive]
    );
    assert_eq!(result.status, Status::Inconclusive);
    assert_eq!(result.first_issue.unwrap().rank, Some(1));

    // Ranks that disagree on their labels are not a group.
    let odd = dir.path().join("odd");
    write_run(&odd, "job", 0, 2, &[("s0", point(1.0))], true);
    write_run(&odd, "job", 1, 2, &[("t0", point(1.0))], true);
    let err = RunGroup::load(&odd, None).unwrap_err().to_string();
    assert!(err.contains("'t0'") && err.contains("'s0'"), "{err}");
}

#[test]
fn nothing_compared_is_inconclusive_for_every_kind_of_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let o = CompareOptions::default();
    let empty_points = [("s0", vec![]), ("s1", vec![])];
    let a = single_rank_run(&dir.path().join("a"), "m", &empty_points, true);
    let b = single_rank_run(&dir.path().join("b"), "m", &empty_points, true);
    let nothing = |c: &tcgd_compare::Comparison| {
        let issue = c.first_issue.clone().expect("a reason");
        (
            c.status,
            c.ok,
            c.conclusive,
            c.counts.total,
            issue.scope,
            issue.description,
        )
    };
    let why = |what: &str| {
        format!(
            "nothing was compared: {what}; a match needs at least one observation compared \
             (were the probes or observe() calls reached?)"
        )
    };

    // Runs whose points hold no observation: before, `match` with 0 observations.
    let runs = compare_runs(&a, &b, &PointMapping::ByLabel, &o, &Silent).unwrap();
    assert_eq!(
        nothing(&runs),
        (
            Status::Inconclusive,
            false,
            false,
            0,
            "comparison",
            why("none of the 2 point pairs holds an observation on either side")
        )
    );
    // Each point pair still says what it is (both empty); the verdict is the whole's.
    assert!(runs.points.iter().all(|p| p.status == Status::Match));

    // Two empty points, as a point or snapshot comparison.
    let empty = set("p", vec![]);
    for kind in [ComparisonKind::Points, ComparisonKind::Snapshots] {
        let point = compare_sets(
            kind,
            (&empty, subject("point", "r")),
            (&empty, subject("point", "c")),
            &o,
            &Silent,
        )
        .unwrap();
        let what = if kind == ComparisonKind::Points {
            "neither point holds an observation"
        } else {
            "neither snapshot holds an observation"
        };
        assert_eq!(
            nothing(&point),
            (
                Status::Inconclusive,
                false,
                false,
                0,
                "comparison",
                why(what)
            )
        );
    }

    // A series of empty points, and a series over a run without points.
    let series = compare_point_series((&a.points[0], subject("point", "s0")), &b, &o, &Silent);
    assert_eq!(nothing(&series.unwrap()).0, Status::Inconclusive);
    let bare = single_rank_run(&dir.path().join("bare"), "m", &[], true);
    let over_nothing =
        compare_point_series((&a.points[0], subject("point", "s0")), &bare, &o, &Silent);
    assert_eq!(
        nothing(&over_nothing.unwrap()).5,
        why("the series run has no point")
    );

    // Runs without points.
    let bare2 = single_rank_run(&dir.path().join("bare2"), "m", &[], true);
    let no_points = compare_runs(&bare, &bare2, &PointMapping::ByIndex, &o, &Silent).unwrap();
    assert_eq!(nothing(&no_points).5, why("neither run has a point"));

    // Groups of such runs: every rank is inconclusive, and so is the group.
    let job = |root: &std::path::Path| {
        for rank in 0..2 {
            write_run(root, "job", rank, 2, &empty_points, true);
        }
        RunGroup::load(root, None).unwrap()
    };
    let groups = compare_groups(&job(&dir.path().join("g1")), &job(&dir.path().join("g2")));
    assert_eq!(groups.status, Status::Inconclusive);
    assert!(groups
        .ranks
        .iter()
        .all(|r| r.status == Status::Inconclusive));
    assert_eq!(groups.first_issue.unwrap().rank, Some(0));

    // One observation compared and equal is enough for a match.
    let one = single_rank_run(
        &dir.path().join("one"),
        "m",
        &[("s0", vec![one_f32("x", 1.0)]), ("s1", vec![])],
        true,
    );
    let one_again = single_rank_run(
        &dir.path().join("one_again"),
        "m",
        &[("s0", vec![one_f32("x", 1.0)]), ("s1", vec![])],
        true,
    );
    let matched = compare_runs(&one, &one_again, &PointMapping::ByLabel, &o, &Silent).unwrap();
    assert_eq!((matched.status, matched.counts.total), (Status::Match, 1));
    assert!(matched.first_issue.is_none());
}

#[test]
fn worst_issues_name_the_point_of_each_observation() {
    let dir = tempfile::tempdir().unwrap();
    let point = |v: f32| vec![one_f32("x", v)];
    let ra = single_rank_run(
        &dir.path().join("a"),
        "m",
        &[("s0", point(1.0)), ("s1", point(2.0)), ("s2", point(3.0))],
        true,
    );
    let rb = single_rank_run(
        &dir.path().join("b"),
        "m",
        &[("s0", point(1.0)), ("s1", point(2.5)), ("s2", point(5.0))],
        true,
    );
    let o = CompareOptions::default();
    let result = compare_runs(&ra, &rb, &PointMapping::ByLabel, &o, &Silent).unwrap();
    let worst: Vec<(Option<usize>, Status, String)> = result
        .worst_issues(Some(2))
        .into_iter()
        .map(|i| (i.point, i.status, i.description))
        .collect();
    assert_eq!(
        worst,
        vec![
            (
                Some(2),
                Status::Mismatch,
                "point 's2', x[0]: 1 of 1 element differs (100%); first at (0,): reference \
                 3, candidate 5; max abs error 2"
                    .to_owned()
            ),
            (
                Some(1),
                Status::Mismatch,
                "point 's1', x[0]: 1 of 1 element differs (100%); first at (0,): reference \
                 2, candidate 2.5; max abs error 0.5"
                    .to_owned()
            ),
        ]
    );
}
