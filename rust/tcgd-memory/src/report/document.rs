//! What every report directory holds besides its CSV files: `report.txt`, `report.json`
//! (pretty JSON ending in a newline) and `report.html`.

use serde_json::Value;

/// Pretty JSON text ending in a newline, as `report.json` and `to_json()` give it.
pub(crate) fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// `report.txt`, `report.json` and `report.html`, `(file name, content)`.
pub(crate) fn report_files(text: String, json: &Value, html: String) -> Vec<(String, String)> {
    vec![
        ("report.txt".to_owned(), text),
        ("report.json".to_owned(), pretty(json)),
        ("report.html".to_owned(), html),
    ]
}
