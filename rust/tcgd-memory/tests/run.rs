//! Memory runs through tcgd-store: what a point writes comes back, history is stored
//! once, a failed commit leaves the run and the history cursor as they were.

mod common;

use common::*;
use proptest::prelude::*;
use serde_json::Value;
use tcgd_memory::compare::{compare, CompareOptions};
use tcgd_memory::pickle::parse;
use tcgd_memory::run::{MemoryRunReader, MemoryRunWriter, PointMeta};
use tcgd_memory::state::SnapshotSource;
use tcgd_memory::{IngestOptions, JsonSnapshot, MemoryError};
use tcgd_store::{RunHeader, RunKind, Table};

fn header() -> RunHeader {
    RunHeader {
        run_id: "runmem".into(),
        name: "mem".into(),
        kind: RunKind::Memory,
        execution: "eager".into(),
        rank: Some(0),
        group_id: None,
        world_size: Some(1),
        provenance: serde_json::json!({}),
        run_metadata: serde_json::json!({}),
    }
}

fn record(
    w: &mut MemoryRunWriter,
    snap: &Value,
    label: &str,
    marker: &str,
    used: i64,
) -> Result<(), MemoryError> {
    let pending = w.ingest(
        &JsonSnapshot(snap),
        &snap,
        &IngestOptions {
            marker: Some(marker.into()),
            ..IngestOptions::default()
        },
    )?;
    w.commit(
        pending,
        PointMeta {
            label: label.into(),
            metadata: r#"{"step": 1}"#.into(),
            taken: SnapshotSource {
                source: "dict".into(),
                synchronized: true,
                ..SnapshotSource::default()
            },
            ..PointMeta::default()
        },
        vec![memory(0, used, Some(MIB))],
    )?;
    Ok(())
}

#[test]
fn points_round_trip_and_store_history_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run");
    let mut w = MemoryRunWriter::create(&path, header(), "test").unwrap();
    record(&mut w, &before_capture(), "before", "m0", 400 * MIB).unwrap();
    // Same label again: refused, and nothing of it is committed.
    let err = record(&mut w, &after_capture(), "before", "m1", 450 * MIB).unwrap_err();
    assert!(err.to_string().contains("already used"), "{err}");
    record(&mut w, &after_capture(), "after", "m1", 450 * MIB).unwrap();
    w.close(true).unwrap();

    let r = MemoryRunReader::open(&path).unwrap();
    let states = r.states();
    assert_eq!(states.len(), 2);
    assert_eq!(states[1].identity.label, "after");
    assert!(states[1].identity.boundary_recorded);
    assert_eq!(states[1].device_stats(0).reserved_bytes, 18 * MIB);
    assert_eq!(states[1].residual(0), Some(450 * MIB - 18 * MIB));
    assert_eq!(states[1].memory(0).probe_device_bytes, Some(MIB));
    // The second point holds only the three entries after the first marker, even though
    // the failed attempt in between read the same ring.
    let events = r.events(1).unwrap();
    let actions: Vec<&str> = events.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, vec!["segment_alloc", "alloc", "snapshot"]);
    assert_eq!(r.events(0).unwrap().len(), 3);
    // Frames are stored once per run.
    let frames = r.store().table(Table::MemoryFrames).unwrap();
    assert_eq!(frames.num_rows(), r.stacks().frames().len());
    assert!(frames.num_rows() <= 3);

    // A loaded point compares exactly like the live one.
    let c = compare(&states[0], &states[1], &CompareOptions::default()).unwrap();
    assert_eq!(c.lifecycle.as_str(), "exact");
    assert_eq!(c.devices[0].lifecycle.unwrap().new_segment_bytes, 16 * MIB);
    let stats = r.store().table(Table::MemoryStats).unwrap();
    assert_eq!(stats.num_rows(), 1 + 2);
}

#[test]
fn memory_tables_are_refused_in_tensor_runs_and_vice_versa() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = header();
    h.kind = RunKind::Tensor;
    let err = MemoryRunWriter::create(&dir.path().join("t"), h, "test")
        .err()
        .unwrap();
    assert!(err.to_string().contains("memory"), "{err}");
}

#[test]
fn real_pickle_round_trips_through_a_run() {
    let data = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data");
    let dir = tempfile::tempdir().unwrap();
    let mut w = MemoryRunWriter::create(&dir.path().join("run"), header(), "test").unwrap();
    for stage in ["before", "after"] {
        let snap = tcgd_memory::run::read_pickle_file(
            &data.join(format!("memory_default_{stage}.pickle")),
        )
        .unwrap();
        let pending = w
            .ingest(&snap, &snap.root(), &IngestOptions::default())
            .unwrap();
        w.commit(
            pending,
            PointMeta {
                label: stage.into(),
                taken: SnapshotSource {
                    source: "import".into(),
                    ..SnapshotSource::default()
                },
                ..PointMeta::default()
            },
            vec![],
        )
        .unwrap();
    }
    // Points commit on the writer thread; flush makes them durable before reading back.
    w.flush().unwrap();
    let r = MemoryRunReader::open(w.dir()).unwrap();
    let c = compare(&r.states()[0], &r.states()[1], &CompareOptions::default()).unwrap();
    let private: i64 = c.devices[0]
        .pools
        .iter()
        .filter(|p| p.kind.as_str() == "private")
        .map(|p| p.stats.candidate.active_bytes)
        .sum();
    assert!(private >= 16 * MIB, "{private}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The pickle reader never panics and never loops on arbitrary bytes.
    #[test]
    fn pickle_reader_survives_any_input(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse(&data);
    }

    /// Nor on real snapshots with bytes flipped or cut short.
    #[test]
    fn pickle_reader_survives_damaged_snapshots(at in 0usize..4000, byte in any::<u8>(), cut in 0usize..4000) {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/memory_default_after.pickle");
        let mut data = std::fs::read(path).unwrap();
        let at = at % data.len();
        data[at] = byte;
        data.truncate(cut.min(data.len()));
        if let Ok(tree) = parse(&data) {
            let snap = tcgd_memory::PickleSnapshot::new(tree);
            let mut stacks = tcgd_memory::StackTable::default();
            let _ = tcgd_memory::ingest(&snap, &snap.root(), &IngestOptions::default(), &tcgd_memory::HistoryCursor::new(), &mut stacks);
        }
    }
}
