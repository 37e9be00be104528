//! The attribution sections of comparison and timeline reports: stack coverage, stack
//! deltas and event summaries. JSON and CSV keep every row; `limit` and `stack_depth`
//! shorten text and HTML only.

use std::fmt::Write as _;

use serde_json::{json, Value};

use tcgd_report::{Cell, Table};

use super::{csv_table, escape_html, format_bytes, format_change, html_table, opt, pool_name};
use crate::attribution::{
    Attribution, EventSummary, EvidenceStatus, PoolConfidence, StackCoverage, StackDelta,
    StackFrames, StackSummary,
};
use crate::model::PoolId;

/// Presentation of attribution rows in text and HTML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Display {
    pub stack_depth: usize,
    pub limit: usize,
}

impl Default for Display {
    fn default() -> Self {
        Display {
            stack_depth: 2,
            limit: 20,
        }
    }
}

fn side_key(key: Option<(i64, PoolId)>) -> String {
    key.map_or_else(
        || "-".to_owned(),
        |(d, p)| format!("device {d} {}", pool_name(p)),
    )
}

fn pool_label(pool: Option<PoolId>, confidence: PoolConfidence) -> String {
    match (pool, confidence) {
        (_, PoolConfidence::NotApplicable) => "pool[n/a]".to_owned(),
        (Some(p), _) => pool_name(p),
        (None, _) => "pool[unknown]".to_owned(),
    }
}

fn status_word(s: &EvidenceStatus) -> &'static str {
    match (s.requested, s.available, s.complete) {
        (false, _, _) => "not requested",
        (true, false, _) => "unavailable",
        (true, true, false) => "partial",
        (true, true, true) => "complete",
    }
}

fn coverage_line(side: &str, c: &StackCoverage) -> String {
    format!(
        "{side} stack coverage: {:.1}% ({} of {} active bytes, {} of {} blocks)",
        c.coverage * 100.0,
        format_bytes(c.attributed_bytes),
        format_bytes(c.active_bytes),
        c.attributed_blocks,
        c.active_blocks
    )
}

fn visible_deltas(a: &Attribution, include_unchanged: bool) -> Vec<&StackDelta> {
    a.stack_deltas
        .iter()
        .filter(|d| include_unchanged || d.changed())
        .collect()
}

/// The text section of one attribution (empty when nothing was requested).
pub fn attribution_text(a: &Attribution, display: Display, include_unchanged: bool) -> String {
    let s = &a.status;
    if !(s.stacks.requested || s.events.requested || s.lifetimes.requested) {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "attribution {} -> {}: stacks {}, events {}, lifetimes {}",
        a.reference_title,
        a.candidate_title,
        status_word(&s.stacks),
        status_word(&s.events),
        status_word(&s.lifetimes)
    );
    for (side, c) in [
        ("  reference", &a.reference_stack_coverage),
        ("  candidate", &a.candidate_stack_coverage),
    ] {
        if let Some(c) = c {
            let _ = writeln!(out, "{}", coverage_line(side, c));
        }
    }
    if s.stacks.requested {
        let rows = visible_deltas(a, include_unchanged);
        let _ = writeln!(
            out,
            "  allocation stacks ({} of {} rows):",
            rows.len().min(display.limit),
            rows.len()
        );
        for d in rows.iter().take(display.limit) {
            let _ = writeln!(
                out,
                "    {:>12}  {} -> {}  count {:+}  {}",
                format_change(d.delta_size_bytes),
                format_bytes(d.reference_size_bytes),
                format_bytes(d.candidate_size_bytes),
                d.delta_count,
                d.stack_frames.key_at_depth(display.stack_depth)
            );
            let _ = writeln!(
                out,
                "                  {} / {}",
                side_key(d.reference_key),
                side_key(d.candidate_key)
            );
        }
    }
    if s.events.requested {
        let _ = writeln!(
            out,
            "  allocator events ({} of {} rows):",
            a.events.len().min(display.limit),
            a.events.len()
        );
        for e in a.events.iter().take(display.limit) {
            let _ = writeln!(
                out,
                "    {:<15} {:>12} x{:<5} device {} {} stream 0x{:x} [{}]  {}",
                e.action,
                format_bytes(e.total_bytes),
                e.count,
                e.device_index,
                pool_label(e.pool_id, e.attribution_confidence),
                e.stream,
                e.attribution_confidence.as_str(),
                e.stack_frames.key_at_depth(display.stack_depth)
            );
        }
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
    json!({
        "device_index": c.device_index,
        "pool_id": pool_value(c.pool_id),
        "active_bytes": c.active_bytes,
        "attributed_bytes": c.attributed_bytes,
        "unattributed_bytes": c.unattributed_bytes,
        "active_blocks": c.active_blocks,
        "attributed_blocks": c.attributed_blocks,
        "coverage": c.coverage,
    })
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

/// Every row of one attribution.
pub fn attribution_json(a: &Attribution) -> Value {
    json!({
        "reference": a.reference_title,
        "candidate": a.candidate_title,
        "attribution_status": {
            "stacks": status_value(&a.status.stacks),
            "events": status_value(&a.status.events),
            "lifetimes": status_value(&a.status.lifetimes),
        },
        "reference_stack_coverage": a.reference_stack_coverage.as_ref().map(coverage_json),
        "candidate_stack_coverage": a.candidate_stack_coverage.as_ref().map(coverage_json),
        "stack_deltas": a.stack_deltas.iter().map(delta_json).collect::<Vec<_>>(),
        "events": a.events.iter().map(event_json).collect::<Vec<_>>(),
        "warnings": a.warnings,
    })
}

const STACK_COLUMNS: &[&str] = &[
    "reference",
    "candidate",
    "reference_device_index",
    "reference_pool_id",
    "candidate_device_index",
    "candidate_pool_id",
    "stream",
    "stack_key",
    "stack_fingerprint",
    "stack_frames_json",
    "reference_size_bytes",
    "candidate_size_bytes",
    "delta_size_bytes",
    "reference_requested_bytes",
    "candidate_requested_bytes",
    "delta_requested_bytes",
    "reference_count",
    "candidate_count",
    "delta_count",
];

const EVENT_COLUMNS: &[&str] = &[
    "reference",
    "candidate",
    "device_index",
    "pool_id",
    "stream",
    "action",
    "stack_key",
    "stack_fingerprint",
    "stack_frames_json",
    "total_bytes",
    "count",
    "attribution_confidence",
];

fn pool_cell(p: Option<PoolId>) -> Cell {
    Cell::text(p.map(|(a, b)| format!("{a},{b}")))
}

/// `allocation_stack_comparisons.csv`: every stack delta of every attribution
/// (`include_unchanged=false` drops unchanged rows).
pub fn stack_deltas_csv(items: &[&Attribution], include_unchanged: bool) -> String {
    let mut table = Table::new(STACK_COLUMNS);
    for a in items {
        for d in visible_deltas(a, include_unchanged) {
            table.push(vec![
                a.reference_title.as_str().into(),
                a.candidate_title.as_str().into(),
                opt(d.reference_key.map(|k| k.0)),
                pool_cell(d.reference_key.map(|k| k.1)),
                opt(d.candidate_key.map(|k| k.0)),
                pool_cell(d.candidate_key.map(|k| k.1)),
                opt(d.stream),
                d.stack_frames.key().into(),
                d.stack_frames.fingerprint().into(),
                d.stack_frames.to_json().into(),
                d.reference_size_bytes.into(),
                d.candidate_size_bytes.into(),
                d.delta_size_bytes.into(),
                d.reference_requested_bytes.into(),
                d.candidate_requested_bytes.into(),
                d.delta_requested_bytes.into(),
                d.reference_count.into(),
                d.candidate_count.into(),
                d.delta_count.into(),
            ]);
        }
    }
    csv_table(&table)
}

/// `events.csv`: every event row of every attribution.
pub fn events_csv(items: &[&Attribution]) -> String {
    let mut table = Table::new(EVENT_COLUMNS);
    for a in items {
        for e in &a.events {
            table.push(vec![
                a.reference_title.as_str().into(),
                a.candidate_title.as_str().into(),
                e.device_index.into(),
                pool_cell(e.pool_id),
                e.stream.into(),
                e.action.as_str().into(),
                e.stack_frames.key().into(),
                e.stack_frames.fingerprint().into(),
                e.stack_frames.to_json().into(),
                e.total_bytes.into(),
                e.count.into(),
                e.attribution_confidence.as_str().into(),
            ]);
        }
    }
    csv_table(&table)
}

/// The HTML fragment of one attribution (tables limited to `display.limit` rows, each
/// saying how many it shows).
pub fn attribution_html(a: &Attribution, display: Display, include_unchanged: bool) -> String {
    let s = &a.status;
    if !(s.stacks.requested || s.events.requested || s.lifetimes.requested) {
        return String::new();
    }
    let mut out = format!(
        "<h2>Attribution {} &rarr; {}</h2>\n<p>stacks {}, events {}, lifetimes {}</p>\n",
        escape_html(&a.reference_title),
        escape_html(&a.candidate_title),
        status_word(&s.stacks),
        status_word(&s.events),
        status_word(&s.lifetimes)
    );
    for (side, c) in [
        ("reference", &a.reference_stack_coverage),
        ("candidate", &a.candidate_stack_coverage),
    ] {
        if let Some(c) = c {
            let _ = writeln!(out, "<p>{}</p>", escape_html(&coverage_line(side, c)));
        }
    }
    if s.stacks.requested {
        let rows = visible_deltas(a, include_unchanged);
        let _ = writeln!(
            out,
            "<h3>Allocation stacks</h3>\n<p>showing {} of {} rows</p>",
            rows.len().min(display.limit),
            rows.len()
        );
        let cells: Vec<Vec<Cell>> = rows
            .iter()
            .take(display.limit)
            .map(|d| {
                vec![
                    side_key(d.reference_key).into(),
                    side_key(d.candidate_key).into(),
                    d.reference_size_bytes.into(),
                    d.candidate_size_bytes.into(),
                    d.delta_size_bytes.into(),
                    d.delta_count.into(),
                    d.stack_frames.key_at_depth(display.stack_depth).into(),
                ]
            })
            .collect();
        out.push_str(&html_table(
            &[
                "reference pool",
                "candidate pool",
                "reference bytes",
                "candidate bytes",
                "delta bytes",
                "delta count",
                "stack",
            ],
            &cells,
            |_| "",
        ));
    }
    if s.events.requested {
        let _ = writeln!(
            out,
            "<h3>Allocator events</h3>\n<p>showing {} of {} rows</p>",
            a.events.len().min(display.limit),
            a.events.len()
        );
        let cells: Vec<Vec<Cell>> = a
            .events
            .iter()
            .take(display.limit)
            .map(|e| {
                vec![
                    e.device_index.into(),
                    pool_label(e.pool_id, e.attribution_confidence).into(),
                    format!("0x{:x}", e.stream).into(),
                    e.action.as_str().into(),
                    e.total_bytes.into(),
                    e.count.into(),
                    e.attribution_confidence.as_str().into(),
                    e.stack_frames.key_at_depth(display.stack_depth).into(),
                ]
            })
            .collect();
        out.push_str(&html_table(
            &[
                "device",
                "pool",
                "stream",
                "action",
                "bytes",
                "count",
                "confidence",
                "stack",
            ],
            &cells,
            |_| "",
        ));
    }
    for w in &a.warnings {
        let _ = writeln!(out, "<p class=\"warn\">{}</p>", escape_html(w));
    }
    out
}
