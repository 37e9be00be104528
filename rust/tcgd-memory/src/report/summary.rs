use serde_json::{json, Value};

use crate::compare::{summary, Comparison};
use crate::state::MemoryState;

use super::comparison::*;
use super::*;

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
