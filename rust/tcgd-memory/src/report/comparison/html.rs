//! The comparison report as a standalone HTML page: a chart of reserved bytes per pool,
//! the text report and the value table.

use super::*;
/// Reserved bytes per pool, reference and candidate side by side.
pub(in crate::report) fn pool_chart(shown: &Comparison) -> String {
    let mut bars: Vec<(String, i64, i64)> = Vec::new();
    for d in &shown.devices {
        let device = d.candidate_device.or(d.reference_device).unwrap_or(-1);
        for p in &d.pools {
            let pool = p.candidate_pool.or(p.reference_pool).unwrap_or((0, 0));
            bars.push((
                format!("device {device} {} ({})", pool_name(pool), p.kind.as_str()),
                p.stats.reference.reserved_bytes,
                p.stats.candidate.reserved_bytes,
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
pub(in crate::report) fn comparison_html_body(
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
