//! `compact_root`: what it rewrites, and what it leaves alone.

use std::fs;
use std::path::{Path, PathBuf};

use tcgd_store::{
    compact_root, DeltaTable, ObservationDescriptor, ObservationInput, PayloadKind, PointInput,
    RunHeader, RunKind, RunReader, RunWriter, Site, Table, Value,
};
use tcgd_tensor::DType;

fn header(name: &str) -> RunHeader {
    // The run id is derived from the name, so a test can find the run's files.
    let run_id = blake3::hash(name.as_bytes()).to_hex()[..32].to_owned();
    RunHeader {
        rank: Some(0),
        world_size: Some(1),
        ..RunHeader::new(&run_id, name, RunKind::Tensor, "eager")
    }
}

fn observation(bytes: &[u8]) -> ObservationInput<'_> {
    ObservationInput::new(
        ObservationDescriptor {
            order: 0,
            name: "x".into(),
            invocation_index: 0,
            dtype: DType::Float32,
            shape: vec![(bytes.len() / 4) as i64],
            stride: vec![1],
            source_device: "cpu".into(),
            payload: PayloadKind::Full,
        },
        Site::default(),
        Value::Bytes(bytes),
    )
}

/// A finished run of `points` points, one commit each, kept as committed.
fn uncompacted_run(root: &Path, name: &str, points: u32) {
    let mut w = RunWriter::create(root, header(name), "test").unwrap();
    w.set_compact_on_close(false);
    for i in 0..points {
        let bytes: Vec<u8> = (0..8)
            .flat_map(|v| (v as f32 + i as f32).to_le_bytes())
            .collect();
        let point = PointInput {
            label: format!("p{i}"),
            metadata: "{}".into(),
            replay_index: None,
            timestamp_us: None,
        };
        w.commit_point(&point, &[observation(&bytes)]).unwrap();
        w.flush().unwrap();
    }
    w.close(true).unwrap();
}

/// Every table's log version and listed files.
fn state(root: &Path) -> Vec<(Table, u64, Vec<String>)> {
    Table::ALL
        .into_iter()
        .filter_map(|table| {
            let delta = DeltaTable::open(root, table).unwrap()?;
            let mut files: Vec<String> =
                delta.files().unwrap().into_iter().map(|f| f.path).collect();
            files.sort();
            Some((table, delta.version(), files))
        })
        .collect()
}

fn data_files(root: &Path, table: Table, run: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(root.join(table.dir_name()).join("rank=0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(&format!("part-{run}")))
        .collect();
    files.sort();
    files
}

#[test]
fn a_damaged_run_is_not_compacted_at_all_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("job");
    uncompacted_run(&root, "damaged", 3);
    uncompacted_run(&root, "intact", 3);
    let damaged_id = &header("damaged").run_id;
    // The observations of the damaged run's last point lose their last byte. Points come
    // before observations in the compaction's order of tables: they must stay as they are.
    let observations = data_files(&root, Table::Observations, damaged_id);
    assert_eq!(observations.len(), 3);
    let last = observations.last().unwrap();
    let size = fs::metadata(last).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(last)
        .unwrap()
        .set_len(size - 1)
        .unwrap();
    let points_before = data_files(&root, Table::Points, damaged_id);
    let before = state(&root);

    let report = compact_root(&root).unwrap();
    assert_eq!(report.runs_compacted, 1, "{report:?}");
    assert_eq!(report.runs_skipped.len(), 1, "{report:?}");
    // The damaged run's files and log entries are exactly as they were; the intact run
    // was compacted (one file per table).
    assert_eq!(data_files(&root, Table::Points, damaged_id), points_before);
    let after = state(&root);
    for ((table, _, files_before), (_, _, files_after)) in before.iter().zip(&after) {
        let of = |files: &[String], run: &str| -> Vec<String> {
            files.iter().filter(|f| f.contains(run)).cloned().collect()
        };
        assert_eq!(
            of(files_before, damaged_id),
            of(files_after, damaged_id),
            "{table:?}"
        );
    }
    let skipped = &report.runs_skipped[0];
    assert!(
        skipped.starts_with("run 'damaged' (rank 0): '"),
        "{skipped}"
    );
    assert!(
        skipped.contains(&last.file_name().unwrap().to_string_lossy().into_owned()),
        "{skipped}"
    );
    assert!(skipped.contains("truncated"), "{skipped}");

    let intact = RunReader::open_selected(
        &root,
        &tcgd_store::RunSelector {
            name: Some("intact".into()),
            ..Default::default()
        },
        tcgd_store::OnDamage::Raise,
    )
    .unwrap();
    assert_eq!(intact.manifest().point_count, 3);
    let intact_id = &header("intact").run_id;
    for table in [Table::Points, Table::Observations, Table::Payloads] {
        assert_eq!(data_files(&root, table, intact_id).len(), 1, "{table:?}");
    }
}

#[test]
fn compacting_an_intact_run_rewrites_every_table_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("job");
    uncompacted_run(&root, "run", 4);
    let report = compact_root(&root).unwrap();
    assert_eq!(
        (
            report.runs_compacted,
            report.files_before,
            report.files_after
        ),
        (1, 13, 4),
        "{report:?}"
    );
    assert!(report.runs_skipped.is_empty());
}
