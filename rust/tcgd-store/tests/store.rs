//! Round trips through the writer and reader, and every kind of bad input the reader must
//! refuse with a typed error naming the file.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{Float64Type, Int64Type};
use tcgd_store::{
    content_digest, CommitPolicy, ObservationDescriptor, ObservationInput, OnDamage, PayloadKind,
    PointInput, RunHeader, RunKind, RunReader, RunSelector, RunWriter, Site, SiteFacts, StoreError,
    Table, Value, FORMAT_VERSION,
};
use tcgd_tensor::{DType, TensorSummary};

fn header() -> RunHeader {
    RunHeader {
        rank: Some(0),
        world_size: Some(1),
        provenance: serde_json::json!({"torch": "x"}),
        run_metadata: serde_json::json!({"k": 1}),
        ..RunHeader::new("run1", "test", RunKind::Tensor, "eager")
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
    ObservationInput::new(
        ObservationDescriptor {
            order,
            name: name.into(),
            invocation_index: inv,
            dtype: DType::Float32,
            shape: vec![n],
            stride: vec![1],
            source_device: "cpu".into(),
            payload: PayloadKind::Full,
        },
        Site::default(),
        Value::Bytes(bytes),
    )
}

/// A run of the two points of `write_two_points` in a temporary directory, which lasts as
/// long as the returned guard.
fn two_point_run() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    write_two_points(&dir);
    (tmp, dir)
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> &'a ArrayRef {
    batch.column_by_name(name).unwrap()
}

fn strings(batch: &RecordBatch, name: &str) -> Vec<String> {
    column(batch, name)
        .as_string::<i32>()
        .iter()
        .map(|s| s.unwrap_or("<null>").to_owned())
        .collect()
}

fn ints(batch: &RecordBatch, name: &str) -> Vec<i64> {
    column(batch, name)
        .as_primitive::<Int64Type>()
        .values()
        .to_vec()
}

fn write_two_points(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let a = f32_bytes(&[1.0, 2.0, f32::NAN, f32::INFINITY]);
    let b = f32_bytes(&[0.0, -3.0]);
    let mut w = RunWriter::create(dir, header(), "test").unwrap();
    // One group per point, kept as committed: the tests below damage one point's files.
    w.set_compact_on_close(false);
    let c0 = w
        .commit_point(
            &point("p0"),
            &[f32_obs("a", 0, 0, &a), f32_obs("a", 1, 1, &b)],
        )
        .unwrap();
    assert_eq!((c0.point_index, c0.observations), (0, 2));
    w.flush().unwrap();
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
fn tensor_points_are_the_rows_as_typed_points() {
    let (_tmp, dir) = two_point_run();
    let r = RunReader::open(&dir).unwrap();
    let points = r.tensor_points().unwrap();
    let labels: Vec<&str> = points.iter().map(|p| p.label.as_str()).collect();
    assert_eq!(labels, ["p0", "p1"]);
    let p0 = &points[0];
    assert_eq!((p0.index, p0.replay_index), (0, None));
    assert_eq!(p0.timestamp_micros, 1_700_000_000_000_000);
    assert_eq!(p0.metadata, r#"{"step": 1}"#);
    let keys: Vec<(&str, i64)> = p0.observations.iter().map(|o| o.key()).collect();
    assert_eq!(keys, [("a", 0), ("a", 1)]);
    let a = &p0.observations[0];
    assert_eq!(a.descriptor.shape, [4]);
    assert_eq!(a.nbytes(), Some(16));
    assert!(a.has_payload());
    assert_eq!(a.site, None);
    let summary = a.summary.unwrap();
    assert_eq!(
        (
            summary.numel,
            summary.finite_count,
            summary.nan_count,
            summary.pos_inf_count
        ),
        (4, 2, 1, 1)
    );
    assert_eq!(summary.mean, Some(1.5));
    assert_eq!(points[1].observations.len(), 1);
    // Every run kind has its point rows; these carry no observations.
    assert!(r
        .points()
        .unwrap()
        .iter()
        .all(|p| p.observations.is_empty()));
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
    let mut obs = f32_obs("big", 0, 0, &bytes);
    Arc::make_mut(&mut obs.facts).dtype = DType::UInt8;
    Arc::make_mut(&mut obs.facts).shape = vec![bytes.len() as i64];
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
    let mut summary_only = f32_obs("s", 0, 0, &a);
    summary_only.payload = PayloadKind::Summary;
    let mut empty = f32_obs("e", 0, 1, &[]);
    Arc::make_mut(&mut empty.facts).shape = vec![0, 3];
    Arc::make_mut(&mut empty.facts).stride = vec![3, 1];
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
    let mut ragged = f32_obs("a", 0, 0, &a);
    Arc::make_mut(&mut ragged.facts).shape = vec![2];
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

/// The data files of `table` on disk, in point order (`rank=0`: the test runs have rank 0).
fn files(root: &Path, table: &str) -> Vec<PathBuf> {
    let dir = root.join(table).join("rank=0");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "parquet"));
    files.sort();
    files
}

/// The data file of `table` holding point `point` (a point per file in these tests).
fn part_of(root: &Path, table: &str, point: u64) -> PathBuf {
    let tag = format!("-{point:06}-{point:06}-");
    files(root, table)
        .into_iter()
        .find(|p| p.file_name().unwrap().to_string_lossy().contains(&tag))
        .unwrap_or_else(|| panic!("no {table} file of point {point}"))
}

/// Damages `count` bytes in the middle of a committed part (column data) by XORing
/// `mask` into them, keeping the file's size and footer intact.
fn damage_middle(part: &Path, count: usize, mask: u8) {
    let mut bytes = fs::read(part).unwrap();
    let start = bytes.len() / 2 - count / 2;
    for b in &mut bytes[start..start + count] {
        *b ^= mask;
    }
    fs::write(part, &bytes).unwrap();
}

fn open_err(dir: &Path) -> StoreError {
    match RunReader::open(dir) {
        Ok(_) => panic!("expected an error opening {}", dir.display()),
        Err(e) => e,
    }
}

#[test]
fn truncated_part_is_a_typed_error_naming_the_file() {
    let (_tmp, dir) = two_point_run();
    let part = part_of(&dir, "observations", 1);
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
    assert!(err
        .to_string()
        .contains(&*part.file_name().unwrap().to_string_lossy()));
}

#[test]
fn damaged_bytes_of_the_same_length_are_caught() {
    let (_tmp, dir) = two_point_run();
    let part = part_of(&dir, "payloads", 0);
    damage_middle(&part, 16, 0xA5);
    let r = RunReader::open(&dir).unwrap();
    let issues = r.validate().unwrap();
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].path, part);
    assert!(issues[0].problem.contains("file digest"));
}

/// Rewrites the configuration of a table's first commit.
fn edit_table_property(root: &Path, table: &str, key: &str, value: &str) {
    let log = root
        .join(table)
        .join("_delta_log/00000000000000000000.json");
    let text = fs::read_to_string(&log).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(conf) = v.pointer_mut("/metaData/configuration") {
                conf[key] = value.into();
            }
            v.to_string()
        })
        .collect();
    fs::write(&log, lines.join("\n") + "\n").unwrap();
}

#[test]
fn newer_format_version_is_refused() {
    let (_tmp, dir) = two_point_run();
    let newer = (FORMAT_VERSION + 1).to_string();
    edit_table_property(&dir, "runs", "tcgd.format_version", &newer);
    let err = open_err(&dir);
    assert!(
        matches!(err, StoreError::NewerFormat { found, .. } if found == FORMAT_VERSION + 1),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade"));
}

#[test]
fn a_logged_path_escaping_the_table_is_refused() {
    let (tmp, dir) = two_point_run();
    fs::write(tmp.path().join("outside.parquet"), b"x").unwrap();
    let log = dir.join("points/_delta_log/00000000000000000001.json");
    let text = fs::read_to_string(&log).unwrap();
    let start = text.find("\"path\":\"").unwrap() + 8;
    let end = start + text[start..].find('"').unwrap();
    let crafted = format!("{}../../outside.parquet{}", &text[..start], &text[end..]);
    fs::write(&log, crafted).unwrap();
    let err = open_err(&dir);
    assert!(
        matches!(&err, StoreError::UnsafePath { part, .. } if part.contains("outside.parquet")),
        "{err}"
    );
}

#[test]
fn not_a_job_root_and_version_one_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let err = open_err(tmp.path());
    assert!(
        matches!(err, StoreError::NotARun { missing: false, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("it has no runs table"), "{err}");
    let err = open_err(&tmp.path().join("typo"));
    assert!(
        matches!(err, StoreError::NotARun { missing: true, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("it does not exist"), "{err}");
    fs::write(
        tmp.path().join("run.json"),
        b"{\"schema\": \"torch-cudagraph-debug/run\"}",
    )
    .unwrap();
    let err = open_err(tmp.path());
    assert!(matches!(err, StoreError::VersionOneRun { .. }), "{err}");
    assert!(err.to_string().contains("version 1"), "{err}");
    // Nothing is written next to a version 1 run either.
    assert!(matches!(
        RunWriter::create(tmp.path(), header(), "test")
            .err()
            .unwrap(),
        StoreError::VersionOneRun { .. }
    ));
}

#[test]
fn files_outside_the_log_are_invisible_to_the_reader() {
    // A crash between moving a file into its table and committing it leaves a file that
    // the log does not list; the run must load without it.
    let (_tmp, dir) = two_point_run();
    let copy = part_of(&dir, "points", 1)
        .with_file_name("part-run1-000002-000002-0000000000000000.parquet");
    fs::copy(part_of(&dir, "points", 1), &copy).unwrap();
    let r = RunReader::open(&dir).unwrap();
    assert_eq!(r.table(Table::Points).unwrap().num_rows(), 2);
    assert_eq!(r.manifest().point_count, 2);
}

#[test]
fn runs_share_a_root_and_are_chosen_by_name_and_rank() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    for (name, rank) in [("eager", 0), ("eager", 1), ("compiled", 0)] {
        let mut h = header();
        h.run_id = format!("{name}{rank}");
        h.name = name.into();
        h.rank = Some(rank);
        let mut w = RunWriter::create(root, h, "test").unwrap();
        let bytes = f32_bytes(&[rank as f32]);
        w.commit_point(&point("p0"), &[f32_obs("x", 0, 0, &bytes)])
            .unwrap();
        w.close(true).unwrap();
    }
    let pick = |name: Option<&str>, rank: Option<i64>| {
        RunReader::open_selected(
            root,
            &RunSelector {
                name: name.map(str::to_owned),
                rank,
                kind: None,
            },
            OnDamage::Raise,
        )
    };
    let r = pick(Some("eager"), Some(1)).unwrap();
    assert_eq!(r.manifest().header.run_id, "eager1");
    assert_eq!(r.table(Table::Observations).unwrap().num_rows(), 1);
    assert_eq!(
        pick(Some("compiled"), None)
            .unwrap()
            .manifest()
            .header
            .run_id,
        "compiled0"
    );
    let err = pick(Some("eager"), None).err().unwrap();
    assert!(err.to_string().contains("2 runs match"), "{err}");
    let err = pick(Some("nope"), None).err().unwrap();
    assert!(err.to_string().contains("'compiled' (rank 0"), "{err}");
    // Rank is the partition: every table has rank=0/ and rank=1/ directories.
    assert!(root.join("observations/rank=1").is_dir());
    assert!(root.join("runs/rank=0").is_dir());
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
    let obs = |name: &str, order: i64, bytes: &'static [u8]| {
        let mut obs = f32_obs(name, 0, order, bytes);
        Arc::make_mut(&mut obs.facts).dtype = DType::UInt8;
        Arc::make_mut(&mut obs.facts).shape = vec![bytes.len() as i64];
        obs
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

    let part = files(&dir, "payloads").remove(0);
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
                        h.run_id = format!("racer{n}");
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
            let named = tcgd_store::run_path(&dir, "test", 0);
            assert!(
                matches!(loser, StoreError::RunInUse { path, .. } | StoreError::RunExists { path }
                    if path == &named),
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
fn overwrite_replaces_the_runs_rows_only() {
    let (_tmp, dir) = two_point_run();
    let mut other = header();
    other.run_id = "other".into();
    other.name = "other".into();
    let mut w = RunWriter::create(&dir, other, "test").unwrap();
    let bytes = f32_bytes(&[7.0]);
    w.commit_point(&point("o"), &[f32_obs("x", 0, 0, &bytes)])
        .unwrap();
    w.close(true).unwrap();
    fs::write(dir.join("notes.txt"), "mine").unwrap();
    assert!(matches!(
        RunWriter::create(&dir, header(), "test").err().unwrap(),
        StoreError::RunExists { .. }
    ));
    let mut h = header();
    h.run_id = "run2".into();
    let mut w = RunWriter::create_with(&dir, h, "test", true).unwrap();
    w.close(true).unwrap();
    let pick = |name: &str| {
        let selector = RunSelector {
            name: Some(name.into()),
            ..RunSelector::default()
        };
        RunReader::open_selected(&dir, &selector, OnDamage::Raise).unwrap()
    };
    let r = pick("test");
    assert_eq!(r.manifest().header.run_id, "run2");
    assert_eq!(r.manifest().point_count, 0);
    // The replaced run's files are gone from disk too; the other run and the user's file
    // are untouched.
    for table in ["points", "observations", "payloads"] {
        let names: Vec<String> = files(&dir, table)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().all(|n| n.starts_with("part-other-")),
            "{table}: {names:?}"
        );
    }
    assert_eq!(pick("other").table(Table::Points).unwrap().num_rows(), 1);
    assert_eq!(fs::read_to_string(dir.join("notes.txt")).unwrap(), "mine");
}

#[test]
fn a_missing_part_is_corrupt_and_skip_leaves_its_point_out() {
    let (_tmp, dir) = two_point_run();
    let gone = part_of(&dir, "observations", 1);
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
    let (_tmp, dir) = two_point_run();
    let part = part_of(&dir, "observations", 0);
    damage_middle(&part, 1, 0x01);
    // Same size: the size check passes, but the open reads the row tables and checks
    // their digests, so no row of the damaged part is ever returned.
    let err = open_err(&dir);
    assert!(
        matches!(&err, StoreError::CorruptPart { path, .. } if path == &part),
        "{err}"
    );
}

#[test]
fn discard_removes_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("job");
    let mut w = RunWriter::create(&dir, header(), "test").unwrap();
    let bytes = f32_bytes(&[1.0]);
    w.commit_point(&point("p0"), &[f32_obs("x", 0, 0, &bytes)])
        .unwrap();
    w.flush().unwrap();
    w.discard().unwrap();
    let err = open_err(&dir);
    assert!(err.to_string().contains("holds no runs"), "{err}");
    for table in ["runs", "points", "observations", "payloads"] {
        assert!(files(&dir, table).is_empty(), "{table}");
    }
    // The name is free again.
    let mut w = RunWriter::create(&dir, header(), "test").unwrap();
    w.close(true).unwrap();
}

#[test]
fn a_log_past_its_checkpoint_version_keeps_committing_and_loading() {
    // Every 100th version writes a checkpoint; a run that commits more often than that
    // must neither stall there nor lose what the checkpoint summarises.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let (done, wait) = std::sync::mpsc::channel();
    let writer_dir = dir.clone();
    std::thread::spawn(move || {
        let mut w = RunWriter::create(&writer_dir, header(), "test").unwrap();
        w.set_compact_on_close(false);
        for i in 0..130 {
            let bytes = f32_bytes(&[i as f32]);
            w.commit_point(&point(&format!("p{i}")), &[f32_obs("x", 0, 0, &bytes)])
                .unwrap();
            w.flush().unwrap();
        }
        w.close(true).unwrap();
        done.send(()).unwrap();
    });
    wait.recv_timeout(std::time::Duration::from_secs(120))
        .expect("the writer stalled");
    assert!(dir
        .join("points/_delta_log/00000000000000000100.checkpoint.parquet")
        .is_file());
    let r = RunReader::open(&dir).unwrap();
    assert_eq!(r.manifest().point_count, 130);
    assert_eq!(r.table(Table::Points).unwrap().num_rows(), 130);
}

/// The `add` actions' statistics of a table's log, as JSON.
fn logged_stats(table_dir: &Path) -> Vec<serde_json::Value> {
    let mut stats = Vec::new();
    for entry in fs::read_dir(table_dir.join("_delta_log")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        for line in fs::read_to_string(&path).unwrap().lines() {
            let action: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(text) = action["add"]["stats"].as_str() {
                stats.push(serde_json::from_str(text).unwrap());
            }
        }
    }
    stats
}

#[test]
fn a_group_of_many_blocks_of_rows_round_trips_with_statistics_of_every_row() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut w = RunWriter::create(&dir, header(), "test").unwrap();
    // One group (committed at the close), kept as written.
    w.set_commit_policy(CommitPolicy {
        interval: std::time::Duration::from_secs(3600),
        ..CommitPolicy::default()
    })
    .unwrap();
    w.set_compact_on_close(false);
    // Sites shared by every point, as the device recorder hands them over; a third of them
    // have no module path, and site 5 has no finite value (no min).
    let sites: Vec<Arc<SiteFacts>> = (0..28)
        .map(|i| {
            Arc::new(SiteFacts {
                name: format!("site{i:02}"),
                dtype: DType::Float32,
                shape: vec![2, i],
                stride: vec![i, 1],
                source_device: "cuda:0".into(),
                site: Site {
                    module_path: (i % 3 != 0).then(|| format!("model.layers.{i}")),
                    materialized_by_probe: Some(i % 2 == 0),
                    ..Site::default()
                },
            })
        })
        .collect();
    // 36,400 rows: more than two blocks of the writer's.
    let points = 1300;
    for p in 0..points {
        let inputs: Vec<ObservationInput<'_>> = sites
            .iter()
            .enumerate()
            .map(|(i, facts)| ObservationInput {
                facts: Arc::clone(facts),
                order: i as i64,
                invocation_index: 0,
                payload: PayloadKind::Summary,
                value: Value::Summary(TensorSummary {
                    numel: 2 * i as u64,
                    finite_count: 2 * i as u64,
                    min: (i != 5).then_some(p as f64),
                    max: Some(p as f64 + 1.0),
                    mean: Some(0.5),
                    std: Some(0.25),
                    l2_norm: i as f64,
                    nan_count: 0,
                    pos_inf_count: 0,
                    neg_inf_count: 0,
                    zero_count: 0,
                }),
            })
            .collect();
        w.commit_point(&point(&format!("p{p}")), &inputs).unwrap();
    }
    w.close(true).unwrap();

    let r = RunReader::open(&dir).unwrap();
    let obs = r.table(Table::Observations).unwrap();
    assert_eq!(obs.num_rows(), 28 * points);
    let labels = strings(&obs, "point_label");
    let names = strings(&obs, "name");
    let modules = strings(&obs, "module_path");
    let ordinals = ints(&obs, "ordinal");
    let indices = ints(&obs, "point_index");
    let numel = ints(&obs, "numel");
    let mins = column(&obs, "min").as_primitive::<Float64Type>();
    let l2 = column(&obs, "l2").as_primitive::<Float64Type>();
    let shapes = column(&obs, "shape").as_list::<i32>();
    let materialized = column(&obs, "materialized_by_probe").as_boolean();
    for row in 0..obs.num_rows() {
        let (p, i) = (row / 28, row % 28);
        assert_eq!(labels[row], format!("p{p}"));
        assert_eq!(indices[row], p as i64);
        assert_eq!(names[row], format!("site{i:02}"));
        assert_eq!(ordinals[row], i as i64);
        assert_eq!(numel[row], 2 * i as i64);
        assert_eq!(l2.value(row), i as f64);
        let module = if i % 3 == 0 {
            "<null>".to_owned()
        } else {
            format!("model.layers.{i}")
        };
        assert_eq!(modules[row], module);
        assert_eq!(mins.is_null(row), i == 5);
        if i != 5 {
            assert_eq!(mins.value(row), p as f64);
        }
        let shape = shapes.value(row);
        assert_eq!(shape.as_primitive::<Int64Type>().values(), &[2, i as i64]);
        assert_eq!(materialized.value(row), i % 2 == 0);
    }
    assert!(strings(&obs, "payload").iter().all(|p| p == "summary"));
    assert_eq!(column(&obs, "digest").null_count(), obs.num_rows());

    // The log's statistics of the file cover every row of it.
    let stats = logged_stats(&dir.join("observations"));
    assert_eq!(stats.len(), 1);
    let stats = &stats[0];
    assert_eq!(stats["numRecords"], 28 * points as u64);
    assert_eq!(stats["nullCount"]["module_path"], 10 * points as u64);
    assert_eq!(stats["nullCount"]["min"], points as u64);
    assert_eq!(stats["nullCount"]["name"], 0);
    assert_eq!(stats["minValues"]["name"], "site00");
    assert_eq!(stats["maxValues"]["name"], "site27");
    assert_eq!(stats["minValues"]["module_path"], "model.layers.1");
    assert_eq!(stats["maxValues"]["module_path"], "model.layers.8");
    assert_eq!(stats["minValues"]["point_label"], "p0");
    assert_eq!(stats["maxValues"]["point_label"], "p999");
    assert_eq!(stats["maxValues"]["point_index"], points as u64 - 1);
    assert_eq!(stats["minValues"]["payload"], "summary");
    assert_eq!(stats["maxValues"]["max"], points as f64);
}
