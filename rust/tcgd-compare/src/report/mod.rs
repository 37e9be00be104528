//! Reports of a comparison: text for people, JSON for programs, HTML with charts, and CSV
//! tables; and writing them into a directory.

pub mod csv;
pub mod group;
pub mod html;
mod rows;
pub mod text;

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
    "rank_comparisons.csv",
];

/// The complete comparison as pretty-printed JSON.
pub fn to_json(c: &Comparison) -> Result<String> {
    serde_json::to_string_pretty(c)
        .map_err(|e| CompareError::InvalidInput(format!("cannot encode the report: {e}")))
}

pub fn to_text(c: &Comparison, limit: Option<usize>) -> String {
    to_text_with(c, limit, None)
}

/// The text report; `include_unchanged` says whether matching rows are listed (`None`:
/// for a single point pair only).
pub fn to_text_with(
    c: &Comparison,
    limit: Option<usize>,
    include_unchanged: Option<bool>,
) -> String {
    text::render(c, limit.unwrap_or(c.options.limit), include_unchanged)
}

pub fn to_html(c: &Comparison, limit: Option<usize>) -> String {
    to_html_with(c, limit, None)
}

/// The HTML report, with rows chosen as [`to_text_with`] chooses them.
pub fn to_html_with(
    c: &Comparison,
    limit: Option<usize>,
    include_unchanged: Option<bool>,
) -> String {
    html::render(c, limit.unwrap_or(c.options.limit), include_unchanged)
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
        tables.push(("rank_comparisons.csv", t));
    }
    tables
}

/// Writes every report into `dir` (created if missing) and returns the paths written,
/// by the rules every report directory follows ([`tcgd_report::dir`]): a directory that
/// already holds anything needs `overwrite`, which replaces only [`REPORT_FILES`].
pub fn write(
    c: &Comparison,
    dir: &Path,
    overwrite: bool,
    limit: Option<usize>,
) -> Result<Vec<PathBuf>> {
    write_with(c, dir, overwrite, limit, None)
}

/// [`write`], with the text and HTML rows chosen as [`to_text_with`] chooses them (JSON
/// and CSV stay complete).
pub fn write_with(
    c: &Comparison,
    dir: &Path,
    overwrite: bool,
    limit: Option<usize>,
    include_unchanged: Option<bool>,
) -> Result<Vec<PathBuf>> {
    let mut files = vec![
        ("report.txt", to_text_with(c, limit, include_unchanged)),
        ("report.json", to_json(c)?),
        ("report.html", to_html_with(c, limit, include_unchanged)),
    ];
    files.extend(csv_tables(c));
    Ok(tcgd_report::write_report(
        dir,
        &files,
        &REPORT_FILES,
        overwrite,
    )?)
}
