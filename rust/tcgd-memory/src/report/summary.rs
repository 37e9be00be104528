use serde_json::{json, Value};

use crate::compare::{summary, Comparison};
use crate::state::MemoryState;

use super::comparison::*;
use super::document::pretty;
use super::*;

/// Several states, each reported on its own, as one document (`tcgd memory summary`):
/// the text reports one after another, JSON `{"points": [...]}`, one CSV table whose
/// first column is the point's label, one HTML page.
pub fn render_summaries(states: &[&MemoryState], format: Format, options: ReportOptions) -> String {
    let summaries: Vec<Comparison> = states.iter().map(|s| summary(s)).collect();
    // The peaks of each state are those since the state before it in the list.
    let previous: Vec<Option<&MemoryState>> = std::iter::once(None)
        .chain(states.iter().map(|s| Some(*s)))
        .collect();
    match format {
        Format::Text => summaries
            .iter()
            .zip(states.iter().zip(&previous))
            .map(|(c, (s, p))| {
                let mut text = comparison_text(c, options);
                text.push_str(&beyond_text(s, *p));
                text
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Json => {
            let points: Vec<Value> = summaries
                .iter()
                .zip(states.iter().zip(&previous))
                .map(|(c, (s, p))| {
                    let mut v = comparison_json(c, options);
                    if let Value::Object(map) = &mut v {
                        map.insert("pool_owners".into(), json!(s.pool_owners_json()));
                        map.insert("peaks_between".into(), peaks_json(s, *p));
                    }
                    v
                })
                .collect();
            pretty(&json!({ "points": points }))
        }
        Format::Csv => {
            let header: Vec<&str> = std::iter::once("point").chain(CSV_HEADER).collect();
            let mut table = Table::new(&header);
            for (state, c) in states.iter().zip(&summaries) {
                for row in comparison_rows(&view(c, options)) {
                    let point = Cell::from(&state.identity.label);
                    table.push(std::iter::once(point).chain(row).collect());
                }
            }
            csv_table(&table)
        }
        Format::Html => {
            let bodies: Vec<String> = summaries
                .iter()
                .zip(states.iter().zip(&previous))
                .map(|(c, (s, p))| {
                    let mut body = comparison_html_body(c, options).1;
                    let extra = beyond_text(s, *p);
                    if !extra.is_empty() {
                        body.push_str("<pre>");
                        body.push_str(&escape_html(&extra));
                        body.push_str("</pre>\n");
                    }
                    body
                })
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

/// The pool owners and the peaks since `previous` of a state, as text lines (empty when
/// the state has neither).
pub(super) fn beyond_text(state: &MemoryState, previous: Option<&MemoryState>) -> String {
    let mut out = String::new();
    if !state.pool_owners.is_empty() {
        out.push_str("  pool owners:\n");
        for o in &state.pool_owners {
            out.push_str(&format!(
                "    device[{}] {}: {}\n",
                o.device,
                pool_name(o.pool),
                o.describe()
            ));
        }
    }
    for p in &state.peaks {
        let between = p.between(previous.and_then(|s| s.device_peaks(p.device)));
        let parts = super::timeline::peaks_parts(&between);
        if !parts.is_empty() {
            out.push_str(&format!("  device[{}]: {}\n", p.device, parts.join("; ")));
        }
    }
    out
}

fn peaks_json(state: &MemoryState, previous: Option<&MemoryState>) -> Value {
    let rows: Vec<Value> = state
        .peaks
        .iter()
        .map(|p| {
            let between = p.between(previous.and_then(|s| s.device_peaks(p.device)));
            json!({"device": p.device, "reading": p, "between": between})
        })
        .collect();
    Value::Array(rows)
}
