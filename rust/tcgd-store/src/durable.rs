//! Durable file replacement: write under a hidden temporary name, fsync, rename, fsync the
//! directory. A reader (ours, DuckDB's glob, anyone's) sees either nothing or the whole
//! file, and a crash after the rename cannot lose it.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};

/// The hidden name a file is written under before it becomes visible. The leading dot and
/// `.tmp` suffix keep it out of `*.parquet` globs and out of our own listings.
pub fn temp_path_for(final_path: &Path) -> PathBuf {
    let name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    final_path.with_file_name(format!(".{name}.tmp"))
}

/// A file being written: counts bytes and hashes them on the way to disk, so the part's
/// digest costs no second read.
pub struct HashingFile {
    inner: BufWriter<File>,
    hasher: blake3::Hasher,
    bytes: u64,
    temp: PathBuf,
    target: PathBuf,
}

pub struct Committed {
    pub bytes: u64,
    pub digest: String,
}

impl HashingFile {
    pub fn create(target: &Path) -> Result<HashingFile> {
        let temp = temp_path_for(target);
        let file = File::create(&temp).map_err(StoreError::io(&temp))?;
        Ok(HashingFile {
            inner: BufWriter::with_capacity(1 << 20, file),
            hasher: blake3::Hasher::new(),
            bytes: 0,
            temp,
            target: target.to_path_buf(),
        })
    }

    /// Flushes, fsyncs and renames into place. The directory fsync is left to the caller,
    /// who renames several files into one directory and syncs it once.
    pub fn commit(self) -> Result<Committed> {
        let temp = self.temp.clone();
        let file = self
            .inner
            .into_inner()
            .map_err(|e| StoreError::io(&temp)(e.into_error()))?;
        file.sync_all().map_err(StoreError::io(&temp))?;
        drop(file);
        fs::rename(&temp, &self.target).map_err(StoreError::io(&self.target))?;
        Ok(Committed {
            bytes: self.bytes,
            digest: format!("blake3:{}", self.hasher.finalize().to_hex()),
        })
    }

    pub fn temp_path(&self) -> &Path {
        &self.temp
    }
}

impl Write for HashingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Makes renames inside `dir` durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StoreError::io(dir))
}

/// Writes log version `version` of a Delta log (`<log_dir>/<version:020>.json`) only if no
/// file has that name yet: the text goes to a hidden temporary file, fsynced, which is then
/// hard-linked to the final name (a link never replaces a file, so of two writers racing
/// for one version exactly one wins, and a reader sees the whole commit or none). Returns
/// `false` when the version was taken.
pub fn write_new_file(log_dir: &Path, version: u64, text: &str) -> Result<bool> {
    let target = log_dir.join(format!("{version:020}.json"));
    // Unique per call: writers of one process, and of other hosts sharing the root (whose
    // process ids may be the same), race for a version too.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let unique = blake3::hash(format!("{}-{call}-{nanos}", std::process::id()).as_bytes());
    let temp = log_dir.join(format!(
        ".{version:020}.json.{}.tmp",
        &unique.to_hex().as_str()[..16]
    ));
    let written = File::create(&temp)
        .and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_all()
        })
        .map_err(StoreError::io(&temp));
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(e);
    }
    let linked = fs::hard_link(&temp, &target);
    let _ = fs::remove_file(&temp);
    match linked {
        Ok(()) => {
            sync_dir(log_dir)?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(StoreError::io(&target)(e)),
    }
}
