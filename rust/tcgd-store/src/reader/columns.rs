//! Typed access to the columns of a table's rows, by name: how every reader of a run's
//! batches (the store's points and observation rows) gets its arrays.

use std::path::Path;

use arrow::array::StringArray;
use arrow::array::{Array, AsArray, BooleanArray, Float64Array, Int64Array, RecordBatch};
use arrow::datatypes::{Float64Type, Int64Type};

use crate::error::{Result, StoreError};

/// The columns of one batch of a run's rows read from `dir`; a missing column or one of
/// another type is a damaged part of that run.
pub struct Columns<'a> {
    dir: &'a Path,
    batch: &'a RecordBatch,
}

impl<'a> Columns<'a> {
    pub fn new(dir: &'a Path, batch: &'a RecordBatch) -> Self {
        Columns { dir, batch }
    }

    pub fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// The error for a column `name` that is missing or of the wrong type.
    pub fn bad(&self, name: &str) -> StoreError {
        StoreError::CorruptPart {
            path: self.dir.to_path_buf(),
            reason: format!("column '{name}' is missing or has the wrong type"),
        }
    }

    pub fn column(&self, name: &str) -> Result<&'a dyn Array> {
        self.batch
            .column_by_name(name)
            .map(|c| c.as_ref())
            .ok_or_else(|| self.bad(name))
    }

    pub fn strings(&self, name: &str) -> Result<&'a StringArray> {
        self.column(name)?
            .as_string_opt::<i32>()
            .ok_or_else(|| self.bad(name))
    }

    pub fn ints(&self, name: &str) -> Result<&'a Int64Array> {
        self.column(name)?
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| self.bad(name))
    }

    pub fn floats(&self, name: &str) -> Result<&'a Float64Array> {
        self.column(name)?
            .as_primitive_opt::<Float64Type>()
            .ok_or_else(|| self.bad(name))
    }

    pub fn booleans(&self, name: &str) -> Result<&'a BooleanArray> {
        self.column(name)?
            .as_boolean_opt()
            .ok_or_else(|| self.bad(name))
    }

    /// A list<int64> column (shapes, strides), one vector per row.
    pub fn int_lists(&self, name: &str) -> Result<Vec<Vec<i64>>> {
        let lists = self
            .column(name)?
            .as_list_opt::<i32>()
            .ok_or_else(|| self.bad(name))?;
        (0..lists.len())
            .map(|i| {
                let item = lists.value(i);
                let values = item
                    .as_primitive_opt::<Int64Type>()
                    .ok_or_else(|| self.bad(name))?;
                Ok(values.values().to_vec())
            })
            .collect()
    }
}
