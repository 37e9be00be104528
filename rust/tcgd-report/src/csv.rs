//! CSV tables (RFC 4180) that are safe to open in a spreadsheet, written from Arrow record
//! batches through `arrow-csv`.
//!
//! Spreadsheets run a cell that starts with `=`, `+`, `-` or `@` as a formula (and some
//! strip a leading tab or carriage return first), so a label like `=HYPERLINK(...)` in a
//! report would become a live link or worse. Such a text cell is written with a leading
//! `'`, which spreadsheets read as "this is text". Numbers are left alone: `-1.5`, `-inf`
//! and `1-2j` cannot carry a formula, and prefixing them would turn numbers into text for
//! every program that reads the file.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::csv::writer::{Terminator, WriterBuilder};
use arrow::datatypes::{DataType, Field, Float64Type, Schema};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

/// How a CSV line ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// `\n` (memory reports).
    Lf,
    /// `\r\n` (tensor reports, as Python's `csv` module writes them).
    CrLf,
}

/// `batch` as CSV: a header row of its field names, then one line per row. Text columns
/// are neutralised cell by cell ([`neutral`]); floats are written at full precision with
/// non-finite values as `nan`, `inf`, `-inf` ([`float`]); other numbers and booleans as
/// `arrow-csv` writes them; a null is an empty cell. Cells are quoted only when they hold
/// `,`, `"`, CR or LF.
pub fn write(batch: &RecordBatch, ending: Ending) -> Result<String, ArrowError> {
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(batch.num_columns());
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        let text: Option<StringArray> = match column.data_type() {
            DataType::Utf8 => Some(rewritten(column.as_string::<i32>(), neutral)),
            DataType::Float64 => Some(rewritten(column.as_primitive::<Float64Type>(), float)),
            _ => None,
        };
        match text {
            Some(text) => {
                fields.push(Field::new(field.name(), DataType::Utf8, true));
                columns.push(Arc::new(text));
            }
            None => {
                fields.push(Field::clone(field));
                columns.push(column.clone());
            }
        }
    }
    let safe = RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?;
    let terminator = match ending {
        Ending::Lf => Terminator::Any(b'\n'),
        Ending::CrLf => Terminator::CRLF,
    };
    let mut out = Vec::new();
    {
        let mut writer = WriterBuilder::new()
            .with_header(true)
            .with_null(String::new())
            .with_line_terminator(terminator)
            .build(&mut out);
        writer.write(&safe)?;
    }
    String::from_utf8(out).map_err(|e| ArrowError::CsvError(e.to_string()))
}

/// A column's values as the text `write` gives them; nulls stay null.
fn rewritten<T>(
    values: impl IntoIterator<Item = Option<T>>,
    text: impl Fn(T) -> String,
) -> StringArray {
    values.into_iter().map(|v| v.map(&text)).collect()
}

/// A float at full precision (the shortest text that reads back as the same value), with
/// non-finite values spelled as in the JSON reports: `nan`, `inf`, `-inf`.
pub fn float(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v == f64::INFINITY {
        "inf".into()
    } else if v == f64::NEG_INFINITY {
        "-inf".into()
    } else {
        format!("{v:?}")
    }
}

/// A text cell as a spreadsheet may read it: `'` before one it would run as a formula,
/// anything else unchanged. Quoting is the CSV writer's job.
pub fn neutral(value: &str) -> String {
    if runs_as_formula(value) {
        format!("'{value}")
    } else {
        value.to_owned()
    }
}

/// One cell, neutralised if a spreadsheet would run it and quoted if it needs quoting.
pub fn cell(value: &str) -> String {
    let value = neutral(value);
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value
    }
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
    use arrow::array::{BooleanArray, Float64Array, Int64Array};

    use super::*;

    #[test]
    fn fault_formula_cells_are_neutralised() {
        for (raw, want) in [
            (
                "=HYPERLINK(\"http://x\",\"y\")",
                "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"",
            ),
            ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
            ("-2+3", "'-2+3"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\t=1", "'\t=1"),
            ("\r=1", "\"'\r=1\""),
            ("-", "'-"),
            ("-e5", "'-e5"),
            ("--1", "'--1"),
            ("-1-2-3j", "'-1-2-3j"),
        ] {
            assert_eq!(cell(raw), want, "cell {raw:?}");
        }
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
        for (raw, want) in [
            ("plain", "plain"),
            ("a,b", "\"a,b\""),
            ("say \"hi\"", "\"say \"\"hi\"\"\""),
            ("two\nlines", "\"two\nlines\""),
            ("a=b", "a=b"),
            ("", ""),
        ] {
            assert_eq!(cell(raw), want, "cell {raw:?}");
        }
    }

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    fn column(values: impl Array + 'static) -> ArrayRef {
        Arc::new(values)
    }

    #[test]
    fn fault_text_columns_are_neutralised_and_numbers_kept() {
        let b = batch(vec![
            (
                "label",
                column(StringArray::from(vec![
                    Some("=1"),
                    Some("-1"),
                    Some("a,\"b\""),
                    None,
                ])),
            ),
            (
                "n",
                column(Int64Array::from(vec![Some(-3), None, Some(4), Some(0)])),
            ),
            (
                "x",
                column(Float64Array::from(vec![
                    Some(-0.5),
                    Some(f64::NAN),
                    Some(f64::NEG_INFINITY),
                    None,
                ])),
            ),
            (
                "ok",
                column(BooleanArray::from(vec![
                    Some(true),
                    Some(false),
                    None,
                    Some(true),
                ])),
            ),
        ]);
        assert_eq!(
            write(&b, Ending::Lf).unwrap(),
            "label,n,x,ok\n'=1,-3,-0.5,true\n-1,,nan,false\n\"a,\"\"b\"\"\",4,-inf,\n,0,,true\n"
        );
        assert_eq!(
            write(&b, Ending::CrLf).unwrap().split('\n').next(),
            Some("label,n,x,ok\r")
        );
    }

    #[test]
    fn empty_tables_keep_their_header() {
        let b = batch(vec![(
            "a",
            column(StringArray::from(Vec::<Option<&str>>::new())),
        )]);
        assert_eq!(write(&b, Ending::CrLf).unwrap(), "a\r\n");
    }

    #[test]
    fn floats_at_full_precision() {
        assert_eq!(float(0.1), "0.1");
        assert_eq!(float(1.0), "1.0");
        assert_eq!(float(f64::NEG_INFINITY), "-inf");
    }
}
