//! `tcgd compact ROOT`: the whole root tidied after its writers are done.
//!
//! For every run no writer holds: rows of points that never committed (a crash between
//! the commits of one group) are removed, the run's small files are rewritten into files
//! of the target size, each in one commit per table (remove + add, so readers of the log
//! never see a mix), and files a crash left outside the log (staged, or moved into a table
//! but never committed) are deleted. Runs being written are left alone, and a damaged run
//! is reported and left exactly as it was (every file of a run is checked before its first
//! commit), not a reason to leave the others as they are.

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use crate::claim::DirClaim;
use crate::delta::{parse_log_retention, DeltaTable, Operation, LOG_RETENTION};
use crate::error::{Result, StoreError};
use crate::layout::{self, PartName};
use crate::manifest::PartEntry;
use crate::reader::{check_committed_part, committed_parts, list_runs, RunRow};
use crate::schema::Table;
use crate::writer::{
    compaction_bins, delete_files, stage_file, staging_path, COMPACT_TARGET_BYTES,
};

/// What `compact_root` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CompactionReport {
    pub runs_compacted: u64,
    /// Runs skipped because a writer holds them.
    pub runs_in_use: u64,
    pub files_before: u64,
    pub files_after: u64,
    /// Files removed from the log because their points never committed.
    pub uncommitted_removed: u64,
    /// Files deleted that no log listed (left by crashed writers).
    pub orphans_deleted: u64,
    /// Expired files removed from the tables' Delta logs (`log_cleanup.rs`).
    pub log_files_removed: u64,
    /// Runs that could not be compacted (damaged), with why; the others still were. Each
    /// is left as it was: its files are all checked before its first commit.
    pub runs_skipped: Vec<String>,
}

/// Compacts every run of `root` that no writer holds. Each run is claimed like a writer
/// claims it (its name and rank), and held until the end: a recorder starting the same
/// run meanwhile gets `RunInUse` instead of racing the compaction, and only files of runs
/// held this way are ever deleted (a run that started after the runs were listed is not
/// touched).
pub fn compact_root(root: &Path) -> Result<CompactionReport> {
    let runs = list_runs(root)?;
    let mut report = CompactionReport::default();
    let mut held: HashSet<String> = HashSet::new();
    let mut claims: Vec<DirClaim> = Vec::new();
    for run in &runs {
        let claim = match DirClaim::acquire(&layout::claim_dir(root, &run.name, run.rank)) {
            Ok(claim) => claim,
            Err(StoreError::RunInUse { .. }) => {
                report.runs_in_use += 1;
                continue;
            }
            Err(e) => return Err(e),
        };
        claims.push(claim);
        held.insert(run.run_id.clone());
        let before = (
            report.files_before,
            report.files_after,
            report.uncommitted_removed,
        );
        match compact_run(root, run, &mut report) {
            Ok(()) => {
                let (files_before, files_after, removed) = before;
                let changed = report.files_before - files_before
                    != report.files_after - files_after
                    || report.uncommitted_removed != removed;
                report.runs_compacted += u64::from(changed);
            }
            Err(e) => {
                // Its leftovers stay too: a damaged run is not touched at all.
                held.remove(&run.run_id);
                let why = match e {
                    StoreError::CorruptPart { path, reason } => {
                        format!("'{}' is damaged ({reason})", path.display())
                    }
                    other => other.to_string(),
                };
                report
                    .runs_skipped
                    .push(format!("run '{}' (rank {}): {why}", run.name, run.rank));
            }
        }
    }
    report.orphans_deleted = delete_orphans(root, &held)?;
    for mut claim in claims {
        claim.release();
    }
    report.log_files_removed = remove_expired_log_files(root)?;
    Ok(report)
}

/// Removes the expired files of every table's Delta log of `root`.
pub fn remove_expired_log_files(root: &Path) -> Result<u64> {
    let mut removed = 0;
    for table in Table::ALL {
        if let Some(delta) = DeltaTable::open(root, table)? {
            removed += delta.remove_expired_log_files()?;
        }
    }
    Ok(removed)
}

/// Sets the log retention (`delta.logRetentionDuration`, a Delta interval such as
/// `interval 1 day`) of every table of the job root `root`; tables created later take the
/// `runs` table's. Returns how many tables changed (a commit each).
pub fn set_log_retention(root: &Path, retention: &str) -> Result<u64> {
    parse_log_retention(retention)?;
    // A job root, or a clear error (the same as loading a run from it).
    list_runs(root)?;
    let mut changed = 0;
    // `runs` first: a table created meanwhile copies its value.
    let mut order = vec![Table::Runs];
    order.extend(Table::ALL.into_iter().filter(|t| *t != Table::Runs));
    for table in order {
        if let Some(mut delta) = DeltaTable::open(root, table)? {
            changed += u64::from(delta.set_property(LOG_RETENTION, retention)?);
        }
    }
    Ok(changed)
}

fn compact_run(root: &Path, run: &RunRow, report: &mut CompactionReport) -> Result<()> {
    let (parts, committed) = committed_parts(root, run)?;
    // Every file of the run is checked (size and digest) before the first commit: a
    // damaged file found halfway would leave some tables rewritten and others not, and
    // a damaged run is left exactly as it was.
    for part in &parts {
        check_committed_part(root, part)?;
    }
    let mut tables: Vec<Table> = run.kind.tables().to_vec();
    tables.push(Table::Runs);
    for table in tables {
        let Some(mut delta) = DeltaTable::open(root, table)? else {
            continue;
        };
        let mine: Vec<(String, PartName, u64)> = delta
            .files()?
            .into_iter()
            .filter(|f| f.rank == Some(run.rank))
            .filter_map(|f| {
                let (_, file) = layout::split_logged_path(&f.path)?;
                let name = PartName::parse(file)?;
                (name.run_id == run.run_id).then_some((f.path.clone(), name, f.size))
            })
            .collect();
        report.files_before += mine.len() as u64;
        if table == Table::Runs {
            report.files_after += mine.len() as u64;
            continue;
        }
        let (kept, dangling): (Vec<_>, Vec<_>) = mine
            .into_iter()
            .partition(|(_, name, _)| name.first_point < committed);
        if !dangling.is_empty() {
            let paths: Vec<String> = dangling.iter().map(|d| d.0.clone()).collect();
            delta.commit(&[], &paths, Operation::Replace)?;
            delete_files(delta.dir(), &paths);
            report.uncommitted_removed += paths.len() as u64;
        }
        let mut kept = kept;
        kept.sort_by_key(|(_, name, _)| name.first_point);
        let bins = compaction_bins(&kept, |f| f.2, COMPACT_TARGET_BYTES);
        for bin in bins {
            if bin.len() < 2 {
                report.files_after += bin.len() as u64;
                continue;
            }
            rewrite(root, &mut delta, table, run, &bin)?;
            report.files_after += 1;
        }
    }
    Ok(())
}

/// Rewrites `bin` (files of one run and table) as one file, in one commit.
fn rewrite(
    root: &Path,
    delta: &mut DeltaTable,
    table: Table,
    run: &RunRow,
    bin: &[(String, PartName, u64)],
) -> Result<()> {
    let mut batches = Vec::new();
    for (logged, name, size) in bin {
        let entry = PartEntry {
            table: table.dir_name().to_owned(),
            path: format!("{}/{logged}", table.dir_name()),
            rows: 0,
            bytes: *size,
            digest: name.digest_prefix.clone(),
            point_index: name.first_point,
            last_point_index: name.last_point,
        };
        let path = root.join(&entry.path);
        // Compaction never copies damage into a new file: every input is checked.
        batches.extend(crate::parts::read_part_checked(
            &path,
            table,
            Some(&entry.digest),
        )?);
    }
    let rows = arrow::compute::concat_batches(&table.schema(), &batches)
        .map_err(|e| StoreError::invalid(table.dir_name(), e.to_string()))?;
    let first = bin.iter().map(|b| b.1.first_point).min().unwrap_or(0);
    let last = bin.iter().map(|b| b.1.last_point).max().unwrap_or(first);
    let tag = format!("compact-{}", std::process::id());
    let path = staging_path(root, &run.run_id, table, &tag)?;
    let (staged, _) = stage_file(
        root,
        table,
        run.rank,
        &run.run_id,
        &path,
        std::iter::once(Ok(rows)),
        (first, last),
        delta.stats_collector(run.rank)?,
    )?;
    let removes: Vec<String> = bin.iter().map(|b| b.0.clone()).collect();
    let logged = staged.path.clone();
    if let Err(e) = delta.commit(&[staged], &removes, Operation::Compact) {
        let _ = fs::remove_file(delta.dir().join(&logged));
        return Err(e);
    }
    delete_files(delta.dir(), &removes);
    Ok(())
}

/// Deletes the data files no log lists and the staged files, of the runs in `held` (which
/// this compaction claimed: no writer of theirs is running).
fn delete_orphans(root: &Path, held: &HashSet<String>) -> Result<u64> {
    let mut deleted = 0;
    for table in Table::ALL {
        let Some(delta) = DeltaTable::open(root, table)? else {
            continue;
        };
        let listed: HashSet<String> = delta.files()?.into_iter().map(|f| f.path).collect();
        let Ok(ranks) = fs::read_dir(delta.dir()) else {
            continue;
        };
        for rank_dir in ranks.flatten() {
            let dir_name = rank_dir.file_name().to_string_lossy().into_owned();
            if !dir_name.starts_with("rank=") {
                continue;
            }
            let Ok(files) = fs::read_dir(rank_dir.path()) else {
                continue;
            };
            for file in files.flatten() {
                let file_name = file.file_name().to_string_lossy().into_owned();
                let Some(name) = PartName::parse(&file_name) else {
                    continue;
                };
                let logged = format!("{dir_name}/{file_name}");
                if !listed.contains(&logged) && held.contains(&name.run_id) {
                    let _ = fs::remove_file(file.path());
                    deleted += 1;
                }
            }
        }
    }
    let staging = layout::staging_dir(root);
    if let Ok(files) = fs::read_dir(&staging) {
        for file in files.flatten() {
            let name = file.file_name().to_string_lossy().into_owned();
            let run_id = name.trim_start_matches('.').split('-').next().unwrap_or("");
            if held.contains(run_id) {
                let _ = fs::remove_file(file.path());
                deleted += 1;
            }
        }
    }
    Ok(deleted)
}
