//! The HTML report: one standalone file, no script, charts as inline SVG. Every string that
//! came from a user (names, labels, paths, metadata, reasons quoting them) is escaped, and a
//! content security policy forbids scripts in case anything slipped through.

use std::fmt::Write;

use crate::model::{Comparison, ComparisonKind, ObservationComparison, PointComparison, Status};
use crate::report::rows::{self, ObservationRow};

/// Text safe in element content and in quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(ch),
        }
    }
    out
}

pub(crate) const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem;color:#1b1b1b;max-width:1200px}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}
th,td{border-bottom:1px solid #ddd;padding:.25rem .6rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
table.facts th{background:none;font-weight:600;border:none}table.facts td{border:none}
.status{font-weight:700}.match{color:#2e7d32}.mismatch{color:#c62828}.inconclusive{color:#b26a00}
.note{color:#555;font-size:.85rem}code{font-size:.85rem}
svg{background:#fafafa;border:1px solid #e0e0e0;max-width:100%;height:auto}
svg text{font-size:11px;fill:#333}
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
    let mut out = String::new();
    let title = format!("tcgd {}: {}", c.kind.title(), c.status.shout());
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n",
        escape(&title)
    );
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
         complete comparison; the CSV files hold its tables.</p>\n</body>\n</html>\n",
    );
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

// ---------------------------------------------------------------------------- charts

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 280.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 40.0;
/// Beyond this many observations, neighbours share a bar (the worst of them).
const MAX_BARS: usize = 1200;

/// A log10 axis over the positive values given; zero plots at the bottom.
struct LogAxis {
    lo: f64,
    hi: f64,
}

impl LogAxis {
    fn over(values: impl Iterator<Item = f64>) -> Option<LogAxis> {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && *v > 0.0) {
            lo = lo.min(v.log10());
            hi = hi.max(v.log10());
        }
        if !lo.is_finite() {
            return None;
        }
        // One decade of room below the smallest error keeps it visibly above the zeros.
        let (lo, hi) = (lo.floor() - 1.0, hi.ceil());
        Some(LogAxis {
            lo,
            hi: if hi > lo { hi } else { lo + 1.0 },
        })
    }

    /// Height above the baseline, in [0, 1]; zero sits just above the baseline so it
    /// stays visible, infinity at the top.
    fn height(&self, v: f64) -> f64 {
        if v.is_nan() || v <= 0.0 {
            return 0.0;
        }
        if v.is_infinite() {
            return 1.0;
        }
        ((v.log10() - self.lo) / (self.hi - self.lo)).clamp(0.02, 1.0)
    }

    fn ticks(&self) -> Vec<f64> {
        let span = (self.hi - self.lo) as usize;
        let step = span.div_ceil(6).max(1);
        (0..=span)
            .step_by(step)
            .map(|i| self.lo + i as f64)
            .collect()
    }
}

fn axis(out: &mut String, axis: Option<&LogAxis>, label: &str) {
    let plot_h = HEIGHT - TOP - BOTTOM;
    if let Some(a) = axis {
        for t in a.ticks() {
            let y = TOP + plot_h * (1.0 - (t - a.lo) / (a.hi - a.lo));
            let _ = write!(
                out,
                "<line class=\"grid\" x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">1e{}</text>",
                WIDTH - RIGHT,
                LEFT - 6.0,
                y + 4.0,
                t as i64
            );
        }
    }
    let _ = write!(
        out,
        "<text x=\"14\" y=\"{:.1}\" transform=\"rotate(-90 14 {:.1})\" \
         text-anchor=\"middle\">{}</text>",
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(label)
    );
}

fn svg_open(id: &str, label: &str) -> String {
    format!(
        "<svg id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" aria-label=\"{}\">",
        escape(label)
    )
}

/// One bar per observation comparison in execution order, height = max abs error (log
/// scale), colour = status. Pairs compared without values (one-sided, metadata, summary)
/// are dashed outlines at full height.
fn site_chart(c: &Comparison) -> String {
    let all = c.observations();
    let mut out = svg_open(
        "chart-sites",
        "max absolute error per observation, in execution order",
    );
    if all.is_empty() {
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no observations</text></svg>",
            WIDTH / 2.0,
            HEIGHT / 2.0
        );
        return out;
    }
    let error = |o: &ObservationComparison| o.metrics.as_ref().and_then(|m| m.max_abs_error);
    let log = LogAxis::over(all.iter().filter_map(|(_, _, o)| error(o)));
    axis(&mut out, log.as_ref(), "max abs error");
    let per_bar = all.len().div_ceil(MAX_BARS);
    let bars = all.len().div_ceil(per_bar);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let bw = plot_w / bars as f64;
    let mut last_point: Option<(Option<i64>, usize)> = None;
    for (b, group) in all.chunks(per_bar).enumerate() {
        let x = LEFT + b as f64 * bw;
        // Point boundaries, when there are few enough to draw.
        let first = &group[0];
        let point_id = (first.0, first.1.position);
        if last_point.is_some_and(|p| p != point_id) && bars <= 400 {
            let _ = write!(
                out,
                "<line class=\"boundary\" x1=\"{x:.2}\" y1=\"{TOP}\" x2=\"{x:.2}\" y2=\"{:.1}\">\
                 <title>point {}</title></line>",
                TOP + plot_h,
                escape(&rows::point_name(c, first.1))
            );
        }
        last_point = Some(point_id);
        let worst = group
            .iter()
            .max_by(|a, b| {
                a.2.status.cmp(&b.2.status).then(
                    error(a.2)
                        .unwrap_or(0.0)
                        .total_cmp(&error(b.2).unwrap_or(0.0)),
                )
            })
            .unwrap_or(first);
        let o = worst.2;
        let (class, h) = match (error(o), o.status) {
            (Some(e), s) => (
                format!("bar-{}", status_class(s)),
                log.as_ref().map_or(0.02, |a| a.height(e)).max(0.02),
            ),
            (None, Status::Match) => ("bar-match".to_owned(), 0.02),
            (None, Status::Inconclusive) => ("bar-inconclusive".to_owned(), 1.0),
            (None, Status::Mismatch) => ("bar-novalues".to_owned(), 1.0),
        };
        let height = plot_h * h;
        let mut tip = String::new();
        if let Some(rank) = worst.0 {
            tip.push_str(&format!("rank {rank}, "));
        }
        if !rows::single_point(c) {
            tip.push_str(&format!("point {}, ", rows::point_name(c, worst.1)));
        }
        tip.push_str(&format!("{}: {}", o.label(), o.reason));
        if group.len() > 1 {
            tip.push_str(&format!(" (worst of {} observations)", group.len()));
        }
        let _ = write!(
            out,
            "<rect class=\"{class}\" x=\"{x:.2}\" y=\"{:.2}\" width=\"{:.2}\" \
             height=\"{height:.2}\"><title>{}</title></rect>",
            TOP + plot_h - height,
            (bw - 1.0).max(0.5),
            escape(&tip)
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">observations in execution \
         order ({}{})</text></svg>",
        LEFT + plot_w / 2.0,
        HEIGHT - 12.0,
        all.len(),
        if per_bar > 1 {
            format!(", {per_bar} per bar")
        } else {
            String::new()
        }
    );
    out
}

const PALETTE: [&str; 8] = [
    "#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#ad1457", "#4e342e",
];

/// Max abs error of the observations that drift most, one line each, over the points of
/// the series; the first divergence is marked.
fn drift_chart(c: &Comparison) -> String {
    let mut out = svg_open("chart-drift", "max absolute error over the series");
    let points: &[PointComparison] = &c.points;
    let Some(series) = &c.series else {
        out.push_str("</svg>\n");
        return out;
    };
    let mut keys: Vec<(usize, f64)> = series
        .observations
        .iter()
        .enumerate()
        .map(|(i, d)| (i, d.max_abs_error.unwrap_or(0.0)))
        .collect();
    keys.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    keys.truncate(PALETTE.len());
    keys.sort_by_key(|k| k.0);
    let value = |p: &PointComparison, name: &str, inv: i64| {
        p.observations
            .iter()
            .find(|o| o.name == name && o.invocation_index == inv)
            .and_then(|o| o.metrics.as_ref().and_then(|m| m.max_abs_error))
    };
    let log = LogAxis::over(keys.iter().flat_map(|&(i, _)| {
        let d = &series.observations[i];
        points
            .iter()
            .filter_map(move |p| value(p, &d.name, d.invocation_index))
    }));
    axis(&mut out, log.as_ref(), "max abs error");
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let n = points.len().max(1);
    let x_of = |i: usize| {
        if n == 1 {
            LEFT + plot_w / 2.0
        } else {
            LEFT + plot_w * i as f64 / (n - 1) as f64
        }
    };
    if let Some(first) = &series.first_divergence {
        let x = x_of(first.point);
        let _ = write!(
            out,
            "<line class=\"divergence\" x1=\"{x:.2}\" y1=\"{TOP}\" x2=\"{x:.2}\" y2=\"{:.1}\">\
             <title>first divergence: {}</title></line>",
            TOP + plot_h,
            escape(&rows::series_point(&series.first_divergence))
        );
    }
    for (slot, &(i, _)) in keys.iter().enumerate() {
        let d = &series.observations[i];
        let colour = PALETTE[slot % PALETTE.len()];
        let mut path = String::new();
        let mut pen_down = false;
        for (pi, p) in points.iter().enumerate() {
            match value(p, &d.name, d.invocation_index) {
                Some(v) => {
                    let h = log.as_ref().map_or(0.0, |a| a.height(v));
                    let y = TOP + plot_h * (1.0 - h);
                    let _ = write!(
                        path,
                        "{}{:.2},{:.2} ",
                        if pen_down { "L" } else { "M" },
                        x_of(pi),
                        y
                    );
                    pen_down = true;
                }
                None => pen_down = false,
            }
        }
        let name = format!("{}[{}]", d.name, d.invocation_index);
        let _ = write!(
            out,
            "<path d=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\">\
             <title>{}</title></path>",
            path.trim_end(),
            escape(&name)
        );
        let ly = TOP + 12.0 + 14.0 * slot as f64;
        let _ = write!(
            out,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{colour}\"/>\
             <text class=\"legend\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            WIDTH - RIGHT - 200.0,
            ly - 9.0,
            WIDTH - RIGHT - 186.0,
            ly,
            escape(&name)
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">points of the series ({}), \
         worst {} observations</text></svg>",
        LEFT + plot_w / 2.0,
        HEIGHT - 12.0,
        points.len(),
        keys.len()
    );
    out
}
