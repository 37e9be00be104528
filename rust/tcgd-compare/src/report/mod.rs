//! Reports of a comparison: text for people, JSON for programs, HTML with charts, and CSV
//! tables; and writing them into a directory.

pub mod csv;
pub mod html;
mod rows;
pub mod text;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{CompareError, Result};
use crate::model::Comparison;

/// Every file name a report directory can hold. `write` replaces only these.
pub const REPORT_FILES: [&str; 7] = [
    "report.txt",
    "report.json",
    "report.html",
    "observations.csv",
    "points.csv",
    "divergence.csv",
    "ranks.csv",
];

/// The complete comparison as pretty-printed JSON.
pub fn to_json(c: &Comparison) -> Result<String> {
    serde_json::to_string_pretty(c)
        .map_err(|e| CompareError::InvalidInput(format!("cannot encode the report: {e}")))
}

pub fn to_text(c: &Comparison, limit: Option<usize>) -> String {
    text::render(c, limit.unwrap_or(c.options.limit))
}

pub fn to_html(c: &Comparison, limit: Option<usize>) -> String {
    html::render(c, limit.unwrap_or(c.options.limit))
}

/// The CSV tables that apply to this comparison, by file name.
pub fn csv_tables(c: &Comparison) -> Vec<(&'static str, String)> {
    let mut tables = vec![
        ("observations.csv", csv::observations(c)),
        ("points.csv", csv::points(c)),
    ];
    if let Some(t) = csv::divergence(c) {
        tables.push(("divergence.csv", t));
    }
    if let Some(t) = csv::ranks(c) {
        tables.push(("ranks.csv", t));
    }
    tables
}

/// Writes every report into `dir` (created if missing) and returns the paths written.
///
/// A directory that already holds anything needs `overwrite`; even then only the files in
/// [`REPORT_FILES`] are removed (so a stale table of an earlier report cannot linger), and
/// everything else in the directory is left alone. Each file is written under a temporary
/// name and renamed into place.
pub fn write(
    c: &Comparison,
    dir: &Path,
    overwrite: bool,
    limit: Option<usize>,
) -> Result<Vec<PathBuf>> {
    if dir.exists() && !dir.is_dir() {
        return Err(CompareError::InvalidInput(format!(
            "'{}' exists and is not a directory; give a directory for the report",
            dir.display()
        )));
    }
    fs::create_dir_all(dir).map_err(CompareError::io(dir))?;
    let mut entries: Vec<String> = fs::read_dir(dir)
        .map_err(CompareError::io(dir))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    if !entries.is_empty() && !overwrite {
        let shown: Vec<&str> = entries.iter().take(5).map(String::as_str).collect();
        return Err(CompareError::ReportExists {
            dir: dir.to_path_buf(),
            entries: format!(
                "{}{}",
                shown.join(", "),
                if entries.len() > 5 { ", ..." } else { "" }
            ),
        });
    }
    for name in REPORT_FILES {
        let path = dir.join(name);
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_file() || meta.file_type().is_symlink() => {
                fs::remove_file(&path).map_err(CompareError::io(&path))?;
            }
            Ok(_) => {
                return Err(CompareError::InvalidInput(format!(
                    "'{}' is not a file; remove it or choose another report directory",
                    path.display()
                )))
            }
            Err(_) => {}
        }
    }
    let mut files = vec![
        ("report.txt", to_text(c, limit)),
        ("report.json", to_json(c)?),
        ("report.html", to_html(c, limit)),
    ];
    files.extend(csv_tables(c));
    let mut written = Vec::with_capacity(files.len());
    for (name, content) in files {
        let path = dir.join(name);
        let temp = dir.join(format!(".{name}.tmp"));
        let mut file = fs::File::create(&temp).map_err(CompareError::io(&temp))?;
        file.write_all(content.as_bytes())
            .map_err(CompareError::io(&temp))?;
        drop(file);
        fs::rename(&temp, &path).map_err(CompareError::io(&path))?;
        written.push(path);
    }
    Ok(written)
}
