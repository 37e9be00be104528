use super::*;
use crate::stats::public_metric_name;

fn member(rank: i64, labels: &[&str], complete: bool) -> GroupMember {
    GroupMember {
        run: RankRun {
            rank,
            path: PathBuf::from(format!("/job/{rank}")),
            name: "job".into(),
            run_id: format!("run{rank}"),
            complete,
            world_size: Some(2),
            labels: labels.iter().map(|s| (*s).to_owned()).collect(),
        },
        group_id: None,
        provenance: serde_json::json!({"torch": "2.11"}),
        run_metadata: serde_json::Value::Null,
        states: Vec::new(),
    }
}

#[test]
fn extrema_keep_every_owning_rank_and_never_sum() {
    let e = MetricExtrema::of(&[(0, 5), (1, 9), (2, 5), (3, 9)]).unwrap();
    assert_eq!(
        (e.min_bytes, e.min_rank, e.min_ranks.clone()),
        (5, 0, vec![0, 2])
    );
    assert_eq!(
        (e.max_bytes, e.max_rank, e.max_ranks.clone()),
        (9, 1, vec![1, 3])
    );
    assert_eq!((e.spread_bytes, e.rank_count), (4, 4));
    let wide = MetricExtrema::of(&[(0, i64::MIN), (1, i64::MAX)]).unwrap();
    assert_eq!(wide.spread_bytes, i64::MAX);
    assert!(MetricExtrema::of(&[]).is_none());
}

#[test]
fn labels_prefix_rules() {
    let ok = MemoryRunGroup::build(
        None,
        vec![
            member(0, &["a", "b", "c"], true),
            member(1, &["a", "b"], false),
        ],
    )
    .unwrap();
    assert_eq!(ok.labels, ["a", "b", "c"]);
    assert!(!ok.complete);
    assert!(ok
        .warnings
        .iter()
        .any(|w| w.contains("rank 1 is incomplete")));
    let short = MemoryRunGroup::build(
        None,
        vec![
            member(0, &["a", "b", "c"], true),
            member(1, &["a", "b"], true),
        ],
    );
    assert!(short.unwrap_err().to_string().contains("finished with 2"));
    let order = MemoryRunGroup::build(
        None,
        vec![member(0, &["a", "b"], true), member(1, &["b", "a"], true)],
    );
    assert!(order.unwrap_err().to_string().contains("same order"));
    let twice = MemoryRunGroup::build(None, vec![member(0, &["a"], true), member(0, &["a"], true)]);
    assert!(twice.unwrap_err().to_string().contains("two runs"));
    let missing = MemoryRunGroup::build(None, vec![member(1, &["a"], true)]).unwrap();
    assert_eq!(missing.missing_ranks, [0]);
    let mut other = member(1, &["a"], true);
    other.provenance = serde_json::json!({"torch": "2.12"});
    let prov = MemoryRunGroup::build(None, vec![member(0, &["a"], true), other]).unwrap();
    assert!(prov.complete);
    assert!(prov
        .warnings
        .iter()
        .any(|w| w.contains("provenance 'torch' differs")));
}

#[test]
fn public_metric_names() {
    assert_eq!(public_metric_name("allocated"), "allocated_bytes");
    assert_eq!(public_metric_name("segment_count"), "segment_count");
    assert_eq!(public_metric_name("reserved"), "reserved_bytes");
    assert_eq!(public_metric_name("active_bytes"), "active_bytes");
}
