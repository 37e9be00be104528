//! `commit_tables`: the generic commit memory runs use. It must keep the tensor-run rules
//! (unique labels, JSON metadata, all-or-nothing visibility) and refuse tables that do
//! not belong to the run's kind or do not match their schema.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use tcgd_store::{PointInput, RunHeader, RunKind, RunReader, RunWriter, StoreError, Table};

fn header(kind: RunKind) -> RunHeader {
    RunHeader::new("runm", "m", kind, "live")
}

fn point(label: &str) -> PointInput {
    PointInput {
        label: label.into(),
        metadata: "{}".into(),
        replay_index: None,
        timestamp_us: Some(1_700_000_000_000_000),
    }
}

/// A `memory_frames` batch with `n` rows for point `index`.
fn frames(index: i64, n: usize) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec!["runm"; n])),
        Arc::new(Int64Array::from(vec![index; n])),
        Arc::new(Int64Array::from_iter_values(0..n as i64)),
        Arc::new(StringArray::from(vec!["model.py"; n])),
        Arc::new(Int64Array::from(vec![7; n])),
        Arc::new(StringArray::from(vec!["forward"; n])),
    ];
    // The FX node columns: null (frames of user code).
    let columns = columns
        .into_iter()
        .chain((0..4).map(|_| Arc::new(StringArray::from(vec![None::<&str>; n])) as ArrayRef))
        .collect();
    RecordBatch::try_new(Table::MemoryFrames.schema(), columns).unwrap()
}

#[test]
fn memory_points_commit_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run");
    let mut w = RunWriter::create(&path, header(RunKind::Memory), "test").unwrap();
    for table in Table::MEMORY {
        assert!(path.join(table.dir_name()).is_dir(), "{table:?}");
    }
    assert!(!path.join("observations").exists());
    assert_eq!(w.next_point_index(), 0);
    w.commit_tables(&point("a"), 3, vec![(Table::MemoryFrames, frames(0, 2))])
        .unwrap();
    // An empty batch writes no part.
    w.commit_tables(&point("b"), 0, vec![(Table::MemoryFrames, frames(1, 0))])
        .unwrap();
    let err = w.commit_tables(&point("a"), 0, vec![]).unwrap_err();
    assert!(err.to_string().contains("already used"), "{err}");
    w.close(true).unwrap();

    let r = RunReader::open(&path).unwrap();
    assert_eq!(r.manifest().point_count, 2);
    assert_eq!(r.table(Table::MemoryFrames).unwrap().num_rows(), 2);
    assert_eq!(r.table(Table::Points).unwrap().num_rows(), 2);
    assert_eq!(r.manifest().parts_of(Table::MemoryFrames).count(), 1);
    assert!(r.validate().unwrap().is_empty());
}

#[test]
fn tables_of_another_kind_or_schema_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = RunWriter::create(&dir.path().join("t"), header(RunKind::Tensor), "test").unwrap();
    let err = w
        .commit_tables(&point("a"), 0, vec![(Table::MemoryFrames, frames(0, 1))])
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput { .. }), "{err}");

    let mut m = RunWriter::create(&dir.path().join("m"), header(RunKind::Memory), "test").unwrap();
    let err = m
        .commit_tables(&point("a"), 0, vec![(Table::MemoryStacks, frames(0, 1))])
        .unwrap_err();
    assert!(err.to_string().contains("schema"), "{err}");
    let err = m
        .commit_tables(&point("a"), 0, vec![(Table::Points, frames(0, 1))])
        .unwrap_err();
    assert!(err.to_string().contains("points"), "{err}");
    // Nothing of the refused points became visible.
    assert_eq!(m.point_count(), 0);
}
