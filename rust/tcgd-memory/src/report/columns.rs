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

/// The cells one part of a table's columns takes from a row.
type PartCells<'a, R> = Box<dyn Fn(&R) -> Vec<Cell> + 'a>;

/// The columns of a table whose rows are made of parts, part after part: each part's
/// names, and the cells it takes from a row.
pub(crate) struct Parts<'a, R> {
    names: Vec<String>,
    parts: Vec<PartCells<'a, R>>,
}

impl<'a, R> Parts<'a, R> {
    pub(crate) fn new() -> Parts<'a, R> {
        Parts {
            names: Vec::new(),
            parts: Vec::new(),
        }
    }

    /// Then the `columns` of what `of` gives of a row.
    pub(crate) fn of<P>(self, columns: &'a [Column<P>], of: impl Fn(&R) -> &P + 'a) -> Self {
        let names = header(columns).into_iter().map(str::to_owned).collect();
        self.with(names, move |row| cells(columns, of(row)))
    }

    /// Then columns named `names`, whose cells `cells` gives.
    pub(crate) fn with(mut self, names: Vec<String>, cells: impl Fn(&R) -> Vec<Cell> + 'a) -> Self {
        self.names.extend(names);
        self.parts.push(Box::new(cells));
        self
    }

    /// A table of `rows`.
    pub(crate) fn table(&self, rows: impl IntoIterator<Item = R>) -> Table {
        let rows = rows
            .into_iter()
            .map(|row| self.parts.iter().flat_map(|part| part(&row)).collect())
            .collect();
        Table::with_rows(&self.names, rows)
    }
}
