//! A report as a sequence of blocks (headings, paragraphs, facts, tables, line charts),
//! rendered as plain text for a terminal and as one standalone HTML page.
//!
//! Reports that are assembled outside this crate (the compile plugin's "why" report puts
//! together runs, comparisons and searches that only Python can drive) describe their
//! content here and never write markup: every string is escaped as the page is built.

use std::fmt::Write;

use crate::html::{escape, page};
use crate::svg::{Frame, LogAxis};
use crate::table::{Cell, Table};

/// One line of a chart: a value per x position, `None` where it has none.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Heading(String),
    Paragraph(String),
    /// Name and value pairs, one per line (`status: mismatch`).
    Facts(Vec<(String, String)>),
    /// A table; text shows at most `limit` rows (and says how many more there are).
    Table {
        table: Table,
        limit: Option<usize>,
    },
    /// Lines over labelled x positions on a log10 y axis (errors span decades); the text
    /// form lists the values instead.
    LineChart {
        title: String,
        y_label: String,
        x_labels: Vec<String>,
        series: Vec<Series>,
    },
    /// Preformatted text (code, a command).
    Code(String),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Document {
    pub title: String,
    pub blocks: Vec<Block>,
}

/// A number as a person reads it in a report: four significant digits.
pub fn display_float(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return match v {
            v if v.is_nan() => "nan".to_owned(),
            v if v == f64::INFINITY => "inf".to_owned(),
            v if v == f64::NEG_INFINITY => "-inf".to_owned(),
            _ => "0".to_owned(),
        };
    }
    let magnitude = v.abs();
    if (1e-3..1e5).contains(&magnitude) {
        let digits = (3 - magnitude.log10().floor() as i32).max(0) as usize;
        let text = format!("{v:.digits$}");
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            text
        }
    } else {
        format!("{v:.3e}")
    }
}

fn shown(cell: &Cell) -> String {
    match cell {
        Cell::Float(v) => display_float(*v),
        other => other.to_string(),
    }
}

fn numeric(cell: &Cell) -> bool {
    matches!(cell, Cell::Int(_) | Cell::UInt(_) | Cell::Float(_))
}

/// Columns whose every non-null cell is a number are right-aligned.
fn numeric_columns(table: &Table) -> Vec<bool> {
    (0..table.names().len())
        .map(|i| {
            let mut cells = table.rows().iter().map(|r| &r[i]).filter(|c| !c.is_null());
            let mut any = false;
            let all = cells.all(|c| {
                any = true;
                numeric(c)
            });
            any && all
        })
        .collect()
}

/// Rows of cells in aligned columns, the first row the header, each line indented by two
/// spaces; `right` marks the columns aligned to the right (numbers).
pub fn aligned_columns(out: &mut String, right: &[bool], lines: &[Vec<&str>]) {
    let mut widths = vec![0; right.len()];
    for line in lines {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for cells in lines {
        let mut text = String::from("  ");
        let last = cells.len().saturating_sub(1);
        for (i, cell) in cells.iter().enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            if right[i] {
                text.push_str(&" ".repeat(pad));
                text.push_str(cell);
            } else {
                text.push_str(cell);
                if i != last {
                    text.push_str(&" ".repeat(pad));
                }
            }
            if i != last {
                text.push_str("  ");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
}

impl Document {
    pub fn new(title: impl Into<String>) -> Document {
        Document {
            title: title.into(),
            blocks: Vec::new(),
        }
    }

    pub fn push(&mut self, block: Block) {
        self.blocks.push(block);
    }

    pub fn to_text(&self) -> String {
        let mut out = format!("{}\n", self.title);
        for block in &self.blocks {
            match block {
                Block::Heading(h) => {
                    let _ = writeln!(out, "\n{h}:");
                }
                Block::Paragraph(p) => {
                    let _ = writeln!(out, "{p}");
                }
                Block::Facts(facts) => {
                    for (name, value) in facts {
                        let _ = writeln!(out, "  {name}: {value}");
                    }
                }
                Block::Table { table, limit } => text_table(&mut out, table, *limit),
                Block::LineChart {
                    title,
                    x_labels,
                    series,
                    ..
                } => {
                    let _ = writeln!(out, "  {title}:");
                    let mut names = vec![String::new()];
                    names.extend(series.iter().map(|s| s.name.clone()));
                    let mut table = Table::new(&names);
                    for (i, x) in x_labels.iter().enumerate() {
                        let mut row = vec![Cell::from(x.as_str())];
                        row.extend(
                            series
                                .iter()
                                .map(|s| Cell::from(s.values.get(i).copied().flatten())),
                        );
                        table.push(row);
                    }
                    text_table(&mut out, &table, None);
                }
                Block::Code(code) => {
                    for line in code.lines() {
                        let _ = writeln!(out, "    {line}");
                    }
                }
            }
        }
        out
    }

    pub fn to_html(&self) -> String {
        let mut body = format!("<h1>{}</h1>\n", escape(&self.title));
        for block in &self.blocks {
            match block {
                Block::Heading(h) => {
                    let _ = writeln!(body, "<h2>{}</h2>", escape(h));
                }
                Block::Paragraph(p) => {
                    let _ = writeln!(body, "<p>{}</p>", escape(p));
                }
                Block::Facts(facts) => {
                    body.push_str("<table class=\"facts\">\n");
                    for (name, value) in facts {
                        let _ = writeln!(
                            body,
                            "<tr><th>{}</th><td>{}</td></tr>",
                            escape(name),
                            escape(value)
                        );
                    }
                    body.push_str("</table>\n");
                }
                Block::Table { table, .. } => html_table(&mut body, table),
                Block::LineChart {
                    title,
                    y_label,
                    x_labels,
                    series,
                } => line_chart(&mut body, title, y_label, x_labels, series),
                Block::Code(code) => {
                    let _ = writeln!(body, "<pre>{}</pre>", escape(code));
                }
            }
        }
        page(&self.title, CHART_STYLE, &body)
    }
}

fn text_table(out: &mut String, table: &Table, limit: Option<usize>) {
    if table.rows().is_empty() {
        out.push_str("  none\n");
        return;
    }
    let right = numeric_columns(table);
    let rows = table.rows();
    let n = limit.map_or(rows.len(), |l| l.min(rows.len()));
    let texts: Vec<Vec<String>> = rows[..n]
        .iter()
        .map(|r| r.iter().map(shown).collect())
        .collect();
    let mut lines: Vec<Vec<&str>> = vec![table.names().iter().map(String::as_str).collect()];
    lines.extend(texts.iter().map(|r| r.iter().map(String::as_str).collect()));
    aligned_columns(out, &right, &lines);
    if rows.len() > n {
        let _ = writeln!(out, "  ... {} more", rows.len() - n);
    }
}

fn html_table(out: &mut String, table: &Table) {
    let right = numeric_columns(table);
    out.push_str("<table>\n<tr>");
    for name in table.names() {
        let _ = write!(out, "<th>{}</th>", escape(name));
    }
    out.push_str("</tr>\n");
    for row in table.rows() {
        out.push_str("<tr>");
        for (cell, num) in row.iter().zip(&right) {
            let class = if *num { " class=\"num\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", escape(&shown(cell)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

const CHART_STYLE: &str = "\
table.facts th{background:none;font-weight:600}
svg .grid{stroke:#e4e4e4}svg .axis{stroke:#888}
svg .s0{stroke:#1f77b4;fill:#1f77b4}svg .s1{stroke:#d62728;fill:#d62728}
svg .s2{stroke:#2ca02c;fill:#2ca02c}svg .s3{stroke:#9467bd;fill:#9467bd}
svg polyline{fill:none;stroke-width:2}
";

const FRAME: Frame = Frame {
    width: 960.0,
    height: 300.0,
    left: 70.0,
    right: 150.0,
    top: 16.0,
    bottom: 80.0,
};

fn line_chart(
    out: &mut String,
    title: &str,
    y_label: &str,
    x_labels: &[String],
    series: &[Series],
) {
    let _ = writeln!(out, "<h3>{}</h3>", escape(title));
    let values = series
        .iter()
        .flat_map(|s| s.values.iter().flatten().copied());
    let Some(axis) = LogAxis::over(values) else {
        out.push_str("<p class=\"note\">no positive values to plot</p>\n");
        return;
    };
    if x_labels.is_empty() {
        out.push_str("<p class=\"note\">no positive values to plot</p>\n");
        return;
    }
    let plot_w = FRAME.plot_width();
    let x = |i: usize| {
        if x_labels.len() == 1 {
            FRAME.left + plot_w / 2.0
        } else {
            FRAME.left + plot_w * i as f64 / (x_labels.len() - 1) as f64
        }
    };
    // Zero and non-finite values sit on the baseline so that a line stays continuous.
    let y = |v: f64| FRAME.y(axis.height(v, 0.0));
    let _ = writeln!(
        out,
        "<svg viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">",
        FRAME.width,
        FRAME.height,
        escape(title)
    );
    LogAxis::draw(Some(&axis), out, &FRAME, usize::MAX, y_label);
    for (i, label) in x_labels.iter().enumerate() {
        let lx = x(i);
        let ly = FRAME.height - FRAME.bottom + 12.0;
        let _ = write!(
            out,
            "<text x=\"{lx:.1}\" y=\"{ly:.1}\" text-anchor=\"end\" \
             transform=\"rotate(-35 {lx:.1} {ly:.1})\">{}</text>",
            escape(label)
        );
    }
    for (k, s) in series.iter().enumerate() {
        let class = format!("s{}", k % 4);
        let points: Vec<String> = s
            .values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| format!("{:.1},{:.1}", x(i), y(v))))
            .collect();
        let _ = write!(
            out,
            "<polyline class=\"{class}\" points=\"{}\"><title>{}</title></polyline>",
            points.join(" "),
            escape(&s.name)
        );
        for (i, v) in s.values.iter().enumerate() {
            if let Some(v) = v {
                let _ = write!(
                    out,
                    "<circle class=\"{class}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\"><title>{}: {}</title></circle>",
                    x(i),
                    y(*v),
                    escape(&x_labels[i]),
                    escape(&display_float(*v))
                );
            }
        }
        let ly = FRAME.top + 14.0 + 16.0 * k as f64;
        let _ = write!(
            out,
            "<line class=\"{class}\" x1=\"{:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke-width=\"2\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            FRAME.width - FRAME.right + 10.0,
            FRAME.width - FRAME.right + 30.0,
            FRAME.width - FRAME.right + 34.0,
            ly + 4.0,
            escape(&s.name)
        );
    }
    out.push_str("</svg>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Document {
        let mut d = Document::new("Why <it> diverged");
        d.push(Block::Heading("Verdicts".into()));
        d.push(Block::Facts(vec![(
            "status".into(),
            "mismatch & <b>".into(),
        )]));
        d.push(Block::Table {
            table: Table::with_rows(
                &["site", "error"],
                vec![
                    vec!["layers.0/<addmm>".into(), 1.5e-7.into()],
                    vec!["layers.1".into(), 0.25.into()],
                    vec!["layers.2".into(), Cell::Null],
                ],
            ),
            limit: Some(2),
        });
        d.push(Block::LineChart {
            title: "error by layer".into(),
            y_label: "rmse".into(),
            x_labels: vec!["a".into(), "b<".into()],
            series: vec![Series {
                name: "compiled".into(),
                values: vec![Some(1e-7), Some(2e-3)],
            }],
        });
        d
    }

    #[test]
    fn text_aligns_numbers_and_cuts_at_the_limit() {
        let text = sample().to_text();
        assert!(text.starts_with("Why <it> diverged\n\nVerdicts:\n  status: mismatch & <b>\n"));
        assert!(text.contains("  site                 error\n  layers.0/<addmm>  1.500e-7\n  layers.1              0.25\n  ... 1 more\n"), "{text}");
        assert!(text.contains("  error by layer:\n"));
    }

    #[test]
    fn html_escapes_every_string() {
        let html = sample().to_html();
        assert!(!html.contains("<it>") && !html.contains("<b>") && !html.contains("<addmm>"));
        assert!(html.contains("<h1>Why &lt;it&gt; diverged</h1>"));
        assert!(html.contains("mismatch &amp; &lt;b&gt;"));
        assert!(html.contains("b&lt;"));
        assert!(html.contains("<polyline class=\"s0\""));
        // Every row is in the page, whatever the text limit.
        assert!(html.contains("<td>layers.2</td><td class=\"num\"></td>"));
    }

    #[test]
    fn floats_read_with_four_significant_digits() {
        for (v, s) in [
            (0.0, "0"),
            (0.25, "0.25"),
            (1234.5678, "1235"),
            (1.5e-7, "1.500e-7"),
            (2.5e6, "2.500e6"),
            (f64::NAN, "nan"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(display_float(v), s);
        }
    }
}
