//! The plain-text report: what a person reads in a terminal.

use std::fmt::Write;

use crate::model::Comparison;
use crate::report::rows::{self, Section};

use tcgd_report::document::aligned_columns as aligned;

/// A section under its heading: a table of its text columns, or `none` when it says so.
pub(crate) fn section(out: &mut String, s: &Section) {
    let _ = writeln!(out, "\n{}:", s.title);
    if s.none_if_empty && s.rows.is_empty() {
        out.push_str("  none\n");
        return;
    }
    let shown: Vec<usize> = (0..s.columns.len())
        .filter(|&i| !s.columns[i].html_only)
        .collect();
    let right: Vec<bool> = shown.iter().map(|&i| s.columns[i].numeric).collect();
    let mut lines = vec![shown.iter().map(|&i| s.columns[i].name).collect::<Vec<_>>()];
    for row in &s.rows {
        lines.push(shown.iter().map(|&i| row[i].plain()).collect());
    }
    aligned(out, &right, &lines);
    more(out, s.rows.len(), s.total, s.limit);
}

fn more(out: &mut String, shown: usize, total: usize, limit: usize) {
    if total > shown {
        let _ = writeln!(
            out,
            "  ... {} more not shown (limit {limit}; report.json lists every row)",
            total - shown
        );
    }
}

/// `include_unchanged`: whether matching ranks, points and observations get rows
/// (`None`: [`rows::keeps_matches`]'s default). The header counts every row either way.
pub fn render(c: &Comparison, limit: usize, include_unchanged: Option<bool>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "torch-cudagraph-debug {}", c.kind.title());
    let header = rows::header(c);
    let width = header.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    for (key, value) in &header {
        let _ = writeln!(out, "{:width$} {value}", format!("{key}:"));
    }
    if !c.warnings.is_empty() {
        out.push_str("\nwarnings:\n");
        for w in &c.warnings {
            let _ = writeln!(out, "  - {w}");
        }
    }

    for s in rows::sections(c, limit, include_unchanged) {
        section(&mut out, &s);
    }

    let worst = c.worst(Some(limit.min(5)));
    let worth_listing: Vec<_> = worst
        .iter()
        .filter(|(_, _, o)| o.status != crate::model::Status::Match)
        .collect();
    // A ranking says something new only once there are a few issues to rank.
    if worth_listing.len() >= 3 {
        out.push_str("\nworst observations:\n");
        for (i, (rank, p, o)) in worth_listing.iter().enumerate() {
            let mut at = String::new();
            if let Some(r) = rank {
                at.push_str(&format!("rank {r}, "));
            }
            if !rows::single_point(c) {
                at.push_str(&format!("point {}, ", rows::point_name(c, p)));
            }
            let _ = writeln!(out, "  {}. {at}{}: {}", i + 1, o.label(), o.reason);
        }
    }
    out
}
