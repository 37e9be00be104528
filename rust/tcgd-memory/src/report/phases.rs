use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::phases::PhaseComparison;

use super::comparison::*;
use super::document::pretty;
use super::*;

pub(super) const PHASE_HEADER: [&str; 16] = [
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

pub(super) fn phase_rows(phases: &PhaseComparison) -> Vec<Vec<Cell>> {
    phases
        .rows
        .iter()
        .map(|r| {
            let v = &r.values;
            vec![
                r.level.as_str().into(),
                Cell::text(r.scope.map(|s| s.as_str())),
                opt(r.baseline_device),
                opt(r.candidate_device),
                opt_pool(r.baseline_pool),
                opt_pool(r.candidate_pool),
                r.metric.into(),
                opt(v.baseline_start),
                opt(v.baseline_end),
                opt(v.candidate_start),
                opt(v.candidate_end),
                opt(v.baseline_change()),
                opt(v.candidate_change()),
                opt(v.start_gap()),
                opt(v.end_gap()),
                v.identity_holds().into(),
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

pub(super) fn phases_text(phases: &PhaseComparison, include_unchanged: bool) -> String {
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
        Format::Json => pretty(&phases_json(phases)),
        Format::Csv => csv_table(&Table::with_rows(&PHASE_HEADER, phase_rows(phases))),
        Format::Html => {
            let mut body = String::from("<h1>Memory phases</h1>\n<pre>");
            body.push_str(&escape_html(&phases_text(
                phases,
                options.include_unchanged,
            )));
            body.push_str("</pre>\n");
            body.push_str(&html_table(&PHASE_HEADER, &phase_rows(phases), |row| {
                if row[15] == Cell::Bool(false) {
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
