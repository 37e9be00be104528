//! Claiming a run directory: at most one writer per directory, across threads, processes
//! and hosts sharing a filesystem.
//!
//! The claim is an exclusive `flock` on a hidden lock file in the run directory, taken
//! before anything of the run is looked at or written and held for the writer's life.
//! Checking for `run.json` and then creating it is not enough: two writers starting
//! together both see no manifest, and their parts, written under the same temporary
//! names, interleave into a run that fails to load. A lock is released by the kernel when
//! its process dies, so a killed recorder never leaves a claim that blocks the next one.
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
    /// Directories this claim created (outermost first): removed again, when empty, if
    /// the run is discarded.
    created: Vec<PathBuf>,
}

impl DirClaim {
    /// Creates `dir` (and its missing parents) and claims it. Another live writer of the
    /// directory makes this fail with `RunInUse`.
    pub fn acquire(dir: &Path) -> Result<DirClaim> {
        let mut created = Vec::new();
        let lock_path = dir.join(LOCK_FILE);
        for _ in 0..LOCK_ATTEMPTS {
            created.extend(create_dirs(dir)?);
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
                    let mut claim = DirClaim {
                        lock_path: lock_path.clone(),
                        file: None,
                        created,
                    };
                    // Nothing of ours is in the directory; leave it as it was.
                    claim.remove_created_dirs();
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
                created,
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

    /// Ends the claim and removes the directories it created, when they are empty.
    pub fn release_and_remove_created(&mut self) {
        self.release();
        self.remove_created_dirs();
    }

    fn remove_created_dirs(&mut self) {
        for dir in self.created.drain(..).rev() {
            // Only empty directories go: anything another writer put there stays.
            if fs::remove_dir(&dir).is_err() {
                break;
            }
        }
    }
}

impl Drop for DirClaim {
    fn drop(&mut self) {
        self.release();
    }
}

/// Who holds the claim on `dir`, when a live writer does. Creates nothing: for messages
/// about a directory this writer will not claim.
pub(crate) fn holder(dir: &Path) -> Option<String> {
    let lock_path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&lock_path)
        .ok()?;
    match lock_exclusive(&file) {
        // Locked by us only for this look: the lock goes with `file`.
        Ok(()) => None,
        Err(LockError::Busy) => Some(holder_of(&lock_path)),
        Err(LockError::Io(_)) => None,
    }
}

/// Creates `dir` and its missing ancestors; returns the ones this call created, outermost
/// first. A directory another process creates at the same moment is not counted as ours.
fn create_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(path) = at {
        if path.as_os_str().is_empty() || path.is_dir() {
            break;
        }
        missing.push(path.to_path_buf());
        at = path.parent();
    }
    let mut created = Vec::new();
    for path in missing.into_iter().rev() {
        match fs::create_dir(&path) {
            Ok(()) => created.push(path),
            Err(e) if e.kind() == ErrorKind::AlreadyExists && path.is_dir() => {}
            Err(e) => return Err(StoreError::io(&path)(e)),
        }
    }
    Ok(created)
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
        assert_eq!(first.created.len(), 3);
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
        assert!(second.created.is_empty());
        second.release_and_remove_created();
        assert!(
            dir.is_dir(),
            "directories the second claim did not create stay"
        );
        first.remove_created_dirs();
        assert!(!root.path().join("a").exists());
    }
}
