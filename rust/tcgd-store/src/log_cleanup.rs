//! Removing expired files from a table's Delta log, as Delta's "log retention" defines it.
//!
//! Each commit adds a file to `_delta_log/`, and a checkpoint every 100 versions; nothing
//! else ever removes one, so a long job (or many short ones in one root) piles up tens of
//! thousands of small files. A log file may go once no reader can need it:
//!
//! - it is older (by modification time) than the table's `delta.logRetentionDuration`;
//! - its version is below the **boundary**: the newest complete checkpoint that is itself
//!   older than the retention. Every version committed within the retention can still be
//!   rebuilt (from the boundary checkpoint and the commits after it), and the newest
//!   checkpoint and every commit at or after it are never touched, whatever the retention;
//! - the boundary is not past the checkpoint `_last_checkpoint` names, so a reader
//!   following the hint finds its checkpoint.
//!
//! `delta.enableExpiredLogCleanup = false` turns the removal off. Files are removed oldest
//! first, so an interrupted cleanup leaves a log that is still whole. Data files are never
//! touched here.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::{Result, StoreError};

/// What a file of `_delta_log/` is, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogFile {
    /// `<v>.json`
    Commit,
    /// `<v>.checkpoint.parquet`, or a V2 checkpoint `<v>.checkpoint.<uuid>.parquet|json`.
    Checkpoint,
    /// `<v>.checkpoint.<part>.<parts>.parquet`: one part of a multi-part checkpoint.
    CheckpointPart { parts: u32 },
    /// `<v>.crc` and other per-version files (`<v>.<w>.compacted.json` counts as `<w>`).
    Other,
}

/// A log file with its version (the last version it covers) and modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub name: String,
    pub version: u64,
    pub modified: SystemTime,
}

/// Parses `<20 digits>.<rest>`; `None` for names that are not versioned log files
/// (`_last_checkpoint`, temporary files, directories such as `_sidecars`).
fn classify(name: &str) -> Option<(u64, LogFile)> {
    let (digits, rest) = name.split_at_checked(20)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let version: u64 = digits.parse().ok()?;
    let rest = rest.strip_prefix('.')?;
    if rest == "json" {
        return Some((version, LogFile::Commit));
    }
    if rest == "crc" {
        return Some((version, LogFile::Other));
    }
    if let Some(compacted) = rest.strip_suffix(".compacted.json") {
        // `<from>.<to>.compacted.json` stands for versions up to `<to>`.
        let to: u64 = compacted.parse().ok().filter(|_| compacted.len() == 20)?;
        return Some((to.max(version), LogFile::Other));
    }
    let checkpoint = rest.strip_prefix("checkpoint.")?;
    if checkpoint == "parquet" {
        return Some((version, LogFile::Checkpoint));
    }
    let fields: Vec<&str> = checkpoint.split('.').collect();
    match fields.as_slice() {
        [part, parts, "parquet"]
            if part.len() == 10 && parts.len() == 10 && part.parse::<u32>().is_ok() =>
        {
            let parts = parts.parse().ok()?;
            Some((version, LogFile::CheckpointPart { parts }))
        }
        [_uuid, "parquet" | "json"] => Some((version, LogFile::Checkpoint)),
        _ => None,
    }
}

/// The files of `entries` to remove, oldest first: those below the boundary (see the
/// module's comment) and older than `cutoff`. `hint`: the version `_last_checkpoint` names.
pub(crate) fn expired(entries: &[Entry], cutoff: SystemTime, hint: Option<u64>) -> Vec<&Entry> {
    // Per version: its commit's time, and whether a complete checkpoint exists (and when it
    // was written, for a version whose commit is gone).
    let mut commit_time: BTreeMap<u64, SystemTime> = BTreeMap::new();
    let mut single: BTreeMap<u64, SystemTime> = BTreeMap::new();
    let mut parts: BTreeMap<(u64, u32), (u32, SystemTime)> = BTreeMap::new();
    for entry in entries {
        let Some((version, kind)) = classify(&entry.name) else {
            continue;
        };
        match kind {
            LogFile::Commit => {
                commit_time.insert(version, entry.modified);
            }
            LogFile::Checkpoint => {
                let at = single.entry(version).or_insert(entry.modified);
                *at = (*at).max(entry.modified);
            }
            LogFile::CheckpointPart { parts: total } => {
                let seen = parts.entry((version, total)).or_insert((0, entry.modified));
                seen.0 += 1;
                seen.1 = seen.1.max(entry.modified);
            }
            LogFile::Other => {}
        }
    }
    let mut complete = single;
    for ((version, total), (found, at)) in parts {
        if found == total {
            let time = complete.entry(version).or_insert(at);
            *time = (*time).max(at);
        }
    }
    let boundary = complete
        .iter()
        .filter(|(version, written)| {
            let time = commit_time.get(version).copied().unwrap_or(**written);
            time < cutoff
        })
        .map(|(version, _)| *version)
        .max();
    let Some(mut boundary) = boundary else {
        return Vec::new();
    };
    if let Some(hint) = hint {
        boundary = boundary.min(hint);
    }
    let mut doomed: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.version < boundary && e.modified < cutoff)
        .collect();
    doomed.sort_by(|a, b| (a.version, &a.name).cmp(&(b.version, &b.name)));
    doomed
}

/// The versioned files of `log_dir`.
fn list(log_dir: &Path) -> Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for item in fs::read_dir(log_dir).map_err(StoreError::io(log_dir))? {
        let item = item.map_err(StoreError::io(log_dir))?;
        let name = item.file_name().to_string_lossy().into_owned();
        let Some((version, _)) = classify(&name) else {
            continue;
        };
        let meta = item.metadata().map_err(StoreError::io(item.path()))?;
        if !meta.is_file() {
            continue;
        }
        let modified = meta.modified().map_err(StoreError::io(item.path()))?;
        entries.push(Entry {
            name,
            version,
            modified,
        });
    }
    Ok(entries)
}

/// What `_last_checkpoint` says, for the cleanup.
enum Hint {
    /// No hint: readers list the log.
    Absent,
    /// The checkpoint version it names: that checkpoint must stay.
    Version(u64),
    /// A hint that cannot be read. The kernel ignores it and lists the log, but other
    /// engines may follow it anyway, so the cleanup removes nothing.
    Unreadable,
}

fn checkpoint_hint(log_dir: &Path) -> Result<Hint> {
    let path = log_dir.join("_last_checkpoint");
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Hint::Absent),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => return Ok(Hint::Unreadable),
        Err(e) => return Err(StoreError::io(&path)(e)),
    };
    Ok(serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("version").and_then(serde_json::Value::as_u64))
        .map_or(Hint::Unreadable, Hint::Version))
}

/// Removes the expired files of `log_dir` (see the module's comment); returns the paths
/// removed. A file another cleanup removed first is not an error.
pub(crate) fn remove_expired(log_dir: &Path, cutoff: SystemTime) -> Result<Vec<PathBuf>> {
    let hint = match checkpoint_hint(log_dir)? {
        Hint::Absent => None,
        Hint::Version(version) => Some(version),
        Hint::Unreadable => return Ok(Vec::new()),
    };
    let entries = list(log_dir)?;
    let mut removed = Vec::new();
    for entry in expired(&entries, cutoff, hint) {
        let path = log_dir.join(&entry.name);
        match fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(&path)(e)),
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    /// Commits `0..=last` one second apart (version v at second v), and checkpoints.
    fn log(last: u64, checkpoints: &[u64]) -> Vec<Entry> {
        let mut entries: Vec<Entry> = (0..=last)
            .map(|v| Entry {
                name: format!("{v:020}.json"),
                version: v,
                modified: at(v),
            })
            .collect();
        for &c in checkpoints {
            entries.push(Entry {
                name: format!("{c:020}.checkpoint.parquet"),
                version: c,
                modified: at(c),
            });
        }
        entries
    }

    fn names(entries: &[&Entry]) -> Vec<String> {
        entries.iter().map(|e| e.name.clone()).collect()
    }

    #[test]
    fn names_of_log_files() {
        let v = "00000000000000000042";
        assert_eq!(classify(&format!("{v}.json")), Some((42, LogFile::Commit)));
        assert_eq!(
            classify(&format!("{v}.checkpoint.parquet")),
            Some((42, LogFile::Checkpoint))
        );
        assert_eq!(
            classify(&format!("{v}.checkpoint.0000000001.0000000003.parquet")),
            Some((42, LogFile::CheckpointPart { parts: 3 }))
        );
        assert_eq!(
            classify(&format!(
                "{v}.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json"
            )),
            Some((42, LogFile::Checkpoint))
        );
        assert_eq!(classify(&format!("{v}.crc")), Some((42, LogFile::Other)));
        assert_eq!(
            classify(&format!("{v}.00000000000000000050.compacted.json")),
            Some((50, LogFile::Other))
        );
        for other in [
            "_last_checkpoint",
            "_sidecars",
            "42.json",
            ".00000000000000000042.json.tmp",
            "0000000000000000004x.json",
            "00000000000000000042.json.tmp",
        ] {
            assert_eq!(classify(other), None, "{other}");
        }
    }

    #[test]
    fn nothing_goes_without_an_expired_checkpoint() {
        // No checkpoint at all: every file is needed.
        assert!(expired(&log(250, &[]), at(1000), None).is_empty());
        // A checkpoint younger than the retention: everything before it may still be
        // read to rebuild the versions within the retention.
        assert!(expired(&log(250, &[100, 200]), at(50), Some(200)).is_empty());
    }

    #[test]
    fn files_below_the_newest_expired_checkpoint_go() {
        let entries = log(250, &[100, 200]);
        // Everything is older than the retention: the boundary is the newest checkpoint.
        let doomed = expired(&entries, at(1000), Some(200));
        assert_eq!(doomed.len(), 200 + 1, "commits 0..200 and checkpoint 100");
        assert!(doomed.iter().all(|e| e.version < 200));
        assert_eq!(doomed[0].name, format!("{:020}.json", 0));
        assert!(names(&doomed).contains(&format!("{:020}.checkpoint.parquet", 100)));
        // Versions 150.. are within the retention: they are rebuilt from checkpoint 100,
        // so it and the commits after it stay.
        let doomed = expired(&entries, at(150), Some(200));
        assert_eq!(doomed.len(), 100);
        assert!(doomed.iter().all(|e| e.version < 100));
    }

    #[test]
    fn a_stale_hint_holds_the_boundary_back() {
        let entries = log(250, &[100, 200]);
        let doomed = expired(&entries, at(1000), Some(100));
        assert!(doomed.iter().all(|e| e.version < 100));
        assert_eq!(doomed.len(), 100);
    }

    #[test]
    fn an_incomplete_multi_part_checkpoint_is_no_boundary() {
        let mut entries = log(250, &[100]);
        entries.push(Entry {
            name: format!("{:020}.checkpoint.0000000001.0000000002.parquet", 200),
            version: 200,
            modified: at(200),
        });
        let doomed = expired(&entries, at(1000), None);
        assert!(
            doomed.iter().all(|e| e.version < 100),
            "{:?}",
            names(&doomed)
        );
        entries.push(Entry {
            name: format!("{:020}.checkpoint.0000000002.0000000002.parquet", 200),
            version: 200,
            modified: at(200),
        });
        let doomed = expired(&entries, at(1000), None);
        assert_eq!(doomed.iter().map(|e| e.version).max(), Some(199));
    }

    #[test]
    fn a_file_younger_than_the_retention_stays_whatever_its_version() {
        let mut entries = log(250, &[100, 200]);
        // Commit 5 was rewritten (touched) recently.
        entries[5].modified = at(5000);
        let doomed = expired(&entries, at(1000), Some(200));
        assert!(!names(&doomed).contains(&format!("{:020}.json", 5)));
        assert_eq!(doomed.len(), 200);
    }

    #[test]
    fn removal_on_disk_keeps_the_hint_and_what_follows_the_boundary() {
        let dir = tempfile::tempdir().unwrap();
        for v in 0..=120u64 {
            fs::write(dir.path().join(format!("{v:020}.json")), b"{}\n").unwrap();
        }
        fs::write(
            dir.path().join(format!("{:020}.checkpoint.parquet", 100)),
            b"x",
        )
        .unwrap();
        fs::write(
            dir.path().join("_last_checkpoint"),
            br#"{"version":100,"size":1}"#,
        )
        .unwrap();
        fs::create_dir(dir.path().join("_sidecars")).unwrap();
        let later = SystemTime::now() + Duration::from_secs(3600);
        let removed = remove_expired(dir.path(), later).unwrap();
        assert_eq!(removed.len(), 100);
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left.len(), 21 + 1 + 1 + 1, "{left:?}");
        assert_eq!(left[0], format!("{:020}.checkpoint.parquet", 100));
        assert!(left.contains(&"_last_checkpoint".to_owned()));
        assert!(left.contains(&"_sidecars".to_owned()));
        // Nothing is expired yet at the real time: the files were just written.
        fs::write(dir.path().join(format!("{:020}.json", 0)), b"{}\n").unwrap();
        assert!(
            remove_expired(dir.path(), SystemTime::now() - Duration::from_secs(60))
                .unwrap()
                .is_empty()
        );
        // An unreadable hint stops the cleanup (it removes nothing, and is no error).
        fs::write(dir.path().join("_last_checkpoint"), b"garbage").unwrap();
        assert!(remove_expired(dir.path(), later).unwrap().is_empty());
        assert!(dir.path().join(format!("{:020}.json", 0)).is_file());
    }
}
