//! The first-anomaly search over a run the store's writer wrote: it reads the run through
//! the store's mapping of the observation rows, so a column the writer renames or retypes
//! shows here.

mod common;

use common::*;
use tcgd_compare::{first_anomaly_in_run, AnomalyQuery, SiteLocation};
use tcgd_store::RunReader;

#[test]
fn a_written_run_answers_with_its_point_site_and_summary() {
    let dir = tempfile::tempdir().unwrap();
    let mut hidden = one_f32("b", f32::NAN);
    hidden.site = Some(SiteLocation {
        module_path: Some("fc2".into()),
        node_name: Some("addmm".into()),
        ..SiteLocation::default()
    });
    let points = [
        ("s0", vec![one_f32("a", 0.0), one_f32("b", 1.0)]),
        (
            "s1",
            vec![one_f32("a", -0.5), hidden, one_f32("c", f32::INFINITY)],
        ),
    ];
    write_run(dir.path(), "model", 0, 1, &points, true);
    let reader = RunReader::open(dir.path()).unwrap();

    let query = AnomalyQuery::parse("nonfinite", None, None).unwrap();
    let found = first_anomaly_in_run(&reader, &query).unwrap().unwrap();
    let first = found.first();
    assert_eq!((first.label.as_str(), first.name.as_str()), ("s1", "b"));
    assert_eq!(
        (first.point_index, first.replay_index, first.order),
        (1, Some(2), 1)
    );
    let site = first.site.as_ref().expect("the hit has a site");
    assert_eq!(site.module_path.as_deref(), Some("fc2"));
    assert_eq!(found.sites[1].site, None);
    assert_eq!((first.summary.numel, first.summary.nan_count), (1, 1));
    assert_eq!((first.summary.min, first.summary.max), (None, None));
    // Visited: both of s0, then a and b of s1; c hit at the same replay.
    assert_eq!(found.scanned, 4);
    let names: Vec<_> = found.sites.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["b", "c"]);
    assert_eq!(found.sites[1].summary.pos_inf_count, 1);

    // In JSON the hit's site and summary are keys of the hit itself.
    let json = serde_json::to_value(&found).unwrap();
    assert_eq!(json["sites"][0]["module_path"], "fc2");
    assert_eq!(json["sites"][0]["nan_count"], 1);
    assert_eq!(json["sites"][1]["pos_inf_count"], 1);

    // The site filter reads the same rows, and only what it keeps is scanned.
    let query = AnomalyQuery::parse("nan", None, Some("fc*")).unwrap();
    let found = first_anomaly_in_run(&reader, &query).unwrap().unwrap();
    assert_eq!((found.first().name.as_str(), found.scanned), ("b", 1));
}
