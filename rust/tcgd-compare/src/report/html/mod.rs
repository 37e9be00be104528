//! The HTML report: one standalone file, no script, charts as inline SVG. Every string that
//! came from a user (names, labels, paths, metadata, reasons quoting them) is escaped, and a
//! content security policy forbids scripts in case anything slipped through.

use std::fmt::Write;

use crate::model::{Comparison, ComparisonKind, Status};
use crate::report::rows::{self, ObservationRow};

mod charts;
use charts::*;

pub use tcgd_report::html::escape;

/// What tensor pages add to the shared style: facts tables, status colours, chart marks.
pub(crate) const STYLE: &str = "\
table.facts th{background:none;font-weight:600;border:none}table.facts td{border:none}
.status{font-weight:700}.match{color:#2e7d32}.mismatch{color:#c62828}.inconclusive{color:#b26a00}
rect.bar-match{fill:#2e7d32}rect.bar-mismatch{fill:#c62828}rect.bar-inconclusive{fill:#f9a825}
rect.bar-novalues{fill:none;stroke:#c62828;stroke-dasharray:3 2}
line.grid{stroke:#e3e3e3}line.boundary{stroke:#9e9e9e;stroke-dasharray:2 3}
line.divergence{stroke:#c62828;stroke-dasharray:5 3}
";

fn status_class(s: Status) -> &'static str {
    s.as_str()
}

fn status_cell(s: Status) -> String {
    format!(
        "<td class=\"status {}\">{}</td>",
        status_class(s),
        s.shout()
    )
}

pub(crate) fn cell(text: &str) -> String {
    format!("<td>{}</td>", escape(text))
}

pub(crate) fn num(text: &str) -> String {
    format!("<td class=\"num\">{}</td>", escape(text))
}

pub(crate) fn head(columns: &[&str]) -> String {
    let mut s = String::from("<thead><tr>");
    for c in columns {
        let _ = write!(s, "<th>{}</th>", escape(c));
    }
    s.push_str("</tr></thead>");
    s
}

pub(crate) fn more(out: &mut String, shown: usize, total: usize, limit: usize) {
    if total > shown {
        let _ = write!(
            out,
            "<p class=\"note\">{} more not shown (limit {limit}); report.json lists every \
             row.</p>",
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
    let title = format!("tcgd {}: {}", c.kind.title(), c.status.shout());
    let mut out = String::new();
    out.push_str(&tcgd_report::html::page_head(&title, STYLE));
    let _ = writeln!(
        out,
        "<h1>torch-cudagraph-debug {} <span class=\"status {}\" id=\"status\">{}</span></h1>",
        escape(c.kind.title()),
        status_class(c.status),
        c.status.shout()
    );
    out.push_str("<table class=\"facts\">");
    for (key, value) in rows::header(c) {
        let _ = write!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(key),
            escape(&value)
        );
    }
    out.push_str("</table>\n");
    if !c.warnings.is_empty() {
        out.push_str("<h2>Warnings</h2><ul id=\"warnings\">");
        for w in &c.warnings {
            let _ = write!(out, "<li>{}</li>", escape(w));
        }
        out.push_str("</ul>\n");
    }

    out.push_str("<h2>Error per site, in execution order</h2>\n");
    out.push_str(&site_chart(c));
    if c.kind == ComparisonKind::PointSeries {
        out.push_str("<h2>Drift over the series</h2>\n");
        out.push_str(&drift_chart(c));
    }

    if c.kind == ComparisonKind::RunGroups {
        let _ = write!(
            out,
            "<h2>Ranks ({})</h2><table id=\"ranks\">",
            c.ranks.len()
        );
        out.push_str(&head(&[
            "rank",
            "status",
            "points",
            "observations",
            "mismatch",
            "inconclusive",
            "detail",
        ]));
        out.push_str("<tbody>");
        let ranks: Vec<_> = c.ranks.iter().filter(shown_rank).collect();
        for r in ranks.iter().take(limit) {
            out.push_str("<tr>");
            out.push_str(&num(&r.rank.to_string()));
            out.push_str(&status_cell(r.status));
            match &r.comparison {
                Some(inner) => {
                    out.push_str(&num(&inner.point_counts.total.to_string()));
                    out.push_str(&num(&inner.counts.total.to_string()));
                    out.push_str(&num(&inner.counts.mismatched.to_string()));
                    out.push_str(&num(&inner.counts.inconclusive.to_string()));
                }
                None => {
                    for _ in 0..4 {
                        out.push_str(&num("-"));
                    }
                }
            }
            out.push_str(&cell(&rows::rank_detail(r)));
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table>\n");
        more(&mut out, ranks.len().min(limit), ranks.len(), limit);
    }

    if !rows::single_point(c) {
        let mut points = rows::point_rows(c);
        if include_unchanged == Some(false) {
            points.retain(|(_, p)| p.status != crate::model::Status::Match);
        }
        let grouped = c.kind == ComparisonKind::RunGroups;
        let _ = write!(
            out,
            "<h2>Points ({})</h2><table id=\"points\">",
            points.len()
        );
        let mut columns = Vec::new();
        if grouped {
            columns.push("rank");
        }
        columns.extend([
            "point",
            "replay",
            "status",
            "observations",
            "mismatch",
            "inconclusive",
            "worst max abs",
            "detail",
        ]);
        out.push_str(&head(&columns));
        out.push_str("<tbody>");
        for (rank, p) in points.iter().take(limit) {
            out.push_str("<tr>");
            if grouped {
                out.push_str(&num(&rank.map(|r| r.to_string()).unwrap_or_default()));
            }
            out.push_str(&cell(&rows::point_name(c, p)));
            let replay = p
                .candidate
                .as_ref()
                .or(p.reference.as_ref())
                .and_then(|r| r.replay_index)
                .map(|r| r.to_string())
                .unwrap_or_else(|| "-".into());
            out.push_str(&num(&replay));
            out.push_str(&status_cell(p.status));
            out.push_str(&num(&p.counts.total.to_string()));
            out.push_str(&num(&p.counts.mismatched.to_string()));
            out.push_str(&num(&p.counts.inconclusive.to_string()));
            out.push_str(&num(&rows::metric(rows::worst_abs(p))));
            out.push_str(&cell(p.reason.as_deref().unwrap_or("")));
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table>\n");
        more(&mut out, points.len().min(limit), points.len(), limit);
    }

    if let Some(series) = &c.series {
        let total = c.points.len();
        let _ = write!(
            out,
            "<h2>Divergence per observation ({})</h2><table id=\"divergence\">",
            series.observations.len()
        );
        out.push_str(&head(&[
            "observation",
            "status",
            "first mismatch",
            "first inconclusive",
            "mismatched points",
            "max abs",
        ]));
        out.push_str("<tbody>");
        for d in series.observations.iter().take(limit) {
            out.push_str("<tr>");
            out.push_str(&cell(&format!("{}[{}]", d.name, d.invocation_index)));
            out.push_str(&status_cell(d.status));
            out.push_str(&cell(&rows::series_point(&d.first_mismatch)));
            out.push_str(&cell(&rows::series_point(&d.first_inconclusive)));
            out.push_str(&num(&rows::divergence_points(d, total)));
            out.push_str(&num(&rows::metric(d.max_abs_error)));
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table>\n");
        more(
            &mut out,
            series.observations.len().min(limit),
            series.observations.len(),
            limit,
        );
    }

    let (obs_rows, total) = rows::observation_rows(c, include_unchanged);
    if rows::keeps_matches(c, include_unchanged) {
        let _ = write!(out, "<h2>Observations ({total}, execution order)</h2>");
    } else {
        let _ = write!(
            out,
            "<h2>Observations not matching ({} of {total}, execution order)</h2>",
            obs_rows.len()
        );
    }
    if obs_rows.is_empty() {
        out.push_str("<p>None.</p>\n");
    } else {
        observation_table(&mut out, c, &obs_rows, limit);
        more(&mut out, obs_rows.len().min(limit), obs_rows.len(), limit);
    }
    out.push_str(
        "<p class=\"note\">Generated by torch-cudagraph-debug. report.json holds the \
         complete comparison; the CSV files hold its tables.</p>\n",
    );
    out.push_str(tcgd_report::html::PAGE_END);
    out
}

fn observation_table(
    out: &mut String,
    c: &Comparison,
    obs_rows: &[ObservationRow<'_>],
    limit: usize,
) {
    let grouped = c.kind == ComparisonKind::RunGroups;
    let multi = !rows::single_point(c);
    out.push_str("<table id=\"observations\">");
    let mut columns = Vec::new();
    if grouped {
        columns.push("rank");
    }
    if multi {
        columns.push("point");
    }
    columns.extend([
        "observation",
        "site",
        "status",
        "kind",
        "dtype",
        "shape",
        "mismatched",
        "max abs",
        "max rel",
        "cosine",
        "max ULP",
        "detail",
    ]);
    out.push_str(&head(&columns));
    out.push_str("<tbody>");
    for row in obs_rows.iter().take(limit) {
        let o = row.observation;
        out.push_str("<tr>");
        if grouped {
            out.push_str(&num(&row.rank.map(|r| r.to_string()).unwrap_or_default()));
        }
        if multi {
            out.push_str(&cell(&row.point_label(c)));
        }
        out.push_str(&format!(
            "<td><code class=\"name\">{}</code></td>",
            escape(&o.label())
        ));
        out.push_str(&cell(&row.site()));
        out.push_str(&status_cell(o.status));
        out.push_str(&cell(o.kind.as_str()));
        out.push_str(&cell(&row.dtype()));
        out.push_str(&cell(&row.shape()));
        out.push_str(&num(&row.mismatched()));
        out.push_str(&num(&row.max_abs()));
        out.push_str(&num(&row.max_rel()));
        let m = o.metrics.as_ref();
        out.push_str(&num(&rows::metric(m.and_then(|m| m.cosine_similarity))));
        out.push_str(&num(&m
            .and_then(|m| m.max_ulp_distance)
            .map_or_else(|| "-".to_owned(), |u| u.to_string())));
        out.push_str(&cell(&o.reason));
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>\n");
}
