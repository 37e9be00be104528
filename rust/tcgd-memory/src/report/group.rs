//! Run-group reports: the group summary (per-rank states and cross-rank extrema per
//! point) and the group phase comparison (per-rank equations and cross-rank extrema of
//! every term). Text and HTML show the headline metrics; JSON and CSV keep every metric.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::group::{
    change_gap, stat_names, GroupPhaseAggregate, GroupPhaseComparison, GroupSummary,
    MemoryRunGroup, MetricExtrema, RankDevicePointState, RankPhaseRow, RankPoint,
    RankPointAggregate, RankPointState, TermExtrema,
};
use crate::phases::PhaseLevel;
use crate::stats::public_metric_name;

use super::attribution::table_records;
use super::columns::{cells, field, header, json_object, Column, Parts};
use super::comparison::pool_json;
use super::document::{pretty, report_file_names, report_files};
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

pub fn group_descriptor_json(g: &MemoryRunGroup) -> Value {
    json!({
        "name": g.name,
        "root": g.root,
        "group_id": g.group_id,
        "world_size": g.world_size,
        "ranks": g.ranks(),
        "missing_ranks": g.missing_ranks,
        "complete": g.complete,
        "labels": g.labels,
        "members": g.members.iter().map(|m| json!({
            "rank": m.run.rank,
            "path": m.run.path,
            "name": m.run.name,
            "run_id": m.run.run_id,
            "complete": m.run.complete,
            "world_size": m.run.world_size,
            "group_id": m.group_id,
            "point_count": m.run.labels.len(),
        })).collect::<Vec<_>>(),
    })
}

fn to_json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

fn group_header(out: &mut String, what: &str, g: &MemoryRunGroup) {
    let _ = writeln!(
        out,
        "{what} '{}'{}: ranks {} of world size {}, {} points, {}",
        g.name,
        g.root
            .as_ref()
            .map(|r| format!(" at {}", r.display()))
            .unwrap_or_default(),
        if g.members.is_empty() {
            "none".to_owned()
        } else {
            ranks_text(&g.ranks())
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
        "warnings": s.group.warnings,
        "rank_points": to_json(&s.rank_points),
        "rank_devices": to_json(&s.rank_devices),
        "point_aggregates": s.point_aggregates.iter().map(RankPointAggregate::json).collect::<Vec<_>>(),
    })
}

impl RankPointAggregate {
    /// The aggregate as `report.json` holds it: its fields and `worst_rank`.
    pub fn json(&self) -> Value {
        let mut v = to_json(self);
        if let Value::Object(map) = &mut v {
            map.insert("worst_rank".into(), json!(self.worst_rank()));
        }
        v
    }
}

impl MetricExtrema {
    /// The extrema as a JSON object, every key after `prefix` (joined by `_` unless the
    /// prefix ends with one), as flat rows name a term's extrema (`end_gap_min_bytes`).
    pub fn json_with_prefix(&self, prefix: Option<&str>) -> Value {
        let Value::Object(map) = to_json(self) else {
            return Value::Null;
        };
        let key = |k: String| match prefix {
            None => k,
            Some(p) if p.is_empty() || p.ends_with('_') => format!("{p}{k}"),
            Some(p) => format!("{p}_{k}"),
        };
        Value::Object(map.into_iter().map(|(k, v)| (key(k), v)).collect())
    }
}

pub fn group_summary_text(s: &GroupSummary) -> String {
    let mut out = String::new();
    group_header(&mut out, "Memory run group", &s.group);
    for m in &s.group.members {
        let _ = writeln!(
            out,
            "  rank {}: {} points, {}",
            m.run.rank,
            m.run.labels.len(),
            if m.run.complete {
                "complete"
            } else {
                "incomplete"
            }
        );
    }
    for w in &s.group.warnings {
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

/// Rank rows: the point each is `at`, its `columns`, then every statistic of the rank's
/// state.
fn rank_rows<'a, R>(
    columns: &'a [Column<R>],
    rows: &'a [R],
    at: fn(&R) -> &RankPoint,
    stats: fn(&R) -> &[(String, i64)],
) -> Table {
    let parts = Parts::<&R>::new()
        .of(&AT_COLUMNS, move |r| at(r))
        .of(columns, |r| *r)
        .with(stat_names(), move |r| {
            stats(r).iter().map(|(_, v)| Cell::from(*v)).collect()
        });
    parts.table(rows)
}

/// The point a rank row is about.
const AT_COLUMNS: [Column<RankPoint>; 3] = [field!(rank), field!(point_index), field!(label)];

const RANK_POINT_COLUMNS: [Column<RankPointState>; 3] = [
    ("scope", |r| r.scope.as_str().into()),
    field!(observation_count),
    field!(pool_count),
];

const RANK_DEVICE_COLUMNS: [Column<RankDevicePointState>; 5] = [
    field!(device_index),
    field!(free_bytes),
    field!(total_bytes),
    field!(used_bytes),
    field!(cuda_allocator_residual_bytes),
];

const EXTREMA_COLUMNS: [Column<MetricExtrema>; 8] = [
    field!(min_bytes),
    field!(min_rank),
    ("min_ranks", |e| ranks_text(&e.min_ranks).into()),
    field!(max_bytes),
    field!(max_rank),
    ("max_ranks", |e| ranks_text(&e.max_ranks).into()),
    field!(spread_bytes),
    field!(rank_count),
];

/// The extrema cells of a term, empty where no rank has it.
fn extrema_cells(e: Option<&MetricExtrema>) -> Vec<Cell> {
    e.map_or_else(
        || vec![Cell::Null; EXTREMA_COLUMNS.len()],
        |e| cells(&EXTREMA_COLUMNS, e),
    )
}

/// The extrema columns of each of `terms`, named `{term}_{column}`.
fn extrema_names<'a>(terms: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let names = header(&EXTREMA_COLUMNS);
    terms
        .into_iter()
        .flat_map(|t| names.iter().map(move |n| format!("{t}{n}")))
        .collect()
}

const POINT_AGGREGATE_COLUMNS: [Column<RankPointAggregate>; 4] = [
    field!(point_index),
    field!(label),
    ("scope", |r| r.scope.as_str().into()),
    field!(metric),
];

fn rank_points_table(s: &GroupSummary) -> Table {
    rank_rows(&RANK_POINT_COLUMNS, &s.rank_points, |r| &r.at, |r| &r.stats)
}

fn rank_devices_table(s: &GroupSummary) -> Table {
    rank_rows(
        &RANK_DEVICE_COLUMNS,
        &s.rank_devices,
        |r| &r.at,
        |r| &r.stats,
    )
}

fn point_aggregates_table(s: &GroupSummary) -> Table {
    let mut names = extrema_names([""]);
    names.push("worst_rank".to_owned());
    let parts = Parts::<&RankPointAggregate>::new()
        .of(&POINT_AGGREGATE_COLUMNS, |a| *a)
        .with(names, |a| {
            let mut row = extrema_cells(Some(&a.extrema));
            row.push(a.worst_rank().into());
            row
        });
    parts.table(&s.point_aggregates)
}

/// A page: the text report, then the rows of `table` that `keep` keeps.
fn html_of(
    title: &str,
    text: &str,
    name: &str,
    table: &Table,
    keep: impl Fn(&[Cell]) -> bool,
) -> String {
    let mut body = format!("<h1>{}</h1>\n<pre>", escape_html(title));
    body.push_str(&escape_html(text));
    body.push_str("</pre>\n");
    let _ = writeln!(body, "<h2>{}</h2>", escape_html(name));
    let rows: Vec<Vec<Cell>> = table.rows().iter().filter(|r| keep(r)).cloned().collect();
    body.push_str(&html_table(table.names(), &rows, |_| ""));
    html_page(title, &body)
}

pub fn render_group_summary(s: &GroupSummary, format: Format) -> String {
    match format {
        Format::Text => group_summary_text(s),
        Format::Json => pretty(&group_summary_json(s)),
        Format::Csv => csv_table(&point_aggregates_table(s)),
        // The headline metrics of every point aggregate; rank rows are in the CSVs.
        Format::Html => html_of(
            "Memory run group summary",
            &group_summary_text(s),
            "Point aggregates (scope all)",
            &point_aggregates_table(s),
            |r| r[2] == "all" && r[3].as_str().is_some_and(|m| HEADLINE.contains(&m)),
        ),
    }
}

/// Every file of a group summary's report directory, `(name, content)`.
pub fn group_summary_files(s: &GroupSummary) -> Vec<(String, String)> {
    let devices = (!s.rank_devices.is_empty()).then(|| rank_devices_table(s));
    report_files(
        group_summary_text(s),
        &group_summary_json(s),
        render_group_summary(s, Format::Html),
        SUMMARY_CSV.into_iter().zip([
            Some(rank_points_table(s)),
            devices,
            Some(point_aggregates_table(s)),
        ]),
    )
}

/// The CSV files of a group summary, in order.
const SUMMARY_CSV: [&str; 3] = [
    "rank_points.csv",
    "rank_devices.csv",
    "point_aggregates.csv",
];

/// Every file a group summary report may write: what `overwrite` replaces.
pub const GROUP_SUMMARY_FILES: [&str; 6] = report_file_names(SUMMARY_CSV);

// ---------------------------------------------------------------------- phases

/// The metric of a rank's phase row, each term of its equation and whether the identity
/// holds: the columns every level's rank rows end with.
const TERM_COLUMNS: [Column<RankPhaseRow>; 11] = [
    ("metric", |r| public_metric_name(r.row.metric).into()),
    ("baseline_start_bytes", |r| opt(r.values().baseline_start)),
    ("baseline_end_bytes", |r| opt(r.values().baseline_end)),
    ("candidate_start_bytes", |r| opt(r.values().candidate_start)),
    ("candidate_end_bytes", |r| opt(r.values().candidate_end)),
    ("baseline_change_bytes", |r| {
        opt(r.values().baseline_change())
    }),
    ("candidate_change_bytes", |r| {
        opt(r.values().candidate_change())
    }),
    ("start_gap_bytes", |r| opt(r.values().start_gap())),
    ("end_gap_bytes", |r| opt(r.values().end_gap())),
    ("change_gap_bytes", |r| opt(change_gap(r.values()))),
    ("identity_holds", |r| r.values().identity_holds().into()),
];

const BASELINE_DEVICE: Column<RankPhaseRow> =
    ("baseline_device_index", |r| opt(r.row.baseline_device));
const CANDIDATE_DEVICE: Column<RankPhaseRow> =
    ("candidate_device_index", |r| opt(r.row.candidate_device));

/// What identifies a rank's row of each level, before its [`TERM_COLUMNS`].
const SCOPE_ROW: [Column<RankPhaseRow>; 2] = [
    field!(rank),
    ("scope", |r| Cell::text(r.row.scope.map(|s| s.as_str()))),
];
const POOL_ROW: [Column<RankPhaseRow>; 5] = [
    field!(rank),
    BASELINE_DEVICE,
    ("baseline_pool_id", |r| opt_pool(r.row.baseline_pool)),
    CANDIDATE_DEVICE,
    ("candidate_pool_id", |r| opt_pool(r.row.candidate_pool)),
];
const DEVICE_ROW: [Column<RankPhaseRow>; 3] = [field!(rank), BASELINE_DEVICE, CANDIDATE_DEVICE];

/// The rank rows of one level: their identity columns, then the terms.
fn rank_table(
    identity: &[Column<RankPhaseRow>],
    mut rows: Vec<RankPhaseRow>,
    include_unchanged: bool,
) -> Table {
    rows.retain(|r| include_unchanged || r.changed());
    Parts::<&RankPhaseRow>::new()
        .of(identity, |r| *r)
        .of(&TERM_COLUMNS, |r| *r)
        .table(&rows)
}

const PHASE_AGGREGATE_COLUMNS: [Column<GroupPhaseAggregate>; 4] = [
    ("scope", |r| r.scope.as_str().into()),
    field!(metric),
    field!(rank_count),
    field!(identity_holds),
];

/// The phase aggregates; `include_unchanged=false` keeps those that changed.
fn phase_aggregates_table(c: &GroupPhaseComparison, include_unchanged: bool) -> Table {
    let terms = TermExtrema::NAMES.map(|t| format!("{t}_"));
    let parts = Parts::<&GroupPhaseAggregate>::new()
        .of(&PHASE_AGGREGATE_COLUMNS, |a| *a)
        .with(extrema_names(terms.iter().map(String::as_str)), |a| {
            a.terms.all().into_iter().flat_map(extrema_cells).collect()
        });
    let rows = c
        .phase_aggregates
        .iter()
        .filter(|a| include_unchanged || a.changed());
    parts.table(rows)
}

/// The identity columns of a rank row of `level`.
fn rank_identity(level: PhaseLevel) -> &'static [Column<RankPhaseRow>] {
    match level {
        PhaseLevel::Scope => &SCOPE_ROW,
        PhaseLevel::Pool => &POOL_ROW,
        PhaseLevel::Device => &DEVICE_ROW,
    }
}

impl RankPhaseRow {
    /// The row as `report.json` holds it: its terms, its rank and its identity.
    pub fn json(&self) -> Value {
        let mut m = json_object(&TERM_COLUMNS, self);
        m.insert("rank".into(), json!(self.rank));
        let r = &self.row;
        let identity = match r.level {
            PhaseLevel::Scope => vec![("scope", json!(r.scope.map(|s| s.as_str())))],
            PhaseLevel::Pool => vec![
                ("baseline_device_index", json!(r.baseline_device)),
                ("baseline_pool_id", pool_json(r.baseline_pool)),
                ("candidate_device_index", json!(r.candidate_device)),
                ("candidate_pool_id", pool_json(r.candidate_pool)),
            ],
            PhaseLevel::Device => vec![
                ("baseline_device_index", json!(r.baseline_device)),
                ("candidate_device_index", json!(r.candidate_device)),
            ],
        };
        for (k, v) in identity {
            m.insert(k.to_owned(), v);
        }
        Value::Object(m)
    }
}

impl GroupPhaseComparison {
    /// The lines of `rank_decomposition.csv` (`Scope`), `rank_pool_decomposition.csv`
    /// (`Pool`) or `rank_device_decomposition.csv` (`Device`), as `(column, cell)` pairs.
    pub fn rank_records(
        &self,
        level: PhaseLevel,
        include_unchanged: bool,
    ) -> Vec<Vec<(String, Cell)>> {
        let rows = match level {
            PhaseLevel::Scope => self.rank_decomposition(),
            PhaseLevel::Pool => self.rank_pool_decomposition(),
            PhaseLevel::Device => self.rank_device_decomposition(),
        };
        table_records(rank_table(rank_identity(level), rows, include_unchanged))
    }

    /// The lines of `phase_aggregates.csv`, as `(column, cell)` pairs.
    pub fn phase_aggregate_records(&self, include_unchanged: bool) -> Vec<Vec<(String, Cell)>> {
        table_records(phase_aggregates_table(self, include_unchanged))
    }
}

pub fn group_phases_json(c: &GroupPhaseComparison) -> Value {
    let rows = |rows: Vec<RankPhaseRow>| rows.iter().map(RankPhaseRow::json).collect::<Vec<_>>();
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
        "rank_decomposition": rows(c.rank_decomposition()),
        "rank_pool_decomposition": rows(c.rank_pool_decomposition()),
        "rank_device_decomposition": rows(c.rank_device_decomposition()),
        "phase_aggregates": to_json(&c.phase_aggregates),
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
        if !include_unchanged && !a.changed() {
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
            show(&a.terms.end_gap),
            show(&a.terms.change_gap)
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
        Format::Csv => csv_table(&phase_aggregates_table(c, include_unchanged)),
        Format::Html => html_of(
            "Memory run group phases",
            &group_phases_text(c, include_unchanged),
            "Per-rank allocator-scope equations",
            &rank_table(&SCOPE_ROW, c.rank_decomposition(), include_unchanged),
            |_| true,
        ),
    }
}

/// Every file of a group phase report directory, `(name, content)`. With
/// `include_unchanged=false` the per-rank CSVs leave out rows with no change and no gap.
pub fn group_phases_files(
    c: &GroupPhaseComparison,
    include_unchanged: bool,
) -> Vec<(String, String)> {
    let ranks =
        |identity: &[Column<RankPhaseRow>], rows| rank_table(identity, rows, include_unchanged);
    let devices = c.rank_device_decomposition();
    let devices = (!devices.is_empty()).then(|| ranks(&DEVICE_ROW, devices));
    report_files(
        group_phases_text(c, include_unchanged),
        &group_phases_json(c),
        render_group_phases(c, Format::Html, include_unchanged),
        PHASE_CSV.into_iter().zip([
            Some(ranks(&SCOPE_ROW, c.rank_decomposition())),
            Some(ranks(&POOL_ROW, c.rank_pool_decomposition())),
            devices,
            Some(phase_aggregates_table(c, include_unchanged)),
        ]),
    )
}

/// The CSV files of a group phase comparison, in order.
const PHASE_CSV: [&str; 4] = [
    "rank_decomposition.csv",
    "rank_pool_decomposition.csv",
    "rank_device_decomposition.csv",
    "phase_aggregates.csv",
];

/// Every file a group phase report may write: what `overwrite` replaces.
pub const GROUP_PHASE_FILES: [&str; 7] = report_file_names(PHASE_CSV);
