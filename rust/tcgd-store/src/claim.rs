//! Claiming a run: at most one writer per run name and rank of a job root, across threads,
//! processes and hosts sharing a filesystem.
//!
//! The claim is an exclusive `flock` on a hidden lock file in the run's claim directory
//! (`<root>/_claims/<name key>.rank=<r>/`), taken before anything of the run is looked at
//! or written and held for the writer's life (and by `tcgd compact` while it rewrites the
//! run). Checking the `runs` table and then adding a row is not enough: two writers
//! starting together both see no run and both record one. A lock is released by the
//! kernel when its process dies, so a killed recorder never leaves a claim that blocks the
//! next one.
//!
//! When the writer ends, it removes the lock file (still holding the lock), then its claim
//! directory and `_claims/` if they are empty. Each step is safe against a writer starting
//! at that moment:
//!
//! - A writer that opened the lock file before it was removed locks a file no longer at
//!   the path: it checks that the file it locked is still the one at the path, and starts
//!   over when it is not.
//! - A writer that created its lock file in the directory first makes the directory not
//!   empty: `rmdir` fails and the directory stays (never a recursive removal).
//! - A writer whose directory is removed between creating it and opening the lock file
//!   (or whose `_claims/` goes between creating it and creating its directory, or whose
//!   directory goes between "it exists" and the check that it is one) gets "not found" or
//!   "exists" and starts over, creating them again.
//!
//! A crash leaves the lock file and its directory, unlocked: the next writer of that run
//! name and rank takes it over, and removes it when it ends.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};

/// The lock file's name: hidden, so `*.parquet` globs and listings of tables skip it.
pub const LOCK_FILE: &str = ".tcgd-writer.lock";

/// Attempts at locking before giving up on a directory whose lock file keeps changing.
const LOCK_ATTEMPTS: usize = 20;

pub(crate) struct DirClaim {
    lock_path: PathBuf,
    /// Holds the lock while open; `None` once released.
    file: Option<File>,
}

impl DirClaim {
    /// Creates `dir` (and its missing parents) and claims it. Another live writer of the
    /// directory makes this fail with `RunInUse`.
    pub fn acquire(dir: &Path) -> Result<DirClaim> {
        let lock_path = dir.join(LOCK_FILE);
        for _ in 0..LOCK_ATTEMPTS {
            match fs::create_dir_all(dir) {
                Ok(()) => {}
                // A writer ending removed `_claims/` between the creation of it and of
                // `dir` (not found), or `dir` between its creation failing because it
                // existed and the check that it is a directory (exists): make them again.
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::AlreadyExists) => {
                    continue
                }
                Err(e) => return Err(StoreError::io(dir)(e)),
            }
            let file = match OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&lock_path)
            {
                Ok(file) => file,
                // The directory was removed under us (a losing writer cleaning up what it
                // created): make it again.
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io(&lock_path)(e)),
            };
            match lock_exclusive(&file) {
                Ok(()) => {}
                Err(LockError::Busy) => {
                    return Err(StoreError::RunInUse {
                        path: dir.to_path_buf(),
                        holder: holder_of(&lock_path),
                    });
                }
                Err(LockError::Io(e)) => return Err(StoreError::io(&lock_path)(e)),
            }
            if !still_at_path(&file, &lock_path) {
                continue;
            }
            let mut claim = DirClaim {
                lock_path,
                file: Some(file),
            };
            claim.write_holder();
            return Ok(claim);
        }
        Err(StoreError::RunInUse {
            path: dir.to_path_buf(),
            holder: "writers that keep starting and ending".into(),
        })
    }

    /// Whether the claim is still held (released by `release`).
    pub fn is_held(&self) -> bool {
        self.file.is_some()
    }

    /// Who holds the claim, for the message another writer gets.
    fn write_holder(&mut self) {
        if let Some(file) = self.file.as_mut() {
            let holder = format!("pid {} on host {}", std::process::id(), host_name());
            // Only a message depends on it: a failure here does not stop the writer.
            let _ = file
                .set_len(0)
                .and_then(|()| file.write_all(holder.as_bytes()));
        }
    }

    /// Ends the claim: removes the lock file while still holding the lock, then unlocks
    /// and removes the claim directory and `_claims/` when nothing else is in them (see
    /// the module's comment for why this is safe with writers starting meanwhile).
    pub fn release(&mut self) {
        if let Some(file) = self.file.take() {
            let _ = fs::remove_file(&self.lock_path);
            drop(file);
            if let Some(dir) = self.lock_path.parent() {
                // `remove_dir` removes only an empty directory: one another writer has
                // put its lock file in stays.
                if fs::remove_dir(dir).is_ok() {
                    if let Some(claims) = dir.parent() {
                        let _ = fs::remove_dir(claims);
                    }
                }
            }
        }
    }
}

impl Drop for DirClaim {
    fn drop(&mut self) {
        self.release();
    }
}

enum LockError {
    Busy,
    Io(std::io::Error),
}

#[cfg(unix)]
fn lock_exclusive(file: &File) -> std::result::Result<(), LockError> {
    use rustix::fs::{flock, FlockOperation};
    use rustix::io::Errno;
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(()),
        Err(e) if e == Errno::WOULDBLOCK || e == Errno::AGAIN => Err(LockError::Busy),
        // A filesystem without file locks: the directory cannot be claimed, so two writers
        // could meet in it. Recording still works; docs/storage.md says where to record.
        Err(e) if e == Errno::NOLCK || e == Errno::NOSYS || e == Errno::OPNOTSUPP => Ok(()),
        Err(e) => Err(LockError::Io(e.into())),
    }
}

#[cfg(not(unix))]
fn lock_exclusive(_file: &File) -> std::result::Result<(), LockError> {
    // Linux is the supported platform; elsewhere the claim is the lock file's presence.
    Ok(())
}

/// Whether `file` (locked) is still the file at `path`: a writer that just ended removes
/// its lock file, and a lock taken on the removed file claims nothing.
#[cfg(unix)]
fn still_at_path(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn still_at_path(_file: &File, path: &Path) -> bool {
    path.exists()
}

fn holder_of(lock_path: &Path) -> String {
    let text = fs::read_to_string(lock_path).unwrap_or_default();
    let text = text.trim();
    if text.is_empty() || text.len() > 200 {
        "another writer".into()
    } else {
        text.to_owned()
    }
}

fn host_name() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_of_one_directory_is_refused_until_the_first_ends() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b/run");
        let mut first = DirClaim::acquire(&dir).unwrap();
        let err = DirClaim::acquire(&dir).err().unwrap();
        assert!(
            matches!(&err, StoreError::RunInUse { holder, .. }
                if holder.contains(&format!("pid {}", std::process::id()))),
            "{err}"
        );
        // The refused claim removed nothing: the first one's lock file is still there.
        assert!(dir.join(LOCK_FILE).is_file());
        first.release();
        assert!(!dir.join(LOCK_FILE).exists());
        let mut second = DirClaim::acquire(&dir).unwrap();
        second.release();
        // The claim directory and its parent are removed once empty; the root stays.
        assert!(!dir.exists());
        assert!(!root.path().join("a/b").exists());
        assert!(root.path().join("a").is_dir());
    }

    #[test]
    fn an_ending_claim_keeps_a_directory_another_writer_uses() {
        let root = tempfile::tempdir().unwrap();
        let claims = root.path().join("_claims");
        let (mine, other) = (claims.join("a.rank=0"), claims.join("b.rank=0"));
        let mut first = DirClaim::acquire(&mine).unwrap();
        let mut second = DirClaim::acquire(&other).unwrap();
        first.release();
        assert!(!mine.exists());
        assert!(
            other.join(LOCK_FILE).is_file(),
            "the other claim is untouched"
        );
        // A file in the claim directory that is not the lock (a newer writer's lock file
        // being created there) keeps the directory.
        let mut third = DirClaim::acquire(&mine).unwrap();
        fs::write(mine.join("someone-else"), b"").unwrap();
        third.release();
        assert!(mine.join("someone-else").is_file());
        second.release();
        assert!(!other.exists());
        assert!(claims.is_dir(), "_claims/ stays while a directory is in it");
        fs::remove_file(mine.join("someone-else")).unwrap();
        let mut last = DirClaim::acquire(&mine).unwrap();
        last.release();
        assert!(!claims.exists(), "_claims/ goes with the last claim");
    }

    #[test]
    fn claims_taken_and_ended_in_many_threads_never_share_a_run() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let root = tempfile::tempdir().unwrap();
        let dirs: Vec<PathBuf> = (0..2)
            .map(|i| root.path().join("_claims").join(format!("{i}.rank=0")))
            .collect();
        let holders: Arc<Vec<AtomicUsize>> =
            Arc::new((0..2).map(|_| AtomicUsize::new(0)).collect());
        let overlaps = Arc::new(AtomicUsize::new(0));
        let claimed = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (dirs, holders) = (dirs.clone(), Arc::clone(&holders));
                let (overlaps, claimed) = (Arc::clone(&overlaps), Arc::clone(&claimed));
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let which = (t + i) % 2;
                        match DirClaim::acquire(&dirs[which]) {
                            Ok(mut claim) => {
                                if holders[which].fetch_add(1, Ordering::SeqCst) != 0 {
                                    overlaps.fetch_add(1, Ordering::SeqCst);
                                }
                                claimed.fetch_add(1, Ordering::SeqCst);
                                holders[which].fetch_sub(1, Ordering::SeqCst);
                                claim.release();
                            }
                            Err(StoreError::RunInUse { .. }) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(overlaps.load(Ordering::SeqCst), 0);
        assert!(claimed.load(Ordering::SeqCst) > 0);
        assert!(
            !root.path().join("_claims").exists(),
            "every claim ended and was removed"
        );
    }
}
