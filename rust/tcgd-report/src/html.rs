//! The HTML shell every report shares: one standalone file, no script, charts as inline
//! SVG. Every string that came from a user (names, labels, paths, reasons quoting them)
//! goes through [`escape`], and a content security policy forbids scripts in case
//! anything slipped through.

/// Text safe in element content and in quoted attribute values.
pub fn escape(s: &str) -> String {
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

/// The style every report starts from: type, tables, numbers, notes, charts.
pub const BASE_STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem;color:#1b1b1b;max-width:1200px}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}
th,td{border-bottom:1px solid #ddd;padding:.25rem .6rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num,td.n{text-align:right;font-variant-numeric:tabular-nums}
.note{color:#555;font-size:.85rem}code{font-size:.85rem}.warn{color:#a40}
pre{background:#f5f5f5;padding:8px;overflow-x:auto}
svg{background:#fafafa;border:1px solid #e0e0e0;max-width:100%;height:auto}
svg text{font-size:11px;fill:#333}
";

/// The start of a page, up to and including `<body>`: doctype, charset, a content
/// security policy that allows inline style and nothing else (no script, no fetch), the
/// escaped `title`, [`BASE_STYLE`] and then `extra_style` (rules of one kind of report).
pub fn page_head(title: &str, extra_style: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{BASE_STYLE}{extra_style}</style>\n</head>\n<body>\n",
        escape(title)
    )
}

/// What closes a page that [`page_head`] opened.
pub const PAGE_END: &str = "</body>\n</html>\n";

/// A whole page: [`page_head`], `body` (already HTML) and [`PAGE_END`].
pub fn page(title: &str, extra_style: &str, body: &str) -> String {
    let mut out = page_head(title, extra_style);
    out.push_str(body);
    out.push_str(PAGE_END);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_markup_in_text_is_escaped() {
        assert_eq!(
            escape("<a href='x'>&\""),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;"
        );
    }

    #[test]
    fn pages_forbid_scripts_and_escape_titles() {
        let p = page("<script>", "tr.x{color:red}\n", "<p>hi</p>\n");
        assert!(p.starts_with("<!DOCTYPE html>\n"));
        assert!(p.contains("<meta charset=\"utf-8\">"));
        assert!(p.contains("content=\"default-src 'none'; style-src 'unsafe-inline'\""));
        assert!(p.contains("<title>&lt;script&gt;</title>"));
        assert!(!p.contains("<script>"));
        assert!(p.contains(&format!("{BASE_STYLE}tr.x{{color:red}}\n</style>")));
        assert!(p.ends_with("<body>\n<p>hi</p>\n</body>\n</html>\n"));
    }
}
