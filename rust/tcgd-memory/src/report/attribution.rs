//! The attribution sections of comparison and timeline reports: stack coverage, stack
//! deltas and event summaries. JSON and CSV keep every row; `limit` and `stack_depth`
//! shorten text and HTML only.

use std::fmt::Write as _;

use serde_json::{json, Value};

use tcgd_report::{Cell, Table};

use super::columns::{self, field, Column, Parts};
pub use super::display::Display;
use super::{csv_table, escape_html, format_bytes, format_change, html_table, opt, pool_name};
use crate::attribution::{
    Attribution, EventSummary, EvidenceStatus, StackCoverage, StackDelta, StackFrames, StackSummary,
};
use crate::model::PoolId;

fn side_key(key: Option<(i64, PoolId)>) -> String {
    key.map_or_else(
        || "-".to_owned(),
        |(d, p)| format!("device {d} {}", pool_name(p)),
    )
}

fn status_word(s: &EvidenceStatus) -> &'static str {
    match (s.requested, s.available, s.complete) {
        (false, _, _) => "not requested",
        (true, false, _) => "unavailable",
        (true, true, false) => "partial",
        (true, true, true) => "complete",
    }
}

/// `reference stack coverage: ...` and its candidate line, for the sides that have one.
fn coverage_lines(a: &Attribution) -> impl Iterator<Item = String> + '_ {
    [
        ("reference", &a.reference.stack_coverage),
        ("candidate", &a.candidate.stack_coverage),
    ]
    .into_iter()
    .filter_map(|(side, c)| {
        let c = c.as_ref()?;
        Some(format!(
            "{side} stack coverage: {:.1}% ({} of {} active bytes, {} of {} blocks)",
            c.coverage * 100.0,
            format_bytes(c.attributed_bytes),
            format_bytes(c.active_bytes),
            c.attributed_blocks,
            c.active_blocks
        ))
    })
}

fn visible_deltas(a: &Attribution, include_unchanged: bool) -> Vec<&StackDelta> {
    a.stack_deltas
        .iter()
        .filter(|d| include_unchanged || d.changed())
        .collect()
}

/// Rows text and HTML show (at most `limit`), and how many there are.
type Shown<'a, T> = (Vec<&'a T>, usize);

fn first<'a, T>(rows: impl ExactSizeIterator<Item = &'a T>, limit: usize) -> Shown<'a, T> {
    let total = rows.len();
    (rows.take(limit).collect(), total)
}

/// The stack and event rows text and HTML show, for the analyses that were requested.
fn shown(
    a: &Attribution,
    display: Display,
    include_unchanged: bool,
) -> (
    Option<Shown<'_, StackDelta>>,
    Option<Shown<'_, EventSummary>>,
) {
    let s = &a.status;
    let deltas = s.stacks.requested.then(|| {
        first(
            visible_deltas(a, include_unchanged).into_iter(),
            display.limit,
        )
    });
    let events = s
        .events
        .requested
        .then(|| first(a.events.iter(), display.limit));
    (deltas, events)
}

/// One list of the text form under its heading, saying how many of its rows it shows;
/// `lines` gives each row's lines.
fn text_section<R>(
    out: &mut String,
    title: &str,
    (rows, total): Shown<'_, R>,
    lines: impl Fn(&R) -> String,
) {
    let _ = writeln!(out, "  {title} ({} of {total} rows):", rows.len());
    for r in rows {
        out.push_str(&lines(r));
    }
}

/// The text section of one attribution (empty when nothing was requested).
pub fn attribution_text(a: &Attribution, display: Display, include_unchanged: bool) -> String {
    let s = &a.status;
    if !s.requested() {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "attribution {} -> {}: stacks {}, events {}, lifetimes {}",
        a.reference.title,
        a.candidate.title,
        status_word(&s.stacks),
        status_word(&s.events),
        status_word(&s.lifetimes)
    );
    for line in coverage_lines(a) {
        let _ = writeln!(out, "  {line}");
    }
    let (deltas, events) = shown(a, display, include_unchanged);
    let depth = display.stack_depth;
    if let Some(shown) = deltas {
        text_section(&mut out, "allocation stacks", shown, |d| {
            format!(
                "    {:>12}  {} -> {}  count {:+}  {}\n                  {} / {}\n",
                format_change(d.delta_size_bytes),
                format_bytes(d.reference_size_bytes),
                format_bytes(d.candidate_size_bytes),
                d.delta_count,
                d.stack_frames.key_at_depth(depth),
                side_key(d.reference_key),
                side_key(d.candidate_key)
            )
        });
    }
    if let Some(shown) = events {
        text_section(&mut out, "allocator events", shown, |e| {
            format!(
                "    {:<15} {:>12} x{:<5} device {} {} stream 0x{:x} [{}]  {}\n",
                e.action,
                format_bytes(e.total_bytes),
                e.count,
                e.device_index,
                e.pool_label(),
                e.stream,
                e.attribution_confidence.as_str(),
                e.stack_frames.key_at_depth(depth)
            )
        });
    }
    for w in &a.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
    out
}

fn frames_value(f: &StackFrames) -> Value {
    serde_json::to_value(f).unwrap_or(Value::Null)
}

fn pool_value(p: Option<PoolId>) -> Value {
    p.map_or(Value::Null, |(a, b)| json!([a, b]))
}

fn key_value(k: Option<(i64, PoolId)>) -> Value {
    k.map_or(
        Value::Null,
        |(d, p)| json!({"device_index": d, "pool_id": [p.0, p.1]}),
    )
}

fn status_value(s: &EvidenceStatus) -> Value {
    json!({"requested": s.requested, "available": s.available, "complete": s.complete})
}

pub fn coverage_json(c: &StackCoverage) -> Value {
    serde_json::to_value(c).unwrap_or(Value::Null)
}

pub fn summary_json(s: &StackSummary) -> Value {
    json!({
        "device_index": s.device_index,
        "pool_id": [s.pool_id.0, s.pool_id.1],
        "stream": s.stream,
        "stack_key": s.stack_frames.key(),
        "stack_fingerprint": s.stack_frames.fingerprint(),
        "stack_frames": frames_value(&s.stack_frames),
        "size_bytes": s.size_bytes,
        "requested_bytes": s.requested_bytes,
        "count": s.count,
    })
}

pub fn delta_json(d: &StackDelta) -> Value {
    json!({
        "reference_key": key_value(d.reference_key),
        "candidate_key": key_value(d.candidate_key),
        "stream": d.stream,
        "stack_key": d.stack_frames.key(),
        "stack_fingerprint": d.stack_frames.fingerprint(),
        "stack_frames": frames_value(&d.stack_frames),
        "reference_size_bytes": d.reference_size_bytes,
        "candidate_size_bytes": d.candidate_size_bytes,
        "delta_size_bytes": d.delta_size_bytes,
        "reference_requested_bytes": d.reference_requested_bytes,
        "candidate_requested_bytes": d.candidate_requested_bytes,
        "delta_requested_bytes": d.delta_requested_bytes,
        "reference_count": d.reference_count,
        "candidate_count": d.candidate_count,
        "delta_count": d.delta_count,
    })
}

pub fn event_json(e: &EventSummary) -> Value {
    json!({
        "device_index": e.device_index,
        "pool_id": pool_value(e.pool_id),
        "stream": e.stream,
        "action": e.action,
        "stack_key": e.stack_frames.key(),
        "stack_fingerprint": e.stack_frames.fingerprint(),
        "stack_frames": frames_value(&e.stack_frames),
        "total_bytes": e.total_bytes,
        "count": e.count,
        "attribution_confidence": e.attribution_confidence.as_str(),
    })
}

/// An event row as `report.json` holds it, with the endpoints' titles under `reference`
/// and `candidate` when given (as `events.csv` names them).
pub fn event_row_json(e: &EventSummary, titles: Titles<'_>) -> Value {
    let mut v = event_json(e);
    if let (Some((r, c)), Value::Object(map)) = (titles, &mut v) {
        map.insert("reference".into(), r.into());
        map.insert("candidate".into(), c.into());
    }
    v
}

/// Every row of one attribution.
pub fn attribution_json(a: &Attribution) -> Value {
    json!({
        "reference": a.reference.title,
        "candidate": a.candidate.title,
        "attribution_status": {
            "stacks": status_value(&a.status.stacks),
            "events": status_value(&a.status.events),
            "lifetimes": status_value(&a.status.lifetimes),
        },
        "reference_stack_coverage": a.reference.stack_coverage.as_ref().map(coverage_json),
        "candidate_stack_coverage": a.candidate.stack_coverage.as_ref().map(coverage_json),
        "stack_deltas": a.stack_deltas.iter().map(delta_json).collect::<Vec<_>>(),
        "events": a.events.iter().map(event_json).collect::<Vec<_>>(),
        "warnings": a.warnings,
    })
}

/// A stack delta's pools and stream, before its stack.
const DELTA_KEY_COLUMNS: [Column<StackDelta>; 5] = [
    ("reference_device_index", |d| {
        opt(d.reference_key.map(|k| k.0))
    }),
    ("reference_pool_id", |d| {
        pool_cell(d.reference_key.map(|k| k.1))
    }),
    ("candidate_device_index", |d| {
        opt(d.candidate_key.map(|k| k.0))
    }),
    ("candidate_pool_id", |d| {
        pool_cell(d.candidate_key.map(|k| k.1))
    }),
    field!(stream),
];

/// A stack delta's sizes and counts, after its stack.
const DELTA_VALUE_COLUMNS: [Column<StackDelta>; 9] = [
    field!(reference_size_bytes),
    field!(candidate_size_bytes),
    field!(delta_size_bytes),
    field!(reference_requested_bytes),
    field!(candidate_requested_bytes),
    field!(delta_requested_bytes),
    field!(reference_count),
    field!(candidate_count),
    field!(delta_count),
];

/// An event row's place and action, before its stack.
const EVENT_KEY_COLUMNS: [Column<EventSummary>; 4] = [
    field!(device_index),
    ("pool_id", |e| pool_cell(e.pool_id)),
    field!(stream),
    field!(action),
];

/// An event row's bytes and count, after its stack.
const EVENT_VALUE_COLUMNS: [Column<EventSummary>; 3] = [
    field!(total_bytes),
    field!(count),
    ("attribution_confidence", |e| {
        e.attribution_confidence.as_str().into()
    }),
];

/// How CSV files show a stack.
const STACK_COLUMNS: [Column<StackFrames>; 3] = [
    ("stack_key", |f| f.key().into()),
    ("stack_fingerprint", |f| f.fingerprint().into()),
    ("stack_frames_json", |f| f.to_json().into()),
];

fn pool_cell(p: Option<PoolId>) -> Cell {
    Cell::text(p.map(|(a, b)| format!("{a},{b}")))
}

/// The titles of the endpoints an attribution row belongs to: `(reference, candidate)`.
pub type Titles<'a> = Option<(&'a str, &'a str)>;

/// Rows with an allocation stack as CSV holds them: the endpoints' titles (when
/// `titled`), the row's `key` columns, its stack, then its `values`.
fn stack_table<'a, R: 'a>(
    rows: impl IntoIterator<Item = (Titles<'a>, &'a R)>,
    titled: bool,
    (key, values): (&'a [Column<R>], &'a [Column<R>]),
    frames: fn(&R) -> &StackFrames,
) -> Table {
    let mut parts = Parts::<(Titles<'a>, &'a R)>::new();
    if titled {
        parts = parts.with(vec!["reference".into(), "candidate".into()], |(t, _)| {
            let (r, c) = t.unzip();
            vec![Cell::text(r), Cell::text(c)]
        });
    }
    parts
        .of(key, |(_, row)| *row)
        .of(&STACK_COLUMNS, move |(_, row)| frames(row))
        .of(values, |(_, row)| *row)
        .table(rows)
}

/// The rows `of` every attribution as CSV, each after its endpoints' titles.
fn stack_rows_csv<'a, R: 'a>(
    items: &[&'a Attribution],
    of: impl Fn(&'a Attribution) -> Vec<&'a R>,
    columns: (&'a [Column<R>], &'a [Column<R>]),
    frames: fn(&R) -> &StackFrames,
) -> String {
    let rows = items.iter().flat_map(|a| {
        let titles = Some((a.reference.title.as_str(), a.candidate.title.as_str()));
        of(a).into_iter().map(move |row| (titles, row))
    });
    csv_table(&stack_table(rows, true, columns, frames))
}

/// `(column, cell)` of every row of `table`, in order.
pub fn table_records(table: Table) -> Vec<Vec<(String, Cell)>> {
    let names = table.names().to_vec();
    table
        .into_rows()
        .into_iter()
        .map(|row| names.iter().cloned().zip(row).collect())
        .collect()
}

/// The one row of a one-row table as `(column, cell)` pairs.
pub(crate) fn table_row(table: Table) -> Vec<(String, Cell)> {
    table_records(table).into_iter().next().unwrap_or_default()
}

/// One event row as a line of `events.csv` holds it; the endpoints' titles first when
/// given.
pub fn event_row(e: &EventSummary, titles: Titles<'_>) -> Vec<(String, Cell)> {
    let columns = (&EVENT_KEY_COLUMNS[..], &EVENT_VALUE_COLUMNS[..]);
    table_row(stack_table([(titles, e)], titles.is_some(), columns, |e| {
        &e.stack_frames
    }))
}

/// One stack delta as a line of `allocation_stack_comparisons.csv` holds it; the
/// endpoints' titles first when given.
pub fn delta_row(d: &StackDelta, titles: Titles<'_>) -> Vec<(String, Cell)> {
    let columns = (&DELTA_KEY_COLUMNS[..], &DELTA_VALUE_COLUMNS[..]);
    table_row(stack_table([(titles, d)], titles.is_some(), columns, |d| {
        &d.stack_frames
    }))
}

/// A stack summary's pool and stream, before its stack.
const SUMMARY_KEY_COLUMNS: [Column<StackSummary>; 3] = [
    field!(device_index),
    ("pool_id", |s| pool_cell(Some(s.pool_id))),
    field!(stream),
];

/// A stack summary's sizes and count, after its stack.
const SUMMARY_VALUE_COLUMNS: [Column<StackSummary>; 3] =
    [field!(size_bytes), field!(requested_bytes), field!(count)];

/// One stack summary as a flat row, in the columns of the other stack rows.
pub fn summary_row(s: &StackSummary) -> Vec<(String, Cell)> {
    let columns = (&SUMMARY_KEY_COLUMNS[..], &SUMMARY_VALUE_COLUMNS[..]);
    table_row(stack_table([(None, s)], false, columns, |s| {
        &s.stack_frames
    }))
}

const COVERAGE_COLUMNS: [Column<StackCoverage>; 8] = [
    field!(device_index),
    ("pool_id", |c| pool_cell(c.pool_id)),
    field!(active_bytes),
    field!(attributed_bytes),
    field!(unattributed_bytes),
    field!(active_blocks),
    field!(attributed_blocks),
    field!(coverage),
];

/// One stack coverage as a flat row.
pub fn coverage_row(c: &StackCoverage) -> Vec<(String, Cell)> {
    let parts = Parts::<&StackCoverage>::new().of(&COVERAGE_COLUMNS, |c| *c);
    table_row(parts.table([c]))
}

/// `allocation_stack_comparisons.csv`: every stack delta of every attribution
/// (`include_unchanged=false` drops unchanged rows).
pub fn stack_deltas_csv(items: &[&Attribution], include_unchanged: bool) -> String {
    stack_rows_csv(
        items,
        |a| visible_deltas(a, include_unchanged),
        (&DELTA_KEY_COLUMNS, &DELTA_VALUE_COLUMNS),
        |d| &d.stack_frames,
    )
}

/// `events.csv`: every event row of every attribution.
pub fn events_csv(items: &[&Attribution]) -> String {
    stack_rows_csv(
        items,
        |a| a.events.iter().collect(),
        (&EVENT_KEY_COLUMNS, &EVENT_VALUE_COLUMNS),
        |e| &e.stack_frames,
    )
}

/// The stack deltas as HTML shows them, before their stack.
const DELTA_HTML: [Column<StackDelta>; 6] = [
    ("reference pool", |d| side_key(d.reference_key).into()),
    ("candidate pool", |d| side_key(d.candidate_key).into()),
    ("reference bytes", |d| d.reference_size_bytes.into()),
    ("candidate bytes", |d| d.candidate_size_bytes.into()),
    ("delta bytes", |d| d.delta_size_bytes.into()),
    ("delta count", |d| d.delta_count.into()),
];

/// The event rows as HTML shows them, before their stack.
const EVENT_HTML: [Column<EventSummary>; 7] = [
    ("device", |e| e.device_index.into()),
    ("pool", |e| e.pool_label().into()),
    ("stream", |e| format!("0x{:x}", e.stream).into()),
    ("action", |e| e.action.as_str().into()),
    ("bytes", |e| e.total_bytes.into()),
    ("count", |e| e.count.into()),
    ("confidence", |e| e.attribution_confidence.as_str().into()),
];

/// One table of the HTML fragment under its heading, saying how many of its rows it
/// shows: `columns`, then each row's `stack`.
fn html_section<R>(
    out: &mut String,
    title: &str,
    (rows, total): Shown<'_, R>,
    columns: &[Column<R>],
    stack: impl Fn(&R) -> String,
) {
    let _ = writeln!(
        out,
        "<h3>{title}</h3>\n<p>showing {} of {total} rows</p>",
        rows.len()
    );
    let mut header = columns::header(columns);
    header.push("stack");
    let cells: Vec<Vec<Cell>> = rows
        .iter()
        .map(|r| {
            let mut row = columns::cells(columns, r);
            row.push(stack(r).into());
            row
        })
        .collect();
    out.push_str(&html_table(&header, &cells, |_| ""));
}

/// The HTML fragment of one attribution (tables limited to `display.limit` rows, each
/// saying how many it shows).
pub fn attribution_html(a: &Attribution, display: Display, include_unchanged: bool) -> String {
    let s = &a.status;
    if !s.requested() {
        return String::new();
    }
    let mut out = format!(
        "<h2>Attribution {} &rarr; {}</h2>\n<p>stacks {}, events {}, lifetimes {}</p>\n",
        escape_html(&a.reference.title),
        escape_html(&a.candidate.title),
        status_word(&s.stacks),
        status_word(&s.events),
        status_word(&s.lifetimes)
    );
    for line in coverage_lines(a) {
        let _ = writeln!(out, "<p>{}</p>", escape_html(&line));
    }
    let (deltas, events) = shown(a, display, include_unchanged);
    let depth = display.stack_depth;
    if let Some(shown) = deltas {
        let stack = |d: &StackDelta| d.stack_frames.key_at_depth(depth);
        html_section(&mut out, "Allocation stacks", shown, &DELTA_HTML, stack);
    }
    if let Some(shown) = events {
        let stack = |e: &EventSummary| e.stack_frames.key_at_depth(depth);
        html_section(&mut out, "Allocator events", shown, &EVENT_HTML, stack);
    }
    for w in &a.warnings {
        let _ = writeln!(out, "<p class=\"warn\">{}</p>", escape_html(w));
    }
    out
}

/// A whole report in `format` (`rendered`) with the sections of `attributions` (one per
/// comparison, in order) added: appended to text, before `</body>` in HTML, under
/// `"attribution"` in a JSON document. A CSV report is returned as it is: attribution
/// rows have files of their own. A JSON report that does not parse as an object is an
/// error (never a report with the sections silently dropped).
pub fn with_sections(
    rendered: String,
    format: super::Format,
    attributions: &[&Attribution],
    display: Display,
    include_unchanged: bool,
) -> Result<String, serde_json::Error> {
    use super::Format;
    if attributions.is_empty() {
        return Ok(rendered);
    }
    Ok(match format {
        Format::Csv => rendered,
        Format::Json => {
            let mut document: serde_json::Map<String, Value> = serde_json::from_str(&rendered)?;
            let sections = attributions.iter().map(|a| attribution_json(a)).collect();
            document.insert("attribution".to_owned(), Value::Array(sections));
            super::document::pretty(&Value::Object(document))
        }
        Format::Html => {
            let sections: String = attributions
                .iter()
                .map(|a| attribution_html(a, display, include_unchanged))
                .collect();
            match rendered.rfind("</body>") {
                Some(at) => format!("{}{sections}{}", &rendered[..at], &rendered[at..]),
                None => rendered + &sections,
            }
        }
        Format::Text => {
            let sections: String = attributions
                .iter()
                .map(|a| attribution_text(a, display, include_unchanged))
                .collect();
            format!("{}\n\n{sections}", rendered.trim_end_matches('\n'))
        }
    })
}
