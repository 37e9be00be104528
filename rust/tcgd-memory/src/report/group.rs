//! Run-group reports: the group summary (per-rank states and cross-rank extrema per
//! point) and the group phase comparison (per-rank equations and cross-rank extrema of
//! every term). Text and HTML show the headline metrics; JSON and CSV keep every metric.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::group::{
    change_gap, phase_metric_name, GroupDescriptor, GroupPhaseComparison, GroupSummary,
    MetricExtrema, RankPhaseRow,
};

use super::comparison::pool_json;
use super::*;

/// The metrics text and HTML show; the others are in JSON and CSV.
const HEADLINE: [&str; 4] = [
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "requested_bytes",
];

fn ranks_text(ranks: &[i64]) -> String {
    ranks
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

pub fn group_descriptor_json(g: &GroupDescriptor) -> Value {
    json!({
        "name": g.name,
        "root": g.root,
        "group_id": g.group_id,
        "world_size": g.world_size,
        "ranks": g.ranks,
        "missing_ranks": g.missing_ranks,
        "complete": g.complete,
        "labels": g.labels,
        "members": g.members.iter().map(|m| json!({
            "rank": m.rank,
            "path": m.path,
            "name": m.name,
            "run_id": m.run_id,
            "complete": m.complete,
            "world_size": m.world_size,
            "group_id": m.group_id,
            "point_count": m.labels.len(),
        })).collect::<Vec<_>>(),
    })
}

fn stats_json(stats: &[(String, i64)]) -> Value {
    Value::Object(stats.iter().map(|(n, v)| (n.clone(), json!(v))).collect())
}

fn extrema_json(e: &MetricExtrema) -> Value {
    json!({
        "min_bytes": e.min_bytes,
        "min_rank": e.min_rank,
        "min_ranks": e.min_ranks,
        "max_bytes": e.max_bytes,
        "max_rank": e.max_rank,
        "max_ranks": e.max_ranks,
        "spread_bytes": e.spread_bytes,
        "rank_count": e.rank_count,
    })
}

fn opt_extrema_json(e: &Option<MetricExtrema>) -> Value {
    e.as_ref().map_or(Value::Null, extrema_json)
}

fn group_header(out: &mut String, what: &str, g: &GroupDescriptor) {
    let _ = writeln!(
        out,
        "{what} '{}'{}: ranks {} of world size {}, {} points, {}",
        g.name,
        g.root
            .as_ref()
            .map(|r| format!(" at {}", r.display()))
            .unwrap_or_default(),
        if g.ranks.is_empty() {
            "none".to_owned()
        } else {
            ranks_text(&g.ranks)
        },
        g.world_size
            .map_or_else(|| "unknown".to_owned(), |w| w.to_string()),
        g.labels.len(),
        if g.complete { "complete" } else { "INCOMPLETE" }
    );
}

// ---------------------------------------------------------------------- summary

pub fn group_summary_json(s: &GroupSummary) -> Value {
    json!({
        "kind": "memory_run_group_summary",
        "group": group_descriptor_json(&s.group),
        "warnings": s.warnings,
        "rank_points": s.rank_points.iter().map(|r| json!({
            "rank": r.rank,
            "point_index": r.point_index,
            "label": r.label,
            "scope": r.scope.as_str(),
            "observation_count": r.observation_count,
            "pool_count": r.pool_count,
            "stats": stats_json(&r.stats),
        })).collect::<Vec<_>>(),
        "rank_devices": s.rank_devices.iter().map(|r| json!({
            "rank": r.rank,
            "point_index": r.point_index,
            "label": r.label,
            "device_index": r.device_index,
            "free_bytes": r.free_bytes,
            "total_bytes": r.total_bytes,
            "used_bytes": r.used_bytes,
            "cuda_allocator_residual_bytes": r.cuda_allocator_residual_bytes,
            "stats": stats_json(&r.stats),
        })).collect::<Vec<_>>(),
        "point_aggregates": s.point_aggregates.iter().map(|a| {
            let mut v = extrema_json(&a.extrema);
            if let Value::Object(map) = &mut v {
                map.insert("point_index".into(), json!(a.point_index));
                map.insert("label".into(), json!(a.label));
                map.insert("scope".into(), json!(a.scope.as_str()));
                map.insert("metric".into(), json!(a.metric));
                map.insert("worst_rank".into(), json!(a.worst_rank()));
            }
            v
        }).collect::<Vec<_>>(),
    })
}

pub fn group_summary_text(s: &GroupSummary) -> String {
    let mut out = String::new();
    group_header(&mut out, "Memory run group", &s.group);
    for m in &s.group.members {
        let _ = writeln!(
            out,
            "  rank {}: {} points, {}",
            m.rank,
            m.labels.len(),
            if m.complete { "complete" } else { "incomplete" }
        );
    }
    for w in &s.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
    let _ = writeln!(
        out,
        "\nPer point, allocator-wide (scope all), across ranks; never summed:"
    );
    for (index, label) in s.group.labels.iter().enumerate() {
        let aggs: Vec<_> = s
            .point_aggregates
            .iter()
            .filter(|a| a.point_index == index as i64 && a.scope == crate::stats::Scope::All)
            .collect();
        let count = aggs.first().map_or(0, |a| a.extrema.rank_count);
        let _ = writeln!(out, "  [{index}] {label} ({count} ranks)");
        for metric in HEADLINE {
            if let Some(a) = aggs.iter().find(|a| a.metric == metric) {
                let e = &a.extrema;
                let _ = writeln!(
                    out,
                    "    {:<16} min {} (rank {}), max {} (rank {}), spread {}",
                    metric.trim_end_matches("_bytes"),
                    format_bytes(e.min_bytes),
                    ranks_text(&e.min_ranks),
                    format_bytes(e.max_bytes),
                    ranks_text(&e.max_ranks),
                    format_bytes(e.spread_bytes)
                );
            }
        }
    }
    out
}

const RANK_POINT_STATS: [&str; 14] = [
    "reserved_bytes",
    "allocated_bytes",
    "active_bytes",
    "requested_bytes",
    "awaiting_free_bytes",
    "inactive_bytes",
    "internal_fragmentation_bytes",
    "segment_count",
    "block_count",
    "inactive_block_count",
    "largest_inactive_block_bytes",
    "expandable_segment_count",
    "expandable_reserved_bytes",
    "expandable_inactive_bytes",
];

fn stat_cells(stats: &[(String, i64)]) -> Vec<Cell> {
    RANK_POINT_STATS
        .iter()
        .map(|name| {
            stats
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| Cell::from(*v))
                .unwrap_or(Cell::Null)
        })
        .collect()
}

fn table_csv(header: &[String], rows: &[Vec<Cell>]) -> String {
    csv_table(&Table::with_rows(header, rows.to_vec()))
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn rank_points_table(s: &GroupSummary) -> (Vec<String>, Vec<Vec<Cell>>) {
    let mut header = strings(&[
        "rank",
        "point_index",
        "label",
        "scope",
        "observation_count",
        "pool_count",
    ]);
    header.extend(strings(&RANK_POINT_STATS));
    let rows = s
        .rank_points
        .iter()
        .map(|r| {
            let mut row: Vec<Cell> = vec![
                r.rank.into(),
                r.point_index.into(),
                r.label.as_str().into(),
                r.scope.as_str().into(),
                r.observation_count.into(),
                r.pool_count.into(),
            ];
            row.extend(stat_cells(&r.stats));
            row
        })
        .collect();
    (header, rows)
}

fn rank_devices_table(s: &GroupSummary) -> (Vec<String>, Vec<Vec<Cell>>) {
    let mut header = strings(&[
        "rank",
        "point_index",
        "label",
        "device_index",
        "free_bytes",
        "total_bytes",
        "used_bytes",
        "cuda_allocator_residual_bytes",
    ]);
    header.extend(strings(&RANK_POINT_STATS));
    let rows = s
        .rank_devices
        .iter()
        .map(|r| {
            let mut row: Vec<Cell> = vec![
                r.rank.into(),
                r.point_index.into(),
                r.label.as_str().into(),
                r.device_index.into(),
                opt(r.free_bytes),
                opt(r.total_bytes),
                opt(r.used_bytes),
                opt(r.cuda_allocator_residual_bytes),
            ];
            row.extend(stat_cells(&r.stats));
            row
        })
        .collect();
    (header, rows)
}

const EXTREMA_HEADER: [&str; 8] = [
    "min_bytes",
    "min_rank",
    "min_ranks",
    "max_bytes",
    "max_rank",
    "max_ranks",
    "spread_bytes",
    "rank_count",
];

fn extrema_cells(e: Option<&MetricExtrema>) -> Vec<Cell> {
    match e {
        None => vec![Cell::Null; EXTREMA_HEADER.len()],
        Some(e) => vec![
            e.min_bytes.into(),
            e.min_rank.into(),
            ranks_text(&e.min_ranks).into(),
            e.max_bytes.into(),
            e.max_rank.into(),
            ranks_text(&e.max_ranks).into(),
            e.spread_bytes.into(),
            e.rank_count.into(),
        ],
    }
}

fn point_aggregates_table(s: &GroupSummary) -> (Vec<String>, Vec<Vec<Cell>>) {
    let mut header = strings(&["point_index", "label", "scope", "metric"]);
    header.extend(strings(&EXTREMA_HEADER));
    header.push("worst_rank".to_owned());
    let rows = s
        .point_aggregates
        .iter()
        .map(|a| {
            let mut row: Vec<Cell> = vec![
                a.point_index.into(),
                a.label.as_str().into(),
                a.scope.as_str().into(),
                a.metric.as_str().into(),
            ];
            row.extend(extrema_cells(Some(&a.extrema)));
            row.push(a.worst_rank().into());
            row
        })
        .collect();
    (header, rows)
}

/// A table as the HTML page gets it: header cells and rows.
type HtmlTable = (Vec<String>, Vec<Vec<Cell>>);

fn html_of(title: &str, text: &str, tables: &[(&str, HtmlTable)]) -> String {
    let mut body = format!("<h1>{}</h1>\n<pre>", escape_html(title));
    body.push_str(&escape_html(text));
    body.push_str("</pre>\n");
    for (name, (header, rows)) in tables {
        let _ = writeln!(body, "<h2>{}</h2>", escape_html(name));
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        body.push_str(&html_table(&header, rows, |_| ""));
    }
    html_page(title, &body)
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

pub fn render_group_summary(s: &GroupSummary, format: Format) -> String {
    match format {
        Format::Text => group_summary_text(s),
        Format::Json => pretty(&group_summary_json(s)),
        Format::Csv => {
            let (h, r) = point_aggregates_table(s);
            table_csv(&h, &r)
        }
        Format::Html => {
            // The headline metrics of every point aggregate; rank rows are in the CSVs.
            let (h, rows) = point_aggregates_table(s);
            let rows: Vec<Vec<Cell>> = rows
                .into_iter()
                .filter(|r| r[2] == "all" && r[3].as_str().is_some_and(|m| HEADLINE.contains(&m)))
                .collect();
            html_of(
                "Memory run group summary",
                &group_summary_text(s),
                &[("Point aggregates (scope all)", (h, rows))],
            )
        }
    }
}

/// Every file of a group summary's report directory, `(name, content)`.
pub fn group_summary_files(s: &GroupSummary) -> Vec<(String, String)> {
    let mut files = vec![
        ("report.txt".to_owned(), group_summary_text(s)),
        ("report.json".to_owned(), pretty(&group_summary_json(s))),
        (
            "report.html".to_owned(),
            render_group_summary(s, Format::Html),
        ),
    ];
    let (h, r) = rank_points_table(s);
    files.push(("rank_points.csv".to_owned(), table_csv(&h, &r)));
    if !s.rank_devices.is_empty() {
        let (h, r) = rank_devices_table(s);
        files.push(("rank_devices.csv".to_owned(), table_csv(&h, &r)));
    }
    let (h, r) = point_aggregates_table(s);
    files.push(("point_aggregates.csv".to_owned(), table_csv(&h, &r)));
    files
}

/// Every file a group summary report may write: what `overwrite` replaces.
pub const GROUP_SUMMARY_FILES: [&str; 6] = [
    "report.txt",
    "report.json",
    "report.html",
    "rank_points.csv",
    "rank_devices.csv",
    "point_aggregates.csv",
];

// ---------------------------------------------------------------------- phases

const TERMS: [&str; 9] = [
    "baseline_start",
    "baseline_end",
    "candidate_start",
    "candidate_end",
    "baseline_change",
    "candidate_change",
    "start_gap",
    "end_gap",
    "change_gap",
];

fn term_cells(r: &RankPhaseRow) -> Vec<Cell> {
    let v = r.values();
    vec![
        opt(v.baseline_start),
        opt(v.baseline_end),
        opt(v.candidate_start),
        opt(v.candidate_end),
        opt(v.baseline_change()),
        opt(v.candidate_change()),
        opt(v.start_gap()),
        opt(v.end_gap()),
        opt(change_gap(v)),
        v.identity_holds().into(),
    ]
}

fn term_json(r: &RankPhaseRow) -> serde_json::Map<String, Value> {
    let v = r.values();
    let mut m = serde_json::Map::new();
    m.insert("rank".into(), json!(r.rank));
    m.insert("metric".into(), json!(phase_metric_name(r.row.metric)));
    for (name, value) in [
        ("baseline_start_bytes", v.baseline_start),
        ("baseline_end_bytes", v.baseline_end),
        ("candidate_start_bytes", v.candidate_start),
        ("candidate_end_bytes", v.candidate_end),
        ("baseline_change_bytes", v.baseline_change()),
        ("candidate_change_bytes", v.candidate_change()),
        ("start_gap_bytes", v.start_gap()),
        ("end_gap_bytes", v.end_gap()),
        ("change_gap_bytes", change_gap(v)),
    ] {
        m.insert(name.into(), json!(value));
    }
    m.insert("identity_holds".into(), json!(v.identity_holds()));
    m
}

fn term_header(prefix: &[&str]) -> Vec<String> {
    let mut h = strings(prefix);
    h.push("metric".to_owned());
    h.extend(TERMS.iter().map(|t| format!("{t}_bytes")));
    h.push("identity_holds".to_owned());
    h
}

fn rank_decomposition_table(c: &GroupPhaseComparison) -> (Vec<String>, Vec<Vec<Cell>>) {
    let rows = c
        .rank_decomposition()
        .iter()
        .map(|r| {
            let mut row: Vec<Cell> = vec![
                r.rank.into(),
                Cell::text(r.row.scope.map(|s| s.as_str())),
                phase_metric_name(r.row.metric).into(),
            ];
            row.extend(term_cells(r));
            row
        })
        .collect();
    (term_header(&["rank", "scope"]), rows)
}

fn rank_pool_table(c: &GroupPhaseComparison) -> (Vec<String>, Vec<Vec<Cell>>) {
    let rows = c
        .rank_pool_decomposition()
        .iter()
        .map(|r| {
            let mut row: Vec<Cell> = vec![
                r.rank.into(),
                opt(r.row.baseline_device),
                opt_pool(r.row.baseline_pool),
                opt(r.row.candidate_device),
                opt_pool(r.row.candidate_pool),
                phase_metric_name(r.row.metric).into(),
            ];
            row.extend(term_cells(r));
            row
        })
        .collect();
    (
        term_header(&[
            "rank",
            "baseline_device_index",
            "baseline_pool_id",
            "candidate_device_index",
            "candidate_pool_id",
        ]),
        rows,
    )
}

fn rank_device_table(c: &GroupPhaseComparison) -> (Vec<String>, Vec<Vec<Cell>>) {
    let rows = c
        .rank_device_decomposition()
        .iter()
        .map(|r| {
            let mut row: Vec<Cell> = vec![
                r.rank.into(),
                opt(r.row.baseline_device),
                opt(r.row.candidate_device),
                phase_metric_name(r.row.metric).into(),
            ];
            row.extend(term_cells(r));
            row
        })
        .collect();
    (
        term_header(&["rank", "baseline_device_index", "candidate_device_index"]),
        rows,
    )
}

const AGGREGATE_TERMS: [&str; 5] = [
    "baseline_change",
    "candidate_change",
    "start_gap",
    "end_gap",
    "change_gap",
];

fn phase_aggregates_table(c: &GroupPhaseComparison) -> (Vec<String>, Vec<Vec<Cell>>) {
    let mut header = strings(&["scope", "metric", "rank_count"]);
    for t in AGGREGATE_TERMS {
        header.extend(EXTREMA_HEADER.iter().map(|h| format!("{t}_{h}")));
    }
    let rows = c
        .phase_aggregates
        .iter()
        .map(|a| {
            let mut row: Vec<Cell> = vec![
                a.scope.as_str().into(),
                a.metric.as_str().into(),
                a.rank_count.into(),
            ];
            for e in [
                &a.baseline_change,
                &a.candidate_change,
                &a.start_gap,
                &a.end_gap,
                &a.change_gap,
            ] {
                row.extend(extrema_cells(e.as_ref()));
            }
            row
        })
        .collect();
    (header, rows)
}

pub fn group_phases_json(c: &GroupPhaseComparison) -> Value {
    let with = |rows: Vec<RankPhaseRow>, extra: &dyn Fn(&RankPhaseRow) -> Vec<(&str, Value)>| {
        rows.iter()
            .map(|r| {
                let mut m = term_json(r);
                for (k, v) in extra(r) {
                    m.insert(k.to_owned(), v);
                }
                Value::Object(m)
            })
            .collect::<Vec<_>>()
    };
    json!({
        "kind": "memory_run_group_phase_comparison",
        "baseline": group_descriptor_json(&c.baseline),
        "candidate": group_descriptor_json(&c.candidate),
        "baseline_start": c.endpoints[0],
        "baseline_end": c.endpoints[1],
        "candidate_start": c.endpoints[2],
        "candidate_end": c.endpoints[3],
        "ranks": c.ranks,
        "skipped_ranks": c.skipped_ranks,
        "baseline_only_ranks": c.baseline_only_ranks,
        "candidate_only_ranks": c.candidate_only_ranks,
        "identity_failures": c.identity_failures(),
        "warnings": c.warnings,
        "rank_decomposition": with(c.rank_decomposition(), &|r| vec![
            ("scope", json!(r.row.scope.map(|s| s.as_str()))),
        ]),
        "rank_pool_decomposition": with(c.rank_pool_decomposition(), &|r| vec![
            ("baseline_device_index", json!(r.row.baseline_device)),
            ("baseline_pool_id", pool_json(r.row.baseline_pool)),
            ("candidate_device_index", json!(r.row.candidate_device)),
            ("candidate_pool_id", pool_json(r.row.candidate_pool)),
        ]),
        "rank_device_decomposition": with(c.rank_device_decomposition(), &|r| vec![
            ("baseline_device_index", json!(r.row.baseline_device)),
            ("candidate_device_index", json!(r.row.candidate_device)),
        ]),
        "phase_aggregates": c.phase_aggregates.iter().map(|a| json!({
            "scope": a.scope.as_str(),
            "metric": a.metric,
            "rank_count": a.rank_count,
            "baseline_change": opt_extrema_json(&a.baseline_change),
            "candidate_change": opt_extrema_json(&a.candidate_change),
            "start_gap": opt_extrema_json(&a.start_gap),
            "end_gap": opt_extrema_json(&a.end_gap),
            "change_gap": opt_extrema_json(&a.change_gap),
        })).collect::<Vec<_>>(),
    })
}

pub fn group_phases_text(c: &GroupPhaseComparison, include_unchanged: bool) -> String {
    let mut out = String::new();
    group_header(&mut out, "Baseline group", &c.baseline);
    group_header(&mut out, "Candidate group", &c.candidate);
    let _ = writeln!(
        out,
        "Phases: baseline '{}' -> '{}', candidate '{}' -> '{}'; ranks compared: {}{}",
        c.endpoints[0],
        c.endpoints[1],
        c.endpoints[2],
        c.endpoints[3],
        ranks_text(&c.ranks),
        if c.skipped_ranks.is_empty() {
            String::new()
        } else {
            format!(" (skipped: {})", ranks_text(&c.skipped_ranks))
        }
    );
    let _ = writeln!(
        out,
        "  every rank's rows check end gap = start gap + candidate change - baseline change; \
         failures: {}",
        c.identity_failures()
    );
    for w in &c.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
    let _ = writeln!(
        out,
        "\nAcross ranks (min / max with their ranks, spread); never summed:"
    );
    for a in &c.phase_aggregates {
        let moved = [&a.end_gap, &a.change_gap].iter().any(|e| {
            e.as_ref()
                .is_some_and(|e| e.min_bytes != 0 || e.max_bytes != 0)
        });
        if !include_unchanged && !moved {
            continue;
        }
        let show = |e: &Option<MetricExtrema>| match e {
            None => "n/a".to_owned(),
            Some(e) => format!(
                "min {} (rank {}), max {} (rank {}), spread {}",
                format_change(e.min_bytes),
                ranks_text(&e.min_ranks),
                format_change(e.max_bytes),
                ranks_text(&e.max_ranks),
                format_bytes(e.spread_bytes)
            ),
        };
        let _ = writeln!(
            out,
            "  scope {} {} ({} ranks)\n    end gap:    {}\n    change gap: {}",
            a.scope.as_str(),
            a.metric,
            a.rank_count,
            show(&a.end_gap),
            show(&a.change_gap)
        );
    }
    out
}

pub fn render_group_phases(
    c: &GroupPhaseComparison,
    format: Format,
    include_unchanged: bool,
) -> String {
    match format {
        Format::Text => group_phases_text(c, include_unchanged),
        Format::Json => pretty(&group_phases_json(c)),
        Format::Csv => {
            let (h, r) = phase_aggregates_table(c);
            table_csv(&h, &r)
        }
        Format::Html => {
            let (h, rows) = rank_decomposition_table(c);
            let rows: Vec<Vec<Cell>> = rows
                .into_iter()
                .filter(|r| include_unchanged || r[7..11].iter().any(moved))
                .collect();
            html_of(
                "Memory run group phases",
                &group_phases_text(c, include_unchanged),
                &[("Per-rank allocator-scope equations", (h, rows))],
            )
        }
    }
}

/// Every file of a group phase report directory, `(name, content)`. With
/// `include_unchanged=false` the per-rank CSVs leave out rows with no change and no gap.
pub fn group_phases_files(
    c: &GroupPhaseComparison,
    include_unchanged: bool,
) -> Vec<(String, String)> {
    let keep = |rows: Vec<Vec<Cell>>, first_term: usize| -> Vec<Vec<Cell>> {
        rows.into_iter()
            .filter(|r| include_unchanged || r[first_term + 4..first_term + 8].iter().any(moved))
            .collect()
    };
    let mut files = vec![
        (
            "report.txt".to_owned(),
            group_phases_text(c, include_unchanged),
        ),
        ("report.json".to_owned(), pretty(&group_phases_json(c))),
        (
            "report.html".to_owned(),
            render_group_phases(c, Format::Html, include_unchanged),
        ),
    ];
    let (h, r) = rank_decomposition_table(c);
    files.push((
        "rank_decomposition.csv".to_owned(),
        table_csv(&h, &keep(r, 3)),
    ));
    let (h, r) = rank_pool_table(c);
    files.push((
        "rank_pool_decomposition.csv".to_owned(),
        table_csv(&h, &keep(r, 6)),
    ));
    let (h, r) = rank_device_table(c);
    if !r.is_empty() {
        files.push((
            "rank_device_decomposition.csv".to_owned(),
            table_csv(&h, &keep(r, 4)),
        ));
    }
    let (h, r) = phase_aggregates_table(c);
    files.push(("phase_aggregates.csv".to_owned(), table_csv(&h, &r)));
    files
}

/// Every file a group phase report may write: what `overwrite` replaces.
pub const GROUP_PHASE_FILES: [&str; 7] = [
    "report.txt",
    "report.json",
    "report.html",
    "rank_decomposition.csv",
    "rank_pool_decomposition.csv",
    "rank_device_decomposition.csv",
    "phase_aggregates.csv",
];

/// A byte term that moved: present and not zero.
fn moved(x: &Cell) -> bool {
    !x.is_null() && *x != Cell::Int(0)
}
