//! The plain-text report: what a person reads in a terminal.

use std::fmt::Write;

use crate::model::{Comparison, ComparisonKind};
use crate::report::rows::{self, ObservationRow};

/// A table with aligned columns; `right` marks numeric columns.
pub(crate) struct Table {
    headers: Vec<&'static str>,
    right: Vec<bool>,
    pub(crate) rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(columns: &[(&'static str, bool)]) -> Table {
        Table {
            headers: columns.iter().map(|c| c.0).collect(),
            right: columns.iter().map(|c| c.1).collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn render(&self, out: &mut String) {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String], out: &mut String| {
            let mut text = String::from("  ");
            let last = cells.len().saturating_sub(1);
            for (i, cell) in cells.iter().enumerate() {
                let pad = widths[i].saturating_sub(cell.chars().count());
                if self.right[i] {
                    text.push_str(&" ".repeat(pad));
                    text.push_str(cell);
                } else {
                    text.push_str(cell);
                    if i != last {
                        text.push_str(&" ".repeat(pad));
                    }
                }
                if i != last {
                    text.push_str("  ");
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        let headers: Vec<String> = self.headers.iter().map(|h| (*h).to_owned()).collect();
        line(&headers, out);
        for row in &self.rows {
            line(row, out);
        }
    }
}

pub(crate) fn more(out: &mut String, shown: usize, total: usize, limit: usize) {
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
    let shown_rank = |r: &&crate::model::RankComparison| {
        include_unchanged != Some(false) || r.status != crate::model::Status::Match
    };
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

    if c.kind == ComparisonKind::RunGroups {
        let _ = writeln!(out, "\nranks ({}):", c.ranks.len());
        let mut t = Table::new(&[
            ("rank", true),
            ("status", false),
            ("points", true),
            ("observations", true),
            ("mismatch", true),
            ("inconclusive", true),
            ("detail", false),
        ]);
        let ranks: Vec<_> = c.ranks.iter().filter(shown_rank).collect();
        for r in ranks.iter().take(limit) {
            let (points, observations, mismatch, inconclusive) = match &r.comparison {
                Some(inner) => (
                    inner.point_counts.total.to_string(),
                    inner.counts.total.to_string(),
                    inner.counts.mismatched.to_string(),
                    inner.counts.inconclusive.to_string(),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            t.rows.push(vec![
                r.rank.to_string(),
                r.status.shout().to_owned(),
                points,
                observations,
                mismatch,
                inconclusive,
                rows::rank_detail(r),
            ]);
        }
        t.render(&mut out);
        more(&mut out, ranks.len().min(limit), ranks.len(), limit);
    }

    if !rows::single_point(c) {
        let mut points = rows::point_rows(c);
        if include_unchanged == Some(false) {
            points.retain(|(_, p)| p.status != crate::model::Status::Match);
        }
        let grouped = c.kind == ComparisonKind::RunGroups;
        let _ = writeln!(out, "\npoints ({}):", points.len());
        let mut columns = Vec::new();
        if grouped {
            columns.push(("rank", true));
        }
        columns.extend([
            ("point", false),
            ("status", false),
            ("observations", true),
            ("mismatch", true),
            ("inconclusive", true),
            ("worst max abs", true),
            ("detail", false),
        ]);
        let mut t = Table::new(&columns);
        for (rank, p) in points.iter().take(limit) {
            let mut row = Vec::new();
            if grouped {
                row.push(rank.map(|r| r.to_string()).unwrap_or_default());
            }
            row.extend([
                rows::point_name(c, p),
                p.status.shout().to_owned(),
                p.counts.total.to_string(),
                p.counts.mismatched.to_string(),
                p.counts.inconclusive.to_string(),
                rows::metric(rows::worst_abs(p)),
                p.reason.clone().unwrap_or_default(),
            ]);
            t.rows.push(row);
        }
        t.render(&mut out);
        more(&mut out, points.len().min(limit), points.len(), limit);
    }

    if let Some(series) = &c.series {
        let total = c.points.len();
        let _ = writeln!(
            out,
            "\ndivergence per observation ({}):",
            series.observations.len()
        );
        let mut t = Table::new(&[
            ("observation", false),
            ("status", false),
            ("first mismatch", false),
            ("first inconclusive", false),
            ("mismatched points", true),
            ("max abs", true),
        ]);
        for d in series.observations.iter().take(limit) {
            t.rows.push(vec![
                format!("{}[{}]", d.name, d.invocation_index),
                d.status.shout().to_owned(),
                rows::series_point(&d.first_mismatch),
                rows::series_point(&d.first_inconclusive),
                rows::divergence_points(d, total),
                rows::metric(d.max_abs_error),
            ]);
        }
        t.render(&mut out);
        more(
            &mut out,
            series.observations.len().min(limit),
            series.observations.len(),
            limit,
        );
    }

    let (obs_rows, total) = rows::observation_rows(c, include_unchanged);
    if rows::keeps_matches(c, include_unchanged) {
        let _ = writeln!(out, "\nobservations ({total}, execution order):");
    } else {
        let _ = writeln!(
            out,
            "\nobservations not matching ({} of {total}, execution order):",
            obs_rows.len()
        );
    }
    if obs_rows.is_empty() {
        out.push_str("  none\n");
    } else {
        observation_table(c, &obs_rows, limit).render(&mut out);
        more(&mut out, obs_rows.len().min(limit), obs_rows.len(), limit);
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

fn observation_table(c: &Comparison, obs_rows: &[ObservationRow<'_>], limit: usize) -> Table {
    let grouped = c.kind == ComparisonKind::RunGroups;
    let multi = !rows::single_point(c);
    let mut columns = Vec::new();
    if grouped {
        columns.push(("rank", true));
    }
    if multi {
        columns.push(("point", false));
    }
    columns.extend([
        ("observation", false),
        ("status", false),
        ("kind", false),
        ("dtype", false),
        ("shape", false),
        ("mismatched", true),
        ("max abs", true),
        ("max rel", true),
        ("detail", false),
    ]);
    let mut t = Table::new(&columns);
    for row in obs_rows.iter().take(limit) {
        let o = row.observation;
        let mut cells = Vec::new();
        if grouped {
            cells.push(row.rank.map(|r| r.to_string()).unwrap_or_default());
        }
        if multi {
            cells.push(row.point_label(c));
        }
        cells.extend([
            o.label(),
            o.status.shout().to_owned(),
            o.kind.as_str().to_owned(),
            row.dtype(),
            row.shape(),
            row.mismatched(),
            row.max_abs(),
            row.max_rel(),
            o.reason.clone(),
        ]);
        t.rows.push(cells);
    }
    t
}
