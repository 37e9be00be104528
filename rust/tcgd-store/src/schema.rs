//! Arrow schemas of the run tables: the one definition every writer, reader and query
//! relies on. `docs/storage.md` documents each column; keep the two in step.

use std::sync::{Arc, LazyLock};

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow_schema::extension::Json;

use crate::error::{Result, StoreError};
use crate::record::SiteLocation;

/// Version of the on-disk layout. Readers refuse a newer one; version 1 (run directories
/// with a `run.json`) is refused with an error saying what it is.
pub const FORMAT_VERSION: u32 = 2;
/// Name carried by the facts a reader hands to Python (`Manifest::to_json`).
pub const SCHEMA_NAME: &str = "torch-cudagraph-debug/run";
/// Parquet key-value metadata keys written into every part.
pub const KV_FORMAT_VERSION: &str = "tcgd.format_version";
pub const KV_TABLE: &str = "tcgd.table";

/// Position of `digest` in the payloads table (after `run_id`).
pub const PAYLOAD_DIGEST_COLUMN: usize = 1;

/// Tensor payloads are split into chunks of this size: Parquet byte arrays stop at 2 GiB,
/// and smaller chunks keep reader memory bounded and row groups scannable.
pub const PAYLOAD_CHUNK_BYTES: usize = 16 << 20;

/// Declares [`Table`] from one list of its tables: the variant, its directory name and its
/// schema, so that adding a table is one line.
macro_rules! tables {
    ($($(#[$doc:meta])* $variant:ident => $dir:literal, $schema:ident;)*) => {
        /// The tables of a job root, each a Delta table in its own directory.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Table {
            $($(#[$doc])* $variant,)*
        }

        impl Table {
            pub const ALL: [Table; [$($dir),*].len()] = [$(Table::$variant),*];

            pub fn dir_name(self) -> &'static str {
                match self {
                    $(Table::$variant => $dir,)*
                }
            }

            pub fn schema(self) -> SchemaRef {
                match self {
                    $(Table::$variant => $schema.clone(),)*
                }
            }
        }
    };
}

tables! {
    /// One row per run: its identity, status and provenance.
    Runs => "runs", RUNS;
    Points => "points", POINTS;
    Observations => "observations", OBSERVATIONS;
    Payloads => "payloads", PAYLOADS;
    MemoryPoints => "memory_points", MEMORY_POINTS;
    MemoryDevices => "memory_devices", MEMORY_DEVICES;
    MemoryStats => "memory_stats", MEMORY_STATS;
    MemorySegments => "memory_segments", MEMORY_SEGMENTS;
    MemoryBlocks => "memory_blocks", MEMORY_BLOCKS;
    MemoryEvents => "memory_events", MEMORY_EVENTS;
    MemoryFrames => "memory_frames", MEMORY_FRAMES;
    MemoryStacks => "memory_stacks", MEMORY_STACKS;
    /// What owns each private pool at a point (Graph Trees, a captured graph, a MemPool).
    MemoryPoolOwners => "memory_pool_owners", MEMORY_POOL_OWNERS;
}

impl Table {
    /// The tables of a tensor run.
    pub const TENSOR: [Table; 3] = [Table::Points, Table::Observations, Table::Payloads];
    /// The tables of a memory run: `points` is shared, so that every run answers the same
    /// "which points are committed" query.
    pub const MEMORY: [Table; 10] = [
        Table::Points,
        Table::MemoryPoints,
        Table::MemoryDevices,
        Table::MemoryStats,
        Table::MemorySegments,
        Table::MemoryBlocks,
        Table::MemoryEvents,
        Table::MemoryFrames,
        Table::MemoryStacks,
        Table::MemoryPoolOwners,
    ];

    pub fn from_dir_name(name: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.dir_name() == name)
    }
}

// Column constructors, one per Arrow type the tables use. A column is required (never
// null) unless wrapped in `nullable`.

fn utf8(name: &str) -> Field {
    Field::new(name, DataType::Utf8, false)
}

fn int64(name: &str) -> Field {
    Field::new(name, DataType::Int64, false)
}

fn float64(name: &str) -> Field {
    Field::new(name, DataType::Float64, false)
}

fn boolean(name: &str) -> Field {
    Field::new(name, DataType::Boolean, false)
}

/// Microseconds since the Unix epoch, in UTC.
fn timestamp(name: &str) -> Field {
    let utc_micros = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    Field::new(name, utc_micros, false)
}

/// A JSON text column: Parquet's JSON logical type, so engines know to parse it.
fn json(name: &str) -> Field {
    utf8(name).with_extension_type(Json::default())
}

fn list_of(name: &str, element: DataType) -> Field {
    let element = Arc::new(Field::new("element", element, false));
    Field::new(name, DataType::List(element), false)
}

fn int64_list(name: &str) -> Field {
    list_of(name, DataType::Int64)
}

fn utf8_list(name: &str) -> Field {
    list_of(name, DataType::Utf8)
}

fn nullable(column: Field) -> Field {
    column.with_nullable(true)
}

fn schema(columns: Vec<Field>) -> SchemaRef {
    Arc::new(Schema::new(columns))
}

/// One row per run (the `runs` table): identity, status and provenance, so a query over a
/// job root sees every run of every rank.
pub static RUNS: LazyLock<SchemaRef> = LazyLock::new(|| {
    schema(vec![
        utf8("run_id"),
        utf8("name"),
        utf8("kind"),
        utf8("execution"),
        nullable(utf8("group_id")),
        nullable(int64("world_size")),
        timestamp("created_at"),
        nullable(timestamp("finished_at")),
        boolean("complete"),
        int64("point_count"),
        int64("format_version"),
        utf8("producer"),
        json("provenance"),
        json("run_metadata"),
    ])
});

/// One row per committed point.
pub static POINTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    schema(vec![
        utf8("run_id"),
        int64("point_index"),
        utf8("label"),
        timestamp("timestamp"),
        nullable(int64("replay_index")),
        int64("observation_count"),
        json("metadata"),
    ])
});

/// One row per observed tensor value. Payload bytes live in `payloads` so that metadata
/// queries never read tensor bytes; the summary columns are always present.
pub static OBSERVATIONS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let site = SiteLocation::COLUMNS.map(|c| nullable(utf8(c)));
    let columns = [
        utf8("run_id"),
        int64("point_index"),
        utf8("point_label"),
        int64("ordinal"),
        utf8("name"),
        int64("invocation_index"),
    ]
    .into_iter()
    .chain(site)
    .chain([
        nullable(boolean("materialized_by_probe")),
        utf8("dtype"),
        int64_list("shape"),
        int64_list("stride"),
        utf8("source_device"),
        int64("nbytes"),
        utf8("payload"),
        nullable(utf8("digest")),
        int64("numel"),
        int64("finite_count"),
        int64("nan_count"),
        int64("posinf_count"),
        int64("neginf_count"),
        int64("zero_count"),
        nullable(float64("min")),
        nullable(float64("max")),
        nullable(float64("mean")),
        nullable(float64("std")),
        float64("l2"),
    ]);
    schema(columns.collect())
});

/// Tensor bytes keyed by content digest; a payload larger than one chunk spans rows.
pub static PAYLOADS: LazyLock<SchemaRef> = LazyLock::new(|| {
    schema(vec![
        utf8("run_id"),
        utf8("digest"),
        int64("chunk_index"),
        int64("chunk_count"),
        int64("total_nbytes"),
        Field::new("data", DataType::LargeBinary, false),
    ])
});

/// The identity columns every memory table starts with, so a glob over many runs still
/// tells rows apart.
fn memory_identity() -> Vec<Field> {
    vec![utf8("run_id"), int64("point_index")]
}

fn memory_schema(columns: Vec<Field>) -> SchemaRef {
    let mut fields = memory_identity();
    fields.extend(columns);
    schema(fields)
}

/// A pool id as torch reports it: a pair of integers, `(0, 0)` for the default pool.
fn pool_columns() -> [Field; 2] {
    [int64("pool_id_0"), int64("pool_id_1")]
}

/// One row per memory point: where its snapshot came from and how it was taken.
pub static MEMORY_POINTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    memory_schema(vec![
        utf8("label"),
        utf8("source"),
        nullable(utf8("source_path")),
        nullable(utf8("marker")),
        boolean("boundary_recorded"),
        boolean("synchronized"),
        boolean("during_capture"),
        nullable(utf8("torch_version")),
        utf8_list("warnings"),
    ])
});

/// One row per (point, device): device-wide memory next to the allocator's, and the state
/// of the allocator history window that ends at this point.
pub static MEMORY_DEVICES: LazyLock<SchemaRef> = LazyLock::new(|| {
    memory_schema(vec![
        int64("device"),
        nullable(int64("free_bytes")),
        nullable(int64("total_bytes")),
        nullable(int64("cuda_used")),
        int64("allocator_reserved"),
        nullable(int64("residual")),
        nullable(int64("probe_device_bytes")),
        nullable(int64("probe_pinned_bytes")),
        utf8("history_status"),
        int64("ring_entries"),
        int64("window_events"),
        nullable(int64("window_first_time_us")),
        nullable(int64("window_last_time_us")),
        // `torch.cuda.memory_stats()` read at the point: peaks (since the previous
        // point when `peak_since_previous_point`, else since the process started or the
        // user last reset them) and the allocator's cumulative retry and OOM counts.
        nullable(int64("peak_reserved_bytes")),
        nullable(int64("peak_allocated_bytes")),
        nullable(int64("peak_active_bytes")),
        nullable(int64("num_alloc_retries")),
        nullable(int64("num_ooms")),
        nullable(boolean("peak_since_previous_point")),
    ])
});

/// One row per (point, device, pool, stream): the allocator statistics of that slice.
pub static MEMORY_STATS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let [p0, p1] = pool_columns();
    memory_schema(vec![
        utf8("point_label"),
        int64("ordinal"),
        int64("device"),
        p0,
        p1,
        utf8("pool_kind"),
        int64("stream"),
        int64("reserved"),
        int64("allocated"),
        int64("active"),
        int64("requested"),
        int64("awaiting_free"),
        int64("inactive"),
        int64("internal_fragmentation"),
        int64("segment_count"),
        int64("block_count"),
        int64("inactive_block_count"),
        int64("largest_inactive_block"),
        int64("expandable_segment_count"),
        int64("expandable_reserved"),
        int64("expandable_inactive"),
    ])
});

/// One row per allocator segment (for expandable segments: per mapped range) at a point.
pub static MEMORY_SEGMENTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let [p0, p1] = pool_columns();
    memory_schema(vec![
        int64("segment_index"),
        int64("device"),
        nullable(int64("address")),
        int64("total_size"),
        nullable(int64("allocated_size")),
        nullable(int64("active_size")),
        nullable(int64("requested_size")),
        int64("stream"),
        p0,
        p1,
        utf8("segment_type"),
        boolean("is_expandable"),
        nullable(int64("stack_id")),
    ])
});

/// One row per block of a segment at a point.
pub static MEMORY_BLOCKS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let [p0, p1] = pool_columns();
    memory_schema(vec![
        int64("segment_index"),
        int64("block_index"),
        int64("device"),
        p0,
        p1,
        int64("stream"),
        nullable(int64("address")),
        boolean("address_inferred"),
        int64("size"),
        int64("requested_size"),
        utf8("state"),
        nullable(int64("stack_id")),
    ])
});

/// Allocator history: only the trace entries new since the previous point.
pub static MEMORY_EVENTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let [p0, p1] = pool_columns().map(nullable);
    memory_schema(vec![
        int64("device"),
        int64("ring_index"),
        utf8("action"),
        nullable(int64("address")),
        int64("size"),
        int64("stream"),
        nullable(int64("time_us")),
        p0,
        p1,
        nullable(json("user_metadata")),
        nullable(utf8("compile_context")),
        nullable(int64("device_free")),
        nullable(int64("stack_id")),
    ])
});

/// Stack frames, each stored once per run (in the part of the point that first saw it).
pub static MEMORY_FRAMES: LazyLock<SchemaRef> = LazyLock::new(|| {
    memory_schema(vec![
        int64("frame_id"),
        utf8("filename"),
        int64("line"),
        utf8("name"),
        // The FX node of a frame of generated code, when torch's FX memory-profile
        // debugging augmented the snapshot (null otherwise).
        nullable(utf8("fx_node_op")),
        nullable(utf8("fx_node_name")),
        nullable(utf8("fx_node_target")),
        nullable(utf8("fx_original_trace")),
    ])
});

/// Stacks as lists of frame ids, innermost first (torch's order), each stored once per run.
pub static MEMORY_STACKS: LazyLock<SchemaRef> =
    LazyLock::new(|| memory_schema(vec![int64("stack_id"), int64_list("frame_ids")]));

/// One row per (point, device, private pool) whose owner was known at the point.
pub static MEMORY_POOL_OWNERS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let [p0, p1] = pool_columns();
    memory_schema(vec![
        int64("device"),
        p0,
        p1,
        utf8("owner_kind"),
        nullable(utf8("owner_name")),
        int64_list("graph_ids"),
        utf8_list("function_kinds"),
        utf8_list("compile_ids"),
        utf8("description"),
    ])
});

/// A batch of `columns` under `schema`'s names and nullability but the columns' own types:
/// what the writer hands Parquet when some columns are dictionaries of the table's type.
pub(crate) fn batch_as_given(schema: &Schema, columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .zip(&columns)
        .map(|(f, c)| Field::new(f.name(), c.data_type().clone(), f.is_nullable()))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| StoreError::invalid("record batch", e.to_string()))
}
