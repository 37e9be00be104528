//! CSV cells (RFC 4180) that are safe to open in a spreadsheet.
//!
//! Spreadsheets run a cell that starts with `=`, `+`, `-` or `@` as a formula (and some
//! strip a leading tab or carriage return first), so a label like `=HYPERLINK(...)` in a
//! report would become a live link or worse. Such a cell is written with a leading `'`,
//! which spreadsheets read as "this is text". Numbers are left alone: `-1.5`, `-inf` and
//! `1-2j` cannot carry a formula, and prefixing them would turn numbers into text for
//! every program that reads the file.

/// One cell, neutralised if a spreadsheet would run it and quoted if it needs quoting.
pub fn cell(value: &str) -> String {
    let neutral;
    let value = if runs_as_formula(value) {
        neutral = format!("'{value}");
        neutral.as_str()
    } else {
        value
    };
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value.to_owned()
    }
}

/// Appends one line of cells and `ending` (`"\n"` or `"\r\n"`).
pub fn line<S: AsRef<str>>(out: &mut String, cells: &[S], ending: &str) {
    for (i, c) in cells.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&cell(c.as_ref()));
    }
    out.push_str(ending);
}

fn runs_as_formula(value: &str) -> bool {
    value.starts_with(['=', '+', '-', '@', '\t', '\r']) && !is_number(value)
}

/// A real number as reports write one (`-12`, `+0.5`, `-1e-05`, `-inf`, `nan`), or a
/// complex one (`-1.5-2j`, `1+infj`).
fn is_number(value: &str) -> bool {
    if let Some(body) = value.strip_suffix('j') {
        // The imaginary part starts at the last sign that does not follow an exponent `e`.
        let bytes = body.as_bytes();
        let split = (1..bytes.len())
            .rev()
            .find(|&i| matches!(bytes[i], b'+' | b'-') && !matches!(bytes[i - 1], b'e' | b'E'));
        return match split {
            Some(i) => is_real(&body[..i]) && is_real(&body[i..]),
            None => is_real(body),
        };
    }
    is_real(value)
}

fn is_real(value: &str) -> bool {
    let unsigned = value.strip_prefix(['+', '-']).unwrap_or(value);
    if matches!(unsigned, "inf" | "nan" | "infinity" | "NaN" | "Infinity") {
        return true;
    }
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some((whole, fraction)) => {
            (digits(whole) || whole.is_empty())
                && (digits(fraction) || fraction.is_empty())
                && !(whole.is_empty() && fraction.is_empty())
        }
        None => digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_formula_cells_are_neutralised() {
        assert_eq!(
            cell("=HYPERLINK(\"http://x\",\"y\")"),
            "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\""
        );
        assert_eq!(cell("+cmd|' /C calc'!A0"), "'+cmd|' /C calc'!A0");
        assert_eq!(cell("-2+3"), "'-2+3");
        assert_eq!(cell("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(cell("\t=1"), "'\t=1");
        assert_eq!(cell("\r=1"), "\"'\r=1\"");
        assert_eq!(cell("-"), "'-");
        assert_eq!(cell("-e5"), "'-e5");
        assert_eq!(cell("--1"), "'--1");
        assert_eq!(cell("-1-2-3j"), "'-1-2-3j");
    }

    #[test]
    fn numbers_and_plain_text_are_kept() {
        for number in [
            "-12",
            "+3",
            "-0.5",
            "-.5",
            "-5.",
            "-1e-05",
            "-1.5E+10",
            "-inf",
            "-nan",
            "-1.5-2j",
            "-1+infj",
            "1e-05-2.5e+03j",
            "-2j",
        ] {
            assert_eq!(cell(number), number, "{number}");
        }
        assert_eq!(cell("plain"), "plain");
        assert_eq!(cell("a,b"), "\"a,b\"");
        assert_eq!(cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(cell("two\nlines"), "\"two\nlines\"");
        assert_eq!(cell("a=b"), "a=b");
        assert_eq!(cell(""), "");
    }

    #[test]
    fn lines_join_cells() {
        let mut out = String::new();
        line(&mut out, &["=1", "-1", "x"], "\r\n");
        assert_eq!(out, "'=1,-1,x\r\n");
    }
}
