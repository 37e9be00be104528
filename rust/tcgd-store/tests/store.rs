//! Round trips through the writer and reader, and every kind of bad input the reader must
//! refuse with a typed error naming the file.

use std::fs;
use std::path::Path;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{Float64Type, Int64Type};
use tcgd_store::{
    content_digest, ObservationInput, OnDamage, PayloadKind, PointInput, RunHeader, RunKind,
    RunReader, RunWriter, Site, StoreError, Table, Value, FORMAT_VERSION, MANIFEST_FILE,
};
use tcgd_tensor::DType;

fn header() -> RunHeader {
    RunHeader {
        run_id: "run-1".into(),
        name: "test".into(),
        kind: RunKind::Tensor,
        execution: "eager".into(),
        rank: Some(0),
        group_id: None,
        world_size: Some(1),
        provenance: serde_json::json!({"torch": "x"}),
        run_metadata: serde_json::json!({"k": 1}),
    }
}

fn point(label: &str) -> PointInput {
    PointInput {
        label: label.into(),
        metadata: r#"{"step": 1}"#.into(),
        replay_index: None,
        timestamp_us: Some(1_700_000_000_000_000),
    }
}

fn f32_obs<'a>(name: &str, inv: i64, order: i64, bytes: &'a [u8]) -> ObservationInput<'a> {
    let n = (bytes.len() / 4) as i64;
    ObservationInput {
        order,
        name: name.into(),
        invocation_index: inv,
        site: Site::default(),
        dtype: DType::Float32,
        shape: vec![n],
        stride: vec![1],
        source_device: "cpu".into(),
        payload: PayloadKind::Full,
        value: Value::Bytes(bytes),
    }
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn strings(batch: &RecordBatch, name: &str) -> Vec<String> {
    batch
        .column_by_name(name)
        .unwrap()
        .as_string::<i32>()
        .iter()
        .map(|s| s.unwrap_or("<null>").to_owned())
        .collect()
}

fn ints(batch: &RecordBatch, name: &str) -> Vec<i64> {
    batch
        .column_by_name(name)
        .unwrap()
        .as_primitive::<Int64Type>()
        .values()
        .to_vec()
}

fn write_two_points(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let a = f32_bytes(&[1.0, 2.0, f32::NAN, f32::INFINITY]);
    let b = f32_bytes(&[0.0, -3.0]);
    let mut w = RunWriter::create(dir, header(), "test").unwrap();
    let c0 = w
        .commit_point(
            &point("p0"),
            &[f32_obs("a", 0, 0, &a), f32_obs("a", 1, 1, &b)],
        )
        .unwrap();
    assert_eq!((c0.point_index, c0.observations), (0, 2));
    // Same bytes again: stored once per run.
    let c1 = w
        .commit_point(&point("p1"), &[f32_obs("a", 0, 0, &a)])
        .unwrap();
    assert_eq!(c1.payloads_deduplicated, 1);
    assert_eq!(c1.payload_chunks_written, 0);
    w.close(true).unwrap();
    (a, b)
}

#[test]
fn round_trip_points_observations_payloads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let (a, b) = write_two_points(&dir);

    let r = RunReader::open(&dir).unwrap();
    let m = r.manifest();
    assert!(m.complete);
    assert_eq!(m.point_count, 2);
    assert_eq!(m.format_version, FORMAT_VERSION);
    assert!(m.finished_at.is_some());

    let points = r.table(Table::Points).unwrap();
    assert_eq!(strings(&points, "label"), ["p0", "p1"]);
    assert_eq!(ints(&points, "observation_count"), [2, 1]);

    let obs = r.table(Table::Observations).unwrap();
    assert_eq!(strings(&obs, "point_label"), ["p0", "p0", "p1"]);
    assert_eq!(ints(&obs, "invocation_index"), [0, 1, 0]);
    assert_eq!(ints(&obs, "nan_count"), [1, 0, 1]);
    assert_eq!(ints(&obs, "posinf_count"), [1, 0, 1]);
    assert_eq!(ints(&obs, "zero_count"), [0, 1, 0]);
    assert_eq!(ints(&obs, "nbytes"), [16, 8, 16]);
    let mean = obs
        .column_by_name("mean")
        .unwrap()
        .as_primitive::<Float64Type>();
    assert_eq!(mean.value(0), 1.5);
    assert_eq!(mean.value(1), -1.5);
    let digests = strings(&obs, "digest");
    assert_eq!(digests[0], content_digest(&a));
    assert_eq!(digests[0], digests[2]);

    assert_eq!(r.payload(&content_digest(&a)).unwrap().as_slice(), a);
    assert_eq!(r.payload(&content_digest(&b)).unwrap().as_slice(), b);
    assert!(matches!(
        r.payload("blake3:00"),
        Err(StoreError::PayloadMissing { .. })
    ));
    assert_eq!(r.table(Table::Payloads).unwrap().num_rows(), 2);
    assert!(r.validate().unwrap().is_empty());

    let run = r.run_table().unwrap();
    assert_eq!(ints(&run, "point_count"), [2]);
    assert_eq!(strings(&run, "run_metadata"), [r#"{"k":1}"#]);
}

#[test]
fn large_payload_spans_chunks_and_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    // 40 MiB + 12 bytes: three chunks, the last one short.
    let bytes: Vec<u8> = (0..(40usize << 20) + 12)
        .map(|i| (i * 31 % 251) as u8)
        .collect();
    let mut w = RunWriter::create(&dir, header(), "test").unwrap();
    let obs = ObservationInput {
        dtype: DType::UInt8,
        shape: vec![bytes.len() as i64],
        ..f32_obs("big", 0, 0, &bytes)
    };
    let c = w.commit_point(&point("p0"), &[obs]).unwrap();
    assert_eq!(c.payload_chunks_written, 3);
    w.close(true).unwrap();
    let r = RunReader::open(&dir).unwrap();
    assert_eq!(
        r.payload(&content_digest(&bytes)).unwrap().as_slice(),
        bytes
    );
}

#[test]
fn summary_payload_stores_no_bytes_and_empty_tensors_work() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let a = f32_bytes(&[1.0, 2.0]);
    let mut w = RunWriter::create(&dir, header(), "test").unwrap();
    let summary_only = ObservationInput {
        payload: PayloadKind::Summary,
        ..f32_obs("s", 0, 0, &a)
    };
    let empty = ObservationInput {
        shape: vec![0, 3],
        stride: vec![3, 1],
        ..f32_obs("e", 0, 1, &[])
    };
    w.commit_point(&point("p0"), &[summary_only, empty])
        .unwrap();
    w.close(false).unwrap();
    let r = RunReader::open(&dir).unwrap();
    assert!(!r.manifest().complete);
    let obs = r.table(Table::Observations).unwrap();
    assert_eq!(strings(&obs, "payload"), ["summary", "full"]);
    assert_eq!(ints(&obs, "numel"), [2, 0]);
    // The summary-only value is digested (comparisons use it) but not stored.
    assert!(matches!(
        r.payload(&content_digest(&a)),
        Err(StoreError::PayloadMissing { .. })
    ));
    assert_eq!(
        r.payload(&content_digest(&[])).unwrap().as_slice(),
        &[] as &[u8]
    );
}

#[test]
fn bad_points_are_refused_and_leave_nothing_visible() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let a = f32_bytes(&[1.0]);
    let mut w = RunWriter::create(&dir, header(), "test").unwrap();
    w.commit_point(&point("p0"), &[f32_obs("a", 0, 0, &a)])
        .unwrap();
    let dup = w.commit_point(&point("p0"), &[]).unwrap_err();
    assert!(dup.to_string().contains("'p0' is already used"), "{dup}");
    let ragged = ObservationInput {
        shape: vec![2],
        ..f32_obs("a", 0, 0, &a)
    };
    let err = w.commit_point(&point("p1"), &[ragged]).unwrap_err();
    assert!(err.to_string().contains("needs 8 bytes, got 4"), "{err}");
    let twice = w
        .commit_point(
            &point("p1"),
            &[f32_obs("a", 0, 0, &a), f32_obs("a", 0, 1, &a)],
        )
        .unwrap_err();
    assert!(twice.to_string().contains("appears twice"), "{twice}");
    // The writer still works, and the failed attempts used no index.
    let c = w.commit_point(&point("p1"), &[]).unwrap();
    assert_eq!(c.point_index, 1);
    w.close(true).unwrap();
    let err = w.commit_point(&point("p2"), &[]).unwrap_err();
    assert!(matches!(err, StoreError::RunFinished { .. }));
    assert!(matches!(
        RunWriter::create(&dir, header(), "test"),
        Err(StoreError::RunExists { .. })
    ));
}

fn edit_manifest(dir: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join(MANIFEST_FILE);
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    f(&mut v);
    fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
}

fn open_err(dir: &Path) -> StoreError {
    match RunReader::open(dir) {
        Ok(_) => panic!("expected an error opening {}", dir.display()),
        Err(e) => e,
    }
}

#[test]
fn truncated_part_is_a_typed_error_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    write_two_points(&dir);
    let part = dir.join("observations/part-000002.parquet");
    let len = fs::metadata(&part).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&part)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let err = open_err(&dir);
    assert!(
        matches!(&err, StoreError::CorruptPart { path, .. } if path == &part),
        "{err}"
    );
    assert!(err.to_string().contains("part-000002.parquet"));
}

#[test]
fn damaged_bytes_of_the_same_length_are_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    write_two_points(&dir);
    let part = dir.join("payloads/part-000001.parquet");
    let mut bytes = fs::read(&part).unwrap();
    // Damage the middle of the file (column data), keeping the footer intact.
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid - 8..mid + 8] {
        *b ^= 0xA5;
    }
    fs::write(&part, &bytes).unwrap();
    let r = RunReader::open(&dir).unwrap();
    let issues = r.validate().unwrap();
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].path, part);
    assert!(issues[0].problem.contains("file digest"));
}

#[test]
fn newer_format_version_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    write_two_points(&dir);
    edit_manifest(&dir, |v| v["format_version"] = (FORMAT_VERSION + 1).into());
    let err = open_err(&dir);
    assert!(
        matches!(err, StoreError::NewerFormat { found, .. } if found == FORMAT_VERSION + 1),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade"));
}

#[test]
fn manifest_path_escaping_the_run_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    write_two_points(&dir);
    fs::write(tmp.path().join("outside.parquet"), b"x").unwrap();
    edit_manifest(&dir, |v| {
        v["parts"][0]["path"] = "points/../../outside.parquet".into();
    });
    let err = open_err(&dir);
    assert!(
        matches!(&err, StoreError::UnsafePath { part, .. } if part == "points/../../outside.parquet"),
        "{err}"
    );
}

#[test]
fn not_a_run_and_invalid_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(matches!(open_err(tmp.path()), StoreError::NotARun { .. }));
    fs::write(tmp.path().join(MANIFEST_FILE), b"{\"schema\": 3").unwrap();
    assert!(matches!(
        open_err(tmp.path()),
        StoreError::InvalidManifest { .. }
    ));
    fs::write(tmp.path().join(MANIFEST_FILE), b"{\"schema\": \"other\"}").unwrap();
    let err = open_err(tmp.path());
    assert!(
        err.to_string()
            .contains("expected \"torch-cudagraph-debug/run\""),
        "{err}"
    );
}

#[test]
fn unlisted_parts_are_invisible_to_the_reader() {
    // A crash between renaming a part and replacing the manifest leaves a part that the
    // manifest does not list; the run must load without it.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    write_two_points(&dir);
    fs::copy(
        dir.join("points/part-000002.parquet"),
        dir.join("points/part-000003.parquet"),
    )
    .unwrap();
    let r = RunReader::open(&dir).unwrap();
    assert_eq!(r.table(Table::Points).unwrap().num_rows(), 2);
}

#[test]
fn part_of_another_table_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    write_two_points(&dir);
    // Swap a points part for an observations part, with a manifest crafted to match it
    // (size and file digest): only the part's own metadata tells the tables apart.
    let obs = dir.join("observations/part-000002.parquet");
    let pts = dir.join("points/part-000002.parquet");
    fs::copy(&obs, &pts).unwrap();
    let size = fs::metadata(&pts).unwrap().len();
    let digest = content_digest(&fs::read(&pts).unwrap());
    edit_manifest(&dir, |v| {
        for p in v["parts"].as_array_mut().unwrap() {
            if p["path"] == "points/part-000002.parquet" {
                p["bytes"] = size.into();
                p["digest"] = digest.clone().into();
            }
        }
    });
    let r = RunReader::open(&dir).unwrap();
    let err = r.table(Table::Points).unwrap_err();
    assert!(
        err.to_string().contains("not a part of the points table"),
        "{err}"
    );
}

/// Pseudo-random bytes (xorshift): what zstd cannot shrink, like float tensor mantissas.
fn noise(len: usize, mut state: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

#[test]
fn payload_bytes_are_compressed_only_where_zstd_pays() {
    use parquet::basic::Compression;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    // 5 chunks of noise (two row groups: 4 + 1), then 4 chunks of a repeating pattern.
    let random = noise((5 * (16 << 20)) - 100, 7);
    let pattern: Vec<u8> = (0..(4 * (16 << 20))).map(|i| (i % 7) as u8).collect();
    let small = noise(1000, 3);
    let mut w = RunWriter::create(&dir, header(), "test").unwrap();
    let obs = |name: &str, order: i64, bytes: &'static [u8]| ObservationInput {
        dtype: DType::UInt8,
        shape: vec![bytes.len() as i64],
        ..f32_obs(name, 0, order, bytes)
    };
    let (random, pattern, small): (&'static [u8], &'static [u8], &'static [u8]) =
        (random.leak(), pattern.leak(), small.leak());
    let c = w
        .commit_point(
            &point("p0"),
            &[
                obs("random", 0, random),
                obs("pattern", 1, pattern),
                obs("small", 2, small),
            ],
        )
        .unwrap();
    assert_eq!(c.payload_chunks_written, 10);
    w.close(true).unwrap();

    let part = fs::read_dir(dir.join("payloads"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .unwrap();
    let file = SerializedFileReader::new(fs::File::open(&part).unwrap()).unwrap();
    let data_codecs: Vec<Compression> = file
        .metadata()
        .row_groups()
        .iter()
        .map(|rg| {
            let data = rg
                .columns()
                .iter()
                .find(|c| c.column_path().string() == "data")
                .unwrap();
            data.compression()
        })
        .collect();
    // Groups: [noise x4] [noise, pattern x3] [pattern, small noise].
    assert_eq!(data_codecs.len(), 3);
    assert_eq!(data_codecs[0], Compression::UNCOMPRESSED);
    assert!(
        matches!(data_codecs[1], Compression::ZSTD(_)),
        "{data_codecs:?}"
    );
    assert!(
        matches!(data_codecs[2], Compression::ZSTD(_)),
        "{data_codecs:?}"
    );

    let r = RunReader::open(&dir).unwrap();
    for bytes in [random, pattern, small] {
        assert_eq!(r.payload(&content_digest(bytes)).unwrap().as_slice(), bytes);
    }
    assert!(r.validate().unwrap().is_empty());
}

#[test]
fn writers_racing_for_one_directory_never_share_it() {
    let tmp = tempfile::tempdir().unwrap();
    for round in 0..20 {
        let dir = tmp.path().join(format!("r{round}"));
        let barrier = std::sync::Barrier::new(6);
        let outcomes: Vec<Result<String, StoreError>> = std::thread::scope(|s| {
            let racers: Vec<_> = (0..6)
                .map(|n| {
                    let (dir, barrier) = (&dir, &barrier);
                    s.spawn(move || {
                        let mut h = header();
                        h.run_id = format!("racer-{n}");
                        barrier.wait();
                        let mut w = RunWriter::create(dir, h.clone(), "test")?;
                        let bytes = f32_bytes(&[n as f32]);
                        w.commit_point(&point("only"), &[f32_obs("x", 0, 0, &bytes)])?;
                        w.close(true)?;
                        Ok(h.run_id)
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        let winners: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {outcomes:?}");
        for loser in outcomes.iter().filter_map(|o| o.as_ref().err()) {
            assert!(
                matches!(loser, StoreError::RunInUse { path, .. } | StoreError::RunExists { path }
                    if path == &dir),
                "{loser}"
            );
        }
        let r = RunReader::open(&dir).unwrap();
        assert_eq!(&r.manifest().header.run_id, winners[0]);
        assert_eq!(r.manifest().point_count, 1);
        assert!(r.validate().unwrap().is_empty());
    }
}

#[test]
fn overwrite_replaces_the_runs_files_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    write_two_points(&dir);
    fs::write(dir.join("notes.txt"), "mine").unwrap();
    assert!(matches!(
        RunWriter::create(&dir, header(), "test").err().unwrap(),
        StoreError::RunExists { .. }
    ));
    let mut h = header();
    h.run_id = "run-2".into();
    let mut w = RunWriter::create_with(&dir, h, "test", true).unwrap();
    w.close(true).unwrap();
    let r = RunReader::open(&dir).unwrap();
    assert_eq!(r.manifest().header.run_id, "run-2");
    assert_eq!(r.manifest().point_count, 0);
    let mut left: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "notes.txt",
            "observations",
            "payloads",
            "points",
            "run.json",
            "run.parquet"
        ]
    );
    assert_eq!(fs::read_dir(dir.join("points")).unwrap().count(), 0);

    // Foreign files among the parts: refused, nothing deleted.
    fs::write(dir.join("points/mine.csv"), "x").unwrap();
    let err = RunWriter::create_with(&dir, header(), "test", true)
        .err()
        .unwrap();
    assert!(
        matches!(&err, StoreError::NotReplaceable { .. }) && err.to_string().contains("mine.csv"),
        "{err}"
    );
    assert_eq!(
        RunReader::open(&dir).unwrap().manifest().header.run_id,
        "run-2"
    );
}

#[test]
fn a_missing_part_is_corrupt_and_skip_leaves_its_point_out() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    write_two_points(&dir);
    let gone = dir.join("observations/part-000002.parquet");
    fs::remove_file(&gone).unwrap();
    let err = open_err(&dir);
    assert!(
        matches!(&err, StoreError::CorruptPart { path, reason } if path == &gone
            && reason.contains("missing")),
        "{err}"
    );
    assert!(!err.to_string().contains("validate()"), "{err}");
    let r = RunReader::open_with(&dir, OnDamage::Skip).unwrap();
    assert_eq!(strings(&r.table(Table::Points).unwrap(), "label"), ["p0"]);
    assert_eq!(r.table(Table::Observations).unwrap().num_rows(), 2);
    let damage = r.damage();
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert_eq!(
        (
            &damage[0].path,
            damage[0].point_index,
            damage[0].label.as_deref()
        ),
        (&gone, Some(1), Some("p1"))
    );
    let issues = r.validate().unwrap();
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert!(issues[0].problem.contains("(point 1 'p1')"), "{issues:?}");
}

#[test]
fn whole_table_reads_check_the_committed_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    write_two_points(&dir);
    let part = dir.join("observations/part-000001.parquet");
    let mut bytes = fs::read(&part).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    fs::write(&part, &bytes).unwrap();
    // Same size: the open passes, but no row of the damaged part is ever returned.
    let r = RunReader::open(&dir).unwrap();
    let err = r.table(Table::Observations).unwrap_err();
    assert!(
        matches!(&err, StoreError::CorruptPart { path, .. } if path == &part),
        "{err}"
    );
}

#[test]
fn discard_removes_the_run_and_the_directories_made_for_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("job/run");
    let mut w = RunWriter::create(&dir, header(), "test").unwrap();
    let bytes = f32_bytes(&[1.0]);
    w.commit_point(&point("p0"), &[f32_obs("x", 0, 0, &bytes)])
        .unwrap();
    w.discard().unwrap();
    assert!(!tmp.path().join("job").exists());
    // A run in a directory that was already there: only the run goes.
    fs::create_dir(tmp.path().join("kept")).unwrap();
    let mut w = RunWriter::create(&tmp.path().join("kept"), header(), "test").unwrap();
    w.discard().unwrap();
    assert!(tmp.path().join("kept").is_dir());
    assert_eq!(fs::read_dir(tmp.path().join("kept")).unwrap().count(), 0);
}
