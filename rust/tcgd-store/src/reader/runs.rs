//! The runs of a job root: listing them from the root's runs table and selecting one by
//! name and rank.

use super::*;

/// Which run of a job root to open: the one matching every given field. Leaving a field
/// out is fine when the root holds one run that matches the others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSelector {
    pub name: Option<String>,
    pub rank: Option<i64>,
    pub kind: Option<RunKind>,
}

/// A run's row of the `runs` table.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub run_id: String,
    pub name: String,
    pub rank: i64,
    pub kind: RunKind,
    pub execution: String,
    pub group_id: Option<String>,
    pub world_size: Option<i64>,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub complete: bool,
    pub point_count: u64,
    pub format_version: i64,
    pub producer: String,
    pub provenance: serde_json::Value,
    pub run_metadata: serde_json::Value,
}

impl RunRow {
    pub fn header(&self) -> RunHeader {
        RunHeader {
            run_id: self.run_id.clone(),
            name: self.name.clone(),
            kind: self.kind,
            execution: self.execution.clone(),
            rank: Some(self.rank),
            group_id: self.group_id.clone(),
            world_size: self.world_size,
            provenance: self.provenance.clone(),
            run_metadata: self.run_metadata.clone(),
        }
    }

    fn describe(&self) -> String {
        format!("'{}' (rank {}, {:?})", self.name, self.rank, self.kind).to_lowercase()
    }
}

/// Every run row of a root's `runs` table (a run whose row is being replaced has one row
/// at every version of the log, never two).
pub fn read_runs(runs: &DeltaTable) -> Result<Vec<RunRow>> {
    let mut rows = Vec::new();
    for file in runs.files()? {
        let Some((rank, _)) = split_logged_path(&file.path) else {
            return Err(StoreError::UnsafePath {
                manifest: runs.dir().join("_delta_log"),
                part: file.path.clone(),
            });
        };
        let path = runs.dir().join(&file.path);
        let name = split_logged_path(&file.path)
            .and_then(|(_, name)| PartName::parse(name))
            .ok_or_else(|| StoreError::UnsafePath {
                manifest: runs.dir().join("_delta_log"),
                part: file.path.clone(),
            })?;
        // The same checks as every other data file: a regular file, its committed size,
        // its committed bytes.
        let meta = fs::symlink_metadata(&path).map_err(StoreError::io(&path))?;
        if !meta.is_file() {
            return Err(StoreError::UnsafePath {
                manifest: runs.dir().join("_delta_log"),
                part: file.path.clone(),
            });
        }
        if meta.len() != file.size {
            return Err(StoreError::CorruptPart {
                path,
                reason: format!(
                    "{} bytes on disk, {} committed (truncated or overwritten)",
                    meta.len(),
                    file.size
                ),
            });
        }
        for batch in read_part_checked(&path, Table::Runs, Some(&name.digest_prefix))? {
            rows.extend(run_rows(&path, &batch, rank)?);
        }
    }
    rows.sort_by(|a, b| (&a.name, a.rank, &a.created_at).cmp(&(&b.name, b.rank, &b.created_at)));
    Ok(rows)
}

/// The runs of the job root `root`, in name and rank order. A run finishing meanwhile
/// replaces its row file: the read then starts over from the new log version.
pub fn list_runs(root: &Path) -> Result<Vec<RunRow>> {
    refuse_version_one(root)?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let runs = DeltaTable::open(root, Table::Runs)?.ok_or_else(|| StoreError::NotARun {
            path: root.to_path_buf(),
            missing: !root.exists(),
        })?;
        match read_runs(&runs) {
            Err(e) if attempt < OPEN_ATTEMPTS && moved_away(&e) => continue,
            other => return other,
        }
    }
}

/// Run rows as a table: the `runs` table's columns with `rank` (the partition) after
/// `name`, the shape every engine shows when it reads the table.
pub fn runs_batch(rows: &[RunRow]) -> Result<RecordBatch> {
    use arrow::array::{
        ArrayRef, BooleanArray, Int64Array, StringArray, TimestampMicrosecondArray,
    };
    use arrow::datatypes::{DataType, Field, Schema};
    let mut fields: Vec<Field> = RUNS.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.insert(2, Field::new("rank", DataType::Int64, false));
    let strs = |f: fn(&RunRow) -> Option<&str>| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<StringArray>())
    };
    let stamps = |f: fn(&RunRow) -> Option<&String>| -> ArrayRef {
        Arc::new(
            rows.iter()
                .map(|r| f(r).and_then(|t| crate::clock::parse_rfc3339(t)))
                .collect::<TimestampMicrosecondArray>()
                .with_timezone("UTC"),
        )
    };
    let json = |v: &serde_json::Value| {
        if v.is_null() {
            "{}".to_owned()
        } else {
            v.to_string()
        }
    };
    let columns: Vec<ArrayRef> = vec![
        strs(|r| Some(&r.run_id)),
        strs(|r| Some(&r.name)),
        Arc::new(rows.iter().map(|r| r.rank).collect::<Int64Array>()),
        strs(|r| {
            Some(if r.kind == RunKind::Tensor {
                "tensor"
            } else {
                "memory"
            })
        }),
        strs(|r| Some(&r.execution)),
        strs(|r| r.group_id.as_deref()),
        Arc::new(rows.iter().map(|r| r.world_size).collect::<Int64Array>()),
        stamps(|r| Some(&r.created_at)),
        stamps(|r| r.finished_at.as_ref()),
        Arc::new(
            rows.iter()
                .map(|r| Some(r.complete))
                .collect::<BooleanArray>(),
        ),
        Arc::new(
            rows.iter()
                .map(|r| r.point_count as i64)
                .collect::<Int64Array>(),
        ),
        Arc::new(
            rows.iter()
                .map(|r| r.format_version)
                .collect::<Int64Array>(),
        ),
        strs(|r| Some(&r.producer)),
        Arc::new(
            rows.iter()
                .map(|r| Some(json(&r.provenance)))
                .collect::<StringArray>(),
        ),
        Arc::new(
            rows.iter()
                .map(|r| Some(json(&r.run_metadata)))
                .collect::<StringArray>(),
        ),
    ];
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| StoreError::invalid("runs", e.to_string()))
}

pub(super) fn run_rows(path: &Path, batch: &RecordBatch, rank: i64) -> Result<Vec<RunRow>> {
    let bad =
        |column: &str| StoreError::corrupt(path)(format!("runs column '{column}' is unreadable"));
    let strings = |name: &str| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(|| bad(name))
    };
    let ints = |name: &str| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_primitive_opt::<Int64Type>())
            .ok_or_else(|| bad(name))
    };
    let times = |name: &str| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_primitive_opt::<arrow::datatypes::TimestampMicrosecondType>())
            .ok_or_else(|| bad(name))
    };
    let (run_id, name, kind, execution, group_id) = (
        strings("run_id")?,
        strings("name")?,
        strings("kind")?,
        strings("execution")?,
        strings("group_id")?,
    );
    let (producer, provenance, metadata) = (
        strings("producer")?,
        strings("provenance")?,
        strings("run_metadata")?,
    );
    let (world_size, point_count, version) = (
        ints("world_size")?,
        ints("point_count")?,
        ints("format_version")?,
    );
    let (created, finished) = (times("created_at")?, times("finished_at")?);
    let complete = batch
        .column_by_name("complete")
        .and_then(|c| c.as_boolean_opt())
        .ok_or_else(|| bad("complete"))?;
    let json = |a: &arrow::array::StringArray, i: usize| -> serde_json::Value {
        serde_json::from_str(a.value(i)).unwrap_or(serde_json::Value::Null)
    };
    (0..batch.num_rows())
        .map(|i| {
            let kind = RunKind::from_name(kind.value(i)).ok_or_else(|| bad("kind"))?;
            Ok(RunRow {
                run_id: run_id.value(i).to_owned(),
                name: name.value(i).to_owned(),
                rank,
                kind,
                execution: execution.value(i).to_owned(),
                group_id: (!group_id.is_null(i)).then(|| group_id.value(i).to_owned()),
                world_size: (!world_size.is_null(i)).then(|| world_size.value(i)),
                created_at: rfc3339(created.value(i)),
                finished_at: (!finished.is_null(i)).then(|| rfc3339(finished.value(i))),
                complete: complete.value(i),
                point_count: u64::try_from(point_count.value(i)).unwrap_or(0),
                format_version: version.value(i),
                producer: producer.value(i).to_owned(),
                provenance: json(provenance, i),
                run_metadata: json(metadata, i),
            })
        })
        .collect()
}

/// The one run of `rows` that `selector` picks, or an error listing the choices.
pub(super) fn select_run(root: &Path, rows: Vec<RunRow>, selector: &RunSelector) -> Result<RunRow> {
    let all: Vec<String> = rows.iter().map(RunRow::describe).collect();
    let mut matching: Vec<RunRow> = rows
        .into_iter()
        .filter(|r| {
            selector.name.as_ref().is_none_or(|n| *n == r.name)
                && selector.rank.is_none_or(|k| k == r.rank)
                && selector.kind.is_none_or(|k| k == r.kind)
        })
        .collect();
    match matching.len() {
        1 => Ok(matching.remove(0)),
        0 => Err(StoreError::RunSelection {
            root: root.to_path_buf(),
            reason: if all.is_empty() {
                "it holds no runs yet".into()
            } else {
                format!(
                    "no run matches {}; it holds {}",
                    describe(selector),
                    all.join(", ")
                )
            },
        }),
        n => Err(StoreError::RunSelection {
            root: root.to_path_buf(),
            reason: format!(
                "{n} runs match {}: {}; choose one by name and rank (name=/rank=, or --name/--rank \
                 on the command line)",
                describe(selector),
                matching
                    .iter()
                    .map(RunRow::describe)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

pub(super) fn describe(selector: &RunSelector) -> String {
    let mut parts = Vec::new();
    if let Some(name) = &selector.name {
        parts.push(format!("name '{name}'"));
    }
    if let Some(rank) = selector.rank {
        parts.push(format!("rank {rank}"));
    }
    if let Some(kind) = selector.kind {
        parts.push(format!("kind {kind:?}").to_lowercase());
    }
    if parts.is_empty() {
        "any run".into()
    } else {
        parts.join(", ")
    }
}

/// The committed data files of run `row`, from the logs of its kind's tables. Rows of a
/// group whose `points` rows were never committed (a crash between the commits of one
/// group) are not part of the run and are left out.
pub(crate) fn committed_parts(root: &Path, row: &RunRow) -> Result<(Vec<PartEntry>, u64)> {
    let mut parts = Vec::new();
    for &table in row.kind.tables() {
        let Some(delta) = DeltaTable::open(root, table)? else {
            continue;
        };
        for file in delta.files()? {
            let unsafe_path = || StoreError::UnsafePath {
                manifest: delta.dir().join("_delta_log"),
                part: file.path.clone(),
            };
            let (rank, name) = split_logged_path(&file.path).ok_or_else(unsafe_path)?;
            let Some(name) = PartName::parse(name) else {
                // Not a file of ours; another tool wrote into the table.
                continue;
            };
            if name.run_id != row.run_id || rank != row.rank {
                continue;
            }
            parts.push(PartEntry {
                table: table.dir_name().to_owned(),
                path: format!("{}/{}", table.dir_name(), file.path),
                rows: file.rows.unwrap_or(0),
                bytes: file.size,
                digest: name.digest_prefix,
                point_index: name.first_point,
                last_point_index: name.last_point,
            });
        }
    }
    parts.sort_by(|a, b| (a.point_index, &a.table).cmp(&(b.point_index, &b.table)));
    let mut committed = 0u64;
    for part in parts.iter().filter(|p| p.table == Table::Points.dir_name()) {
        if part.point_index <= committed {
            committed = committed.max(part.last_point_index + 1);
        }
    }
    parts.retain(|p| p.point_index < committed);
    Ok((parts, committed))
}
