use super::*;

fn point(index: i64, label: &'static str, replay_index: Option<i64>) -> Point<'static> {
    Point {
        index,
        label,
        replay_index,
    }
}

fn obs(point_index: i64, order: i64, name: &'static str) -> Observation<'static> {
    Observation {
        point_index,
        order,
        name,
        summary: TensorSummary {
            min: Some(-1.0),
            max: Some(1.0),
            ..TensorSummary::default()
        },
        ..Observation::default()
    }
}

fn query(kind: &str, threshold: Option<f64>, site: Option<&str>) -> AnomalyQuery {
    AnomalyQuery::parse(kind, threshold, site).unwrap()
}

fn names(found: &FirstAnomaly) -> Vec<(i64, &str)> {
    found
        .sites
        .iter()
        .map(|h| (h.point_index, h.name.as_str()))
        .collect()
}

#[test]
fn each_rule_decides_from_counts_and_finite_extremes() {
    let nan = AnomalyRule::parse("nan", None).unwrap();
    let inf = AnomalyRule::parse("inf", None).unwrap();
    let nonfinite = AnomalyRule::parse("nonfinite", None).unwrap();
    let big = AnomalyRule::parse("abs_max", Some(10.0)).unwrap();
    let (a, b) = (Some(-3.0), Some(4.0));
    let v = |nan_count, pos_inf_count, neg_inf_count, min, max| TensorSummary {
        nan_count,
        pos_inf_count,
        neg_inf_count,
        min,
        max,
        ..TensorSummary::default()
    };
    assert!(nan.hits(&v(1, 0, 0, a, b)) && !nan.hits(&v(0, 1, 1, a, b)));
    assert!(
        inf.hits(&v(0, 1, 0, a, b)) && inf.hits(&v(0, 0, 1, a, b)) && !inf.hits(&v(5, 0, 0, a, b))
    );
    assert!(nonfinite.hits(&v(1, 0, 0, a, b)) && nonfinite.hits(&v(0, 0, 2, a, b)));
    assert!(!nonfinite.hits(&v(0, 0, 0, a, b)));
    // The magnitude of either extreme counts, strictly over the threshold.
    assert!(big.hits(&v(0, 0, 0, Some(-10.5), Some(1.0))));
    assert!(big.hits(&v(0, 0, 0, Some(0.0), Some(11.0))));
    assert!(!big.hits(&v(0, 0, 0, Some(-10.0), Some(10.0))));
    // An infinity is over any threshold; a NaN alone is not a magnitude.
    assert!(big.hits(&v(0, 1, 0, None, None)) && big.hits(&v(0, 0, 1, a, b)));
    assert!(!big.hits(&v(3, 0, 0, None, None)));
    assert_eq!(big.threshold(), Some(10.0));
    assert_eq!(big.kind(), "abs_max");
}

#[test]
fn bad_kinds_and_thresholds_name_what_is_allowed() {
    let message = |kind: &str, t: Option<f64>| AnomalyRule::parse(kind, t).unwrap_err().to_string();
    let text = message("nans", None);
    assert!(
        text.contains("nan, inf, nonfinite, abs_max") && text.contains("'nans'"),
        "{text}"
    );
    assert!(message("abs_max", None).contains("needs a threshold"));
    assert!(message("abs_max", Some(f64::NAN)).contains("finite number"));
    assert!(message("abs_max", Some(-1.0)).contains("at least 0"));
    assert!(message("nan", Some(1.0)).contains("'abs_max' only"));
    assert!(AnomalyRule::parse("abs_max", Some(0.0)).is_ok());
    let bad_glob = AnomalyQuery::parse("nan", None, Some("a[")).unwrap_err();
    assert!(
        bad_glob.to_string().contains("bad site glob 'a['"),
        "{bad_glob}"
    );
    assert!(AnomalyQuery::parse("nan", None, Some("")).is_err());
}

#[test]
fn first_hit_follows_replay_then_point_then_order() {
    // Points are listed out of replay order: point 0 read replay 7, point 1 replay 2.
    let points = [point(0, "late", Some(7)), point(1, "early", Some(2))];
    let mut rows = vec![
        obs(0, 0, "a"),
        obs(0, 1, "b"),
        obs(1, 0, "a"),
        obs(1, 1, "b"),
    ];
    rows[0].summary.nan_count = 1; // replay 7
    rows[3].summary.pos_inf_count = 2; // replay 2, order 1
    let found = first_anomaly(&points, &rows, &query("nonfinite", None, None)).unwrap();
    let first = found.first();
    assert_eq!((first.point_index, first.label.as_str()), (1, "early"));
    assert_eq!(
        (first.replay_index, first.order, first.name.as_str()),
        (Some(2), 1, "b")
    );
    assert_eq!(
        (
            first.summary.nan_count,
            first.summary.pos_inf_count,
            first.summary.neg_inf_count
        ),
        (0, 2, 0)
    );
    // Visited at replay 2: 'a' then 'b'.
    assert_eq!(found.scanned, 2);
    assert_eq!(names(&found), vec![(1, "b")]);
}

#[test]
fn points_without_replay_order_by_point_index_and_rows_by_ordinal() {
    let points = [
        point(0, "p0", None),
        point(1, "p1", None),
        point(2, "p2", None),
    ];
    // Rows in storage order differ from execution order.
    let mut rows = vec![
        obs(2, 0, "x"),
        obs(1, 2, "late"),
        obs(1, 0, "first"),
        obs(1, 1, "mid"),
    ];
    rows[0].summary.nan_count = 1;
    rows[1].summary.nan_count = 3;
    rows[3].summary.neg_inf_count = 1;
    let found = first_anomaly(&points, &rows, &query("nonfinite", None, None)).unwrap();
    assert_eq!(found.first().name, "mid");
    assert_eq!(found.first().label, "p1");
    assert_eq!(found.first().replay_index, None);
    // Every hit of that point, in order; the later point's hit is not listed.
    assert_eq!(names(&found), vec![(1, "mid"), (1, "late")]);
    assert_eq!(found.scanned, 2);
    // NaN only: 'mid' holds an infinity, so 'late' is the first.
    let found = first_anomaly(&points, &rows, &query("nan", None, None)).unwrap();
    assert_eq!(names(&found), vec![(1, "late")]);
    assert_eq!(found.scanned, 3);
}

#[test]
fn hits_of_the_same_replay_span_the_points_that_read_it() {
    let points = [
        point(0, "a", Some(1)),
        point(1, "b", Some(1)),
        point(2, "c", Some(2)),
    ];
    let mut rows = vec![obs(1, 0, "y"), obs(0, 0, "x"), obs(2, 0, "z")];
    for r in &mut rows {
        r.summary.max = Some(100.0);
    }
    let found = first_anomaly(&points, &rows, &query("abs_max", Some(50.0), None)).unwrap();
    assert_eq!(names(&found), vec![(0, "x"), (1, "y")]);
    assert_eq!(found.threshold, Some(50.0));
    assert_eq!(found.first().summary.abs_max(), Some(100.0));
}

#[test]
fn site_filter_matches_names_module_paths_and_node_names() {
    let points = [point(0, "p0", None), point(1, "p1", None)];
    let mut rows = vec![
        obs(0, 0, "inference/addmm"),
        obs(1, 0, "inference/addmm_1"),
        obs(1, 1, "out"),
    ];
    rows[0].site.module_path = Some("layers.0");
    rows[1].site.module_path = Some("layers.1");
    rows[1].site.node_name = Some("addmm_1");
    for r in &mut rows {
        r.summary.nan_count = 1;
    }
    let first = |site: Option<&str>| {
        first_anomaly(&points, &rows, &query("nan", None, site))
            .map(|f| (f.first().name.clone(), f.scanned, f.site_filter.clone()))
    };
    assert_eq!(first(None).unwrap().0, "inference/addmm");
    // Exact module path, glob over names, node name.
    let hit = first(Some("layers.1")).unwrap();
    assert_eq!(
        hit,
        ("inference/addmm_1".into(), 1, Some("layers.1".into()))
    );
    assert_eq!(first(Some("inference/*_1")).unwrap().0, "inference/addmm_1");
    assert_eq!(first(Some("addmm_1")).unwrap().0, "inference/addmm_1");
    assert_eq!(first(Some("o?t")).unwrap().0, "out");
    assert_eq!(first(Some("layers.2")), None);
    // A pattern without metacharacters is exact, not a prefix.
    assert_eq!(first(Some("layers")), None);
}

#[test]
fn no_hit_and_rows_of_unknown_points_give_none() {
    let points = [point(0, "p0", None)];
    let mut rows = vec![obs(0, 0, "x"), obs(5, 0, "orphan")];
    rows[1].summary.nan_count = 1;
    assert!(first_anomaly(&points, &rows, &query("nonfinite", None, None)).is_none());
    assert!(first_anomaly(&points, &[], &query("nan", None, None)).is_none());
    // All-NaN values have no finite extremes: only an infinity passes a threshold.
    rows[0].summary.min = None;
    rows[0].summary.max = None;
    rows[0].summary.nan_count = 4;
    assert!(first_anomaly(&points, &rows, &query("abs_max", Some(0.0), None)).is_none());
}
