//! Reading a run of a job root: its row of the `runs` table, then only the data files the
//! tables' Delta logs list for it, after checking that they are safe and whole.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use arrow::array::{Array, AsArray, BinaryViewArray, ByteView, RecordBatch};
use arrow::buffer::Buffer;

use arrow::compute::concat_batches;
use arrow::datatypes::Int64Type;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};

use crate::delta::DeltaTable;
use crate::digest::{content_digest, format_digest};
use crate::error::{Result, StoreError};
use crate::layout::{split_logged_path, PartName};
use crate::manifest::{part_path, Manifest, PartEntry, RunHeader, RunKind};
use crate::parts::{
    differs_from_committed, read_part_checked, read_part_columns, read_payload_chunks,
};
use crate::pool::BufferPool;
use crate::schema::{Table, PAYLOAD_DIGEST_COLUMN, RUNS};
use crate::writer::{refuse_version_one, rfc3339, run_batch};

mod runs;
pub use runs::*;

/// Where a payload's chunks are: the part and its row numbers there.
#[derive(Debug, Clone)]
struct PayloadLocation {
    part: usize,
    rows: Vec<usize>,
}

pub struct RunReader {
    dir: PathBuf,
    /// The manifest as the reader uses it: with `OnDamage::Skip`, the parts of points
    /// that were left out are not listed.
    manifest: Manifest,
    payload_index: OnceLock<Result<HashMap<String, PayloadLocation>, String>>,
    buffers: Arc<BufferPool>,
    /// What `OnDamage::Skip` left out, and why.
    damage: Vec<Damage>,
    /// Payloads that loaded observations refer to but that were stored in a damaged part.
    unreadable_payloads: HashSet<String>,
    /// Every listed part's file digest was checked at open (`OnDamage::Skip`).
    digests_checked: bool,
    /// Points `OnDamage::Skip` left out: their rows are dropped from every table read.
    left_out: BTreeSet<u64>,
    /// The row tables, read at open (see `open_selected`).
    cache: Mutex<HashMap<Table, RecordBatch>>,
    /// With a damaged frames or stacks file: its first point. Lent rows of that point and
    /// later ones are dropped (they may be the damaged ones' neighbours of unknown state).
    lend_limit: Option<u64>,
}

/// Opens of a run that a concurrent compaction moved away before it gives up.
const OPEN_ATTEMPTS: u32 = 5;

/// Whether `error` is a listed file gone missing: what a compaction committed and
/// deleted while the run was being opened looks like.
fn moved_away(error: &StoreError) -> bool {
    match error {
        StoreError::CorruptPart { reason, .. } => reason.contains("the file is missing"),
        StoreError::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        _ => false,
    }
}

/// Payload buffers a reader keeps for reuse once released: enough for the payloads a
/// comparison holds at once (the pair being compared and the next pair being read).
const KEEP_BUFFER_BYTES: usize = 256 << 20;

/// One problem found by `validate()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationIssue {
    pub path: PathBuf,
    pub problem: String,
}

/// What opening a run does with a damaged part (missing, truncated, or not the bytes that
/// were committed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDamage {
    /// The first damaged part is an error naming it (`CorruptPart`).
    #[default]
    Raise,
    /// Every part's file digest is checked; the points with a damaged part are left out
    /// (in memory runs, also the points after a damaged part of the run-wide stack
    /// tables, which may name its stacks) and listed in `damage()`. A damaged manifest is
    /// still an error: without it nothing is known to be intact.
    Skip,
}

impl OnDamage {
    pub fn parse(value: &str) -> Result<OnDamage> {
        match value {
            "raise" => Ok(OnDamage::Raise),
            "skip" => Ok(OnDamage::Skip),
            other => Err(StoreError::invalid(
                "on_damage",
                format!("'{other}' is not one of \"raise\", \"skip\""),
            )),
        }
    }
}

/// One thing `OnDamage::Skip` left out of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The damaged file.
    pub path: PathBuf,
    /// Its table.
    pub table: String,
    /// The point left out, or whose observation lost its payload.
    pub point_index: Option<u64>,
    /// That point's label, when its `points` part is intact.
    pub label: Option<String>,
    pub problem: String,
}

impl Damage {
    /// One line: the problem and the point it costs.
    pub fn describe(&self) -> String {
        match (self.point_index, &self.label) {
            (Some(i), Some(label)) => format!("{} (point {i} '{label}')", self.problem),
            (Some(i), None) => format!("{} (point {i})", self.problem),
            _ => self.problem.clone(),
        }
    }
}

/// Why a listed part cannot be used.
enum PartProblem {
    /// Not a regular file: refused unread, whatever the mode.
    Unsafe,
    Damaged(String),
    Io(std::io::Error),
}

/// Checks one listed part: present, a regular file, its committed size, and (with
/// `digest`) its committed bytes.
fn check_part(dir: &Path, part: &PartEntry, digest: bool) -> Result<(), PartProblem> {
    let path = part_path(dir, part);
    let meta = match fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(PartProblem::Damaged(
                "the file is missing: the table's log lists it, the directory does not hold it"
                    .into(),
            ))
        }
        Err(e) => return Err(PartProblem::Io(e)),
    };
    if !meta.is_file() {
        return Err(PartProblem::Unsafe);
    }
    if meta.len() != part.bytes {
        return Err(PartProblem::Damaged(format!(
            "{} bytes on disk, {} committed (truncated or overwritten)",
            meta.len(),
            part.bytes
        )));
    }
    if digest {
        match file_digest(&path) {
            Ok(d) if PartName::digest_prefix_of(&d) == part.digest => {}
            Ok(d) => {
                return Err(PartProblem::Damaged(differs_from_committed(
                    &d,
                    &part.digest,
                )))
            }
            Err(StoreError::Io { source, .. }) => return Err(PartProblem::Io(source)),
            Err(e) => return Err(PartProblem::Damaged(e.to_string())),
        }
    }
    Ok(())
}

/// Tables whose rows later points refer to (frames and stacks are stored once per run):
/// a damaged part of theirs costs the later points too.
fn shared_with_later_points(table: &str) -> bool {
    table == Table::MemoryFrames.dir_name() || table == Table::MemoryStacks.dir_name()
}

impl RunReader {
    /// Opens the one run of the job root `root` (see `open_selected` to choose among
    /// several).
    pub fn open(root: &Path) -> Result<RunReader> {
        RunReader::open_selected(root, &RunSelector::default(), OnDamage::Raise)
    }

    pub fn open_with(root: &Path, on_damage: OnDamage) -> Result<RunReader> {
        RunReader::open_selected(root, &RunSelector::default(), on_damage)
    }

    /// Opens the run `selector` picks: reads its row and the tables' logs, then checks
    /// that every listed file is present with the size it was committed with (a
    /// truncated file is caught here, before a query can read a wrong answer out of it).
    /// Whole tables are read only after their files' digests are checked.
    ///
    /// A compaction of the run may retire its files between reading the logs and reading
    /// the files: the open then starts over from the new log version (a few times), and
    /// the run's row tables (points, observations, memory tables) are read during the
    /// open, so what it returns is one version of the run. Payloads are read later, by
    /// digest: a reader that must outlive a compaction of its run opens it again.
    pub fn open_selected(
        root: &Path,
        selector: &RunSelector,
        on_damage: OnDamage,
    ) -> Result<RunReader> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let opened = RunReader::open_once(root, selector, on_damage).and_then(|reader| {
                reader.read_row_tables()?;
                Ok(reader)
            });
            match opened {
                Err(e) if attempt < OPEN_ATTEMPTS && moved_away(&e) => continue,
                other => return other,
            }
        }
    }

    /// Reads every table but payloads into the cache `table()` answers from.
    fn read_row_tables(&self) -> Result<()> {
        for &table in self.manifest.header.kind.tables() {
            if table == Table::Payloads {
                continue;
            }
            let rows = self.read_table(table)?;
            self.cache
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(table, rows);
        }
        Ok(())
    }

    fn open_once(root: &Path, selector: &RunSelector, on_damage: OnDamage) -> Result<RunReader> {
        let rows = list_runs(root)?;
        let row = select_run(root, rows, selector)?;
        let (parts, committed) = committed_parts(root, &row)?;
        let mut manifest = Manifest::new(row.header(), &row.producer, row.created_at.clone());
        manifest.format_version = u32::try_from(row.format_version).unwrap_or(0);
        manifest.finished_at = row.finished_at.clone();
        manifest.complete = row.complete;
        manifest.point_count = committed;
        manifest.parts = parts;
        let dir = root;
        let skip = on_damage == OnDamage::Skip;
        let mut problems: Vec<(usize, String)> = Vec::new();
        for (i, part) in manifest.parts.iter().enumerate() {
            let path = part_path(dir, part);
            match check_part(dir, part, skip) {
                Ok(()) => {}
                Err(PartProblem::Unsafe) => {
                    return Err(StoreError::UnsafePath {
                        manifest: dir.join(&part.table).join("_delta_log"),
                        part: part.path.clone(),
                    })
                }
                Err(PartProblem::Damaged(reason)) if !skip => {
                    return Err(StoreError::CorruptPart { path, reason })
                }
                Err(PartProblem::Io(source)) if !skip => {
                    return Err(StoreError::Io { path, source })
                }
                Err(PartProblem::Damaged(reason)) => problems.push((i, reason)),
                Err(PartProblem::Io(source)) => {
                    problems.push((i, format!("cannot be read: {source}")))
                }
            }
        }
        let mut reader = RunReader {
            dir: dir.to_path_buf(),
            manifest: Manifest {
                parts: Vec::new(),
                ..manifest.clone()
            },
            payload_index: OnceLock::new(),
            buffers: BufferPool::new(KEEP_BUFFER_BYTES),
            damage: Vec::new(),
            unreadable_payloads: HashSet::new(),
            digests_checked: skip,
            left_out: BTreeSet::new(),
            cache: Mutex::new(HashMap::new()),
            lend_limit: None,
        };
        if problems.is_empty() {
            reader.manifest = manifest;
            return Ok(reader);
        }

        let points_of = |part: &PartEntry| {
            part.point_index
                ..=part
                    .last_point_index
                    .min(manifest.point_count.saturating_sub(1))
        };
        let mut left_out: BTreeSet<u64> = problems
            .iter()
            .flat_map(|&(i, _)| points_of(&manifest.parts[i]))
            .collect();
        // The first damaged part of a shared table, and the points it costs after it.
        let shared = problems
            .iter()
            .map(|&(i, _)| &manifest.parts[i])
            .filter(|p| shared_with_later_points(&p.table))
            .min_by_key(|p| p.point_index)
            .cloned();
        let dependent: Vec<u64> = match &shared {
            Some(part) => (part.point_index..manifest.point_count)
                .filter(|p| !left_out.contains(p))
                .collect(),
            None => Vec::new(),
        };
        left_out.extend(&dependent);
        let labels = labels_of(dir, &manifest, &left_out, &problems);
        let damaged: HashSet<usize> = problems.iter().map(|&(i, _)| i).collect();
        for (i, problem) in problems {
            let part = &manifest.parts[i];
            for point in points_of(part) {
                reader.damage.push(Damage {
                    path: part_path(dir, part),
                    table: part.table.clone(),
                    point_index: Some(point),
                    label: labels.get(&point).cloned(),
                    problem: problem.clone(),
                });
            }
        }
        // A left-out point's intact parts of the tables later points refer to stay:
        // payloads (found by digest) always, frames and stacks (dense ids) up to the first
        // damaged one. Parts that also hold kept points stay; `table()` leaves the rows of
        // left-out points out of them.
        let first_shared = shared.as_ref().map(|p| p.point_index);
        let kept = manifest
            .parts
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                let lent = p.table == Table::Payloads.dir_name()
                    || (shared_with_later_points(&p.table)
                        && first_shared.is_none_or(|first| p.point_index < first));
                let all_out = points_of(p).all(|point| left_out.contains(&point));
                !damaged.contains(i) && (!all_out || lent)
            })
            .map(|(_, p)| p.clone())
            .collect();
        manifest.parts = kept;
        reader.manifest = manifest;
        if let Some(part) = shared {
            for point in dependent {
                reader.damage.push(Damage {
                    path: part_path(dir, &part),
                    table: part.table.clone(),
                    point_index: Some(point),
                    label: labels.get(&point).cloned(),
                    problem: format!(
                        "left out: it may name stacks stored with damaged point {}",
                        part.point_index
                    ),
                });
            }
        }
        reader.left_out = left_out;
        reader.lend_limit = first_shared;
        reader.note_unreadable_payloads()?;
        Ok(reader)
    }

    /// With a damaged payloads part left out, the observations of loaded points that
    /// refer to a payload stored in it (payloads are stored once per run, with the first
    /// point that saw them) keep their summaries but lose their values: each is listed.
    fn note_unreadable_payloads(&mut self) -> Result<()> {
        let Some(damaged) = self
            .damage
            .iter()
            .find(|d| d.table == Table::Payloads.dir_name())
            .map(|d| d.path.clone())
        else {
            return Ok(());
        };
        let observations = self.table(Table::Observations)?;
        let index = self.payload_index()?;
        let payload_kind = named_strings(&observations, "payload")?;
        let digests = named_strings(&observations, "digest")?;
        let names = named_strings(&observations, "name")?;
        let labels = named_strings(&observations, "point_label")?;
        let column = |name: &str| {
            observations
                .column_by_name(name)
                .and_then(|c| c.as_primitive_opt::<Int64Type>())
                .ok_or_else(|| StoreError::invalid(name, "column missing from observations"))
        };
        let (points, invocations) = (column("point_index")?, column("invocation_index")?);
        let mut lost = Vec::new();
        for i in 0..observations.num_rows() {
            if payload_kind.value(i) != "full" || digests.is_null(i) {
                continue;
            }
            let digest = digests.value(i);
            if index.contains_key(digest) {
                continue;
            }
            lost.push((
                digest.to_owned(),
                Damage {
                    path: damaged.clone(),
                    table: Table::Payloads.dir_name().to_owned(),
                    point_index: u64::try_from(points.value(i)).ok(),
                    label: Some(labels.value(i).to_owned()),
                    problem: format!(
                        "observation '{}' (invocation {}) refers to a payload stored with a \
                         damaged point: its summary is intact, its values cannot be read",
                        names.value(i),
                        invocations.value(i)
                    ),
                },
            ));
        }
        for (digest, damage) in lost {
            self.unreadable_payloads.insert(digest);
            self.damage.push(damage);
        }
        Ok(())
    }

    /// What `OnDamage::Skip` left out (empty for an intact run, and always with `Raise`).
    pub fn damage(&self) -> &[Damage] {
        &self.damage
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Every committed row of `table` for this run, in commit order, as one batch.
    pub fn table(&self, table: Table) -> Result<RecordBatch> {
        if let Some(rows) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&table)
        {
            return Ok(rows.clone());
        }
        self.read_table(table)
    }

    fn read_table(&self, table: Table) -> Result<RecordBatch> {
        let mut batches = Vec::new();
        for part in self.manifest.parts_of(table) {
            let digest = (!self.digests_checked).then_some(part.digest.as_str());
            batches.extend(read_part_checked(
                &part_path(&self.dir, part),
                table,
                digest,
            )?);
        }
        let rows = concat_batches(&table.schema(), &batches)
            .map_err(|e| StoreError::invalid(table.dir_name(), e.to_string()))?;
        self.without_left_out(table, rows)
    }

    /// `rows` without the rows of points that `OnDamage::Skip` left out. Frames and stacks
    /// are lent to later points: a left-out point's rows of theirs stay, up to the first
    /// point whose frames or stacks are damaged.
    fn without_left_out(&self, table: Table, rows: RecordBatch) -> Result<RecordBatch> {
        let Some(points) = rows
            .column_by_name("point_index")
            .and_then(|c| c.as_primitive_opt::<Int64Type>())
        else {
            return Ok(rows);
        };
        if self.left_out.is_empty() {
            return Ok(rows);
        }
        let lent = shared_with_later_points(table.dir_name());
        let keep: arrow::array::BooleanArray = points
            .iter()
            .map(|p| {
                Some(p.is_none_or(|p| {
                    let p = p as u64;
                    if lent {
                        self.lend_limit.is_none_or(|limit| p < limit)
                    } else {
                        !self.left_out.contains(&p)
                    }
                }))
            })
            .collect();
        arrow::compute::filter_record_batch(&rows, &keep)
            .map_err(|e| StoreError::invalid(table.dir_name(), e.to_string()))
    }

    /// The run's row of the `runs` table, as this reader sees the run.
    pub fn run_table(&self) -> Result<RecordBatch> {
        run_batch(&self.manifest)
    }

    pub fn runs_schema() -> arrow::datatypes::SchemaRef {
        RUNS.clone()
    }

    fn payload_parts(&self) -> Vec<&PartEntry> {
        self.manifest.parts_of(Table::Payloads).collect()
    }

    fn payload_index(&self) -> Result<&HashMap<String, PayloadLocation>> {
        let index = self
            .payload_index
            .get_or_init(|| self.build_payload_index().map_err(|e| e.to_string()));
        index.as_ref().map_err(|reason| StoreError::CorruptPart {
            path: self.dir.join(Table::Payloads.dir_name()),
            reason: reason.clone(),
        })
    }

    fn build_payload_index(&self) -> Result<HashMap<String, PayloadLocation>> {
        let mut index: HashMap<String, PayloadLocation> = HashMap::new();
        for (part_no, part) in self.payload_parts().into_iter().enumerate() {
            let path = part_path(&self.dir, part);
            let mut row = 0usize;
            for batch in read_part_columns(&path, Table::Payloads, &[PAYLOAD_DIGEST_COLUMN], None)?
            {
                let digests = batch.column(0).as_string::<i32>();
                for digest in digests.iter() {
                    let digest = digest.unwrap_or_default();
                    index
                        .entry(digest.to_owned())
                        .or_insert_with(|| PayloadLocation {
                            part: part_no,
                            rows: Vec::new(),
                        })
                        .rows
                        .push(row);
                    row += 1;
                }
            }
        }
        Ok(index)
    }

    /// The bytes of one payload, checked against its digest. A one-chunk payload stays in
    /// the buffer its page was read into; a larger one is joined into one buffer, hashed
    /// piece by piece while the piece is still in cache.
    pub fn payload(&self, digest: &str) -> Result<Buffer> {
        let location = self.payload_index()?.get(digest).ok_or_else(|| {
            match self
                .damage
                .iter()
                .find(|d| self.unreadable_payloads.contains(digest) && d.table == "payloads")
            {
                Some(damaged) => StoreError::CorruptPart {
                    path: damaged.path.clone(),
                    reason: format!("payload {digest} was stored in this damaged part"),
                },
                None => StoreError::PayloadMissing {
                    digest: digest.to_owned(),
                    run: self.dir.clone(),
                },
            }
        })?;
        let parts = self.payload_parts();
        let part = parts[location.part];
        let path = part_path(&self.dir, part);
        let selection = rows_to_selection(&location.rows, part.rows as usize);
        let mut chunks: Vec<(i64, i64, i64, Buffer)> = Vec::new();
        for batch in read_payload_chunks(&path, selection, &self.buffers)? {
            let index = batch.column(0).as_primitive::<Int64Type>();
            let count = batch.column(1).as_primitive::<Int64Type>();
            let total = batch.column(2).as_primitive::<Int64Type>();
            let data = batch.column(3).as_binary_view();
            for i in 0..batch.num_rows() {
                chunks.push((
                    index.value(i),
                    count.value(i),
                    total.value(i),
                    view_buffer(data, i),
                ));
            }
        }
        chunks.sort_by_key(|c| c.0);
        let expected_chunks = chunks.first().map_or(0, |c| c.1);
        let total = chunks.first().map_or(0, |c| c.2);
        let sequence_ok = chunks.len() as i64 == expected_chunks
            && chunks.iter().enumerate().all(|(i, c)| c.0 == i as i64);
        if !sequence_ok {
            return Err(StoreError::corrupt(&path)(format!(
                "payload {digest} has {} of {expected_chunks} chunks",
                chunks.len()
            )));
        }
        let (bytes, actual) = if chunks.len() == 1 {
            let only = chunks.swap_remove(0).3;
            let actual = content_digest(&only);
            (only, actual)
        } else {
            let mut hasher = blake3::Hasher::new();
            let joined_len: usize = chunks.iter().map(|c| c.3.len()).sum();
            let mut joined = self.buffers.take(joined_len);
            let mut at = 0;
            for (_, _, _, chunk) in &chunks {
                for piece in chunk.chunks(HASH_PIECE_BYTES) {
                    joined.as_mut_slice()[at..at + piece.len()].copy_from_slice(piece);
                    hasher.update(piece);
                    at += piece.len();
                }
            }
            (
                Buffer::from(joined.freeze()),
                format_digest(&hasher.finalize()),
            )
        };
        if actual != digest || bytes.len() as i64 != total {
            return Err(StoreError::DigestMismatch {
                digest: digest.to_owned(),
                actual,
                path,
            });
        }
        Ok(bytes)
    }

    /// Checks everything: each part's file digest, each payload's digest, and that every
    /// full observation's payload is present. Returns the problems found (empty: valid),
    /// beginning with what `OnDamage::Skip` left out.
    pub fn validate(&self) -> Result<Vec<ValidationIssue>> {
        let mut issues: Vec<ValidationIssue> = self
            .damage
            .iter()
            .map(|d| ValidationIssue {
                path: d.path.clone(),
                problem: d.describe(),
            })
            .collect();
        if !self.digests_checked {
            let mut damaged = Vec::new();
            for part in &self.manifest.parts {
                let path = part_path(&self.dir, part);
                match file_digest(&path) {
                    Ok(d) if PartName::digest_prefix_of(&d) == part.digest => {}
                    Ok(d) => damaged.push(ValidationIssue {
                        path,
                        problem: differs_from_committed(&d, &part.digest),
                    }),
                    Err(e) => damaged.push(ValidationIssue {
                        path,
                        problem: e.to_string(),
                    }),
                }
            }
            if !damaged.is_empty() {
                issues.extend(damaged);
                return Ok(issues);
            }
        }
        let observations = self.table(Table::Observations)?;
        let payload_kind = named_strings(&observations, "payload")?;
        let digests = named_strings(&observations, "digest")?;
        let mut wanted: Vec<&str> = (0..observations.num_rows())
            .filter(|&i| payload_kind.value(i) == "full" && !digests.is_null(i))
            .map(|i| digests.value(i))
            // Already listed with the damage that made them unreadable.
            .filter(|d| !self.unreadable_payloads.contains(*d))
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        for digest in wanted {
            if let Err(e) = self.payload(digest) {
                issues.push(ValidationIssue {
                    path: self.dir.join(Table::Payloads.dir_name()),
                    problem: e.to_string(),
                });
            }
        }
        Ok(issues)
    }
}

/// The labels of `points` read from their `points` parts, where those are intact.
fn labels_of(
    dir: &Path,
    manifest: &Manifest,
    points: &BTreeSet<u64>,
    problems: &[(usize, String)],
) -> HashMap<u64, String> {
    let damaged: HashSet<usize> = problems.iter().map(|&(i, _)| i).collect();
    let mut labels = HashMap::new();
    for (i, part) in manifest.parts.iter().enumerate() {
        let wanted = (part.point_index..=part.last_point_index).any(|p| points.contains(&p));
        if part.table != Table::Points.dir_name() || damaged.contains(&i) || !wanted {
            continue;
        }
        // Checked at open: its digest matched.
        let Ok(batches) = read_part_checked(&part_path(dir, part), Table::Points, None) else {
            continue;
        };
        for batch in batches {
            let label = batch
                .column_by_name("label")
                .and_then(|c| c.as_string_opt::<i32>());
            let index = batch
                .column_by_name("point_index")
                .and_then(|c| c.as_primitive_opt::<Int64Type>());
            let (Some(label), Some(index)) = (label, index) else {
                continue;
            };
            for row in 0..batch.num_rows() {
                labels.insert(index.value(row) as u64, label.value(row).to_owned());
            }
        }
    }
    labels
}

/// Joined payloads are hashed in pieces this size, right after each is copied.
const HASH_PIECE_BYTES: usize = 1 << 20;

/// The bytes of value `i` of a view array, sharing the array's buffer.
fn view_buffer(data: &BinaryViewArray, i: usize) -> Buffer {
    let view = data.views()[i];
    let len = view as u32 as usize;
    if len <= 12 {
        // Short values live inside the view itself.
        return Buffer::from(data.value(i).to_vec());
    }
    let view = ByteView::from(view);
    data.data_buffers()[view.buffer_index as usize].slice_with_length(view.offset as usize, len)
}

fn rows_to_selection(rows: &[usize], total: usize) -> RowSelection {
    let mut selectors = Vec::new();
    let mut at = 0usize;
    for &row in rows {
        if row > at {
            selectors.push(RowSelector::skip(row - at));
        }
        selectors.push(RowSelector::select(1));
        at = row + 1;
    }
    if total > at {
        selectors.push(RowSelector::skip(total - at));
    }
    RowSelection::from(selectors)
}

fn file_digest(path: &Path) -> Result<String> {
    let mut file = fs::File::open(path).map_err(StoreError::io(path))?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(StoreError::io(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(format!("blake3:{}", hasher.finalize().to_hex()))
}

fn named_strings<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a arrow::array::StringArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| StoreError::invalid(name, "column missing from observations"))
}
