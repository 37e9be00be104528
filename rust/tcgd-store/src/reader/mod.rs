//! Reading a run of a job root: its row of the `runs` table, then only the data files the
//! tables' Delta logs list for it, after checking that they are safe and whole.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use arrow::array::{Array, AsArray, RecordBatch};

use arrow::compute::concat_batches;
use arrow::datatypes::Int64Type;

use crate::clock::rfc3339;
use crate::delta::DeltaTable;
use crate::error::{Result, StoreError};
use crate::layout::refuse_version_one;
use crate::layout::{split_logged_path, PartName};
use crate::manifest::{part_path, Manifest, PartEntry, RunHeader, RunKind};
use crate::parts::read_part_checked;
use crate::pool::BufferPool;
use crate::schema::{Table, RUNS};

mod columns;
mod damage;
mod payloads;
mod runs;
mod tensor_points;
pub use columns::Columns;
pub use damage::*;
use payloads::*;
pub use runs::*;
pub use tensor_points::{ObservationMeta, ObservationRows, RecordedPoint};

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
        self.manifest.runs_row()
    }

    pub fn runs_schema() -> arrow::datatypes::SchemaRef {
        RUNS.clone()
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

fn named_strings<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a arrow::array::StringArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| StoreError::invalid(name, "column missing from observations"))
}
