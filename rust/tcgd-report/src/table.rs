//! A report table: named columns and rows of typed [`Cell`]s, as an Arrow record batch.
//!
//! Every CSV file of a report is one [`Table`]: the rows are built once, shown in HTML as
//! text, and written as CSV through [`crate::csv::write`] from [`Table::batch`]. A column
//! takes the type of its cells (Int64, UInt64, Float64, Utf8 or Boolean; a missing value
//! is a null); a column whose cells disagree is text.

use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use crate::csv::{self, Ending};

/// One value of a table.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    UInt(u64),
    Float(f64),
    Text(String),
    Bool(bool),
}

impl Cell {
    /// Text, or null for `None`.
    pub fn text(value: Option<impl Into<String>>) -> Cell {
        value.map_or(Cell::Null, |v| Cell::Text(v.into()))
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Cell::Null)
    }

    /// The cell's text, if it holds one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Cell::Text(s) => Some(s),
            _ => None,
        }
    }

    fn kind(&self) -> Option<DataType> {
        Some(match self {
            Cell::Null => return None,
            Cell::Int(_) => DataType::Int64,
            Cell::UInt(_) => DataType::UInt64,
            Cell::Float(_) => DataType::Float64,
            Cell::Text(_) => DataType::Utf8,
            Cell::Bool(_) => DataType::Boolean,
        })
    }
}

/// What a report shows: empty for null, floats as [`csv::float`] writes them.
impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Null => Ok(()),
            Cell::Int(v) => write!(f, "{v}"),
            Cell::UInt(v) => write!(f, "{v}"),
            Cell::Float(v) => f.write_str(&csv::float(*v)),
            Cell::Text(s) => f.write_str(s),
            Cell::Bool(b) => write!(f, "{b}"),
        }
    }
}

impl PartialEq<&str> for Cell {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == Some(*other)
    }
}

/// `From` each type a cell holds, converted to its variant's type.
macro_rules! cell_from {
    ($($from:ty => $variant:ident($to:ty)),* $(,)?) => {
        $(
            impl From<$from> for Cell {
                fn from(v: $from) -> Cell {
                    Cell::$variant(<$to>::from(v))
                }
            }
        )*
    };
}

cell_from!(
    i64 => Int(i64),
    i32 => Int(i64),
    u64 => UInt(u64),
    u32 => UInt(u64),
    f64 => Float(f64),
    bool => Bool(bool),
    String => Text(String),
    &str => Text(String),
    &String => Text(String),
);

impl From<usize> for Cell {
    fn from(v: usize) -> Cell {
        Cell::UInt(v as u64)
    }
}

impl<T: Into<Cell>> From<Option<T>> for Cell {
    fn from(v: Option<T>) -> Cell {
        v.map_or(Cell::Null, Into::into)
    }
}

/// Named columns and their rows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    names: Vec<String>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new<S: AsRef<str>>(names: &[S]) -> Table {
        Table {
            names: names.iter().map(|n| n.as_ref().to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// A table of `rows`, each as long as `names`.
    pub fn with_rows<S: AsRef<str>>(names: &[S], rows: Vec<Vec<Cell>>) -> Table {
        let mut t = Table::new(names);
        for row in rows {
            t.push(row);
        }
        t
    }

    /// Appends a row; missing trailing cells are null, extra ones are dropped.
    pub fn push(&mut self, mut row: Vec<Cell>) {
        debug_assert_eq!(row.len(), self.names.len(), "row width");
        row.resize(self.names.len(), Cell::Null);
        self.rows.push(row);
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn rows(&self) -> &[Vec<Cell>] {
        &self.rows
    }

    pub fn into_rows(self) -> Vec<Vec<Cell>> {
        self.rows
    }

    /// The table as one record batch, a nullable column per name.
    pub fn batch(&self) -> Result<RecordBatch, ArrowError> {
        let mut fields = Vec::with_capacity(self.names.len());
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.names.len());
        for (i, name) in self.names.iter().enumerate() {
            let cells = self.rows.iter().map(move |r| &r[i]);
            let mut kinds = cells.clone().filter_map(Cell::kind);
            let kind = match kinds.next() {
                Some(first) if kinds.all(|k| k == first) => first,
                _ => DataType::Utf8,
            };
            // The cells of the column's type as an array of it; the others are null.
            macro_rules! typed {
                ($array:ty, $variant:ident) => {
                    Arc::new(
                        cells
                            .map(|c| match c {
                                Cell::$variant(v) => Some(*v),
                                _ => None,
                            })
                            .collect::<$array>(),
                    )
                };
            }
            let column: ArrayRef = match kind {
                DataType::Int64 => typed!(Int64Array, Int),
                DataType::UInt64 => typed!(UInt64Array, UInt),
                DataType::Float64 => typed!(Float64Array, Float),
                DataType::Boolean => typed!(BooleanArray, Bool),
                _ => Arc::new(
                    cells
                        .map(|c| (!c.is_null()).then(|| c.to_string()))
                        .collect::<StringArray>(),
                ),
            };
            fields.push(Field::new(name, kind, true));
            columns.push(column);
        }
        RecordBatch::try_new_with_options(
            Arc::new(Schema::new(fields)),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(self.rows.len())),
        )
    }

    /// The table as CSV ([`csv::write`]).
    pub fn csv(&self, ending: Ending) -> String {
        self.batch()
            .and_then(|b| csv::write(&b, ending))
            .expect("a table's columns always form a valid batch")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_take_the_type_of_their_cells() {
        let t = Table::with_rows(
            &["n", "label", "mixed", "ok", "none"],
            vec![
                vec![
                    1i64.into(),
                    "=x".into(),
                    1i64.into(),
                    true.into(),
                    Cell::Null,
                ],
                vec![
                    Cell::Null,
                    Cell::Null,
                    "two".into(),
                    false.into(),
                    Cell::Null,
                ],
            ],
        );
        let b = t.batch().unwrap();
        let types: Vec<_> = b
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        assert_eq!(
            types,
            [
                DataType::Int64,
                DataType::Utf8,
                DataType::Utf8,
                DataType::Boolean,
                DataType::Utf8
            ]
        );
        assert_eq!(
            t.csv(Ending::Lf),
            "n,label,mixed,ok,none\n1,'=x,1,true,\n,,two,false,\n"
        );
    }
}
