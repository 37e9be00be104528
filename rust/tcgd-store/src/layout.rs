//! Where things are in a job root, and what a data file's name says.
//!
//! ```text
//! <root>/<table>/_delta_log/...                      the table's commit log
//! <root>/<table>/rank=<r>/part-<run>-<first>-<last>-<digest>.parquet
//! <root>/_staging/                                   files being written
//! <root>/_claims/<run name key>.rank=<r>/            one live writer per run name and rank
//! ```
//!
//! A data file holds rows of one run and of points `first..=last` of it; `digest` is the
//! start of the blake3 of the file's bytes, checked when the file is validated. Names
//! starting with `_` are skipped by Delta, Spark and Hive-style readers, so staging and
//! claims never look like data.

use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};

/// Files being written, before they move into their table.
pub const STAGING_DIR: &str = "_staging";
/// Writer claims (see `claim.rs`).
pub const CLAIMS_DIR: &str = "_claims";
/// Hex digits of the file digest kept in a data file's name: 64 bits find damage; they
/// are not a defence against someone forging files.
const NAME_DIGEST_HEX: usize = 16;

/// What a data file's name says about its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartName {
    pub run_id: String,
    pub first_point: u64,
    pub last_point: u64,
    /// `blake3:`-less hex prefix of the file's digest.
    pub digest_prefix: String,
}

impl PartName {
    pub fn file_name(&self) -> String {
        format!(
            "part-{}-{:06}-{:06}-{}.parquet",
            self.run_id, self.first_point, self.last_point, self.digest_prefix
        )
    }

    /// Parses `part-<run>-<first>-<last>-<digest>.parquet` (the file name only).
    pub fn parse(file_name: &str) -> Option<PartName> {
        let stem = file_name.strip_prefix("part-")?.strip_suffix(".parquet")?;
        let mut fields = stem.rsplitn(4, '-');
        let digest_prefix = fields.next()?;
        let last_point = fields.next()?.parse().ok()?;
        let first_point = fields.next()?.parse().ok()?;
        let run_id = fields.next()?;
        let plain = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
        if !plain(run_id) || !plain(digest_prefix) || first_point > last_point {
            return None;
        }
        Some(PartName {
            run_id: run_id.to_owned(),
            first_point,
            last_point,
            digest_prefix: digest_prefix.to_owned(),
        })
    }

    /// The name's digest prefix from a full `blake3:<hex>` digest.
    pub fn digest_prefix_of(digest: &str) -> String {
        let hex = digest.strip_prefix("blake3:").unwrap_or(digest);
        hex.chars().take(NAME_DIGEST_HEX).collect()
    }
}

/// The partition directory of `rank` inside a table directory.
pub fn rank_dir(rank: i64) -> String {
    format!("rank={rank}")
}

/// A path from the log, relative to the table directory, as `(rank directory, file name)`;
/// `None` for anything but `rank=<int>/<plain file name>`, so no logged path can reach
/// outside the table.
pub fn split_logged_path(path: &str) -> Option<(i64, &str)> {
    let (dir, file) = path.split_once('/')?;
    let rank = dir.strip_prefix("rank=")?.parse().ok()?;
    let plain = !file.is_empty()
        && !file.contains('/')
        && !file.contains('\\')
        && file != ".."
        && file != "."
        && !file.starts_with('.');
    plain.then_some((rank, file))
}

/// The claim directory of a run name and rank: names may hold any characters, so the
/// directory is named by a digest of the name.
pub fn claim_dir(root: &Path, name: &str, rank: i64) -> PathBuf {
    let key = blake3::hash(name.as_bytes()).to_hex();
    root.join(CLAIMS_DIR)
        .join(format!("{}.rank={rank}", &key.as_str()[..24]))
}

pub fn staging_dir(root: &Path) -> PathBuf {
    root.join(STAGING_DIR)
}

/// Where a version 1 run keeps its manifest: such a directory gets a clear error.
pub const VERSION_ONE_MANIFEST: &str = "run.json";

/// Refuses a version 1 run directory (its `run.json` manifest) with an error saying what
/// it is, before anything is written next to it.
pub fn refuse_version_one(root: &Path) -> Result<()> {
    if root.join(VERSION_ONE_MANIFEST).is_file() {
        return Err(StoreError::VersionOneRun {
            path: root.to_path_buf(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_round_trip() {
        let name = PartName {
            run_id: "ab12".into(),
            first_point: 3,
            last_point: 17,
            digest_prefix: "00ff00ff00ff00ff".into(),
        };
        assert_eq!(
            name.file_name(),
            "part-ab12-000003-000017-00ff00ff00ff00ff.parquet"
        );
        assert_eq!(PartName::parse(&name.file_name()), Some(name));
        assert_eq!(PartName::parse("part-x-000002-000001-aa.parquet"), None);
        assert_eq!(PartName::parse("part-../-000001-000002-aa.parquet"), None);
        assert_eq!(PartName::parse("other.parquet"), None);
    }

    #[test]
    fn logged_paths_stay_inside_the_table() {
        assert_eq!(
            split_logged_path("rank=3/part-a.parquet"),
            Some((3, "part-a.parquet"))
        );
        assert_eq!(split_logged_path("rank=3/../x.parquet"), None);
        assert_eq!(split_logged_path("../rank=3/x.parquet"), None);
        assert_eq!(split_logged_path("rank=x/a.parquet"), None);
        assert_eq!(split_logged_path("rank=1/.hidden"), None);
        assert_eq!(split_logged_path("a.parquet"), None);
    }
}
