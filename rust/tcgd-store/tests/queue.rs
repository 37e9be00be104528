//! The background commit queue: order, durability at flush, and what a failure does.

use tcgd_store::{
    CommitJob, CommitQueue, ObservationDescriptor, ObservationInput, PayloadKind, PointInput,
    RunHeader, RunKind, RunReader, RunWriter, Site, StoreError, Value,
};
use tcgd_tensor::DType;

fn header() -> RunHeader {
    RunHeader::new("runq", "queue", RunKind::Tensor, "eager")
}

/// Commits a point with one float32 observation holding `value`.
fn point_job(label: &str, value: f32) -> CommitJob {
    let label = label.to_owned();
    Box::new(move |writer: &mut RunWriter| {
        let bytes = value.to_le_bytes();
        let obs = ObservationInput::new(
            ObservationDescriptor {
                order: 0,
                name: "x".into(),
                invocation_index: 0,
                dtype: DType::Float32,
                shape: vec![1],
                stride: vec![1],
                source_device: "cpu".into(),
                payload: PayloadKind::Full,
            },
            Site::default(),
            Value::Bytes(&bytes),
        );
        let point = PointInput {
            label,
            metadata: "{}".into(),
            replay_index: None,
            timestamp_us: None,
        };
        writer.commit_point(&point, &[obs]).map(|_| ())
    })
}

fn labels(reader: &RunReader) -> Vec<String> {
    use arrow::array::AsArray;
    let points = reader.table(tcgd_store::Table::Points).unwrap();
    let column = points.column_by_name("label").unwrap().as_string::<i32>();
    column.iter().map(|l| l.unwrap().to_owned()).collect()
}

#[test]
fn points_commit_in_order_and_are_durable_after_flush() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut queue = CommitQueue::start(RunWriter::create(&dir, header(), "t").unwrap(), 2).unwrap();
    for i in 0..5 {
        let label = format!("p{i}");
        assert_eq!(queue.next_point_index(), i);
        assert_eq!(
            queue.submit(&label, point_job(&label, i as f32)).unwrap(),
            i
        );
    }
    assert!(queue.has_label("p4"));
    let duplicate = queue.submit("p1", point_job("p1", 0.0)).unwrap_err();
    assert!(
        matches!(duplicate, StoreError::InvalidInput { .. }),
        "{duplicate}"
    );
    queue.flush().unwrap();
    let reader = RunReader::open(&dir).unwrap();
    assert_eq!(labels(&reader), ["p0", "p1", "p2", "p3", "p4"]);
    assert!(!reader.manifest().complete);
    queue.close(true).unwrap();
    assert!(RunReader::open(&dir).unwrap().manifest().complete);
    assert!(matches!(
        queue.submit("late", point_job("late", 0.0)),
        Err(StoreError::RunFinished { .. })
    ));
}

#[test]
fn a_failed_commit_stops_the_queue_and_keeps_what_was_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut queue = CommitQueue::start(RunWriter::create(&dir, header(), "t").unwrap(), 2).unwrap();
    queue.submit("ok", point_job("ok", 1.0)).unwrap();
    queue
        .submit(
            "bad",
            Box::new(|_: &mut RunWriter| {
                Err(StoreError::InvalidInput {
                    field: "test".into(),
                    reason: "refused on purpose".into(),
                })
            }),
        )
        .unwrap();
    // Queued after the failure: dropped, since its index assumed "bad" committed.
    let _ = queue.submit("after", point_job("after", 2.0));
    let err = queue.flush().unwrap_err();
    match &err {
        StoreError::BackgroundCommit { label, reason, .. } => {
            assert_eq!(label, "bad");
            assert!(reason.contains("refused on purpose"), "{reason}");
        }
        other => panic!("{other}"),
    }
    assert!(matches!(
        queue.submit("more", point_job("more", 3.0)),
        Err(StoreError::BackgroundCommit { .. })
    ));
    assert!(queue.close(true).is_err());
    let reader = RunReader::open(&dir).unwrap();
    assert_eq!(labels(&reader), ["ok"]);
    assert!(
        !reader.manifest().complete,
        "a run with a lost point is not complete"
    );
}

#[test]
fn a_panicking_commit_is_an_error_not_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut queue = CommitQueue::start(RunWriter::create(&dir, header(), "t").unwrap(), 1).unwrap();
    queue
        .submit("boom", Box::new(|_: &mut RunWriter| panic!("test panic")))
        .unwrap();
    let err = queue.flush().unwrap_err();
    assert!(err.to_string().contains("panicked"), "{err}");
}

#[test]
fn dropping_the_queue_commits_what_it_holds_and_leaves_the_run_incomplete() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    {
        let mut queue =
            CommitQueue::start(RunWriter::create(&dir, header(), "t").unwrap(), 4).unwrap();
        for i in 0..3 {
            let label = format!("p{i}");
            queue.submit(&label, point_job(&label, i as f32)).unwrap();
        }
    }
    let reader = RunReader::open(&dir).unwrap();
    assert_eq!(labels(&reader), ["p0", "p1", "p2"]);
    assert!(!reader.manifest().complete);
}

#[test]
fn a_reserved_label_is_used_at_once_and_submitted_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut queue = CommitQueue::start(RunWriter::create(&dir, header(), "t").unwrap(), 2).unwrap();
    queue.submit("host", point_job("host", 0.0)).unwrap();
    // A device point takes its label when it ends, before it is handed over.
    queue.reserve("device").unwrap();
    assert!(queue.has_label("device"));
    let used = |e: StoreError| e.to_string().contains("already used");
    assert!(used(queue.reserve("device").unwrap_err()));
    assert!(used(queue.reserve("host").unwrap_err()));
    // The reserved point is accepted once; a second point of that label is refused.
    queue.submit("device", point_job("device", 1.0)).unwrap();
    assert!(used(
        queue
            .submit("device", point_job("device", 2.0))
            .unwrap_err()
    ));
    // A released reservation frees the label.
    queue.reserve("dropped").unwrap();
    queue.release("dropped");
    assert!(!queue.has_label("dropped"));
    queue.submit("dropped", point_job("dropped", 3.0)).unwrap();
    queue.close(true).unwrap();
    let reader = RunReader::open(&dir).unwrap();
    assert_eq!(labels(&reader), ["host", "device", "dropped"]);
}
