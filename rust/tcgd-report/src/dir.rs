//! Writing a report into a directory, the same way for every kind of report.
//!
//! A directory that already holds anything is refused unless the caller asks to
//! overwrite; even then only the report's own files are removed (so a stale file of an
//! earlier report cannot linger next to the new ones) and everything else is left alone.
//! Each file is written under a hidden temporary name and renamed into place, so a reader
//! never sees half a file.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ReportDirError {
    #[error(
        "report directory '{}' is not empty (it holds {entries}); pass overwrite=True \
         (--overwrite) to replace the report files, which removes only files this tool \
         writes, or choose an empty directory",
        dir.display()
    )]
    Exists { dir: PathBuf, entries: String },

    #[error(
        "'{}' exists and is not a directory; give a directory for the report",
        path.display()
    )]
    NotADirectory { path: PathBuf },

    #[error(
        "'{}' is not a file; remove it or choose another report directory",
        path.display()
    )]
    NotAFile { path: PathBuf },

    #[error("I/O error on '{}': {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReportDirError + '_ {
    move |source| ReportDirError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `files` (`(file name, content)`) into `dir`, created if missing, and returns
/// the paths written. `own` names every file this kind of report can write: with
/// `overwrite`, those are removed first; nothing else is touched.
pub fn write_report<N: AsRef<str>>(
    dir: &Path,
    files: &[(N, String)],
    own: &[N],
    overwrite: bool,
) -> Result<Vec<PathBuf>, ReportDirError> {
    if dir.exists() && !dir.is_dir() {
        return Err(ReportDirError::NotADirectory {
            path: dir.to_path_buf(),
        });
    }
    fs::create_dir_all(dir).map_err(io(dir))?;
    let mut entries: Vec<String> = fs::read_dir(dir)
        .map_err(io(dir))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    if !entries.is_empty() && !overwrite {
        let shown: Vec<&str> = entries.iter().take(5).map(String::as_str).collect();
        return Err(ReportDirError::Exists {
            dir: dir.to_path_buf(),
            entries: format!(
                "{}{}",
                shown.join(", "),
                if entries.len() > 5 { ", ..." } else { "" }
            ),
        });
    }
    for name in own {
        let path = dir.join(name.as_ref());
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_file() || meta.file_type().is_symlink() => {
                fs::remove_file(&path).map_err(io(&path))?;
            }
            Ok(_) => return Err(ReportDirError::NotAFile { path }),
            Err(_) => {}
        }
    }
    let mut written = Vec::with_capacity(files.len());
    for (name, content) in files {
        let name = name.as_ref();
        let path = dir.join(name);
        let temp = dir.join(format!(".{name}.tmp"));
        let mut file = fs::File::create(&temp).map_err(io(&temp))?;
        file.write_all(content.as_bytes()).map_err(io(&temp))?;
        drop(file);
        fs::rename(&temp, &path).map_err(io(&path))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Vec<(&'static str, String)> {
        vec![("a.txt", "new a".into()), ("b.csv", "new b".into())]
    }

    #[test]
    fn a_non_empty_directory_needs_overwrite_which_replaces_only_own_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("report");
        let own = ["a.txt", "b.csv", "c.html"];
        let written = write_report(&dir, &files(), &own, false).unwrap();
        assert_eq!(written, vec![dir.join("a.txt"), dir.join("b.csv")]);
        fs::write(dir.join("c.html"), "stale").unwrap();
        fs::write(dir.join("notes.md"), "mine").unwrap();
        let err = write_report(&dir, &files(), &own, false).unwrap_err();
        assert!(matches!(err, ReportDirError::Exists { .. }), "{err}");
        let message = err.to_string();
        assert!(message.contains(&dir.display().to_string()), "{message}");
        assert!(
            message.contains("a.txt, b.csv, c.html, notes.md"),
            "{message}"
        );
        assert!(message.contains("--overwrite") && message.contains("overwrite=True"));
        write_report(&dir, &files(), &own, true).unwrap();
        assert_eq!(fs::read_to_string(dir.join("a.txt")).unwrap(), "new a");
        assert!(
            !dir.join("c.html").exists(),
            "a stale report file is removed"
        );
        assert_eq!(fs::read_to_string(dir.join("notes.md")).unwrap(), "mine");
    }

    #[test]
    fn a_file_in_the_way_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("file");
        fs::write(&path, "x").unwrap();
        let err = write_report(&path, &files(), &["a.txt"], true).unwrap_err();
        assert!(matches!(err, ReportDirError::NotADirectory { .. }));
        let dir = tmp.path().join("d");
        fs::create_dir_all(dir.join("a.txt")).unwrap();
        let err = write_report(&dir, &files(), &["a.txt"], true).unwrap_err();
        assert!(matches!(err, ReportDirError::NotAFile { .. }));
    }
}
