//! The `observations` file of the group being gathered, written while its points arrive.
//!
//! A point's rows go into a block of columns (one vector per column, reserved whole, so
//! nothing is copied while it fills). A full block is encoded into the group's Parquet file
//! on the thread pool while the writer thread takes the next points, one block at a time and
//! in order; the block's vectors then come back to be filled again, so a steady stream of
//! points reuses the same memory. The group commit only encodes the last, partial block and
//! finishes the file: the commit of a group costs little more than that of one block.
//!
//! What stays the same at a site (name, dtype, shape, stride, device, location) is kept once
//! per block, and rows hold its index: the site's strings reach Parquet as dictionaries (see
//! [`Block::into_batch`]), never as one copy per row.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, AsArray, BooleanArray, BooleanBufferBuilder, DictionaryArray, Float64Array,
    Int64Array, PrimitiveArray, RecordBatch, StringArray, StringBuilder, UInt32Array,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{ArrowPrimitiveType, Float64Type, Int64Type, UInt32Type};

use super::rows::{int64_lists, Digested};
use crate::delta::{FileStats, StatsCollector};
use crate::durable::Committed;
use crate::error::{Result, StoreError};
use crate::parts::PartWriter;
use crate::record::{PayloadKind, SiteFacts, SiteLocation};
use crate::schema::{batch_as_given, Table};

/// Rows of a block. A block is what the thread pool encodes at once while the writer thread
/// fills the next one: small enough that the work of a group is spread over its interval,
/// large enough that each hand-over is cheap next to its encoding. Every block is a row
/// group whose columns each start a zstd stream, and a stream's setup (its tables, a few
/// hundred KiB cleared per column) cost as much as the encoding at 16,384 rows: 65,536
/// rows (about 2,300 points of 28 summaries, some 10 MiB in memory) took the writer from
/// about 48,000 to 56,000 points per second on two cores.
const BLOCK_ROWS: usize = 1 << 16;

/// The values of `payload`, in the order rows refer to them.
const PAYLOAD_KINDS: [PayloadKind; 2] = [PayloadKind::Full, PayloadKind::Summary];

/// The integer columns a block keeps, by their names in the table.
const INT_COLUMNS: [&str; 10] = [
    "point_index",
    "ordinal",
    "invocation_index",
    "nbytes",
    "numel",
    "finite_count",
    "nan_count",
    "posinf_count",
    "neginf_count",
    "zero_count",
];
/// The float columns a block keeps (`min`, `max`, `mean`, `std` null when a value has no
/// finite element; `l2` never).
const FLOAT_COLUMNS: [&str; 5] = ["min", "max", "mean", "std", "l2"];

/// Hashes an `Arc`'s address (the key `Block::site_of` finds a site by): an address is
/// already unique, so spreading its bits is all a hash has to do.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, address: usize) {
        self.0 = (address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

/// Up to `BLOCK_ROWS` observation rows, column by column.
struct Block {
    /// The block's distinct site facts; `site_of` finds an `Arc` among them by address (the
    /// same `Arc` is the same site: the device recorder hands the same facts to every point;
    /// `sites` holds a clone of each, so no address is reused while the block lives).
    sites: Vec<Arc<SiteFacts>>,
    site_of: HashMap<usize, u32, BuildHasherDefault<AddressHasher>>,
    /// The labels of the block's points, and the index of the last one (a point's rows
    /// may go on in the next block).
    labels: Vec<String>,
    last_point: Option<u64>,
    /// Per row: its site (in `sites`), its point (in `labels`), its payload kind (in
    /// `PAYLOAD_KINDS`), then the table's own columns.
    site: Vec<u32>,
    point: Vec<u32>,
    payload: Vec<u32>,
    ints: [Vec<i64>; INT_COLUMNS.len()],
    floats: [Vec<f64>; FLOAT_COLUMNS.len()],
    /// Which of `min`, `max`, `mean`, `std` are known, per row.
    known: [BooleanBufferBuilder; 4],
    unknown: [usize; 4],
    digest: StringBuilder,
}

impl Block {
    fn new() -> Block {
        Block::with_columns(
            [(); 3].map(|()| Vec::with_capacity(BLOCK_ROWS)),
            [(); INT_COLUMNS.len()].map(|()| Vec::with_capacity(BLOCK_ROWS)),
            [(); FLOAT_COLUMNS.len()].map(|()| Vec::with_capacity(BLOCK_ROWS)),
        )
    }

    /// A block with nothing reserved: what stands in for one taken away.
    fn empty() -> Block {
        Block::with_columns(Default::default(), Default::default(), Default::default())
    }

    fn with_columns(
        [site, point, payload]: [Vec<u32>; 3],
        ints: [Vec<i64>; INT_COLUMNS.len()],
        floats: [Vec<f64>; FLOAT_COLUMNS.len()],
    ) -> Block {
        Block {
            sites: Vec::new(),
            site_of: HashMap::default(),
            labels: Vec::new(),
            last_point: None,
            site,
            point,
            payload,
            ints,
            floats,
            known: [(); 4].map(|()| BooleanBufferBuilder::new(BLOCK_ROWS)),
            unknown: [0; 4],
            digest: StringBuilder::with_capacity(BLOCK_ROWS, 0),
        }
    }

    fn len(&self) -> usize {
        self.site.len()
    }

    fn is_empty(&self) -> bool {
        self.site.is_empty()
    }

    /// The index of `facts` among the block's sites, added when new.
    fn site_index(&mut self, facts: &Arc<SiteFacts>) -> u32 {
        let next = self.sites.len() as u32;
        let index = *self
            .site_of
            .entry(Arc::as_ptr(facts) as usize)
            .or_insert(next);
        if index == next {
            self.sites.push(Arc::clone(facts));
        }
        index
    }

    fn push(&mut self, point_index: u64, label: &str, d: &Digested<'_>) {
        if self.last_point != Some(point_index) {
            self.labels.push(label.to_owned());
            self.last_point = Some(point_index);
        }
        let site = self.site_index(&d.input.facts);
        let s = &d.summary;
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.site.push(site);
        self.point.push(self.labels.len() as u32 - 1);
        self.payload
            .push(u32::from(d.input.payload == PayloadKind::Summary));
        let ints = [
            point_index as i64,
            d.input.order,
            d.input.invocation_index,
            d.nbytes,
            count(s.numel),
            count(s.finite_count),
            count(s.nan_count),
            count(s.pos_inf_count),
            count(s.neg_inf_count),
            count(s.zero_count),
        ];
        for (column, value) in self.ints.iter_mut().zip(ints) {
            column.push(value);
        }
        for (k, value) in [s.min, s.max, s.mean, s.std].into_iter().enumerate() {
            self.floats[k].push(value.unwrap_or(0.0));
            self.known[k].append(value.is_some());
            self.unknown[k] += usize::from(value.is_none());
        }
        self.floats[4].push(s.l2_norm);
        self.digest.append_option(d.digest.as_deref());
    }

    /// The block as a batch of the table's columns. Strings picked per row from a few
    /// values (a site's, a point's label, the payload kind, the run id) are dictionaries of
    /// those values: Parquet writes such a column as it writes the strings (dictionary-
    /// encoded, as it encodes every string column; readers see strings), and the file's
    /// statistics come from the distinct values (see `stats.rs`). Booleans and lists, which
    /// Parquet takes only as such, are gathered per row.
    fn into_batch(self, run_id: &str) -> Result<RecordBatch> {
        let Block {
            sites,
            labels,
            site,
            point,
            payload,
            ints,
            floats,
            mut known,
            unknown,
            mut digest,
            ..
        } = self;
        let rows = site.len();
        let site = UInt32Array::from(site);
        let (mut point, mut payload) = (Some(point), Some(payload));
        let strings = |values: StringArray, keys: &UInt32Array| -> ArrayRef {
            Arc::new(DictionaryArray::new(keys.clone(), Arc::new(values)))
        };
        let site_strings = |f: &dyn Fn(&SiteFacts) -> Option<&str>| -> ArrayRef {
            strings(sites.iter().map(|s| f(s)).collect(), &site)
        };
        let gather = |values: ArrayRef| -> Result<ArrayRef> {
            arrow::compute::take(&values, &site, None)
                .map_err(|e| StoreError::invalid("observations", e.to_string()))
        };
        let mut ints = ints.map(|v| Some(Arc::new(Int64Array::from(v)) as ArrayRef));
        let mut floats: Vec<Option<ArrayRef>> = floats
            .into_iter()
            .enumerate()
            .map(|(k, values)| {
                let nulls = (k < 4 && unknown[k] > 0).then(|| NullBuffer::new(known[k].finish()));
                Some(Arc::new(Float64Array::new(values.into(), nulls)) as ArrayRef)
            })
            .collect();
        let schema = Table::Observations.schema();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for field in schema.fields() {
            let name = field.name().as_str();
            let column = if let Some(k) = INT_COLUMNS.iter().position(|c| *c == name) {
                ints[k].take().expect("each column once")
            } else if let Some(k) = FLOAT_COLUMNS.iter().position(|c| *c == name) {
                floats[k].take().expect("each column once")
            } else if let Some(k) = SiteLocation::COLUMNS.iter().position(|c| *c == name) {
                site_strings(&|s| s.site.column_values()[k].as_deref())
            } else {
                match name {
                    "run_id" => strings(
                        [Some(run_id)].into_iter().collect(),
                        &UInt32Array::from(vec![0; rows]),
                    ),
                    "point_label" => strings(
                        labels.iter().map(|l| Some(l.as_str())).collect(),
                        &UInt32Array::from(point.take().unwrap_or_default()),
                    ),
                    "name" => site_strings(&|s| Some(&s.name)),
                    "dtype" => site_strings(&|s| Some(s.dtype.torch_name())),
                    "source_device" => site_strings(&|s| Some(&s.source_device)),
                    "payload" => strings(
                        PAYLOAD_KINDS.iter().map(|p| Some(p.as_str())).collect(),
                        &UInt32Array::from(payload.take().unwrap_or_default()),
                    ),
                    "materialized_by_probe" => gather(Arc::new(
                        sites
                            .iter()
                            .map(|s| s.site.materialized_by_probe)
                            .collect::<BooleanArray>(),
                    ))?,
                    "shape" => gather(int64_lists(sites.iter().map(|s| s.shape.as_slice())))?,
                    "stride" => gather(int64_lists(sites.iter().map(|s| s.stride.as_slice())))?,
                    "digest" => Arc::new(digest.finish()),
                    other => {
                        return Err(StoreError::invalid(
                            "observations",
                            format!("no rows for the column '{other}'"),
                        ))
                    }
                }
            };
            columns.push(column);
        }
        // The table's columns, those of strings as dictionaries of them.
        batch_as_given(&schema, columns)
    }

    /// A block to fill again from the columns of an encoded one: the vectors `batch`'s
    /// arrays were made of, where nothing else holds them any more (fresh ones otherwise).
    fn reclaim(batch: RecordBatch) -> Block {
        fn primitive<T: ArrowPrimitiveType>(
            batch: &RecordBatch,
            name: &str,
        ) -> Option<PrimitiveArray<T>> {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_primitive_opt::<T>())
                .cloned()
        }
        fn keys(batch: &RecordBatch, name: &str) -> Option<UInt32Array> {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_dictionary_opt::<UInt32Type>())
                .map(|d| d.keys().clone())
        }
        fn vector<T: ArrowPrimitiveType>(array: Option<PrimitiveArray<T>>) -> Vec<T::Native> {
            array
                .and_then(|a| a.into_parts().1.into_inner().into_vec().ok())
                .map(|mut v: Vec<T::Native>| {
                    v.clear();
                    v
                })
                .unwrap_or_else(|| Vec::with_capacity(BLOCK_ROWS))
        }
        let keys = [
            keys(&batch, "name"),
            keys(&batch, "point_label"),
            keys(&batch, "payload"),
        ];
        let ints = INT_COLUMNS.map(|c| primitive::<Int64Type>(&batch, c));
        let floats = FLOAT_COLUMNS.map(|c| primitive::<Float64Type>(&batch, c));
        // The batch's other arrays share these vectors: only once it is gone is each
        // vector held here alone.
        drop(batch);
        Block::with_columns(keys.map(vector), ints.map(vector), floats.map(vector))
    }
}

/// The file being written and its statistics: with the writer thread while no block is
/// being encoded, with the thread pool while one is.
struct Encoder {
    part: PartWriter,
    stats: StatsCollector,
}

impl Encoder {
    /// Encodes `block` into the file (its statistics collected meanwhile) and returns its
    /// columns to fill again.
    fn encode(&mut self, block: Block, run_id: &str) -> Result<Block> {
        let batch = block.into_batch(run_id)?;
        let stats = &mut self.stats;
        self.part.write(&batch, &mut |rows| stats.merge(rows))?;
        Ok(Block::reclaim(batch))
    }
}

type Encoded = (Encoder, Result<Block>);

pub(super) struct ObservationStream {
    run_id: Arc<str>,
    /// Where the finished part is (under `_staging/`).
    target: PathBuf,
    /// The hidden file the part is written to, until it is finished.
    temp: PathBuf,
    /// Here while no block is being encoded.
    encoder: Option<Encoder>,
    /// Where the block being encoded comes back from.
    busy: Option<Receiver<Encoded>>,
    block: Block,
    spare: Option<Block>,
}

impl ObservationStream {
    /// A stream whose part is written to `target` (under `_staging/`).
    pub(super) fn open(target: &Path, run_id: &str, stats: StatsCollector) -> Result<Self> {
        let part = PartWriter::create(target, Table::Observations)?;
        Ok(ObservationStream {
            run_id: Arc::from(run_id),
            target: target.to_path_buf(),
            temp: part.temp_path().to_path_buf(),
            encoder: Some(Encoder { part, stats }),
            busy: None,
            block: Block::new(),
            spare: None,
        })
    }

    /// Adds the rows of a point: a block that fills is handed to the thread pool.
    pub(super) fn push_point(
        &mut self,
        point_index: u64,
        label: &str,
        rows: &[Digested<'_>],
    ) -> Result<()> {
        for d in rows {
            if self.block.len() == BLOCK_ROWS {
                self.hand_over()?;
            }
            self.block.push(point_index, label, d);
        }
        Ok(())
    }

    /// Waits for the block being encoded, if any: its encoder and columns come back.
    fn wait(&mut self) -> Result<()> {
        let Some(busy) = self.busy.take() else {
            return Ok(());
        };
        let (encoder, block) = busy.recv().map_err(|_| StoreError::Io {
            path: self.temp.clone(),
            source: std::io::Error::other("the encoding of observations stopped"),
        })?;
        self.encoder = Some(encoder);
        self.spare = Some(block?);
        Ok(())
    }

    /// Hands the full block to the thread pool (after the one before it is done: blocks
    /// are encoded in order) and starts the next.
    fn hand_over(&mut self) -> Result<()> {
        self.wait()?;
        let next = self.spare.take().unwrap_or_else(Block::new);
        let block = std::mem::replace(&mut self.block, next);
        let mut encoder = self.encoder.take().expect("no block is being encoded");
        let run_id = Arc::clone(&self.run_id);
        if rayon::current_thread_index().is_some() {
            // The writer runs on a thread of the pool itself: waiting there for a task of
            // the pool could wait forever (a pool of one thread), so the block is encoded
            // right here.
            let block = encoder.encode(block, &run_id);
            self.encoder = Some(encoder);
            self.spare = Some(block?);
            return Ok(());
        }
        let (done, busy) = sync_channel(1);
        rayon::spawn(move || {
            let block = encoder.encode(block, &run_id);
            let _ = done.send((encoder, block));
        });
        self.busy = Some(busy);
        Ok(())
    }

    /// Encodes what is left and finishes the file: fsynced and renamed to its target, which
    /// is returned with its bytes and statistics.
    pub(super) fn finish(mut self) -> Result<(PathBuf, Committed, FileStats)> {
        self.wait()?;
        let block = std::mem::replace(&mut self.block, Block::empty());
        let mut encoder = self.encoder.take().expect("no block is being encoded");
        let finished = (|| {
            if !block.is_empty() {
                encoder.encode(block, &self.run_id)?;
            }
            let written = encoder.part.finish()?;
            Ok((self.target.clone(), written, encoder.stats.finish()?))
        })();
        if finished.is_err() {
            let _ = std::fs::remove_file(&self.temp);
        }
        finished
    }
}

impl Drop for ObservationStream {
    /// A stream dropped unfinished (its group was not committed) leaves no file behind.
    fn drop(&mut self) {
        let _ = self.wait();
        if self.encoder.take().is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ObservationInput, Site, Value};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use tcgd_tensor::{DType, TensorSummary};

    fn summary(numel: u64, min: Option<f64>) -> TensorSummary {
        TensorSummary {
            numel,
            finite_count: numel,
            min,
            max: Some(2.0),
            mean: Some(1.0),
            std: Some(0.5),
            l2_norm: 3.0,
            nan_count: 0,
            pos_inf_count: 0,
            neg_inf_count: 0,
            zero_count: 0,
        }
    }

    /// The Parquet columns of a part: name, physical type, logical type, repetition.
    fn parquet_columns(path: &Path) -> Vec<String> {
        let file = std::fs::File::open(path).unwrap();
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        builder
            .parquet_schema()
            .columns()
            .iter()
            .map(|c| {
                let t = c.self_type();
                format!(
                    "{} {:?} {:?} {:?}",
                    c.path(),
                    c.physical_type(),
                    c.logical_type_ref(),
                    t.get_basic_info().repetition()
                )
            })
            .collect()
    }

    #[test]
    fn a_streamed_part_reads_as_one_written_from_its_strings() {
        let tmp = tempfile::tempdir().unwrap();
        let sites: Vec<Arc<SiteFacts>> = (0..3)
            .map(|i| {
                let site = Site {
                    module_path: (i != 1).then(|| format!("layers.{i}")),
                    ..Site::default()
                };
                Arc::new(SiteFacts {
                    name: format!("v{i}"),
                    dtype: DType::Float32,
                    shape: vec![i + 1],
                    stride: vec![1],
                    source_device: "cpu".into(),
                    site,
                })
            })
            .collect();
        let target = tmp.path().join("streamed.parquet");
        let collector = crate::stats::tests::collector(Table::Observations);
        let mut stream = ObservationStream::open(&target, "run", collector).unwrap();
        // More points than a block holds, so blocks are handed over and encoded meanwhile.
        let points = BLOCK_ROWS / 3 + 5;
        for p in 0..points {
            let inputs: Vec<ObservationInput<'_>> = sites
                .iter()
                .enumerate()
                .map(|(i, facts)| ObservationInput {
                    facts: Arc::clone(facts),
                    order: i as i64,
                    invocation_index: 0,
                    payload: PayloadKind::Summary,
                    value: Value::Summary(summary(i as u64 + 1, (i != 2).then_some(p as f64))),
                })
                .collect();
            let rows: Vec<Digested<'_>> = inputs
                .iter()
                .map(|input| super::super::rows::digest_observation(input).unwrap())
                .collect();
            stream
                .push_point(p as u64, &format!("p{p}"), &rows)
                .unwrap();
        }
        let (written, _, stats) = stream.finish().unwrap();
        assert_eq!(written, target);
        let records = stats.stats.column_by_name("numRecords").unwrap();
        assert_eq!(
            records.as_primitive::<Int64Type>().value(0),
            3 * points as i64
        );
        let streamed = crate::parts::read_part(&target, Table::Observations).unwrap();
        let streamed =
            arrow::compute::concat_batches(&Table::Observations.schema(), &streamed).unwrap();
        assert_eq!(streamed.num_rows(), 3 * points);

        // The same rows as strings, through the path every other batch takes (as before
        // observations were streamed, and as compaction rewrites them).
        let plain = tmp.path().join("plain.parquet");
        crate::parts::write_part(
            &plain,
            Table::Observations,
            std::iter::once(Ok(streamed.clone())),
            &mut |_| Ok(()),
        )
        .unwrap();
        let reread = crate::parts::read_part(&plain, Table::Observations).unwrap();
        let reread =
            arrow::compute::concat_batches(&Table::Observations.schema(), &reread).unwrap();
        assert_eq!(reread, streamed);
        assert_eq!(parquet_columns(&target), parquet_columns(&plain));
        let names = streamed.column_by_name("name").unwrap().as_string::<i32>();
        let labels = streamed
            .column_by_name("point_label")
            .unwrap()
            .as_string::<i32>();
        let modules = streamed.column_by_name("module_path").unwrap();
        for row in [0, 1, 2, 3 * points - 1] {
            assert_eq!(names.value(row), format!("v{}", row % 3));
            assert_eq!(labels.value(row), format!("p{}", row / 3));
            assert_eq!(modules.is_null(row), row % 3 == 1);
        }
    }

    #[test]
    fn an_unfinished_stream_leaves_no_file() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("dropped.parquet");
        let collector = crate::stats::tests::collector(Table::Observations);
        let stream = ObservationStream::open(&target, "run", collector).unwrap();
        drop(stream);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }
}
