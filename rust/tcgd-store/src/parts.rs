//! One part = one Parquet file of one table and one run, written once and never
//! rewritten (compaction writes new files and retires the old ones).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::{
    ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
};
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory,
};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::{KeyValue, PageIndexPolicy};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesBuilder};
use parquet::file::reader::ChunkReader;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use rayon::prelude::*;

use crate::digest::content_digest;
use crate::durable::{Committed, HashingFile};
use crate::error::{Result, StoreError};
use crate::pool::{BufferPool, PooledFile};
use crate::schema::{Table, FORMAT_VERSION, KV_FORMAT_VERSION, KV_TABLE};
use arrow::datatypes::SchemaRef;

/// Payload rows are up to 16 MiB each: a few per row group keeps a single payload read from
/// decoding unrelated chunks.
const PAYLOAD_ROWS_PER_GROUP: usize = 4;

/// A row group's payload bytes are zstd-compressed only when a sample of them shrinks to at
/// most this fraction. Float tensors typically save under 10% and decompress at under
/// 1 GB/s on one core, which would make reading a run (and comparing runs) several times
/// slower than reading plain bytes; integer, boolean and sparse tensors save far more.
const COMPRESS_IF_SAMPLE_RATIO_AT_MOST: f64 = 0.8;
/// Samples per payload chunk and their size, spread over the chunk.
const SAMPLES_PER_CHUNK: usize = 4;
const SAMPLE_BYTES: usize = 16 << 10;

fn builder(table: Table) -> Result<WriterPropertiesBuilder> {
    let level =
        ZstdLevel::try_new(3).map_err(|e| StoreError::invalid("zstd level", e.to_string()))?;
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_key_value_metadata(Some(vec![
            KeyValue::new(KV_FORMAT_VERSION.to_owned(), FORMAT_VERSION.to_string()),
            KeyValue::new(KV_TABLE.to_owned(), table.dir_name().to_owned()),
        ]));
    // Numbers are stored plain (zstd still shrinks repeated ones): a dictionary hashes
    // every value, and the summary statistics (min, max, mean, std, l2) are nearly all
    // distinct, so it was a third of the time to encode an observations file, for a
    // larger file. Strings (names, sites, labels: few distinct values) keep theirs.
    for field in table.schema().fields() {
        if matches!(
            field.data_type(),
            DataType::Int64 | DataType::Float64 | DataType::Timestamp(..)
        ) {
            builder = builder
                .set_column_dictionary_enabled(ColumnPath::from(field.name().as_str()), false);
        }
    }
    Ok(builder)
}

fn properties(table: Table) -> Result<WriterProperties> {
    Ok(builder(table)?.build())
}

/// A payloads part's properties; `compress_data` decides the `data` column's codec.
fn payload_properties(compress_data: bool) -> Result<WriterProperties> {
    // Statistics and dictionaries over raw tensor bytes cost space and buy nothing.
    // One value per write batch lets the page size limit close a page after each large
    // chunk, so a chunk is one page and a read of one chunk skips the others.
    let data = ColumnPath::from("data");
    let mut builder = builder(Table::Payloads)?
        .set_max_row_group_row_count(Some(PAYLOAD_ROWS_PER_GROUP))
        .set_write_batch_size(1)
        .set_column_statistics_enabled(data.clone(), EnabledStatistics::None)
        .set_column_dictionary_enabled(data.clone(), false);
    if !compress_data {
        builder = builder.set_column_compression(data, Compression::UNCOMPRESSED);
    }
    Ok(builder.build())
}

/// Rows to write, and what else looks at them while they are encoded (the file's
/// statistics): called once per row group, on another thread than the encoding.
pub type RowObserver<'a> = &'a mut (dyn FnMut(&RecordBatch) -> Result<()> + Send);

/// Writes the rows of `chunks` (each one row group or more) to `target` through a hidden
/// temporary file and renames it into place; `observe` sees every row group. Chunks are
/// taken one at a time, so the rows never need to be in memory all at once.
pub fn write_part(
    target: &Path,
    table: Table,
    chunks: impl Iterator<Item = Result<RecordBatch>>,
    observe: RowObserver<'_>,
) -> Result<Committed> {
    if table == Table::Payloads {
        return write_payload_part(target, chunks, observe);
    }
    let props = properties(table)?;
    write_parquet(target, table.schema(), props, chunks, observe)
}

/// Writes a payloads part row group by row group: each group's data column is compressed
/// or stored plain after sampling it, and groups are encoded in parallel (zstd is the
/// slowest step of a commit), then appended in order.
fn write_payload_part(
    target: &Path,
    chunks: impl Iterator<Item = Result<RecordBatch>>,
    observe: RowObserver<'_>,
) -> Result<Committed> {
    let schema = Table::Payloads.schema();
    let file = HashingFile::create(target)?;
    let temp = file.temp_path().to_path_buf();
    let parquet_err = |e: parquet::errors::ParquetError| StoreError::Io {
        path: temp.clone(),
        source: std::io::Error::other(e.to_string()),
    };
    let compressed = payload_properties(true)?;
    let (mut file_writer, compressed_columns) =
        ArrowWriter::try_new(file, schema.clone(), Some(compressed))
            .and_then(ArrowWriter::into_serialized_writer)
            .map_err(parquet_err)?;
    // Column writers with the plain data column come from a writer of the same schema
    // that writes nowhere; their chunks are spliced into the real file's row groups.
    let plain = payload_properties(false)?;
    let (_, plain_columns) = ArrowWriter::try_new(std::io::sink(), schema.clone(), Some(plain))
        .and_then(ArrowWriter::into_serialized_writer)
        .map_err(parquet_err)?;

    let mut groups: Vec<RecordBatch> = Vec::new();
    for batch in chunks {
        let batch = batch?;
        observe(&batch)?;
        let rows = batch.num_rows();
        groups.extend(
            (0..rows)
                .step_by(PAYLOAD_ROWS_PER_GROUP)
                .map(|start| batch.slice(start, PAYLOAD_ROWS_PER_GROUP.min(rows - start))),
        );
    }
    // Encoded groups wait in memory until appended: a few per thread bounds that.
    let wave = 2 * rayon::current_num_threads().max(1);
    for (wave_no, wave_groups) in groups.chunks(wave).enumerate() {
        let encoded: Vec<Vec<ArrowColumnChunk>> = wave_groups
            .par_iter()
            .enumerate()
            .map(|(i, group)| {
                let factory = if sample_compresses(group) {
                    &compressed_columns
                } else {
                    &plain_columns
                };
                encode_row_group(factory, &schema, group, wave_no * wave + i)
            })
            .collect::<parquet::errors::Result<_>>()
            .map_err(parquet_err)?;
        for chunks in encoded {
            let mut row_group = file_writer.next_row_group().map_err(parquet_err)?;
            for chunk in chunks {
                chunk
                    .append_to_row_group(&mut row_group)
                    .map_err(parquet_err)?;
            }
            row_group.close().map_err(parquet_err)?;
        }
    }
    file_writer.into_inner().map_err(parquet_err)?.commit()
}

/// Rows a column writer is handed at once. Parquet's writer works out each column's levels
/// for all the rows it is handed (8 to 10 bytes a row for an optional column) before it
/// encodes them: handed in slices, those buffers are small and the next slice reuses
/// them, where a whole row group's would be fresh memory for every column (and fresh
/// memory is most of what encoding costs on a machine whose page faults are slow).
const ENCODE_SLICE_ROWS: usize = 4096;

/// The column writers of a row group. The tables here have one Parquet leaf per column
/// (no structs; a list is one leaf), so a column's writer is the one at its position.
fn column_writers(
    factory: &ArrowRowGroupWriterFactory,
    schema: &SchemaRef,
    index: usize,
) -> parquet::errors::Result<Vec<ArrowColumnWriter>> {
    let writers = factory.create_column_writers(index)?;
    if writers.len() != schema.fields().len() {
        return Err(parquet::errors::ParquetError::General(format!(
            "{} Parquet leaves for {} columns",
            writers.len(),
            schema.fields().len()
        )));
    }
    Ok(writers)
}

/// Adds `rows` to the row group of `writers`, its columns on the thread pool: columns are
/// independent, and encoding them (statistics, dictionaries, compression) is most of the
/// time a commit of many small rows takes.
fn encode_rows(
    writers: &mut [ArrowColumnWriter],
    schema: &SchemaRef,
    rows: &RecordBatch,
) -> parquet::errors::Result<()> {
    writers
        .par_iter_mut()
        .zip(schema.fields().par_iter())
        .zip(rows.columns().par_iter())
        .try_for_each(|((writer, field), column)| {
            for start in (0..column.len()).step_by(ENCODE_SLICE_ROWS) {
                let slice = column.slice(start, ENCODE_SLICE_ROWS.min(column.len() - start));
                for leaf in compute_leaves(field, &slice)? {
                    writer.write(&leaf)?;
                }
            }
            Ok(())
        })
}

/// Closes a row group's column writers (each flushes and compresses its last page).
fn close_writers(
    writers: Vec<ArrowColumnWriter>,
) -> parquet::errors::Result<Vec<ArrowColumnChunk>> {
    writers.into_par_iter().map(|w| w.close()).collect()
}

/// Encodes one row group.
fn encode_row_group(
    factory: &ArrowRowGroupWriterFactory,
    schema: &SchemaRef,
    group: &RecordBatch,
    index: usize,
) -> parquet::errors::Result<Vec<ArrowColumnChunk>> {
    let mut writers = column_writers(factory, schema, index)?;
    encode_rows(&mut writers, schema, group)?;
    close_writers(writers)
}

/// Whether zstd shrinks samples of the group's payload bytes enough to be worth its
/// decompression cost on every read.
fn sample_compresses(group: &RecordBatch) -> bool {
    let Some(data) = group
        .column_by_name("data")
        .and_then(|c| c.as_binary_opt::<i64>())
    else {
        return true;
    };
    let (mut sampled, mut compressed) = (0usize, 0usize);
    for value in data.iter().flatten() {
        let step = value.len() / SAMPLES_PER_CHUNK;
        for i in 0..SAMPLES_PER_CHUNK {
            let start = i * step;
            let sample = &value[start..(start + SAMPLE_BYTES).min(value.len())];
            if sample.is_empty() {
                continue;
            }
            sampled += sample.len();
            compressed += zstd::bulk::compress(sample, 1).map_or(sample.len(), |c| c.len());
            if step == 0 {
                break;
            }
        }
    }
    sampled == 0 || compressed as f64 <= COMPRESS_IF_SAMPLE_RATIO_AT_MOST * sampled as f64
}

fn write_parquet(
    target: &Path,
    schema: SchemaRef,
    props: WriterProperties,
    chunks: impl Iterator<Item = Result<RecordBatch>>,
    observe: RowObserver<'_>,
) -> Result<Committed> {
    let mut part = PartWriter::new(target, schema, props)?;
    for batch in chunks {
        part.write(&batch?, observe)?;
    }
    part.finish()
}

/// A Parquet part being written a batch at a time, each batch's columns encoded on the
/// thread pool. A row group takes rows from as many batches as it can hold (the table's
/// row group size), so batches bound the memory rows take, not the size of row groups.
/// Encoded pages wait in memory until their row group closes; `finish` writes the footer
/// and renames the file into place.
pub struct PartWriter {
    file: SerializedFileWriter<HashingFile>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    group_rows: usize,
    /// The open row group's writers and rows.
    open: Option<(Vec<ArrowColumnWriter>, usize)>,
    index: usize,
    temp: PathBuf,
}

impl PartWriter {
    /// A part of `table` (not `payloads`, whose rows are written by `write_part`) at
    /// `target`.
    pub fn create(target: &Path, table: Table) -> Result<PartWriter> {
        PartWriter::new(target, table.schema(), properties(table)?)
    }

    fn new(target: &Path, schema: SchemaRef, props: WriterProperties) -> Result<PartWriter> {
        let file = HashingFile::create(target)?;
        let temp = file.temp_path().to_path_buf();
        let group_rows = props.max_row_group_row_count().unwrap_or(usize::MAX).max(1);
        let (file, factory) = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .and_then(ArrowWriter::into_serialized_writer)
            .map_err(parquet_error(&temp))?;
        Ok(PartWriter {
            file,
            factory,
            schema,
            group_rows,
            open: None,
            index: 0,
            temp,
        })
    }

    /// The hidden temporary file being written.
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// Adds `batch` (the table's columns, or dictionaries of them); `observe` sees its rows
    /// while they are encoded.
    pub fn write(&mut self, batch: &RecordBatch, observe: RowObserver<'_>) -> Result<()> {
        let fail = parquet_error(&self.temp);
        let mut start = 0;
        while start < batch.num_rows() {
            let (writers, rows) = match &mut self.open {
                Some(open) => open,
                None => self.open.insert((
                    column_writers(&self.factory, &self.schema, self.index).map_err(&fail)?,
                    0,
                )),
            };
            let len = (self.group_rows - *rows).min(batch.num_rows() - start);
            let slice = batch.slice(start, len);
            let schema = &self.schema;
            let (encoded, observed) =
                rayon::join(|| encode_rows(writers, schema, &slice), || observe(&slice));
            observed?;
            encoded.map_err(&fail)?;
            *rows += len;
            start += len;
            if *rows == self.group_rows {
                self.close_row_group()?;
            }
        }
        Ok(())
    }

    fn close_row_group(&mut self) -> Result<()> {
        let Some((writers, _)) = self.open.take() else {
            return Ok(());
        };
        let fail = parquet_error(&self.temp);
        let mut row_group = self.file.next_row_group().map_err(&fail)?;
        for chunk in close_writers(writers).map_err(&fail)? {
            chunk.append_to_row_group(&mut row_group).map_err(&fail)?;
        }
        row_group.close().map_err(&fail)?;
        self.index += 1;
        Ok(())
    }

    /// Writes the footer, fsyncs and renames the file into place.
    pub fn finish(mut self) -> Result<Committed> {
        self.close_row_group()?;
        let fail = parquet_error(&self.temp);
        self.file.into_inner().map_err(fail)?.commit()
    }
}

fn parquet_error(temp: &Path) -> impl Fn(parquet::errors::ParquetError) -> StoreError {
    let temp = temp.to_path_buf();
    move |e| StoreError::Io {
        path: temp.clone(),
        source: std::io::Error::other(e.to_string()),
    }
}

fn open_builder(path: &Path, table: Table) -> Result<ParquetRecordBatchReaderBuilder<File>> {
    let file = File::open(path).map_err(StoreError::io(path))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| StoreError::corrupt(path)(e.to_string()))?;
    check_part_metadata(path, table, &builder, &table.schema())?;
    Ok(builder)
}

fn check_part_metadata<R: ChunkReader>(
    path: &Path,
    table: Table,
    builder: &ParquetRecordBatchReaderBuilder<R>,
    expected: &Schema,
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
    // Columns are only ever appended to a table, nullable, within one format version: a
    // part written before some were added holds the leading columns and reads with the
    // later ones null (see `with_added_columns`).
    let (found, wanted) = (builder.schema().fields(), expected.fields());
    let leading = found.len() <= wanted.len()
        && found
            .iter()
            .zip(wanted)
            .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
    if !leading || !wanted[found.len()..].iter().all(|f| f.is_nullable()) {
        return Err(StoreError::corrupt(path)(
            "its columns differ from the table's schema".into(),
        ));
    }
    Ok(())
}

/// A batch of a part written before the table's last columns were added, with those
/// columns as nulls: what a reader of the current schema sees.
fn with_added_columns(path: &Path, table: Table, batch: RecordBatch) -> Result<RecordBatch> {
    let schema = table.schema();
    if batch.num_columns() == schema.fields().len() {
        return Ok(batch);
    }
    let rows = batch.num_rows();
    let mut columns = batch.columns().to_vec();
    for field in &schema.fields()[batch.num_columns()..] {
        columns.push(arrow::array::new_null_array(field.data_type(), rows));
    }
    RecordBatch::try_new(schema, columns).map_err(|e| StoreError::corrupt(path)(e.to_string()))
}

fn collect(
    path: &Path,
    reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
) -> Result<Vec<RecordBatch>> {
    reader
        .map(|b| b.map_err(|e| StoreError::corrupt(path)(e.to_string())))
        .collect()
}

/// Every row of a part, with the table's schema (columns added since it was written are
/// null).
fn read_whole<R: ChunkReader + 'static>(
    path: &Path,
    table: Table,
    builder: ParquetRecordBatchReaderBuilder<R>,
) -> Result<Vec<RecordBatch>> {
    let reader = builder
        .build()
        .map_err(|e| StoreError::corrupt(path)(e.to_string()))?;
    collect(path, reader)?
        .into_iter()
        .map(|b| with_added_columns(path, table, b))
        .collect()
}

/// Reads a whole part with the table's schema.
pub fn read_part(path: &Path, table: Table) -> Result<Vec<RecordBatch>> {
    read_whole(path, table, open_builder(path, table)?)
}

/// Reads a whole part after checking that its bytes are the ones committed (`digest`, the
/// manifest's file digest): a part damaged in place, at its committed size, is an error
/// naming the file rather than wrong rows. The file is read once, hashed and decoded from
/// memory. `None` skips the check, for parts whose digest was just verified.
pub fn read_part_checked(
    path: &Path,
    table: Table,
    digest: Option<&str>,
) -> Result<Vec<RecordBatch>> {
    let Some(expected) = digest else {
        return read_part(path, table);
    };
    let bytes = std::fs::read(path).map_err(StoreError::io(path))?;
    let actual = content_digest(&bytes);
    if crate::layout::PartName::digest_prefix_of(&actual) != expected {
        return Err(StoreError::corrupt(path)(differs_from_committed(
            &actual, expected,
        )));
    }
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
        .map_err(|e| StoreError::corrupt(path)(e.to_string()))?;
    check_part_metadata(path, table, &builder, &table.schema())?;
    read_whole(path, table, builder)
}

/// The problem of a part whose file digest is not the committed one.
pub fn differs_from_committed(actual: &str, committed: &str) -> String {
    format!(
        "its bytes differ from the committed ones (file digest {actual}, committed {committed})"
    )
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

/// Reads the chunk columns (chunk index, count, total, data) of the selected payload rows.
/// The data column is decoded as a view array: its values stay in the buffers the pages
/// were read into (zero copies for plain pages), and pages of unselected rows are skipped
/// through the offset index without being read.
pub fn read_payload_chunks(
    path: &Path,
    rows: RowSelection,
    pool: &Arc<BufferPool>,
) -> Result<Vec<RecordBatch>> {
    let fields: Vec<Field> = Table::Payloads
        .schema()
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::LargeBinary => Field::new(f.name(), DataType::BinaryView, f.is_nullable()),
            _ => f.as_ref().clone(),
        })
        .collect();
    let viewed = Arc::new(Schema::new(fields));
    let options = ArrowReaderOptions::new()
        .with_schema(viewed.clone())
        .with_page_index_policy(PageIndexPolicy::Optional);
    let file = File::open(path)
        .and_then(|f| PooledFile::new(f, Arc::clone(pool)))
        .map_err(StoreError::io(path))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(file, options)
        .map_err(|e| StoreError::corrupt(path)(e.to_string()))?;
    check_part_metadata(path, Table::Payloads, &builder, &viewed)?;
    // chunk_index, chunk_count, total_nbytes, data (after run_id and digest).
    let mask = ProjectionMask::roots(builder.parquet_schema(), [2, 3, 4, 5]);
    let reader = builder
        .with_projection(mask)
        .with_row_selection(rows)
        .build()
        .map_err(|e| StoreError::corrupt(path)(e.to_string()))?;
    collect(path, reader)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{new_null_array, Array, BooleanArray, Int64Array, StringArray};

    /// A part of `table` as a writer of an earlier build wrote it: the schema without its
    /// last `dropped` columns, three rows (ones, "x", true, or null where allowed).
    fn older_part(dir: &Path, table: Table, dropped: usize) -> (std::path::PathBuf, String) {
        let full = table.schema();
        let kept = &full.fields()[..full.fields().len() - dropped];
        let (fields, columns): (Vec<Field>, Vec<arrow::array::ArrayRef>) = kept
            .iter()
            .map(|f| {
                let column: arrow::array::ArrayRef = match f.data_type() {
                    _ if f.is_nullable() => new_null_array(f.data_type(), 3),
                    DataType::Int64 => Arc::new(Int64Array::from(vec![1; 3])),
                    DataType::Utf8 => Arc::new(StringArray::from(vec!["x"; 3])),
                    DataType::Boolean => Arc::new(BooleanArray::from(vec![true; 3])),
                    other => {
                        let nullable = f.as_ref().clone().with_nullable(true);
                        return (nullable, new_null_array(other, 3));
                    }
                };
                (f.as_ref().clone(), column)
            })
            .unzip();
        let schema = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
        let path = dir.join("older.parquet");
        let props = properties(table).unwrap();
        write_parquet(
            &path,
            schema,
            props,
            std::iter::once(Ok(batch)),
            &mut |_| Ok(()),
        )
        .unwrap();
        let digest = content_digest(&std::fs::read(&path).unwrap());
        (path, crate::layout::PartName::digest_prefix_of(&digest))
    }

    #[test]
    fn a_part_written_before_columns_were_added_reads_them_as_null() {
        let dir = tempfile::tempdir().unwrap();
        let table = Table::MemoryDevices;
        let (path, digest) = older_part(dir.path(), table, 6);
        for batches in [
            read_part(&path, table).unwrap(),
            read_part_checked(&path, table, Some(&digest)).unwrap(),
        ] {
            let batch = &batches[0];
            assert_eq!(batch.schema().fields(), table.schema().fields());
            assert_eq!(batch.num_rows(), 3);
            let added = batch.column_by_name("peak_since_previous_point").unwrap();
            assert_eq!(added.null_count(), 3);
        }
    }

    #[test]
    fn a_part_missing_a_required_column_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        // The points table's last column is not nullable: a part without it is not one of
        // an earlier build, it is damaged.
        let table = Table::Points;
        assert!(!table.schema().fields().last().unwrap().is_nullable());
        let (path, _) = older_part(dir.path(), table, 1);
        let error = read_part(&path, table).unwrap_err().to_string();
        assert!(
            error.contains("columns differ from the table's schema"),
            "{error}"
        );
    }
}
