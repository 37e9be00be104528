//! Claiming a run: at most one writer per run name and rank of a job root, across threads,
//! processes and hosts sharing a filesystem.
//!
//! The claim is an exclusive `flock` on a hidden lock file in the run's claim directory
//! (`<root>/_claims/<name key>.rank=<r>/`), taken before anything of the run is looked at
//! or written and held for the writer's life (and by `tcgd compact` while it rewrites the
//! run). Checking the `runs` table and then adding a row is not enough: two writers
//! starting together both see no run and both record one. A lock is released by the
//! kernel when its process dies, so a killed recorder never leaves a claim that blocks the
//! next one. Claim directories are never removed: another writer may be creating or
//! locking in them at that moment.
//!
//! The lock file is removed when the writer ends. A writer that takes the lock checks that
//! the file it locked is still the one at the path (the previous holder may have removed
//! it between our open and our lock); if not, it starts over.

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
            fs::create_dir_all(dir).map_err(StoreError::io(dir))?;
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

    /// Ends the claim: removes the lock file while still holding the lock, then unlocks.
    pub fn release(&mut self) {
        if let Some(file) = self.file.take() {
            let _ = fs::remove_file(&self.lock_path);
            drop(file);
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
        assert!(dir.is_dir(), "claim directories stay for the next writer");
    }
}
