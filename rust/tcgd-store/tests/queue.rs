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
    let mut queue = CommitQueue::start(
        RunWriter::create(&dir, header(), "t").unwrap(),
        2,
        usize::MAX,
    )
    .unwrap();
    for i in 0..5 {
        let label = format!("p{i}");
        assert_eq!(queue.next_point_index(), i);
        assert_eq!(
            queue
                .submit(&label, 0, point_job(&label, i as f32))
                .unwrap(),
            i
        );
    }
    assert!(queue.has_label("p4"));
    let duplicate = queue.submit("p1", 0, point_job("p1", 0.0)).unwrap_err();
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
        queue.submit("late", 0, point_job("late", 0.0)),
        Err(StoreError::RunFinished { .. })
    ));
}

#[test]
fn a_failed_commit_stops_the_queue_and_keeps_what_was_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut queue = CommitQueue::start(
        RunWriter::create(&dir, header(), "t").unwrap(),
        2,
        usize::MAX,
    )
    .unwrap();
    queue.submit("ok", 0, point_job("ok", 1.0)).unwrap();
    queue
        .submit(
            "bad",
            0,
            Box::new(|_: &mut RunWriter| {
                Err(StoreError::InvalidInput {
                    field: "test".into(),
                    reason: "refused on purpose".into(),
                })
            }),
        )
        .unwrap();
    // Queued after the failure: dropped, since its index assumed "bad" committed.
    let _ = queue.submit("after", 0, point_job("after", 2.0));
    let err = queue.flush().unwrap_err();
    match &err {
        StoreError::BackgroundCommit { label, reason, .. } => {
            assert_eq!(label, "bad");
            assert!(reason.contains("refused on purpose"), "{reason}");
        }
        other => panic!("{other}"),
    }
    assert!(matches!(
        queue.submit("more", 0, point_job("more", 3.0)),
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
    let mut queue = CommitQueue::start(
        RunWriter::create(&dir, header(), "t").unwrap(),
        1,
        usize::MAX,
    )
    .unwrap();
    queue
        .submit(
            "boom",
            0,
            Box::new(|_: &mut RunWriter| panic!("test panic")),
        )
        .unwrap();
    let err = queue.flush().unwrap_err();
    assert!(err.to_string().contains("panicked"), "{err}");
}

#[test]
fn dropping_the_queue_commits_what_it_holds_and_leaves_the_run_incomplete() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    {
        let mut queue = CommitQueue::start(
            RunWriter::create(&dir, header(), "t").unwrap(),
            4,
            usize::MAX,
        )
        .unwrap();
        for i in 0..3 {
            let label = format!("p{i}");
            queue
                .submit(&label, 0, point_job(&label, i as f32))
                .unwrap();
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
    let mut queue = CommitQueue::start(
        RunWriter::create(&dir, header(), "t").unwrap(),
        2,
        usize::MAX,
    )
    .unwrap();
    queue.submit("host", 0, point_job("host", 0.0)).unwrap();
    // A device point takes its label when it ends, before it is handed over.
    queue.reserve("device").unwrap();
    assert!(queue.has_label("device"));
    let used = |e: StoreError| e.to_string().contains("already used");
    assert!(used(queue.reserve("device").unwrap_err()));
    assert!(used(queue.reserve("host").unwrap_err()));
    // The reserved point is accepted once; a second point of that label is refused.
    queue.submit("device", 0, point_job("device", 1.0)).unwrap();
    assert!(used(
        queue
            .submit("device", 0, point_job("device", 2.0))
            .unwrap_err()
    ));
    // A released reservation frees the label.
    queue.reserve("dropped").unwrap();
    queue.release("dropped");
    assert!(!queue.has_label("dropped"));
    queue
        .submit("dropped", 0, point_job("dropped", 3.0))
        .unwrap();
    queue.close(true).unwrap();
    let reader = RunReader::open(&dir).unwrap();
    assert_eq!(labels(&reader), ["host", "device", "dropped"]);
}

/// A point that first waits until `gate` opens, then commits as `point_job` does.
fn gated_job(label: &str, gate: std::sync::mpsc::Receiver<()>) -> CommitJob {
    let inner = point_job(label, 0.0);
    Box::new(move |writer: &mut RunWriter| {
        let _ = gate.recv();
        inner(writer)
    })
}

#[test]
fn points_that_hold_no_bytes_queue_deep_and_held_bytes_wait_for_room() {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let writer = RunWriter::create(&dir, header(), "t").unwrap();
    let queue = Arc::new(Mutex::new(CommitQueue::start(writer, 64, 100).unwrap()));
    let (open, gate) = std::sync::mpsc::channel();
    // The writer thread takes the first point and waits in it: the rest stay queued.
    queue
        .lock()
        .unwrap()
        .submit("gate", 0, gated_job("gate", gate))
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    for i in 0..40 {
        let label = format!("s{i}");
        queue
            .lock()
            .unwrap()
            .submit(&label, 0, point_job(&label, 1.0))
            .unwrap();
    }
    queue
        .lock()
        .unwrap()
        .submit("h0", 60, point_job("h0", 2.0))
        .unwrap();
    // 60 of 100 bytes are queued: 60 more would pass the budget, so this one waits.
    let waiting = {
        let queue = Arc::clone(&queue);
        std::thread::spawn(move || queue.lock().unwrap().submit("h1", 60, point_job("h1", 3.0)))
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !waiting.is_finished(),
        "a point past the byte budget did not wait"
    );
    open.send(()).unwrap();
    assert_eq!(waiting.join().unwrap().unwrap(), 42);
    let mut queue = Arc::try_unwrap(queue).ok().unwrap().into_inner().unwrap();
    queue.close(true).unwrap();
    let reader = RunReader::open(&dir).unwrap();
    assert_eq!(labels(&reader).len(), 43);
    assert_eq!(labels(&reader).last().unwrap(), "h1");
}
