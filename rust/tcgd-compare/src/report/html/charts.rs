//! The charts of the HTML report, as inline SVG: observation sites on a log axis, and the drift of a series.

use std::fmt::Write;

use tcgd_report::svg::{Frame, LogAxis};

use crate::model::{Comparison, ObservationComparison, PointComparison, Status};
use crate::report::rows::{self};

use super::*;

// ---------------------------------------------------------------------------- charts

pub(crate) const WIDTH: f64 = 960.0;
pub(crate) const HEIGHT: f64 = 280.0;
pub(crate) const LEFT: f64 = 64.0;
pub(crate) const RIGHT: f64 = 16.0;
pub(crate) const TOP: f64 = 16.0;
pub(crate) const BOTTOM: f64 = 40.0;
/// Beyond this many observations, neighbours share a bar (the worst of them).
pub(crate) const MAX_BARS: usize = 1200;

/// The frame of every chart in this report.
pub(crate) const FRAME: Frame = Frame {
    width: WIDTH,
    height: HEIGHT,
    left: LEFT,
    right: RIGHT,
    top: TOP,
    bottom: BOTTOM,
};
/// Labelled decades per axis, at most.
const MAX_TICKS: usize = 6;

pub(crate) fn svg_open(id: &str, label: &str) -> String {
    format!(
        "<svg id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" aria-label=\"{}\">",
        escape(label)
    )
}

/// One bar per observation comparison in execution order, height = max abs error (log
/// scale), colour = status. Pairs compared without values (one-sided, metadata, summary)
/// are dashed outlines at full height.
pub(crate) fn site_chart(c: &Comparison) -> String {
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
    LogAxis::draw(log.as_ref(), &mut out, &FRAME, MAX_TICKS, "max abs error");
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
                log.as_ref().map_or(0.02, |a| a.height(e, 0.02)).max(0.02),
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

pub(crate) const PALETTE: [&str; 8] = [
    "#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#ad1457", "#4e342e",
];

/// Max abs error of the observations that drift most, one line each, over the points of
/// the series; the first divergence is marked.
pub(crate) fn drift_chart(c: &Comparison) -> String {
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
    LogAxis::draw(log.as_ref(), &mut out, &FRAME, MAX_TICKS, "max abs error");
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
                    let h = log.as_ref().map_or(0.0, |a| a.height(v, 0.02));
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
