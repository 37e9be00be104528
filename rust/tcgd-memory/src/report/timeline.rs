use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::stats::MemoryStats;
use crate::timeline::Timeline;

use super::comparison::*;
use super::document::pretty;
use super::*;

pub(super) const TIMELINE_HEADER: [&str; 25] = [
    "point_index",
    "label",
    "level",
    "scope",
    "device",
    "pool",
    "pool_kind",
    "reserved",
    "reserved_change",
    "allocated",
    "allocated_change",
    "active",
    "active_change",
    "requested",
    "requested_change",
    "cuda_used",
    "cuda_used_change",
    "residual",
    "residual_change",
    "pool_owner",
    "peak_reserved_between",
    "peak_allocated_between",
    "peak_active_between",
    "alloc_retries_between",
    "ooms_between",
];

pub(super) fn timeline_rows(t: &Timeline) -> Vec<Vec<Cell>> {
    t.rows
        .iter()
        .map(|r| {
            let ch = |f: fn(&MemoryStats) -> i64| opt(r.change.as_ref().map(f));
            vec![
                r.point_index.into(),
                r.label.as_str().into(),
                r.level.as_str().into(),
                Cell::text(r.scope.map(|s| s.as_str())),
                opt(r.device),
                opt_pool(r.pool),
                Cell::text(r.pool_kind.map(|k| k.as_str())),
                r.stats.reserved_bytes.into(),
                ch(|s| s.reserved_bytes),
                r.stats.allocated_bytes.into(),
                ch(|s| s.allocated_bytes),
                r.stats.active_bytes.into(),
                ch(|s| s.active_bytes),
                r.stats.requested_bytes.into(),
                ch(|s| s.requested_bytes),
                opt(r.cuda_used),
                opt(r.cuda_used_change),
                opt(r.residual),
                opt(r.residual_change),
                Cell::text(r.pool_owner.clone()),
                opt(r.peaks.and_then(|p| p.bytes.peak_reserved_bytes)),
                opt(r.peaks.and_then(|p| p.bytes.peak_allocated_bytes)),
                opt(r.peaks.and_then(|p| p.bytes.peak_active_bytes)),
                opt(r.peaks.and_then(|p| p.alloc_retries)),
                opt(r.peaks.and_then(|p| p.ooms)),
            ]
        })
        .collect()
}

/// `peak since previous point: reserved 3.00 MiB, ...`, `1 alloc retry`: what the
/// reading tells of the window since the previous point.
pub(super) fn peaks_parts(p: &crate::owners::PeaksBetween) -> Vec<String> {
    let mut peaks = Vec::new();
    for (name, v) in p.bytes.labelled() {
        if let Some(v) = v {
            peaks.push(format!("{name} {}", format_bytes(v)));
        }
    }
    let mut out = Vec::new();
    if !peaks.is_empty() {
        out.push(format!("peak since previous point: {}", peaks.join(", ")));
    }
    if let Some(n) = p.alloc_retries.filter(|n| *n > 0) {
        out.push(format!(
            "{n} alloc retr{}",
            if n == 1 { "y" } else { "ies" }
        ));
    }
    if let Some(n) = p.ooms.filter(|n| *n > 0) {
        out.push(format!("{n} OOM{}", if n == 1 { "" } else { "s" }));
    }
    out
}

pub(super) fn timeline_text(t: &Timeline, include_unchanged: bool) -> String {
    let mut out = String::new();
    let name = t.points.first().map_or("", |p| p.name.as_str());
    let _ = writeln!(out, "Memory timeline '{name}' ({} points)", t.points.len());
    let mut current = None;
    for r in &t.rows {
        if current != Some(r.point_index) {
            current = Some(r.point_index);
            let _ = writeln!(out, "\n  [{}] {}", r.point_index, r.label);
        }
        let changed = r
            .change
            .is_some_and(|c| c.byte_metrics().iter().any(|(_, v)| *v != 0))
            || r.cuda_used_change.is_some_and(|c| c != 0);
        if !include_unchanged
            && r.change.is_some()
            && !changed
            && r.level != crate::timeline::TimelineLevel::Scope
        {
            continue;
        }
        let value = |v: i64, c: Option<i64>| match c {
            Some(c) => format!("{} ({})", format_bytes(v), format_change(c)),
            None => format_bytes(v),
        };
        let stats = format!(
            "reserved {}, allocated {}, active {}, requested {}",
            value(r.stats.reserved_bytes, r.change.map(|c| c.reserved_bytes)),
            value(r.stats.allocated_bytes, r.change.map(|c| c.allocated_bytes)),
            value(r.stats.active_bytes, r.change.map(|c| c.active_bytes)),
            value(r.stats.requested_bytes, r.change.map(|c| c.requested_bytes)),
        );
        let line = match r.level {
            crate::timeline::TimelineLevel::Scope => {
                format!("    {}: {stats}", r.scope.map_or("?", |s| s.as_str()))
            }
            crate::timeline::TimelineLevel::Device => {
                let cuda = match r.cuda_used {
                    Some(u) => format!(
                        "CUDA used {}, residual {}, ",
                        value(u, r.cuda_used_change),
                        r.residual
                            .map_or_else(|| "n/a".to_owned(), |x| value(x, r.residual_change))
                    ),
                    None => String::new(),
                };
                let peaks: String = r
                    .peaks
                    .map(|p| peaks_parts(&p).iter().map(|x| format!("; {x}")).collect())
                    .unwrap_or_default();
                format!(
                    "    device[{}]: {cuda}{stats}{peaks}",
                    r.device.unwrap_or(-1)
                )
            }
            crate::timeline::TimelineLevel::Pool => format!(
                "      {} ({}{}): {stats}",
                pool_name(r.pool.unwrap_or((0, 0))),
                r.pool_kind.map_or("?", |k| k.as_str()),
                r.pool_owner
                    .as_ref()
                    .map(|o| format!(", {o}"))
                    .unwrap_or_default()
            ),
        };
        let _ = writeln!(out, "{line}");
    }
    out
}

pub fn timeline_json(t: &Timeline) -> Value {
    let rows: Vec<Value> = t
        .rows
        .iter()
        .map(|r| {
            json!({
                "point_index": r.point_index,
                "label": r.label,
                "level": r.level.as_str(),
                "scope": r.scope.map(|s| s.as_str()),
                "device": r.device,
                "pool": pool_json(r.pool),
                "pool_kind": r.pool_kind.map(|k| k.as_str()),
                "stats": r.stats,
                "change": r.change,
                "cuda_used": r.cuda_used,
                "cuda_used_change": r.cuda_used_change,
                "residual": r.residual,
                "residual_change": r.residual_change,
                "pool_owner": r.pool_owner,
                "peaks_between": r.peaks,
            })
        })
        .collect();
    json!({"kind": "memory_timeline", "points": t.points, "rows": rows})
}

/// Most private pools a timeline chart draws a line for (the largest by peak).
const CHART_POOLS: usize = 6;

/// Reserved and allocated bytes of every pool together, and reserved bytes of the largest
/// pools, per point.
fn timeline_chart(t: &Timeline) -> String {
    let labels: Vec<&str> = t.points.iter().map(|p| p.label.as_str()).collect();
    let at = |index: i64| t.points.iter().position(|p| p.index == index);
    let mut series = Vec::new();
    for (name, value) in [
        (
            "reserved, all pools",
            (|s: &MemoryStats| s.reserved_bytes) as fn(&MemoryStats) -> i64,
        ),
        ("allocated, all pools", |s: &MemoryStats| s.allocated_bytes),
    ] {
        let mut values = vec![0; labels.len()];
        for r in t
            .rows
            .iter()
            .filter(|r| r.scope == Some(crate::stats::Scope::All))
        {
            if let Some(i) = at(r.point_index) {
                values[i] = value(&r.stats);
            }
        }
        series.push(Series {
            name: name.to_owned(),
            values,
        });
    }
    let mut pools: std::collections::BTreeMap<(i64, crate::model::PoolId), Vec<i64>> =
        std::collections::BTreeMap::new();
    for r in &t.rows {
        if let (Some(device), Some(pool), Some(i)) = (r.device, r.pool, at(r.point_index)) {
            pools
                .entry((device, pool))
                .or_insert_with(|| vec![0; labels.len()])[i] = r.stats.reserved_bytes;
        }
    }
    let mut pools: Vec<_> = pools.into_iter().collect();
    pools.sort_by_key(|(_, v)| std::cmp::Reverse(v.iter().copied().max().unwrap_or(0)));
    series.extend(
        pools
            .into_iter()
            .take(CHART_POOLS)
            .map(|((d, p), values)| Series {
                name: format!("reserved, device {d} {}", pool_name(p)),
                values,
            }),
    );
    line_chart("timeline-chart", "bytes per point", &labels, &series)
}

pub fn render_timeline(t: &Timeline, format: Format, options: ReportOptions) -> String {
    match format {
        Format::Text => timeline_text(t, options.include_unchanged),
        Format::Json => pretty(&timeline_json(t)),
        Format::Csv => csv_table(&Table::with_rows(&TIMELINE_HEADER, timeline_rows(t))),
        Format::Html => {
            let mut body = String::from("<h1>Memory timeline</h1>\n");
            body.push_str(&timeline_chart(t));
            body.push_str("<pre>");
            body.push_str(&escape_html(&timeline_text(t, options.include_unchanged)));
            body.push_str("</pre>\n");
            body.push_str(&html_table(&TIMELINE_HEADER, &timeline_rows(t), |row| {
                if row[2] == "device" {
                    "device"
                } else {
                    ""
                }
            }));
            html_page("Memory timeline", &body)
        }
    }
}
