//! The statistics a Delta commit records for a data file (`numRecords`, and `nullCount`,
//! `minValues`, `maxValues` of the table's statistics columns), collected while the file
//! is written, a row group at a time.
//!
//! Plain columns go through the kernel's accumulator, which gives the same statistics as
//! collecting over all rows at once. A dictionary-encoded column (the writer's way of
//! handing Parquet a column whose values repeat: an observation's site strings, its
//! point's label) is not something the kernel aggregates, and expanding it to one string
//! per row only to find its smallest and largest value is most of what collecting costs:
//! its statistics come from the distinct values its rows use (bounds collected by the
//! kernel over those values, so truncated as Delta says) and from its rows (nulls).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, StructArray};
use arrow::datatypes::{DataType, Field, Fields, Schema, UInt32Type};
use delta_kernel::expressions::ColumnName;
use delta_kernel::schema::SchemaRef;
use delta_kernel_default_engine::stats::FileStatsAccumulator;

use crate::error::{Result, StoreError};
use crate::schema::Table;

/// The sections of a file's statistics that hold one value per column (Delta protocol,
/// "Per-file Statistics").
const NUM_RECORDS: &str = "numRecords";
const NULL_COUNT: &str = "nullCount";
const MIN_VALUES: &str = "minValues";
const MAX_VALUES: &str = "maxValues";
const COLUMN_SECTIONS: [&str; 3] = [NULL_COUNT, MIN_VALUES, MAX_VALUES];

/// How often each key of one keys array occurs, and its null keys; `keys` tells the array
/// apart (address, length, distinct values) from the other keys arrays of a row group.
struct KeyCounts {
    keys: (usize, usize, usize),
    counts: Vec<i64>,
    nulls: i64,
}

/// A file's statistics, and the columns and physical schema they were collected for.
#[derive(Debug, Clone)]
pub struct FileStats {
    pub(crate) columns: Vec<ColumnName>,
    pub(crate) schema: SchemaRef,
    pub(crate) stats: StructArray,
}

/// The values a dictionary-encoded column's rows used so far, and how many of its rows
/// were null.
#[derive(Debug, Default)]
struct UsedValues {
    values: BTreeSet<String>,
    nulls: i64,
}

/// Collects a file's statistics while the file is written (see the module's comment).
#[derive(Debug)]
pub struct StatsCollector {
    columns: Vec<ColumnName>,
    schema: SchemaRef,
    /// The plain columns' statistics, once a row group was merged.
    plain: Option<FileStatsAccumulator>,
    /// Dictionary-encoded statistics columns, by position in the table.
    dictionaries: BTreeMap<usize, UsedValues>,
    rows: i64,
    table: Table,
    dir: PathBuf,
}

fn kernel_error(dir: &Path) -> impl Fn(delta_kernel::KernelError) -> StoreError + '_ {
    move |e| StoreError::Delta {
        table: dir.to_path_buf(),
        reason: format!("cannot collect statistics: {}", first_line(&e)),
    }
}

fn first_line(error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    text.lines().next().unwrap_or_default().trim().to_owned()
}

fn shape_error(dir: &Path, reason: String) -> StoreError {
    StoreError::Delta {
        table: dir.to_path_buf(),
        reason: format!("cannot collect statistics: {reason}"),
    }
}

impl StatsCollector {
    /// A collector of the statistics of `columns` for a file of `table` (in the table
    /// directory `dir`) whose physical data schema is `schema`.
    pub(crate) fn new(
        columns: &[ColumnName],
        schema: &SchemaRef,
        table: Table,
        dir: &Path,
    ) -> StatsCollector {
        StatsCollector {
            columns: columns.to_vec(),
            schema: schema.clone(),
            plain: None,
            dictionaries: BTreeMap::new(),
            rows: 0,
            table,
            dir: dir.to_path_buf(),
        }
    }

    fn is_stats_column(&self, name: &str) -> bool {
        self.columns.iter().any(|c| c.len() == 1 && c[0] == name)
    }

    /// Adds a row group's rows: the table's columns in its order, each either of the
    /// table's type or a dictionary (`UInt32` keys) of it.
    pub fn merge(&mut self, rows: &RecordBatch) -> Result<()> {
        let table_schema = self.table.schema();
        let mut plain_fields = Vec::new();
        let mut plain_columns = Vec::new();
        // How often each key occurs, per keys array: the columns of a block share theirs
        // (every column of a site picks by the row's site), and are counted once.
        let mut counted: Vec<KeyCounts> = Vec::new();
        for (position, (field, column)) in
            table_schema.fields().iter().zip(rows.columns()).enumerate()
        {
            let DataType::Dictionary(_, _) = column.data_type() else {
                plain_fields.push(field.clone());
                plain_columns.push(Arc::clone(column));
                continue;
            };
            if !self.is_stats_column(field.name()) {
                continue;
            }
            let dictionary = column.as_dictionary_opt::<UInt32Type>().ok_or_else(|| {
                shape_error(
                    &self.dir,
                    format!("column {} has other keys than u32", field.name()),
                )
            })?;
            let values = dictionary.values().as_string_opt::<i32>().ok_or_else(|| {
                shape_error(
                    &self.dir,
                    format!("column {} is not a dictionary of strings", field.name()),
                )
            })?;
            let keys = dictionary.keys();
            let id = (keys.values().as_ptr() as usize, keys.len(), values.len());
            let at = match counted.iter().position(|c| c.keys == id) {
                Some(at) => at,
                None => {
                    let mut counts = vec![0i64; values.len()];
                    for key in keys.iter().flatten() {
                        counts[key as usize] += 1;
                    }
                    counted.push(KeyCounts {
                        keys: id,
                        counts,
                        nulls: keys.null_count() as i64,
                    });
                    counted.len() - 1
                }
            };
            let KeyCounts { counts, nulls, .. } = &counted[at];
            let used = self.dictionaries.entry(position).or_default();
            used.nulls += nulls;
            for (k, &count) in counts.iter().enumerate() {
                if count == 0 {
                    continue;
                }
                if values.is_null(k) {
                    used.nulls += count;
                } else if !used.values.contains(values.value(k)) {
                    used.values.insert(values.value(k).to_owned());
                }
            }
        }
        let plain = RecordBatch::try_new(Arc::new(Schema::new(plain_fields)), plain_columns)
            .map_err(|e| shape_error(&self.dir, e.to_string()))?;
        let dir = self.dir.clone();
        let accumulator = self
            .plain
            .get_or_insert_with(|| FileStatsAccumulator::new(&self.columns, &self.schema));
        accumulator.merge(&plain).map_err(kernel_error(&dir))?;
        self.rows += rows.num_rows() as i64;
        Ok(())
    }

    /// The statistics of every row merged (of a file with no rows, when none was).
    pub fn finish(mut self) -> Result<FileStats> {
        if self.plain.is_none() {
            self.merge(&RecordBatch::new_empty(self.table.schema()))?;
        }
        let fail = kernel_error(&self.dir);
        let plain = self
            .plain
            .take()
            .map(FileStatsAccumulator::finish)
            .transpose()
            .map_err(&fail)?
            .flatten()
            .ok_or_else(|| shape_error(&self.dir, "no statistics were collected".into()))?;
        let table_schema = self.table.schema();
        // Per dictionary column: its null count, and its bounds as the kernel gives them
        // for a column holding its used values once each.
        let mut added: Vec<(usize, &str, ArrayRef)> = Vec::new();
        for (&position, used) in &self.dictionaries {
            let field = table_schema.field(position);
            added.push((
                position,
                NULL_COUNT,
                Arc::new(Int64Array::from(vec![used.nulls])),
            ));
            let values: StringArray = used.values.iter().map(Some).collect();
            let single = Arc::new(Schema::new(vec![field.clone()]));
            let batch = RecordBatch::try_new(single, vec![Arc::new(values)])
                .map_err(|e| shape_error(&self.dir, e.to_string()))?;
            let mut accumulator = FileStatsAccumulator::new(&self.columns, &self.schema);
            accumulator.merge(&batch).map_err(&fail)?;
            let bounds = accumulator
                .finish()
                .map_err(&fail)?
                .ok_or_else(|| shape_error(&self.dir, "no statistics were collected".into()))?;
            for section in [MIN_VALUES, MAX_VALUES] {
                let bound = bounds
                    .column_by_name(section)
                    .and_then(|s| s.as_struct_opt())
                    .and_then(|s| s.column_by_name(field.name()));
                if let Some(bound) = bound {
                    added.push((position, section, Arc::clone(bound)));
                }
            }
        }
        let stats = with_columns(&plain, &added, &table_schema, &self.dir)?;
        Ok(FileStats {
            columns: self.columns,
            schema: self.schema,
            stats,
        })
    }
}

/// `stats` (as the kernel gives them) with `added` values of more columns: each
/// `(position in the table, section, value)` goes into its section, where the table's
/// columns are in the table's order. A section `stats` lacks is made, in the protocol's
/// order of sections.
fn with_columns(
    stats: &StructArray,
    added: &[(usize, &str, ArrayRef)],
    table: &Schema,
    dir: &Path,
) -> Result<StructArray> {
    let position = |name: &str| table.index_of(name).unwrap_or(usize::MAX);
    let section = |name: &str| -> Result<StructArray> {
        let mut children: Vec<(usize, Arc<Field>, ArrayRef)> = Vec::new();
        if let Some(existing) = stats.column_by_name(name) {
            let existing = existing
                .as_struct_opt()
                .ok_or_else(|| shape_error(dir, format!("{name} is not a struct")))?;
            for (field, column) in existing.fields().iter().zip(existing.columns()) {
                children.push((
                    position(field.name()),
                    Arc::clone(field),
                    Arc::clone(column),
                ));
            }
        }
        for (at, _, value) in added.iter().filter(|(_, s, _)| *s == name) {
            let field = Field::new(table.field(*at).name(), value.data_type().clone(), true);
            children.push((*at, Arc::new(field), Arc::clone(value)));
        }
        children.sort_by_key(|(at, _, _)| *at);
        let (fields, columns): (Vec<Arc<Field>>, Vec<ArrayRef>) =
            children.into_iter().map(|(_, f, c)| (f, c)).unzip();
        StructArray::try_new(Fields::from(fields), columns, None)
            .map_err(|e| shape_error(dir, e.to_string()))
    };
    let wanted = |name: &str| {
        stats.column_by_name(name).is_some() || added.iter().any(|(_, s, _)| *s == name)
    };
    // The kernel's order: `numRecords`, the column sections, then the rest.
    let mut fields: Vec<Arc<Field>> = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    let mut sections_done = false;
    for (field, column) in stats.fields().iter().zip(stats.columns()) {
        let name = field.name().as_str();
        let is_section = COLUMN_SECTIONS.contains(&name);
        if !sections_done && (is_section || name != NUM_RECORDS) {
            for name in COLUMN_SECTIONS.into_iter().filter(|s| wanted(s)) {
                let values = section(name)?;
                fields.push(Arc::new(Field::new(name, values.data_type().clone(), true)));
                columns.push(Arc::new(values));
            }
            sections_done = true;
        }
        if !is_section {
            fields.push(Arc::clone(field));
            columns.push(Arc::clone(column));
        }
    }
    StructArray::try_new(Fields::from(fields), columns, None)
        .map_err(|e| shape_error(dir, e.to_string()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use arrow::array::{BooleanArray, Float64Array, Int64Array, ListBuilder, UInt32Array};
    use arrow::datatypes::{DataType, Int64Type};
    use delta_kernel::engine::arrow_conversion::TryFromArrow;
    use delta_kernel::schema::StructType;

    /// The statistics columns Delta picks by default: the table's first 32.
    fn columns(table: Table) -> Vec<ColumnName> {
        table
            .schema()
            .fields()
            .iter()
            .take(32)
            .map(|f| ColumnName::new([f.name().clone()]))
            .collect()
    }

    fn physical(table: Table) -> SchemaRef {
        Arc::new(StructType::try_from_arrow(table.schema().as_ref()).unwrap())
    }

    /// `rows` observation rows whose string columns repeat a few values (some null), as
    /// `dictionaries` says: as dictionaries over values some rows never use, or as strings.
    fn observations(rows: usize, offset: usize, dictionaries: bool) -> RecordBatch {
        let schema = Table::Observations.schema();
        let columns: Vec<ArrayRef> = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(c, f)| -> ArrayRef {
                let value = |r: usize| ((r + offset) * (c % 5 + 1) + c) % 7;
                match f.data_type() {
                    DataType::Utf8 => {
                        // Seven values, the last unused; null for value 3 where allowed.
                        let text = |v: usize| {
                            (!(f.is_nullable() && v == 3)).then(|| format!("{}-{v}", f.name()))
                        };
                        if dictionaries {
                            let values: StringArray = (0..7).map(text).collect();
                            let keys: UInt32Array =
                                (0..rows).map(|r| (value(r) % 6) as u32).collect();
                            Arc::new(arrow::array::DictionaryArray::new(keys, Arc::new(values)))
                        } else {
                            Arc::new(
                                (0..rows)
                                    .map(|r| text(value(r) % 6))
                                    .collect::<StringArray>(),
                            )
                        }
                    }
                    DataType::Int64 => Arc::new(Int64Array::from_iter_values(
                        (0..rows).map(|r| value(r) as i64),
                    )),
                    DataType::Float64 => Arc::new(
                        (0..rows)
                            .map(|r| (!f.is_nullable() || value(r) != 2).then_some(value(r) as f64))
                            .collect::<Float64Array>(),
                    ),
                    DataType::Boolean => Arc::new(
                        (0..rows)
                            .map(|r| (value(r) != 2).then_some(value(r) > 3))
                            .collect::<BooleanArray>(),
                    ),
                    DataType::List(_) => {
                        let mut b = ListBuilder::new(arrow::array::Int64Builder::new())
                            .with_field(Arc::new(Field::new("element", DataType::Int64, false)));
                        for r in 0..rows {
                            b.values().append_slice(&[value(r) as i64, 2]);
                            b.append(true);
                        }
                        Arc::new(b.finish())
                    }
                    other => panic!("no test values for {other}"),
                }
            })
            .collect();
        crate::schema::batch_as_given(&schema, columns).unwrap()
    }

    /// A collector of the statistics Delta's defaults ask for, for a file of `table`.
    pub(crate) fn collector(table: Table) -> StatsCollector {
        StatsCollector::new(&columns(table), &physical(table), table, Path::new("t"))
    }

    fn collect(batches: &[RecordBatch]) -> StructArray {
        let mut collector = collector(Table::Observations);
        for batch in batches {
            collector.merge(batch).unwrap();
        }
        collector.finish().unwrap().stats
    }

    #[test]
    fn dictionary_columns_give_the_statistics_of_their_strings() {
        let strings = [observations(100, 0, false), observations(50, 100, false)];
        let dictionaries = [observations(100, 0, true), observations(50, 100, true)];
        let expected = collect(&strings);
        assert_eq!(collect(&dictionaries), expected);
        // And the same as the kernel collects over all the rows at once.
        let all = arrow::compute::concat_batches(&strings[0].schema(), &strings).unwrap();
        let table = Table::Observations;
        let once = delta_kernel_default_engine::stats::collect_stats(
            &all,
            &columns(table),
            &physical(table),
        )
        .unwrap();
        assert_eq!(expected, once);
        // The rows were counted, and a site column's nulls too.
        let section = |name: &str| expected.column_by_name(name).unwrap().as_struct().clone();
        let records = expected.column_by_name(NUM_RECORDS).unwrap();
        assert_eq!(records.as_primitive::<Int64Type>().value(0), 150);
        let nulls = section(NULL_COUNT);
        let site_nulls = nulls.column_by_name("site_id").unwrap();
        assert!(site_nulls.as_primitive::<Int64Type>().value(0) > 0);
        let min = section(MIN_VALUES);
        assert_eq!(
            min.column_by_name("name")
                .unwrap()
                .as_string::<i32>()
                .value(0),
            "name-0"
        );
    }

    #[test]
    fn a_file_of_no_rows_has_statistics_of_no_rows() {
        let stats = collector(Table::Observations).finish().unwrap().stats;
        let records = stats.column_by_name(NUM_RECORDS).unwrap();
        assert_eq!(records.as_primitive::<Int64Type>().value(0), 0);
    }
}
