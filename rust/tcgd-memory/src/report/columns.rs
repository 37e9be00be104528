//! Table-driven report tables: every column is named once, next to the cell it takes from
//! a row, so a table's header and its rows come from one list.

use tcgd_report::{Cell, Table};

/// One column of a table of `R` rows: its name and its cell of a row.
pub(crate) type Column<R> = (&'static str, fn(&R) -> Cell);

/// A column named like the field it shows: `field!(count)`.
macro_rules! field {
    ($name:ident) => {
        (stringify!($name), |row| {
            $crate::report::columns::cell(&row.$name)
        })
    };
}
pub(crate) use field;

/// The cell of a field's value.
pub(crate) fn cell<T: Clone + Into<Cell>>(value: &T) -> Cell {
    value.clone().into()
}

/// The names of `columns`, in order.
pub(crate) fn header<R>(columns: &[Column<R>]) -> Vec<&'static str> {
    columns.iter().map(|(name, _)| *name).collect()
}

/// The cells `columns` take from `row`, in order.
pub(crate) fn cells<R>(columns: &[Column<R>], row: &R) -> Vec<Cell> {
    columns.iter().map(|(_, cell)| cell(row)).collect()
}

/// A table of `rows`, one cell per column.
pub(crate) fn table<'r, R: 'r>(
    columns: &[Column<R>],
    rows: impl IntoIterator<Item = &'r R>,
) -> Table {
    let rows = rows.into_iter().map(|row| cells(columns, row)).collect();
    Table::with_rows(&header(columns), rows)
}

/// The cells `columns` take from `row` as a JSON object under the columns' names.
pub(crate) fn json_object<R>(
    columns: &[Column<R>],
    row: &R,
) -> serde_json::Map<String, serde_json::Value> {
    columns
        .iter()
        .map(|(name, cell)| ((*name).to_owned(), cell_json(cell(row))))
        .collect()
}

fn cell_json(cell: Cell) -> serde_json::Value {
    use serde_json::Value;
    match cell {
        Cell::Null => Value::Null,
        Cell::Int(v) => v.into(),
        Cell::UInt(v) => v.into(),
        Cell::Float(v) => v.into(),
        Cell::Text(v) => v.into(),
        Cell::Bool(v) => v.into(),
    }
}

/// A table of `(parent, row)` pairs: the `parent` columns of each row's parent, then the
/// row's own `columns`.
pub(crate) fn nested_table<'a, P: 'a, R: 'a>(
    parent: &[Column<P>],
    columns: &[Column<R>],
    rows: impl IntoIterator<Item = (&'a P, &'a R)>,
) -> Table {
    let mut names = header(parent);
    names.extend(header(columns));
    let rows = rows
        .into_iter()
        .map(|(p, row)| {
            let mut line = cells(parent, p);
            line.extend(cells(columns, row));
            line
        })
        .collect();
    Table::with_rows(&names, rows)
}
