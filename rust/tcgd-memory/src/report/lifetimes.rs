//! The lifetime report: text (a cohort table with stacks cut to `stack_depth`), JSON (the
//! whole analysis), the reference's CSV file set, and HTML with a cohort chart (bytes per
//! point per cohort). `limit` and `stack_depth` shape text and HTML only.

use std::fmt::Write as _;

use super::attribution::table_row;
use super::columns::{field, Column, Parts};
use super::document::{csv_files, report_file_names, report_files};
use super::*;
use crate::lifetimes::{
    AllocationCohort, CohortPeaks, CohortPointState, CohortSizeBucket, CohortSizeOutcome,
    CohortSpan, CohortTotals, CohortTransition, LifetimeAnalysis, StackFrame,
};

/// Which transitions of a cohort a CSV file lists.
type TransitionsOf = fn(&AllocationCohort) -> &[CohortTransition];

fn frame_text(f: &StackFrame) -> String {
    format!("{} ({}:{})", f.name, f.filename, f.line)
}

fn frames_json(frames: &[StackFrame]) -> String {
    serde_json::to_string(frames).unwrap_or_default()
}

fn point_label(p: &Option<crate::lifetimes::PointRef>) -> Cell {
    Cell::text(p.as_ref().map(|p| p.label.as_str()))
}

pub fn lifetimes_text(r: &LifetimeAnalysis, d: Display) -> String {
    let mut out = String::new();
    let sel = &r.selection;
    let selection = match sel.kind {
        "active_at" => format!("active_at({})", point_label(&sel.anchor)),
        "born_between" => format!(
            "born_between({}, {}]",
            point_label(&sel.start),
            point_label(&sel.end)
        ),
        _ => "all".to_owned(),
    };
    let _ = writeln!(
        out,
        "Allocation lifetimes '{}': {selection}, points '{}' through '{}' ({} points)",
        r.name,
        r.range.start_point.label,
        r.range.through_point.label,
        r.range.points.len()
    );
    for h in &r.history {
        let _ = writeln!(
            out,
            "  history device[{}]: {} windows, {} events, {}",
            h.device,
            h.windows,
            h.events,
            if h.complete { "complete" } else { "incomplete" }
        );
    }
    let _ = writeln!(
        out,
        "  {} generations, {} tracked, instance stack coverage {:.1}%",
        r.tracked.tracked_generations,
        format_bytes(r.tracked.tracked_bytes),
        r.tracked.instance_stack_coverage * 100.0
    );
    let shown = r.cohorts.len().min(d.limit);
    let _ = writeln!(out, "\n  cohorts: {} (showing {shown})", r.cohorts.len());
    for c in r.cohorts.iter().take(d.limit) {
        let _ = writeln!(
            out,
            "\n  #{} cohort {} device[{}] {} streams {}: {} generations",
            c.display_rank,
            c.cohort_id,
            c.device,
            c.pool_label,
            c.streams
                .iter()
                .map(|s| format!("0x{s:x}"))
                .collect::<Vec<_>>()
                .join(","),
            c.generation_count
        );
        let _ = writeln!(
            out,
            "    snapshot_peak {}, snapshot_blocks {}, owner_event_peak {}, \
             unreusable_event_peak {}",
            format_bytes(c.peaks.peak_active_bytes),
            c.peaks.peak_block_count,
            format_bytes(c.peaks.event_owner_peak_bytes),
            format_bytes(c.peaks.event_unreusable_peak_bytes)
        );
        let _ = writeln!(
            out,
            "    born {} ({}), free requested {} ({}), free completed {} ({}); at '{}': \
             owner-active {} ({}), awaiting free {} ({})",
            format_bytes(c.totals.born_bytes),
            c.totals.born_count,
            format_bytes(c.totals.free_requested_bytes),
            c.totals.free_requested_count,
            format_bytes(c.totals.free_completed_bytes),
            c.totals.free_completed_count,
            r.range.through_point.label,
            format_bytes(c.totals.terminal_owner_active_bytes),
            c.totals.terminal_owner_active_count,
            format_bytes(c.totals.terminal_awaiting_free_bytes),
            c.totals.terminal_awaiting_free_count
        );
        if let (Some(b), Some(q)) = (c.block_size_bytes, c.requested_size_bytes) {
            let _ = writeln!(
                out,
                "    unframed: block {}, requested {}",
                format_bytes(b),
                format_bytes(q)
            );
        }
        if c.stack_frames.is_empty() {
            let _ = writeln!(out, "    <unattributed>");
        }
        for f in c.stack_frames.iter().take(d.stack_depth) {
            let _ = writeln!(out, "    at {}", frame_text(f));
        }
        if c.stack_frames.len() > d.stack_depth {
            let _ = writeln!(
                out,
                "    ... {} more frames",
                c.stack_frames.len() - d.stack_depth
            );
        }
    }
    if r.cohorts.len() > shown {
        let _ = writeln!(
            out,
            "\n  ... {} more cohorts (JSON and CSV hold every cohort)",
            r.cohorts.len() - shown
        );
    }
    for w in &r.warnings {
        let _ = writeln!(out, "\n  warning: {w}");
    }
    out
}

pub fn lifetimes_json(r: &LifetimeAnalysis) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap_or_default();
    if let Some(map) = v.as_object_mut() {
        map.insert(
            "kind".to_owned(),
            serde_json::Value::from("memory_allocation_lifetimes"),
        );
    }
    v
}

fn pool_cell(c: &AllocationCohort) -> String {
    c.pool_id
        .map_or_else(|| "unknown".to_owned(), |(a, b)| format!("{a},{b}"))
}

const COHORT_ID: Column<AllocationCohort> = field!(cohort_id);

/// `cohorts.csv`: a cohort's own columns, then its peaks, its span and its totals (all
/// but the terminal awaiting-free count).
const COHORT_COLUMNS: [Column<AllocationCohort>; 11] = [
    COHORT_ID,
    field!(display_rank),
    field!(device),
    ("pool_id", |c| pool_cell(c).into()),
    field!(pool_label),
    field!(stack_key),
    ("stack_frames_json", |c| frames_json(&c.stack_frames).into()),
    field!(block_size_bytes),
    field!(requested_size_bytes),
    ("streams", |c| {
        c.streams
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(";")
            .into()
    }),
    field!(generation_count),
];

const PEAK_COLUMNS: [Column<CohortPeaks>; 7] = [
    field!(peak_active_bytes),
    field!(peak_owner_active_bytes),
    field!(peak_awaiting_free_bytes),
    field!(peak_block_count),
    field!(active_span_bytes),
    field!(event_owner_peak_bytes),
    field!(event_unreusable_peak_bytes),
];

const SPAN_COLUMNS: [Column<CohortSpan>; 4] = [
    ("first_sampled_point", |s| {
        point_label(&s.first_sampled_point)
    }),
    ("last_sampled_point", |s| point_label(&s.last_sampled_point)),
    ("first_event_point", |s| point_label(&s.first_event_point)),
    ("last_event_point", |s| point_label(&s.last_event_point)),
];

const TOTAL_COLUMNS: [Column<CohortTotals>; 9] = [
    field!(born_bytes),
    field!(born_count),
    field!(free_requested_bytes),
    field!(free_requested_count),
    field!(free_completed_bytes),
    field!(free_completed_count),
    field!(terminal_owner_active_bytes),
    field!(terminal_owner_active_count),
    field!(terminal_awaiting_free_bytes),
];

fn cohorts_table<'a>(cohorts: impl IntoIterator<Item = &'a AllocationCohort>) -> Table {
    let parts = Parts::<&AllocationCohort>::new()
        .of(&COHORT_COLUMNS, |c| *c)
        .of(&PEAK_COLUMNS, |c| &c.peaks)
        .of(&SPAN_COLUMNS, |c| &c.span)
        .of(&TOTAL_COLUMNS, |c| &c.totals);
    parts.table(cohorts)
}

impl AllocationCohort {
    /// The cohort as its line of `cohorts.csv` holds it.
    pub fn csv_row(&self) -> Vec<(String, Cell)> {
        table_row(cohorts_table([self]))
    }
}

const POINT_COLUMNS: [Column<CohortPointState>; 11] = [
    field!(point_index),
    field!(label),
    field!(owner_active_bytes),
    field!(owner_active_count),
    field!(awaiting_free_bytes),
    field!(awaiting_free_count),
    field!(active_bytes),
    field!(block_count),
    field!(owner_requested_bytes),
    field!(awaiting_free_requested_bytes),
    field!(requested_bytes),
];

const SIZE_BUCKET_COLUMNS: [Column<CohortSizeBucket>; 4] = [
    field!(size_bytes),
    field!(requested_size_bytes),
    field!(count),
    field!(total_bytes),
];

const SIZE_OUTCOME_COLUMNS: [Column<CohortSizeOutcome>; 5] = [
    field!(size_bytes),
    field!(requested_size_bytes),
    ("outcome", |o| o.outcome.as_str().into()),
    field!(count),
    field!(total_bytes),
];

const TRANSITION_COLUMNS: [Column<CohortTransition>; 8] = [
    ("start_point", |t| point_label(&t.start_point)),
    ("end_point", |t| t.end_point.label.as_str().into()),
    ("origin", |t| t.origin.as_str().into()),
    field!(stack_key),
    ("stack_frames_json", |t| frames_json(&t.stack_frames).into()),
    ("stack_fallback", |t| t.stack_fallback().into()),
    field!(bytes),
    field!(count),
];

/// Rows of cohorts, each after its cohort's id.
fn cohort_rows<'a, R: 'a>(
    rows: impl IntoIterator<Item = (&'a str, &'a R)>,
    columns: &'a [Column<R>],
) -> Table {
    Parts::<(&str, &R)>::new()
        .with(vec!["cohort_id".to_owned()], |(id, _)| {
            vec![Cell::from(*id)]
        })
        .of(columns, |(_, row)| *row)
        .table(rows)
}

/// The rows `of` every cohort, each after its cohort's id.
fn per_cohort<'a, R>(
    r: &'a LifetimeAnalysis,
    of: fn(&AllocationCohort) -> &[R],
    columns: &'a [Column<R>],
) -> Table {
    let rows = r
        .cohorts
        .iter()
        .flat_map(|c| of(c).iter().map(move |row| (c.cohort_id.as_str(), row)));
    cohort_rows(rows, columns)
}

impl CohortPointState {
    /// The state as its line of `cohort_points.csv` holds it, under `cohort_id`.
    pub fn csv_row(&self, cohort_id: &str) -> Vec<(String, Cell)> {
        table_row(cohort_rows([(cohort_id, self)], &POINT_COLUMNS))
    }
}

impl CohortSizeBucket {
    /// The bucket as its line of `size_histograms.csv` holds it, under `cohort_id`.
    pub fn csv_row(&self, cohort_id: &str) -> Vec<(String, Cell)> {
        table_row(cohort_rows([(cohort_id, self)], &SIZE_BUCKET_COLUMNS))
    }
}

impl CohortSizeOutcome {
    /// The outcome as its line of `size_outcomes.csv` holds it, under `cohort_id`.
    pub fn csv_row(&self, cohort_id: &str) -> Vec<(String, Cell)> {
        table_row(cohort_rows([(cohort_id, self)], &SIZE_OUTCOME_COLUMNS))
    }
}

impl CohortTransition {
    /// The transition row as its line of `birth_stacks.csv`, `free_request_stacks.csv` or
    /// `free_completion_stacks.csv` holds it, under `cohort_id`.
    pub fn csv_row(&self, cohort_id: &str) -> Vec<(String, Cell)> {
        table_row(cohort_rows([(cohort_id, self)], &TRANSITION_COLUMNS))
    }
}

/// The CSV files of a lifetime report, in order.
const LIFETIME_CSV: [&str; 7] = [
    "cohorts.csv",
    "cohort_points.csv",
    "size_histograms.csv",
    "size_outcomes.csv",
    "birth_stacks.csv",
    "free_request_stacks.csv",
    "free_completion_stacks.csv",
];

/// The tables of a lifetime report's CSV files; the transition-stack files only when such
/// transitions exist.
fn lifetimes_tables(r: &LifetimeAnalysis) -> impl Iterator<Item = (&'static str, Option<Table>)> {
    let transitions = |of: TransitionsOf| {
        r.cohorts
            .iter()
            .any(|c| !of(c).is_empty())
            .then(|| per_cohort(r, of, &TRANSITION_COLUMNS))
    };
    let tables = [
        Some(cohorts_table(&r.cohorts)),
        Some(per_cohort(r, |c| &c.points, &POINT_COLUMNS)),
        Some(per_cohort(r, |c| &c.size_histogram, &SIZE_BUCKET_COLUMNS)),
        Some(per_cohort(r, |c| &c.size_outcomes, &SIZE_OUTCOME_COLUMNS)),
        transitions(|c| &c.transitions.births),
        transitions(|c| &c.transitions.free_requests),
        transitions(|c| &c.transitions.free_completions),
    ];
    LIFETIME_CSV.into_iter().zip(tables)
}

/// The CSV files of a lifetime report, `(file name, content)`.
pub fn lifetimes_csv_files(r: &LifetimeAnalysis) -> Vec<(String, String)> {
    csv_files(lifetimes_tables(r))
}

/// Every file a lifetime report can write (what `overwrite` may replace).
pub const LIFETIME_FILES: [&str; 10] = report_file_names(LIFETIME_CSV);

const COLORS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// An SVG line chart of active bytes per point for the first `limit` cohorts; every point
/// is kept for the cohorts shown.
fn cohort_chart(r: &LifetimeAnalysis, d: Display) -> String {
    let shown: Vec<&AllocationCohort> = r.cohorts.iter().take(d.limit).collect();
    let n = r.range.points.len();
    if shown.is_empty() || n == 0 {
        return "<p>No cohorts to chart.</p>\n".to_owned();
    }
    let (w, h, pad) = (720.0f64, 260.0f64, 40.0f64);
    let top = shown
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.active_bytes))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let x = |i: usize| {
        if n == 1 {
            pad + (w - 2.0 * pad) / 2.0
        } else {
            pad + (w - 2.0 * pad) * i as f64 / (n - 1) as f64
        }
    };
    let y = |v: i64| h - pad - (h - 2.0 * pad) * v as f64 / top;
    let mut svg = format!(
        "<svg class=\"cohort-chart\" width=\"{w}\" height=\"{h}\" \
         xmlns=\"http://www.w3.org/2000/svg\">\n<text x=\"{pad}\" y=\"16\" \
         font-size=\"12\">active bytes per point (top {} of {} cohorts; peak {})</text>\n",
        shown.len(),
        r.cohorts.len(),
        escape_html(&format_bytes(top as i64))
    );
    for (i, p) in r.range.points.iter().enumerate() {
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
            x(i),
            h - pad / 3.0,
            escape_html(&p.label)
        );
    }
    for (k, c) in shown.iter().enumerate() {
        let points: Vec<String> = c
            .points
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{:.1},{:.1}", x(i), y(p.active_bytes)))
            .collect();
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\">\
             <title>#{} {} {}</title></polyline>",
            COLORS[k % COLORS.len()],
            points.join(" "),
            c.display_rank,
            escape_html(&c.pool_label),
            escape_html(&c.stack_key)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

pub fn lifetimes_html(r: &LifetimeAnalysis, d: Display) -> String {
    let mut body = String::from("<h1>Allocation lifetimes</h1>\n");
    body.push_str(&cohort_chart(r, d));
    let shown = r.cohorts.len().min(d.limit);
    let _ = writeln!(
        body,
        "<p>Showing {shown} of {} cohorts.</p>",
        r.cohorts.len()
    );
    let header = [
        "rank",
        "cohort",
        "device",
        "pool",
        "stack",
        "generations",
        "snapshot_peak",
        "snapshot_blocks",
        "owner_event_peak",
        "unreusable_event_peak",
        "terminal owner-active",
        "terminal awaiting free",
    ];
    let rows: Vec<Vec<Cell>> = r
        .cohorts
        .iter()
        .take(d.limit)
        .map(|c| {
            let stack = if c.stack_frames.is_empty() {
                "<unattributed>".to_owned()
            } else {
                c.stack_frames
                    .iter()
                    .take(d.stack_depth)
                    .map(frame_text)
                    .collect::<Vec<_>>()
                    .join(" < ")
            };
            vec![
                c.display_rank.into(),
                c.cohort_id.as_str().into(),
                c.device.into(),
                c.pool_label.as_str().into(),
                stack.into(),
                c.generation_count.into(),
                c.peaks.peak_active_bytes.into(),
                c.peaks.peak_block_count.into(),
                c.peaks.event_owner_peak_bytes.into(),
                c.peaks.event_unreusable_peak_bytes.into(),
                c.totals.terminal_owner_active_bytes.into(),
                c.totals.terminal_awaiting_free_bytes.into(),
            ]
        })
        .collect();
    body.push_str(&html_table(&header, &rows, |_| ""));
    body.push_str("<pre>");
    body.push_str(&escape_html(&lifetimes_text(r, d)));
    body.push_str("</pre>\n");
    html_page("Allocation lifetimes", &body)
}

/// `report.txt`, `report.json`, `report.html` and the CSV files.
pub fn lifetimes_files(r: &LifetimeAnalysis, d: Display) -> Vec<(String, String)> {
    report_files(
        lifetimes_text(r, d),
        &lifetimes_json(r),
        lifetimes_html(r, d),
        lifetimes_tables(r),
    )
}
