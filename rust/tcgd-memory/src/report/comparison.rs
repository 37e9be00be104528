use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use crate::compare::{Comparison, DeviceNode, Pair, PoolNode, Relation, StreamNode};
use crate::lifecycle::Lifecycle;
use crate::model::PoolId;
use crate::stats::{MemoryStats, PoolKind};

use super::*;

pub(super) fn device_changed(d: &DeviceNode) -> bool {
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

pub(super) struct Text<'a> {
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

pub(super) fn relation_words(c: &Comparison) -> &'static str {
    match c.relation {
        Relation::SameOrigin => match c.candidate.taken.source.as_str() {
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

pub(super) fn pair_json(pair: Pair<Option<i64>>) -> Value {
    json!({
        "reference": pair.reference,
        "candidate": pair.candidate,
        "change": pair.change(),
    })
}

pub(super) fn stats_json(stats: &Pair<MemoryStats>) -> Value {
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

pub(super) fn lifecycle_json(l: Option<Lifecycle>) -> Value {
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

pub(super) fn pool_json(p: Option<PoolId>) -> Value {
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
pub(super) const CSV_HEADER: [&str; 12] = [
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
type RowId = [Cell; 7];
type Row = [Cell; 12];

pub(super) fn push_row(
    rows: &mut Vec<Row>,
    level: &str,
    id: &RowId,
    metric: &str,
    values: [Option<i64>; 3],
) {
    let [a, b, c, d, e, f, g] = id.clone();
    rows.push([
        level.into(),
        a,
        b,
        c,
        d,
        e,
        f,
        g,
        metric.into(),
        opt(values[0]),
        opt(values[1]),
        opt(values[2]),
    ]);
}

pub(super) fn push_stats(
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
pub(super) fn comparison_rows(shown: &Comparison) -> Vec<Row> {
    let mut rows = Vec::new();
    for d in &shown.devices {
        let ids = |pools: [Option<PoolId>; 2], kind: &str, streams: [Option<i64>; 2]| -> RowId {
            [
                opt(d.reference_device),
                opt(d.candidate_device),
                opt_pool(pools[0]),
                opt_pool(pools[1]),
                kind.into(),
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
    let rows = comparison_rows(&shown).into_iter().map(Vec::from).collect();
    csv_table(&Table::with_rows(&CSV_HEADER, rows))
}

// ---------------------------------------------------------------------- HTML
/// Reserved bytes per pool, reference and candidate side by side.
pub(super) fn pool_chart(shown: &Comparison) -> String {
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
pub fn comparison_html(comparison: &Comparison, options: ReportOptions) -> String {
    let (title, body) = comparison_html_body(comparison, options);
    html_page(&title, &body)
}

/// The page's title and the content of its body.
pub(super) fn comparison_html_body(
    comparison: &Comparison,
    options: ReportOptions,
) -> (String, String) {
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
    let rows: Vec<Vec<Cell>> = comparison_rows(&shown).into_iter().map(Vec::from).collect();
    body.push_str(&html_table(&CSV_HEADER, &rows, |row| {
        match row[0].as_str().unwrap_or_default() {
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
