//! One part = one Parquet file of one table, written once and never rewritten.

use std::fs::File;
use std::path::Path;

use arrow::array::RecordBatch;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReaderBuilder, RowSelection};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::durable::{Committed, HashingFile};
use crate::error::{Result, StoreError};
use crate::schema::{Table, FORMAT_VERSION, KV_FORMAT_VERSION, KV_TABLE, RUNS};
use arrow::datatypes::SchemaRef;

/// Payload rows are up to 16 MiB each: a few per row group keeps a single payload read from
/// decoding unrelated chunks.
const PAYLOAD_ROWS_PER_GROUP: usize = 4;

fn properties(table_name: &str, is_payload: bool) -> Result<WriterProperties> {
    let level =
        ZstdLevel::try_new(3).map_err(|e| StoreError::invalid("zstd level", e.to_string()))?;
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_key_value_metadata(Some(vec![
            KeyValue::new(KV_FORMAT_VERSION.to_owned(), FORMAT_VERSION.to_string()),
            KeyValue::new(KV_TABLE.to_owned(), table_name.to_owned()),
        ]));
    if is_payload {
        // Statistics and dictionaries over raw tensor bytes cost space and buy nothing.
        let data = ColumnPath::from("data");
        builder = builder
            .set_max_row_group_row_count(Some(PAYLOAD_ROWS_PER_GROUP))
            .set_column_statistics_enabled(data.clone(), EnabledStatistics::None)
            .set_column_dictionary_enabled(data, false);
    }
    Ok(builder.build())
}

/// Writes `batch` to `target` through a hidden temporary file and renames it into place.
pub fn write_part(target: &Path, table: Table, batch: &RecordBatch) -> Result<Committed> {
    let props = properties(table.dir_name(), table == Table::Payloads)?;
    write_parquet(target, table.schema(), props, batch)
}

/// Writes the one-row run table (`run.parquet`), a view of the manifest.
pub fn write_run_table(target: &Path, batch: &RecordBatch) -> Result<Committed> {
    write_parquet(target, RUNS.clone(), properties("runs", false)?, batch)
}

fn write_parquet(
    target: &Path,
    schema: SchemaRef,
    props: WriterProperties,
    batch: &RecordBatch,
) -> Result<Committed> {
    let file = HashingFile::create(target)?;
    let temp = file.temp_path().to_path_buf();
    let parquet_err = |e: parquet::errors::ParquetError| StoreError::Io {
        path: temp.clone(),
        source: std::io::Error::other(e.to_string()),
    };
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).map_err(parquet_err)?;
    writer.write(batch).map_err(parquet_err)?;
    let file = writer.into_inner().map_err(parquet_err)?;
    file.commit()
}

fn open_builder(path: &Path, table: Table) -> Result<ParquetRecordBatchReaderBuilder<File>> {
    let file = File::open(path).map_err(StoreError::io(path))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| StoreError::corrupt(path)(e.to_string()))?;
    check_part_metadata(path, table, &builder)?;
    Ok(builder)
}

fn check_part_metadata(
    path: &Path,
    table: Table,
    builder: &ParquetRecordBatchReaderBuilder<File>,
) -> Result<()> {
    let kv = builder.metadata().file_metadata().key_value_metadata();
    let get = |key: &str| {
        kv.and_then(|kv| kv.iter().find(|e| e.key == key))
            .and_then(|e| e.value.clone())
    };
    let version: u32 = get(KV_FORMAT_VERSION)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| StoreError::corrupt(path)(format!("no {KV_FORMAT_VERSION} metadata")))?;
    if version > FORMAT_VERSION {
        return Err(StoreError::NewerFormat {
            path: path.to_path_buf(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if get(KV_TABLE).as_deref() != Some(table.dir_name()) {
        return Err(StoreError::corrupt(path)(format!(
            "not a part of the {} table",
            table.dir_name()
        )));
    }
    let expected = table.schema();
    let found = builder.schema();
    if found.fields().len() != expected.fields().len()
        || found
            .fields()
            .iter()
            .zip(expected.fields())
            .any(|(a, b)| a.name() != b.name() || a.data_type() != b.data_type())
    {
        return Err(StoreError::corrupt(path)(
            "its columns differ from the table's schema".into(),
        ));
    }
    Ok(())
}

fn collect(
    path: &Path,
    reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
) -> Result<Vec<RecordBatch>> {
    reader
        .map(|b| b.map_err(|e| StoreError::corrupt(path)(e.to_string())))
        .collect()
}

/// Reads a whole part with the table's schema.
pub fn read_part(path: &Path, table: Table) -> Result<Vec<RecordBatch>> {
    let reader = open_builder(path, table)?
        .build()
        .map_err(|e| StoreError::corrupt(path)(e.to_string()))?;
    collect(path, reader)
}

/// Reads only the named columns (by position in the table schema) of the selected rows.
pub fn read_part_columns(
    path: &Path,
    table: Table,
    columns: &[usize],
    rows: Option<RowSelection>,
) -> Result<Vec<RecordBatch>> {
    let builder = open_builder(path, table)?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), columns.iter().copied());
    let mut builder = builder.with_projection(mask);
    if let Some(rows) = rows {
        builder = builder.with_row_selection(rows);
    }
    let reader = builder
        .build()
        .map_err(|e| StoreError::corrupt(path)(e.to_string()))?;
    collect(path, reader)
}
