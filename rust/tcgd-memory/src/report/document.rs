//! The files of a report directory: `report.txt`, `report.json` (pretty JSON ending in
//! a newline), `report.html`, then its CSV files.

use serde_json::Value;
use tcgd_report::Table;

use super::csv_table;

/// Pretty JSON text ending in a newline, as `report.json` and `to_json()` give it.
pub(crate) fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// The files every report directory holds, before its CSV files.
const REPORT_FILES: [&str; 3] = ["report.txt", "report.json", "report.html"];

/// [`REPORT_FILES`] then `csv`: every file a report directory may hold, what `overwrite`
/// replaces. `M` is `N + 3`.
pub(crate) const fn report_file_names<const N: usize, const M: usize>(
    csv: [&'static str; N],
) -> [&'static str; M] {
    assert!(M == N + REPORT_FILES.len());
    let mut names = [""; M];
    let mut i = 0;
    while i < M {
        names[i] = if i < REPORT_FILES.len() {
            REPORT_FILES[i]
        } else {
            csv[i - REPORT_FILES.len()]
        };
        i += 1;
    }
    names
}

/// A CSV file for each `(name, table)` that has a table, `(file name, content)`.
pub(crate) fn csv_files<'a>(
    tables: impl IntoIterator<Item = (&'a str, Option<Table>)>,
) -> Vec<(String, String)> {
    tables
        .into_iter()
        .filter_map(|(name, table)| Some((name.to_owned(), csv_table(&table?))))
        .collect()
}

/// `report.txt`, `report.json`, `report.html`, then the CSV files of `tables`.
pub(crate) fn report_files<'a>(
    text: String,
    json: &Value,
    html: String,
    tables: impl IntoIterator<Item = (&'a str, Option<Table>)>,
) -> Vec<(String, String)> {
    REPORT_FILES
        .iter()
        .map(|name| (*name).to_owned())
        .zip([text, pretty(json), html])
        .chain(csv_files(tables))
        .collect()
}
