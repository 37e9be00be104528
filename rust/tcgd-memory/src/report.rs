//! Reports in text, JSON, CSV and HTML. Every format renders the same pruned view of the
//! tree (device -> CUDA used -> residual + allocator -> pools -> streams), so they agree
//! row for row; each level's values sum to its parent's (with `include_unchanged=false`
//! the pruned rows have zero change, so changes still sum).

use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use crate::compare::{summary, Comparison, DeviceNode, Pair, PoolNode, Relation, StreamNode};
use crate::lifecycle::Lifecycle;
use crate::model::PoolId;
use crate::phases::PhaseComparison;
use crate::state::MemoryState;
use crate::stats::{MemoryStats, PoolKind};
use crate::timeline::Timeline;

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
fn format_change(change: i64) -> String {
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

fn pool_name(pool: PoolId) -> String {
    format!("pool[{},{}]", pool.0, pool.1)
}

fn stream_name(stream: i64) -> String {
    format!("stream 0x{stream:x}")
}

// ---------------------------------------------------------------------- pruned view

fn device_changed(d: &DeviceNode) -> bool {
    d.cuda_used.reference != d.cuda_used.candidate
        || d.residual.reference != d.residual.candidate
        || d.probe_slots.reference != d.probe_slots.candidate
        || d.allocator.changed()
        || d.lifecycle.is_some_and(|l| !l.is_zero())
}

/// The tree as it will be shown: pruned of unchanged rows (bottom-up, parents of changed
/// rows kept) and cut at `depth`.
pub fn view(comparison: &Comparison, options: ReportOptions) -> Comparison {
    let mut out = comparison.clone();
    let prune = !options.include_unchanged && comparison.relation != Relation::Single;
    for device in &mut out.devices {
        for pool in &mut device.pools {
            if prune {
                pool.streams
                    .retain(|s| s.stats.changed() || s.lifecycle.is_some_and(|l| !l.is_zero()));
            }
            if options.depth != Depth::Stream {
                pool.streams.clear();
            }
        }
        if prune {
            device.pools.retain(|p| {
                p.stats.changed()
                    || !p.streams.is_empty()
                    || p.lifecycle.is_some_and(|l| !l.is_zero())
            });
        }
        if options.depth == Depth::Device {
            device.pools.clear();
        }
    }
    if prune {
        out.devices
            .retain(|d| device_changed(d) || !d.pools.is_empty());
    }
    out
}

// ---------------------------------------------------------------------- text

struct Text<'a> {
    out: String,
    single: bool,
    comparison: &'a Comparison,
}

impl Text<'_> {
    fn line(&mut self, indent: usize, text: &str) {
        let _ = writeln!(self.out, "{}{}", "  ".repeat(indent), text);
    }

    fn bytes(&self, pair: Pair<Option<i64>>) -> String {
        if self.single {
            return opt_bytes(pair.candidate);
        }
        let change = pair
            .change()
            .map_or_else(|| "n/a".to_owned(), format_change);
        format!(
            "{} -> {} ({change})",
            opt_bytes(pair.reference),
            opt_bytes(pair.candidate)
        )
    }

    fn stat(&self, stats: &Pair<MemoryStats>, f: fn(&MemoryStats) -> i64) -> String {
        self.bytes(Pair {
            reference: Some(f(&stats.reference)),
            candidate: Some(f(&stats.candidate)),
        })
    }

    fn count(&self, stats: &Pair<MemoryStats>, f: fn(&MemoryStats) -> i64) -> String {
        let (r, c) = (f(&stats.reference), f(&stats.candidate));
        if self.single {
            return c.to_string();
        }
        let change = c
            .checked_sub(r)
            .map_or_else(|| "n/a".to_owned(), format_count_change);
        format!("{r} -> {c} ({change})")
    }

    fn stats(&mut self, indent: usize, stats: &Pair<MemoryStats>, private: bool) {
        let reserved = self.stat(stats, |s| s.reserved);
        self.line(indent, &format!("reserved: {reserved}"));
        let line = format!(
            "allocated: {}, active: {}, requested: {}",
            self.stat(stats, |s| s.allocated),
            self.stat(stats, |s| s.active),
            self.stat(stats, |s| s.requested)
        );
        self.line(indent, &line);
        let inactive = self.stat(stats, MemoryStats::inactive);
        let note = if private {
            " (reusable only inside this pool)"
        } else {
            ""
        };
        let line = format!(
            "inactive{note}: {inactive}, segments: {}, blocks: {}",
            self.count(stats, |s| s.segment_count),
            self.count(stats, |s| s.block_count)
        );
        self.line(indent, &line);
        let expandable = stats.reference.expandable_segment_count > 0
            || stats.candidate.expandable_segment_count > 0;
        if expandable {
            let line = format!(
                "expandable segments: {}, reserved: {}, inactive: {}",
                self.count(stats, |s| s.expandable_segment_count),
                self.stat(stats, |s| s.expandable_reserved),
                self.stat(stats, |s| s.expandable_inactive)
            );
            self.line(indent, &line);
        }
    }

    fn lifecycle(&mut self, indent: usize, lifecycle: Option<Lifecycle>) {
        if self.single {
            return;
        }
        let Some(l) = lifecycle else { return };
        let parts: Vec<String> = l
            .fields()
            .iter()
            .filter(|(_, v)| *v != 0)
            .map(|(name, v)| format!("{}={}", name.replace('_', " "), format_bytes(*v)))
            .collect();
        if parts.is_empty() {
            self.line(indent, "lifecycle: no address changes");
        } else {
            self.line(indent, &format!("lifecycle: {}", parts.join(", ")));
        }
    }

    fn side_note(&self, reference: bool, candidate: bool) -> &'static str {
        match (self.single, reference, candidate) {
            (true, _, _) | (false, true, true) => "",
            (false, true, false) => ", reference only",
            (false, false, true) => ", candidate only",
            (false, false, false) => "",
        }
    }

    fn stream(&mut self, indent: usize, s: &StreamNode) {
        let name = match (s.reference_stream, s.candidate_stream) {
            (Some(r), Some(c)) if r != c => format!("{} -> {}", stream_name(r), stream_name(c)),
            (Some(x), _) | (None, Some(x)) => stream_name(x),
            (None, None) => "stream ?".to_owned(),
        };
        let note = self.side_note(s.reference_stream.is_some(), s.candidate_stream.is_some());
        let note = note.trim_start_matches(", ");
        if note.is_empty() {
            self.line(indent, &name);
        } else {
            self.line(indent, &format!("{name} ({note})"));
        }
        let stats = s.stats;
        let reserved = self.stat(&stats, |s| s.reserved);
        self.line(indent + 1, &format!("reserved: {reserved}"));
        let line = format!(
            "allocated: {}, active: {}, requested: {}",
            self.stat(&stats, |s| s.allocated),
            self.stat(&stats, |s| s.active),
            self.stat(&stats, |s| s.requested)
        );
        self.line(indent + 1, &line);
        self.lifecycle(indent + 1, s.lifecycle);
    }

    fn pool(&mut self, indent: usize, p: &PoolNode) {
        let name = match (p.reference_pool, p.candidate_pool) {
            (Some(r), Some(c)) if r != c => format!("{} -> {}", pool_name(r), pool_name(c)),
            (Some(x), _) | (None, Some(x)) => pool_name(x),
            (None, None) => "pool ?".to_owned(),
        };
        let note = self.side_note(p.reference_pool.is_some(), p.candidate_pool.is_some());
        self.line(indent, &format!("{name} ({}{note})", p.kind.as_str()));
        self.stats(indent + 1, &p.stats, p.kind == PoolKind::Private);
        self.lifecycle(indent + 1, p.lifecycle);
        for s in &p.streams {
            self.stream(indent + 1, s);
        }
    }

    fn device(&mut self, d: &DeviceNode) {
        let name = match (d.reference_device, d.candidate_device) {
            (Some(r), Some(c)) if r != c => format!("device[{r}] -> device[{c}]"),
            (Some(x), _) | (None, Some(x)) => format!("device[{x}]"),
            (None, None) => "device[?]".to_owned(),
        };
        let note = self.side_note(d.reference_device.is_some(), d.candidate_device.is_some());
        let note = note.trim_start_matches(", ");
        if note.is_empty() {
            self.line(1, &name);
        } else {
            self.line(1, &format!("{name} ({note})"));
        }
        let known = d.cuda_used.reference.is_some() || d.cuda_used.candidate.is_some();
        if known {
            let used = self.bytes(d.cuda_used);
            self.line(2, &format!("CUDA used: {used}"));
            let residual = self.bytes(d.residual);
            self.line(3, &format!("residual: {residual}"));
            if d.probe_slots.reference.is_some() || d.probe_slots.candidate.is_some() {
                let probe = self.bytes(d.probe_slots);
                let pinned = d.probe_pinned.candidate.unwrap_or(0);
                let pinned_note = if pinned > 0 {
                    format!(
                        " [plus {} of pinned host memory, not device memory]",
                        format_bytes(pinned)
                    )
                } else {
                    String::new()
                };
                self.line(
                    4,
                    &format!("probe slots (torch-cudagraph-debug): {probe}{pinned_note}"),
                );
                let other = self.bytes(d.residual_other);
                self.line(
                    4,
                    &format!(
                        "other (CUDA context, NCCL, other processes, raw cudaMalloc): {other}"
                    ),
                );
            }
            self.line(3, "allocator:");
        } else {
            self.line(
                2,
                "CUDA used: unavailable (no torch.cuda.mem_get_info reading with this state)",
            );
            self.line(2, "allocator:");
        }
        let indent = if known { 4 } else { 3 };
        self.stats(indent, &d.allocator, false);
        self.lifecycle(indent, d.lifecycle);
        for p in &d.pools {
            self.pool(indent, p);
        }
    }
}

fn relation_words(c: &Comparison) -> &'static str {
    match c.relation {
        Relation::SameOrigin => match c.candidate.source.as_str() {
            _ if c.candidate.origin.starts_with("probe:") => "same probe",
            _ => "same run",
        },
        Relation::CrossRun => "independent runs",
        Relation::Single => "single state",
    }
}

pub fn comparison_text(comparison: &Comparison, options: ReportOptions) -> String {
    let shown = view(comparison, options);
    let single = comparison.relation == Relation::Single;
    let mut t = Text {
        out: String::new(),
        single,
        comparison,
    };
    match &comparison.reference {
        Some(r) if !single => t.line(
            0,
            &format!(
                "Memory comparison '{}' -> '{}' ({})",
                r.title(),
                t.comparison.candidate.title(),
                relation_words(comparison)
            ),
        ),
        _ => t.line(
            0,
            &format!("Memory state '{}'", comparison.candidate.title()),
        ),
    }
    if !single {
        t.line(
            1,
            &format!("address lifecycle: {}", comparison.lifecycle.as_str()),
        );
    }
    t.line(
        1,
        "CUDA used is device-wide and includes other processes; residual = CUDA used - \
         allocator reserved; the two are read one after the other, not atomically.",
    );
    for w in &comparison.warnings {
        t.line(1, &format!("warning: {w}"));
    }
    for ((rd, rp), (cd, cp)) in &comparison.suggested_pool_mapping {
        t.line(
            1,
            &format!(
                "suggested pool mapping (not applied): device {rd} {} -> device {cd} {}",
                pool_name(*rp),
                pool_name(*cp)
            ),
        );
    }
    t.line(0, "");
    if shown.devices.is_empty() {
        t.line(1, "(no changes)");
    }
    for d in &shown.devices {
        t.device(d);
    }
    t.out
}

// ---------------------------------------------------------------------- JSON

fn pair_json(pair: Pair<Option<i64>>) -> Value {
    json!({
        "reference": pair.reference,
        "candidate": pair.candidate,
        "change": pair.change(),
    })
}

fn stats_json(stats: &Pair<MemoryStats>) -> Value {
    let mut m = Map::new();
    let (r, c) = (stats.reference.columns(), stats.candidate.columns());
    for ((name, rv), (_, cv)) in r.iter().zip(c.iter()) {
        m.insert(
            (*name).to_owned(),
            json!({"reference": rv, "candidate": cv, "change": cv.checked_sub(*rv)}),
        );
    }
    Value::Object(m)
}

fn lifecycle_json(l: Option<Lifecycle>) -> Value {
    match l {
        None => Value::Null,
        Some(l) => {
            let m: Map<String, Value> = l
                .fields()
                .iter()
                .map(|(k, v)| (format!("{k}_bytes"), json!(v)))
                .collect();
            Value::Object(m)
        }
    }
}

fn pool_json(p: Option<PoolId>) -> Value {
    p.map_or(Value::Null, |(a, b)| json!([a, b]))
}

pub fn comparison_json(comparison: &Comparison, options: ReportOptions) -> Value {
    let shown = view(comparison, options);
    let devices: Vec<Value> = shown
        .devices
        .iter()
        .map(|d| {
            let pools: Vec<Value> = d
                .pools
                .iter()
                .map(|p| {
                    let streams: Vec<Value> = p
                        .streams
                        .iter()
                        .map(|s| {
                            json!({
                                "reference_stream": s.reference_stream,
                                "candidate_stream": s.candidate_stream,
                                "stats": stats_json(&s.stats),
                                "lifecycle": lifecycle_json(s.lifecycle),
                            })
                        })
                        .collect();
                    json!({
                        "reference_pool": pool_json(p.reference_pool),
                        "candidate_pool": pool_json(p.candidate_pool),
                        "kind": p.kind.as_str(),
                        "stats": stats_json(&p.stats),
                        "lifecycle": lifecycle_json(p.lifecycle),
                        "streams": streams,
                    })
                })
                .collect();
            json!({
                "reference_device": d.reference_device,
                "candidate_device": d.candidate_device,
                "cuda_used": pair_json(d.cuda_used),
                "residual": pair_json(d.residual),
                "probe_slots": pair_json(d.probe_slots),
                "residual_other": pair_json(d.residual_other),
                "probe_pinned": pair_json(d.probe_pinned),
                "allocator": stats_json(&d.allocator),
                "lifecycle": lifecycle_json(d.lifecycle),
                "pools": pools,
            })
        })
        .collect();
    json!({
        "kind": if comparison.relation == Relation::Single { "memory_state" } else { "memory_comparison" },
        "reference": comparison.reference,
        "candidate": comparison.candidate,
        "relation": comparison.relation.as_str(),
        "lifecycle_label": comparison.lifecycle.as_str(),
        "include_unchanged": options.include_unchanged,
        "warnings": comparison.warnings,
        "suggested_pool_mapping": comparison.suggested_pool_mapping.iter().map(|((rd, rp), (cd, cp))| {
            json!({"reference": [rd, [rp.0, rp.1]], "candidate": [cd, [cp.0, cp.1]]})
        }).collect::<Vec<_>>(),
        "devices": devices,
    })
}

// ---------------------------------------------------------------------- CSV

/// Cells go through the shared writer, which neutralises text a spreadsheet would run as
/// a formula (a point label like `=HYPERLINK(...)`) and leaves numbers as numbers.
fn csv_line(out: &mut String, fields: &[String]) {
    tcgd_report::csv::line(out, fields, "\n");
}

fn opt(v: Option<i64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn opt_pool(p: Option<PoolId>) -> String {
    p.map(|(a, b)| format!("{a},{b}")).unwrap_or_default()
}

const CSV_HEADER: [&str; 12] = [
    "level",
    "reference_device",
    "candidate_device",
    "reference_pool",
    "candidate_pool",
    "pool_kind",
    "reference_stream",
    "candidate_stream",
    "metric",
    "reference",
    "candidate",
    "change",
];

/// Where a CSV/HTML row belongs: devices, pools (`a,b`), pool kind, streams.
type RowId = [String; 7];
type Row = [String; 12];

fn push_row(rows: &mut Vec<Row>, level: &str, id: &RowId, metric: &str, values: [Option<i64>; 3]) {
    let [a, b, c, d, e, f, g] = id.clone();
    rows.push([
        level.to_owned(),
        a,
        b,
        c,
        d,
        e,
        f,
        g,
        metric.to_owned(),
        opt(values[0]),
        opt(values[1]),
        opt(values[2]),
    ]);
}

fn push_stats(
    rows: &mut Vec<Row>,
    level: &str,
    id: &RowId,
    stats: &Pair<MemoryStats>,
    lifecycle: Option<Lifecycle>,
) {
    let pairs = stats
        .reference
        .columns()
        .into_iter()
        .zip(stats.candidate.columns());
    for ((name, r), (_, c)) in pairs {
        push_row(rows, level, id, name, [Some(r), Some(c), c.checked_sub(r)]);
    }
    if let Some(l) = lifecycle {
        for (name, v) in l.fields() {
            push_row(
                rows,
                level,
                id,
                &format!("lifecycle.{name}"),
                [None, None, Some(v)],
            );
        }
    }
}

/// One row per value of the pruned tree: what CSV and HTML tables show.
fn comparison_rows(shown: &Comparison) -> Vec<Row> {
    let mut rows = Vec::new();
    for d in &shown.devices {
        let ids = |pools: [Option<PoolId>; 2], kind: &str, streams: [Option<i64>; 2]| -> RowId {
            [
                opt(d.reference_device),
                opt(d.candidate_device),
                opt_pool(pools[0]),
                opt_pool(pools[1]),
                kind.to_owned(),
                opt(streams[0]),
                opt(streams[1]),
            ]
        };
        let device_id = ids([None, None], "", [None, None]);
        for (metric, pair) in [
            ("cuda_used", d.cuda_used),
            ("residual", d.residual),
            ("probe_slots", d.probe_slots),
            ("residual_other", d.residual_other),
            ("probe_pinned", d.probe_pinned),
        ] {
            let values = [pair.reference, pair.candidate, pair.change()];
            push_row(&mut rows, "device", &device_id, metric, values);
        }
        push_stats(
            &mut rows,
            "allocator",
            &device_id,
            &d.allocator,
            d.lifecycle,
        );
        for p in &d.pools {
            let pools = [p.reference_pool, p.candidate_pool];
            let kind = p.kind.as_str();
            let pool_id = ids(pools, kind, [None, None]);
            push_stats(&mut rows, "pool", &pool_id, &p.stats, p.lifecycle);
            for s in &p.streams {
                let stream_id = ids(pools, kind, [s.reference_stream, s.candidate_stream]);
                push_stats(&mut rows, "stream", &stream_id, &s.stats, s.lifecycle);
            }
        }
    }
    rows
}

pub fn comparison_csv(comparison: &Comparison, options: ReportOptions) -> String {
    let shown = view(comparison, options);
    let mut out = String::new();
    csv_line(&mut out, &CSV_HEADER.map(str::to_owned));
    for row in comparison_rows(&shown) {
        csv_line(&mut out, &row);
    }
    out
}

// ---------------------------------------------------------------------- HTML

pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px}\
td.n{text-align:right;font-variant-numeric:tabular-nums}tr.device td{background:#eef}\
tr.pool td{background:#f7f7f7}.warn{color:#a40}pre{background:#f5f5f5;padding:8px}";

fn html_page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>{STYLE}</style></head>\n<body>\n{body}</body></html>\n",
        escape_html(title)
    )
}

/// Reserved bytes per pool, reference and candidate side by side.
fn pool_chart(shown: &Comparison) -> String {
    let mut bars: Vec<(String, i64, i64)> = Vec::new();
    for d in &shown.devices {
        let device = d.candidate_device.or(d.reference_device).unwrap_or(-1);
        for p in &d.pools {
            let pool = p.candidate_pool.or(p.reference_pool).unwrap_or((0, 0));
            bars.push((
                format!("device {device} {} ({})", pool_name(pool), p.kind.as_str()),
                p.stats.reference.reserved,
                p.stats.candidate.reserved,
            ));
        }
    }
    if bars.is_empty() {
        return String::new();
    }
    let single = shown.relation == Relation::Single;
    let max = bars.iter().map(|b| b.1.max(b.2)).max().unwrap_or(0).max(1) as f64;
    let (label_w, bar_w, row_h) = (260.0, 420.0, if single { 18.0 } else { 30.0 });
    let height = row_h * bars.len() as f64 + 30.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" \
         role=\"img\" aria-label=\"reserved bytes per pool\">\n",
        label_w + bar_w + 140.0
    );
    for (i, (label, r, c)) in bars.iter().enumerate() {
        let y = 20.0 + row_h * i as f64;
        let _ = writeln!(
            svg,
            "<text x=\"0\" y=\"{:.1}\" font-size=\"12\">{}</text>",
            y + 12.0,
            escape_html(label)
        );
        let mut draw = |value: i64, dy: f64, color: &str, who: &str| {
            let w = (value as f64 / max * bar_w).max(if value > 0 { 1.0 } else { 0.0 });
            let _ = writeln!(
                svg,
                "<rect x=\"{label_w}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"12\" fill=\"{color}\">\
                 <title>{who}: {}</title></rect><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{}</text>",
                y + dy,
                escape_html(&format_bytes(value)),
                label_w + w + 4.0,
                y + dy + 10.0,
                escape_html(&format_bytes(value))
            );
        };
        if single {
            draw(*c, 2.0, "#4a7bd0", "reserved");
        } else {
            draw(*r, 0.0, "#aab4c4", "reference reserved");
            draw(*c, 14.0, "#4a7bd0", "candidate reserved");
        }
    }
    let legend = if single {
        "reserved"
    } else {
        "grey: reference reserved, blue: candidate reserved"
    };
    let _ = writeln!(
        svg,
        "<text x=\"0\" y=\"12\" font-size=\"12\" font-weight=\"bold\">{legend}</text>\n</svg>"
    );
    svg
}

fn html_table(
    header: &[&str],
    rows: &[Vec<String>],
    class_of: impl Fn(&[String]) -> &'static str,
) -> String {
    let mut out = String::from("<table>\n<thead><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", escape_html(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        let _ = write!(out, "<tr class=\"{}\">", class_of(row));
        for cell in row {
            let numeric = !cell.is_empty() && cell.parse::<i64>().is_ok();
            let _ = write!(
                out,
                "<td{}>{}</td>",
                if numeric { " class=\"n\"" } else { "" },
                escape_html(cell)
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    out
}

pub fn comparison_html(comparison: &Comparison, options: ReportOptions) -> String {
    let (title, body) = comparison_html_body(comparison, options);
    html_page(&title, &body)
}

/// The page's title and the content of its body.
fn comparison_html_body(comparison: &Comparison, options: ReportOptions) -> (String, String) {
    let shown = view(comparison, options);
    let text = comparison_text(comparison, options);
    let title = match &comparison.reference {
        Some(r) if comparison.relation != Relation::Single => {
            format!(
                "Memory comparison {} -> {}",
                r.title(),
                comparison.candidate.title()
            )
        }
        _ => format!("Memory state {}", comparison.candidate.title()),
    };
    let mut body = format!("<h1>{}</h1>\n", escape_html(&title));
    for w in &comparison.warnings {
        let _ = writeln!(body, "<p class=\"warn\">warning: {}</p>", escape_html(w));
    }
    body.push_str("<h2>Reserved memory per pool</h2>\n");
    body.push_str(&pool_chart(&shown));
    body.push_str("<h2>Report</h2>\n<pre>");
    body.push_str(&escape_html(&text));
    body.push_str("</pre>\n<h2>Values</h2>\n");
    let rows: Vec<Vec<String>> = comparison_rows(&shown).into_iter().map(Vec::from).collect();
    body.push_str(&html_table(&CSV_HEADER, &rows, |row| {
        match row[0].as_str() {
            "device" | "allocator" => "device",
            "pool" => "pool",
            _ => "",
        }
    }));
    (title, body)
}

pub fn render_comparison(
    comparison: &Comparison,
    format: Format,
    options: ReportOptions,
) -> String {
    match format {
        Format::Text => comparison_text(comparison, options),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&comparison_json(comparison, options))
                .unwrap_or_default();
            s.push('\n');
            s
        }
        Format::Csv => comparison_csv(comparison, options),
        Format::Html => comparison_html(comparison, options),
    }
}

/// Several states, each reported on its own, as one document (`tcgd memory summary`):
/// the text reports one after another, JSON `{"points": [...]}`, one CSV table whose
/// first column is the point's label, one HTML page.
pub fn render_summaries(states: &[&MemoryState], format: Format, options: ReportOptions) -> String {
    let summaries: Vec<Comparison> = states.iter().map(|s| summary(s)).collect();
    match format {
        Format::Text => summaries
            .iter()
            .map(|c| comparison_text(c, options))
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Json => {
            let points: Vec<Value> = summaries
                .iter()
                .map(|c| comparison_json(c, options))
                .collect();
            let mut s =
                serde_json::to_string_pretty(&json!({ "points": points })).unwrap_or_default();
            s.push('\n');
            s
        }
        Format::Csv => {
            let mut out = String::new();
            let header: Vec<String> = std::iter::once("point")
                .chain(CSV_HEADER)
                .map(str::to_owned)
                .collect();
            csv_line(&mut out, &header);
            for (state, c) in states.iter().zip(&summaries) {
                for row in comparison_rows(&view(c, options)) {
                    let cells: Vec<String> = std::iter::once(state.identity.label.clone())
                        .chain(row)
                        .collect();
                    csv_line(&mut out, &cells);
                }
            }
            out
        }
        Format::Html => {
            let bodies: Vec<String> = summaries
                .iter()
                .map(|c| comparison_html_body(c, options).1)
                .collect();
            let title = match states {
                [one] => format!("Memory state {}", one.identity.title()),
                _ => format!("Memory states ({})", states.len()),
            };
            html_page(&title, &bodies.join("<hr>\n"))
        }
    }
}

// ---------------------------------------------------------------------- phases

const PHASE_HEADER: [&str; 16] = [
    "level",
    "scope",
    "baseline_device",
    "candidate_device",
    "baseline_pool",
    "candidate_pool",
    "metric",
    "baseline_start",
    "baseline_end",
    "candidate_start",
    "candidate_end",
    "baseline_change",
    "candidate_change",
    "start_gap",
    "end_gap",
    "identity_holds",
];

fn phase_rows(phases: &PhaseComparison) -> Vec<Vec<String>> {
    phases
        .rows
        .iter()
        .map(|r| {
            let v = &r.values;
            vec![
                r.level.as_str().to_owned(),
                r.scope.map(|s| s.as_str().to_owned()).unwrap_or_default(),
                opt(r.baseline_device),
                opt(r.candidate_device),
                opt_pool(r.baseline_pool),
                opt_pool(r.candidate_pool),
                r.metric.to_owned(),
                opt(v.baseline_start),
                opt(v.baseline_end),
                opt(v.candidate_start),
                opt(v.candidate_end),
                opt(v.baseline_change()),
                opt(v.candidate_change()),
                opt(v.start_gap()),
                opt(v.end_gap()),
                v.identity_holds()
                    .map(|b| b.to_string())
                    .unwrap_or_default(),
            ]
        })
        .collect()
}

pub fn phases_json(phases: &PhaseComparison) -> Value {
    let rows: Vec<Value> = phases
        .rows
        .iter()
        .map(|r| {
            let v = &r.values;
            json!({
                "level": r.level.as_str(),
                "scope": r.scope.map(|s| s.as_str()),
                "baseline_device": r.baseline_device,
                "candidate_device": r.candidate_device,
                "baseline_pool": pool_json(r.baseline_pool),
                "candidate_pool": pool_json(r.candidate_pool),
                "metric": r.metric,
                "baseline_start": v.baseline_start,
                "baseline_end": v.baseline_end,
                "candidate_start": v.candidate_start,
                "candidate_end": v.candidate_end,
                "baseline_change": v.baseline_change(),
                "candidate_change": v.candidate_change(),
                "start_gap": v.start_gap(),
                "end_gap": v.end_gap(),
                "identity_holds": v.identity_holds(),
            })
        })
        .collect();
    json!({
        "kind": "memory_phase_comparison",
        "baseline": [phases.baseline.0, phases.baseline.1],
        "candidate": [phases.candidate.0, phases.candidate.1],
        "same_origin": phases.same_origin,
        "identity_failures": phases.identity_failures().len(),
        "warnings": phases.warnings,
        "rows": rows,
    })
}

fn phases_text(phases: &PhaseComparison, include_unchanged: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Memory phases: baseline '{}' -> '{}', candidate '{}' -> '{}'",
        phases.baseline.0.title(),
        phases.baseline.1.title(),
        phases.candidate.0.title(),
        phases.candidate.1.title()
    );
    let _ = writeln!(
        out,
        "  every row checks end gap = start gap + candidate change - baseline change; \
         failures: {}",
        phases.identity_failures().len()
    );
    for w in &phases.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
    let _ = writeln!(out);
    for r in &phases.rows {
        let v = &r.values;
        let moved = [
            v.baseline_change(),
            v.candidate_change(),
            v.start_gap(),
            v.end_gap(),
        ]
        .iter()
        .any(|x| x.is_some_and(|x| x != 0));
        if !include_unchanged && !moved {
            continue;
        }
        let what = match r.level {
            crate::phases::PhaseLevel::Scope => {
                format!("scope {}", r.scope.map_or("?", |s| s.as_str()))
            }
            crate::phases::PhaseLevel::Device => match (r.baseline_device, r.candidate_device) {
                (Some(b), Some(c)) if b != c => format!("device[{b}] -> device[{c}]"),
                (b, c) => format!("device[{}]", b.or(c).unwrap_or(-1)),
            },
            crate::phases::PhaseLevel::Pool => {
                let d = r.baseline_device.or(r.candidate_device).unwrap_or(-1);
                match (r.baseline_pool, r.candidate_pool) {
                    (Some(b), Some(c)) if b != c => {
                        format!("device[{d}] {} -> {}", pool_name(b), pool_name(c))
                    }
                    (Some(b), None) => format!("device[{d}] {} (baseline only)", pool_name(b)),
                    (None, Some(c)) => format!("device[{d}] {} (candidate only)", pool_name(c)),
                    (Some(b), Some(_)) => format!("device[{d}] {}", pool_name(b)),
                    (None, None) => format!("device[{d}] pool ?"),
                }
            }
        };
        let ch = |x: Option<i64>| x.map_or_else(|| "n/a".to_owned(), format_change);
        let check = match v.identity_holds() {
            Some(true) => "ok",
            Some(false) => "IDENTITY FAILS",
            None => "n/a",
        };
        let _ = writeln!(
            out,
            "  {what} {}: baseline {} -> {} ({}), candidate {} -> {} ({}), start gap {}, end gap {} [{check}]",
            r.metric,
            opt_bytes(v.baseline_start),
            opt_bytes(v.baseline_end),
            ch(v.baseline_change()),
            opt_bytes(v.candidate_start),
            opt_bytes(v.candidate_end),
            ch(v.candidate_change()),
            ch(v.start_gap()),
            ch(v.end_gap()),
        );
    }
    out
}

pub fn render_phases(phases: &PhaseComparison, format: Format, options: ReportOptions) -> String {
    match format {
        Format::Text => phases_text(phases, options.include_unchanged),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&phases_json(phases)).unwrap_or_default();
            s.push('\n');
            s
        }
        Format::Csv => {
            let mut out = String::new();
            csv_line(&mut out, &PHASE_HEADER.map(str::to_owned));
            for row in phase_rows(phases) {
                csv_line(&mut out, &row);
            }
            out
        }
        Format::Html => {
            let mut body = String::from("<h1>Memory phases</h1>\n<pre>");
            body.push_str(&escape_html(&phases_text(
                phases,
                options.include_unchanged,
            )));
            body.push_str("</pre>\n");
            body.push_str(&html_table(&PHASE_HEADER, &phase_rows(phases), |row| {
                if row[15] == "false" {
                    "device"
                } else {
                    ""
                }
            }));
            html_page("Memory phases", &body)
        }
    }
}

// ---------------------------------------------------------------------- timeline

const TIMELINE_HEADER: [&str; 19] = [
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
];

fn timeline_rows(t: &Timeline) -> Vec<Vec<String>> {
    t.rows
        .iter()
        .map(|r| {
            let ch = |f: fn(&MemoryStats) -> i64| opt(r.change.as_ref().map(f));
            vec![
                r.point_index.to_string(),
                r.label.clone(),
                r.level.as_str().to_owned(),
                r.scope.map(|s| s.as_str().to_owned()).unwrap_or_default(),
                opt(r.device),
                opt_pool(r.pool),
                r.pool_kind
                    .map(|k| k.as_str().to_owned())
                    .unwrap_or_default(),
                r.stats.reserved.to_string(),
                ch(|s| s.reserved),
                r.stats.allocated.to_string(),
                ch(|s| s.allocated),
                r.stats.active.to_string(),
                ch(|s| s.active),
                r.stats.requested.to_string(),
                ch(|s| s.requested),
                opt(r.cuda_used),
                opt(r.cuda_used_change),
                opt(r.residual),
                opt(r.residual_change),
            ]
        })
        .collect()
}

fn timeline_text(t: &Timeline, include_unchanged: bool) -> String {
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
            value(r.stats.reserved, r.change.map(|c| c.reserved)),
            value(r.stats.allocated, r.change.map(|c| c.allocated)),
            value(r.stats.active, r.change.map(|c| c.active)),
            value(r.stats.requested, r.change.map(|c| c.requested)),
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
                format!("    device[{}]: {cuda}{stats}", r.device.unwrap_or(-1))
            }
            crate::timeline::TimelineLevel::Pool => format!(
                "      {} ({}): {stats}",
                pool_name(r.pool.unwrap_or((0, 0))),
                r.pool_kind.map_or("?", |k| k.as_str())
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
            })
        })
        .collect();
    json!({"kind": "memory_timeline", "points": t.points, "rows": rows})
}

pub fn render_timeline(t: &Timeline, format: Format, options: ReportOptions) -> String {
    match format {
        Format::Text => timeline_text(t, options.include_unchanged),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&timeline_json(t)).unwrap_or_default();
            s.push('\n');
            s
        }
        Format::Csv => {
            let mut out = String::new();
            csv_line(&mut out, &TIMELINE_HEADER.map(str::to_owned));
            for row in timeline_rows(t) {
                csv_line(&mut out, &row);
            }
            out
        }
        Format::Html => {
            let mut body = String::from("<h1>Memory timeline</h1>\n<pre>");
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
