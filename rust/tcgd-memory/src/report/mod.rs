//! Reports in text, JSON, CSV and HTML. Every format renders the same pruned view of the
//! tree (device -> CUDA used -> residual + allocator -> pools -> streams), so they agree
//! row for row; each level's values sum to its parent's (with `include_unchanged=false`
//! the pruned rows have zero change, so changes still sum).
//!
//! One file per report: [`comparison`] (the state tree of two snapshots or points),
//! [`summary`] (the states of a run), [`phases`] (four-point equations), [`timeline`]
//! (every point against its predecessor). This module holds what they share: options,
//! byte formatting, tables (written as CSV through the shared writer) and the page style.

use std::fmt::Write as _;

use tcgd_report::csv::Ending;
pub use tcgd_report::html::escape as escape_html;
use tcgd_report::{Cell, Table};

use crate::model::PoolId;

pub mod attribution;
mod columns;
mod comparison;
mod display;
mod document;
mod group;
mod lifetimes;
mod phases;
mod summary;
mod timeline;

pub use comparison::{
    comparison_csv, comparison_html, comparison_json, comparison_text, render_comparison, view,
};
pub use display::Display;
pub use group::{
    group_descriptor_json, group_phases_files, group_phases_json, group_summary_files,
    group_summary_json, render_group_phases, render_group_summary, GROUP_PHASE_FILES,
    GROUP_SUMMARY_FILES,
};
pub use lifetimes::{
    lifetimes_csv_files, lifetimes_files, lifetimes_html, lifetimes_json, lifetimes_text,
    LIFETIME_FILES,
};
pub use phases::{phases_json, render_phases};
pub use summary::render_summaries;
pub use timeline::{render_timeline, timeline_json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    Device,
    Pool,
    Stream,
}

impl Depth {
    pub fn parse(s: &str) -> Option<Depth> {
        match s {
            "device" => Some(Depth::Device),
            "pool" => Some(Depth::Pool),
            "stream" => Some(Depth::Stream),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportOptions {
    pub include_unchanged: bool,
    pub depth: Depth,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            include_unchanged: true,
            depth: Depth::Stream,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Csv,
    Html,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "text" => Some(Format::Text),
            "json" => Some(Format::Json),
            "csv" => Some(Format::Csv),
            "html" => Some(Format::Html),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------- formatting

/// Binary units with two decimals; exact bytes below 1 KiB.
pub fn format_bytes(value: i64) -> String {
    let magnitude = value.unsigned_abs();
    let sign = if value < 0 { "-" } else { "" };
    if magnitude < 1024 {
        return format!("{sign}{magnitude} B");
    }
    let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut scaled = magnitude as f64 / 1024.0;
    let mut unit = 0;
    while scaled >= 1024.0 && unit + 1 < units.len() {
        scaled /= 1024.0;
        unit += 1;
    }
    format!("{sign}{scaled:.2} {}", units[unit])
}

/// A signed change: `+16.00 MiB`, `-1.00 KiB`, `+0 B`.
pub fn format_change(change: i64) -> String {
    if change >= 0 {
        format!("+{}", format_bytes(change))
    } else {
        format_bytes(change)
    }
}

fn format_count_change(change: i64) -> String {
    format!("{change:+}")
}

fn opt_bytes(v: Option<i64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), format_bytes)
}

/// A byte value at two states and its change, as comparison reports print it:
/// `2.00 MiB -> 18.00 MiB (+16.00 MiB)`; an unknown value is `n/a`.
pub fn format_comparison(
    reference: Option<i64>,
    candidate: Option<i64>,
    delta: Option<i64>,
) -> String {
    let change = delta.map_or_else(|| "n/a".to_owned(), format_change);
    format!(
        "{} -> {} ({change})",
        opt_bytes(reference),
        opt_bytes(candidate)
    )
}

fn pool_name(pool: PoolId) -> String {
    crate::model::pool_label(Some(pool))
}

fn stream_name(stream: i64) -> String {
    format!("stream 0x{stream:x}")
}

// ---------------------------------------------------------------------- tables

/// A CSV file of a memory report: the table as an Arrow record batch, written through the
/// shared writer, which neutralises text a spreadsheet would run as a formula (a point
/// label like `=HYPERLINK(...)`) and leaves numbers as numbers.
pub(crate) fn csv_table(table: &Table) -> String {
    table.csv(Ending::Lf)
}

fn opt(v: Option<i64>) -> Cell {
    v.into()
}

fn opt_pool(p: Option<PoolId>) -> Cell {
    Cell::text(p.map(|(a, b)| format!("{a},{b}")))
}

/// What memory pages add to the shared style: device and pool rows stand out, cells are
/// boxed.
const STYLE: &str = "td,th{border:1px solid #ccc;padding:2px 6px}\
tr.device td{background:#eef}tr.pool td{background:#f7f7f7}\n";

fn html_page(title: &str, body: &str) -> String {
    tcgd_report::html::page(title, STYLE, body)
}

fn html_table(
    header: &[impl AsRef<str>],
    rows: &[Vec<Cell>],
    class_of: impl Fn(&[Cell]) -> &'static str,
) -> String {
    let mut out = String::from("<table>\n<thead><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", escape_html(h.as_ref()));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        let _ = write!(out, "<tr class=\"{}\">", class_of(row));
        for cell in row {
            let text = cell.to_string();
            let numeric = !text.is_empty() && text.parse::<i64>().is_ok();
            let _ = write!(
                out,
                "<td{}>{}</td>",
                if numeric { " class=\"n\"" } else { "" },
                escape_html(&text)
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    out
}

/// Line colours of charts, one per series in turn.
const COLORS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// One line of a chart: its name (the tooltip) and one value per point.
pub(crate) struct Series {
    pub name: String,
    pub values: Vec<i64>,
}

/// An SVG line chart of byte values per point, scaled to the largest value, each series a
/// polyline whose tooltip names it; `title` and every label are escaped.
pub(crate) fn line_chart(class: &str, title: &str, labels: &[&str], series: &[Series]) -> String {
    let n = labels.len();
    if series.is_empty() || n == 0 {
        return "<p>Nothing to chart.</p>\n".to_owned();
    }
    let (w, h, pad) = (720.0f64, 260.0f64, 40.0f64);
    let top = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let x = |i: usize| match n {
        1 => w / 2.0,
        _ => pad + (w - 2.0 * pad) * i as f64 / (n - 1) as f64,
    };
    let y = |v: i64| h - pad - (h - 2.0 * pad) * v as f64 / top;
    let mut svg = format!(
        "<svg class=\"{}\" width=\"{w}\" height=\"{h}\" \
         xmlns=\"http://www.w3.org/2000/svg\">\n<text x=\"{pad}\" y=\"16\" \
         font-size=\"12\">{} (peak {})</text>\n",
        escape_html(class),
        escape_html(title),
        escape_html(&format_bytes(top as i64))
    );
    for (i, label) in labels.iter().enumerate() {
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
            x(i),
            h - pad / 3.0,
            escape_html(label)
        );
    }
    for (k, s) in series.iter().enumerate() {
        let points: Vec<String> = s
            .values
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
            .collect();
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\">\
             <title>{}</title></polyline>",
            COLORS[k % COLORS.len()],
            points.join(" "),
            escape_html(&s.name)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_format() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(16), "16 B");
        assert_eq!(format_bytes(1024), "1.00 KiB");
        assert_eq!(format_bytes(-3 * 1024 * 1024), "-3.00 MiB");
        assert_eq!(format_change(2 << 20), "+2.00 MiB");
        assert_eq!(format_change(0), "+0 B");
        assert_eq!(
            escape_html("<a href='x'>&"),
            "&lt;a href=&#39;x&#39;&gt;&amp;"
        );
    }
}
