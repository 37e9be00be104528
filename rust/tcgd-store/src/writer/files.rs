//! The writer's file and time helpers: run paths, staged files, deletions, compaction
//! bins, timestamps.

use super::*;
use crate::delta::{FileStats, StagedFile, StatsCollector};
use crate::durable::Committed;

pub(crate) use crate::clock::{now_micros, rfc3339};
pub(crate) use crate::layout::refuse_version_one;

/// Where a data file of a run is written (under `_staging/`, created when missing) before
/// it moves into its table; `tag` tells the files of one writer apart.
pub(crate) fn staging_path(root: &Path, run_id: &str, table: Table, tag: &str) -> Result<PathBuf> {
    let staging = layout::staging_dir(root);
    fs::create_dir_all(&staging).map_err(StoreError::io(&staging))?;
    Ok(staging.join(format!("{run_id}-{}-{tag}.parquet", table.dir_name())))
}

/// Writes the rows of `chunks` to `staged` (a path `staging_path` gave, fsynced) and moves
/// the file into its table's rank directory under its final name; returns it as the
/// table's commit takes it (with the statistics `stats` collected on the way) and its name.
/// Not in the log yet: the caller commits it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn stage_file(
    root: &Path,
    table: Table,
    rank: i64,
    run_id: &str,
    staged: &Path,
    chunks: impl Iterator<Item = Result<RecordBatch>>,
    points: (u64, u64),
    mut stats: StatsCollector,
) -> Result<(StagedFile, PartName)> {
    let written = write_part(staged, table, chunks, &mut |rows| stats.merge(rows))?;
    let stats = match stats.finish() {
        Ok(stats) => stats,
        Err(e) => {
            let _ = fs::remove_file(staged);
            return Err(e);
        }
    };
    place_file(root, table, rank, run_id, staged, written, stats, points)
}

/// Moves the file written at `staged` (its bytes `written`, its rows' statistics `stats`)
/// into its table's rank directory under its final name: a file of the run's points
/// `first..=last`. Not in the log yet: the caller commits it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn place_file(
    root: &Path,
    table: Table,
    rank: i64,
    run_id: &str,
    staged: &Path,
    written: Committed,
    stats: FileStats,
    (first, last): (u64, u64),
) -> Result<(StagedFile, PartName)> {
    let name = PartName {
        run_id: run_id.to_owned(),
        first_point: first,
        last_point: last,
        digest_prefix: PartName::digest_prefix_of(&written.digest),
    };
    let rank_dir = layout::rank_dir(rank);
    let dir = root.join(table.dir_name()).join(&rank_dir);
    fs::create_dir_all(&dir).map_err(StoreError::io(&dir))?;
    let target = dir.join(name.file_name());
    fs::rename(staged, &target).map_err(StoreError::io(&target))?;
    sync_dir(&dir)?;
    let file = StagedFile {
        path: format!("{rank_dir}/{}", name.file_name()),
        rank,
        size: written.bytes,
        stats,
    };
    Ok((file, name))
}

/// How messages and errors name a run of a root.
pub fn run_path(root: &Path, name: &str, rank: i64) -> PathBuf {
    PathBuf::from(format!("{} (run '{name}', rank {rank})", root.display()))
}

/// The run id a data file's logged path names.
pub(crate) fn file_run_id(logged: &str) -> Option<String> {
    let (_, file) = layout::split_logged_path(logged)?;
    PartName::parse(file).map(|name| name.run_id)
}

/// Run ids become parts of file names: letters and digits only (a uuid's hex).
pub(super) fn check_run_id(run_id: &str) -> Result<()> {
    if run_id.is_empty() || run_id.len() > 64 || !run_id.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(StoreError::invalid(
            "run_id",
            format!("'{run_id}' must be 1 to 64 ASCII letters or digits"),
        ));
    }
    Ok(())
}

/// Deletes files a commit removed from the log. Failing to delete costs disk space and a
/// file that plain globs still see, never a wrong answer through the log; `compact_root`
/// deletes what is left.
pub(crate) fn delete_files(table_dir: &Path, logged: &[String]) {
    for path in logged {
        if layout::split_logged_path(path).is_some() {
            let _ = fs::remove_file(table_dir.join(path));
        }
    }
}

/// Consecutive files grouped so each group's total size stays near `target`: each group
/// becomes one file when compacted.
pub(crate) fn compaction_bins<T: Clone>(
    files: &[T],
    size_of: impl Fn(&T) -> u64,
    target: u64,
) -> Vec<Vec<T>> {
    let mut bins: Vec<Vec<T>> = Vec::new();
    let mut size = 0u64;
    for file in files {
        if bins.is_empty() || size + size_of(file) > target {
            bins.push(Vec::new());
            size = 0;
        }
        size += size_of(file);
        bins.last_mut().expect("pushed above").push(file.clone());
    }
    bins
}
