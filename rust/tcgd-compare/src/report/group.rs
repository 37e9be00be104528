//! The summary of a run group: its ranks and, for every rank and point, how many
//! observations were recorded there and with which payload. Text, HTML, JSON and
//! `rank_points.csv`, written by the same rules as comparison reports.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::error::{CompareError, Result};
use crate::group::{GroupMember, MemberPoint, RunGroup};
use tcgd_report::Table as CsvTable;

use crate::report::html::{self, cell, escape};
use crate::report::rows::{Column, Section};
use crate::report::text;

/// Every file a group summary directory can hold; `write` replaces only these.
pub const SUMMARY_FILES: [&str; 4] = [
    "summary.txt",
    "summary.json",
    "summary.html",
    "rank_points.csv",
];

/// Every `(rank, point)` row, ranks ascending, points in order.
pub fn rank_points(g: &RunGroup) -> Vec<(&GroupMember, &MemberPoint)> {
    g.members
        .iter()
        .flat_map(|m| m.points.iter().map(move |p| (m, p)))
        .collect()
}

/// `'job': 2 of 3 ranks, world size 3, INCOMPLETE`, and where it is.
fn headline(g: &RunGroup) -> String {
    let mut s = format!(
        "'{}': {} of {} rank{}, {}",
        g.name,
        g.members.len(),
        g.world_size,
        if g.world_size == 1 { "" } else { "s" },
        if g.complete { "complete" } else { "INCOMPLETE" }
    );
    if let Some(root) = &g.root {
        s.push_str(&format!(" at {}", root.display()));
    }
    s
}

fn missing(g: &RunGroup) -> String {
    if g.missing_ranks.is_empty() {
        "none".to_owned()
    } else {
        g.missing_ranks
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn replay(p: &MemberPoint) -> String {
    p.replay_index
        .map_or_else(|| "eager".to_owned(), |r| r.to_string())
}

/// The summary as JSON data: the group as loaded (members with their points, missing
/// ranks, warnings) plus `rank_points`, one object per rank and point.
pub fn to_value(g: &RunGroup) -> Result<serde_json::Value> {
    let encode = |e: serde_json::Error| {
        CompareError::InvalidInput(format!("cannot encode the summary: {e}"))
    };
    let mut value = serde_json::to_value(g).map_err(encode)?;
    let rows: Vec<serde_json::Value> = rank_points(g)
        .into_iter()
        .map(|(m, p)| {
            serde_json::json!({
                "rank": m.run.rank,
                "point_index": p.index,
                "label": p.label,
                "replay_index": p.replay_index,
                "observation_count": p.observations,
                "full_payload_count": p.full,
                "summary_payload_count": p.summary,
            })
        })
        .collect();
    if let Some(map) = value.as_object_mut() {
        map.insert("rank_points".into(), serde_json::Value::Array(rows));
    }
    Ok(value)
}

pub fn to_json(g: &RunGroup) -> Result<String> {
    serde_json::to_string_pretty(&to_value(g)?)
        .map_err(|e| CompareError::InvalidInput(format!("cannot encode the summary: {e}")))
}

pub fn to_text(g: &RunGroup, limit: usize) -> String {
    let mut out = String::from("torch-cudagraph-debug run group summary\n");
    let _ = writeln!(out, "group:         {}", headline(g));
    let _ = writeln!(out, "missing ranks: {}", missing(g));
    if !g.warnings.is_empty() {
        out.push_str("\nwarnings:\n");
        for w in &g.warnings {
            let _ = writeln!(out, "  - {w}");
        }
    }
    for s in sections(g, limit) {
        text::section(&mut out, &s);
    }
    out
}

/// The ranks and rank points tables of the text and HTML summaries.
fn sections(g: &RunGroup, limit: usize) -> [Section; 2] {
    let columns = vec![
        Column::number("rank"),
        Column::number("points"),
        Column::text("complete"),
        Column::text("run"),
        Column::text("path"),
    ];
    let title = format!("ranks ({})", g.members.len());
    let ranks = Section::new("ranks", title, columns, &g.members, limit, |m| {
        vec![
            m.run.rank.to_string().into(),
            m.points.len().to_string().into(),
            m.run.complete.to_string().into(),
            m.run.run_id.clone().into(),
            m.run.path.display().to_string().into(),
        ]
    });
    let rows = rank_points(g);
    let columns = vec![
        Column::number("rank"),
        Column::number("point"),
        Column::text("label"),
        Column::number("replay"),
        Column::number("observations"),
        Column::number("full"),
        Column::number("summary"),
    ];
    let title = format!("rank points ({})", rows.len());
    let points = Section::new("rank-points", title, columns, &rows, limit, |(m, p)| {
        vec![
            m.run.rank.to_string().into(),
            p.index.to_string().into(),
            p.label.clone().into(),
            replay(p).into(),
            p.observations.to_string().into(),
            p.full.to_string().into(),
            p.summary.to_string().into(),
        ]
    });
    [ranks, points]
}

pub fn to_html(g: &RunGroup, limit: usize) -> String {
    let mut out =
        tcgd_report::html::page_head(&format!("tcgd run group summary: {}", g.name), html::STYLE);
    out.push_str("<h1>torch-cudagraph-debug run group summary</h1>\n");
    let _ = writeln!(
        out,
        "<table class=\"facts\"><tr><th>group</th>{}</tr><tr><th>missing ranks</th>{}</tr>\
         </table>",
        cell(&headline(g)),
        cell(&missing(g))
    );
    if !g.warnings.is_empty() {
        out.push_str("<h2>Warnings</h2><ul>");
        for w in &g.warnings {
            let _ = write!(out, "<li>{}</li>", escape(w));
        }
        out.push_str("</ul>\n");
    }
    for s in sections(g, limit) {
        html::section(&mut out, &s);
    }
    out.push_str(tcgd_report::html::PAGE_END);
    out
}

/// `rank_points.csv`: one row per rank and point, every row.
pub fn rank_points_csv(g: &RunGroup) -> String {
    let mut table = CsvTable::new(&[
        "rank",
        "point_index",
        "label",
        "replay_index",
        "observation_count",
        "full_payload_count",
        "summary_payload_count",
        "run_id",
        "complete",
    ]);
    for (m, p) in rank_points(g) {
        table.push(vec![
            m.run.rank.into(),
            p.index.into(),
            p.label.as_str().into(),
            p.replay_index.into(),
            p.observations.into(),
            p.full.into(),
            p.summary.into(),
            m.run.run_id.as_str().into(),
            m.run.complete.into(),
        ]);
    }
    crate::report::csv::write(&table)
}

/// Writes the summary files into `dir` by the rules of every report directory: one that
/// already holds anything needs `overwrite`, which replaces only [`SUMMARY_FILES`].
pub fn write(g: &RunGroup, dir: &Path, overwrite: bool, limit: usize) -> Result<Vec<PathBuf>> {
    let files = vec![
        ("summary.txt", to_text(g, limit)),
        ("summary.json", to_json(g)?),
        ("summary.html", to_html(g, limit)),
        ("rank_points.csv", rank_points_csv(g)),
    ];
    Ok(tcgd_report::write_report(
        dir,
        &files,
        &SUMMARY_FILES,
        overwrite,
    )?)
}
