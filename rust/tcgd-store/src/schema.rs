//! Arrow schemas of the run tables: the one definition every writer, reader and query
//! relies on. `docs/storage.md` documents each column; keep the two in step.

use std::sync::{Arc, LazyLock};

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow_schema::extension::Json;

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

/// The tables of a job root, each a Delta table in its own directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// One row per run: its identity, status and provenance.
    Runs,
    Points,
    Observations,
    Payloads,
    MemoryPoints,
    MemoryDevices,
    MemoryStats,
    MemorySegments,
    MemoryBlocks,
    MemoryEvents,
    MemoryFrames,
    MemoryStacks,
    /// What owns each private pool at a point (Graph Trees, a captured graph, a MemPool).
    MemoryPoolOwners,
}

impl Table {
    pub const ALL: [Table; 13] = [
        Table::Runs,
        Table::Points,
        Table::Observations,
        Table::Payloads,
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

    pub fn dir_name(self) -> &'static str {
        match self {
            Table::Runs => "runs",
            Table::Points => "points",
            Table::Observations => "observations",
            Table::Payloads => "payloads",
            Table::MemoryPoints => "memory_points",
            Table::MemoryDevices => "memory_devices",
            Table::MemoryStats => "memory_stats",
            Table::MemorySegments => "memory_segments",
            Table::MemoryBlocks => "memory_blocks",
            Table::MemoryEvents => "memory_events",
            Table::MemoryFrames => "memory_frames",
            Table::MemoryStacks => "memory_stacks",
            Table::MemoryPoolOwners => "memory_pool_owners",
        }
    }

    pub fn from_dir_name(name: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.dir_name() == name)
    }

    pub fn schema(self) -> SchemaRef {
        match self {
            Table::Runs => RUNS.clone(),
            Table::Points => POINTS.clone(),
            Table::Observations => OBSERVATIONS.clone(),
            Table::Payloads => PAYLOADS.clone(),
            Table::MemoryPoints => MEMORY_POINTS.clone(),
            Table::MemoryDevices => MEMORY_DEVICES.clone(),
            Table::MemoryStats => MEMORY_STATS.clone(),
            Table::MemorySegments => MEMORY_SEGMENTS.clone(),
            Table::MemoryBlocks => MEMORY_BLOCKS.clone(),
            Table::MemoryEvents => MEMORY_EVENTS.clone(),
            Table::MemoryFrames => MEMORY_FRAMES.clone(),
            Table::MemoryStacks => MEMORY_STACKS.clone(),
            Table::MemoryPoolOwners => MEMORY_POOL_OWNERS.clone(),
        }
    }
}

/// A JSON text column: Parquet's JSON logical type, so engines know to parse it.
fn json_field(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Utf8, nullable).with_extension_type(Json::default())
}

fn utc_micros() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn int64_list() -> DataType {
    DataType::List(Arc::new(Field::new("element", DataType::Int64, false)))
}

/// One row per run (the `runs` table): identity, status and provenance, so a query over a
/// job root sees every run of every rank.
pub static RUNS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("run_id", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("execution", DataType::Utf8, false),
        Field::new("group_id", DataType::Utf8, true),
        Field::new("world_size", DataType::Int64, true),
        Field::new("created_at", utc_micros(), false),
        Field::new("finished_at", utc_micros(), true),
        Field::new("complete", DataType::Boolean, false),
        Field::new("point_count", DataType::Int64, false),
        Field::new("format_version", DataType::Int64, false),
        Field::new("producer", DataType::Utf8, false),
        json_field("provenance", false),
        json_field("run_metadata", false),
    ]))
});

/// One row per committed point.
pub static POINTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("run_id", DataType::Utf8, false),
        Field::new("point_index", DataType::Int64, false),
        Field::new("label", DataType::Utf8, false),
        Field::new("timestamp", utc_micros(), false),
        Field::new("replay_index", DataType::Int64, true),
        Field::new("observation_count", DataType::Int64, false),
        json_field("metadata", false),
    ]))
});

/// One row per observed tensor value. Payload bytes live in `payloads` so that metadata
/// queries never read tensor bytes; the summary columns are always present.
pub static OBSERVATIONS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("run_id", DataType::Utf8, false),
        Field::new("point_index", DataType::Int64, false),
        Field::new("point_label", DataType::Utf8, false),
        Field::new("ordinal", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("invocation_index", DataType::Int64, false),
        Field::new("site_id", DataType::Utf8, true),
        Field::new("graph_kind", DataType::Utf8, true),
        Field::new("node_name", DataType::Utf8, true),
        Field::new("aten_op", DataType::Utf8, true),
        Field::new("module_path", DataType::Utf8, true),
        Field::new("source_location", DataType::Utf8, true),
        Field::new("compile_id", DataType::Utf8, true),
        Field::new("materialized_by_probe", DataType::Boolean, true),
        Field::new("dtype", DataType::Utf8, false),
        Field::new("shape", int64_list(), false),
        Field::new("stride", int64_list(), false),
        Field::new("source_device", DataType::Utf8, false),
        Field::new("nbytes", DataType::Int64, false),
        Field::new("payload", DataType::Utf8, false),
        Field::new("digest", DataType::Utf8, true),
        Field::new("numel", DataType::Int64, false),
        Field::new("finite_count", DataType::Int64, false),
        Field::new("nan_count", DataType::Int64, false),
        Field::new("posinf_count", DataType::Int64, false),
        Field::new("neginf_count", DataType::Int64, false),
        Field::new("zero_count", DataType::Int64, false),
        Field::new("min", DataType::Float64, true),
        Field::new("max", DataType::Float64, true),
        Field::new("mean", DataType::Float64, true),
        Field::new("std", DataType::Float64, true),
        Field::new("l2", DataType::Float64, false),
    ]))
});

/// Tensor bytes keyed by content digest; a payload larger than one chunk spans rows.
pub static PAYLOADS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("run_id", DataType::Utf8, false),
        Field::new("digest", DataType::Utf8, false),
        Field::new("chunk_index", DataType::Int64, false),
        Field::new("chunk_count", DataType::Int64, false),
        Field::new("total_nbytes", DataType::Int64, false),
        Field::new("data", DataType::LargeBinary, false),
    ]))
});

fn utf8_list() -> DataType {
    DataType::List(Arc::new(Field::new("element", DataType::Utf8, false)))
}

/// The identity columns every memory table starts with, so a glob over many runs still
/// tells rows apart.
fn memory_identity() -> Vec<Field> {
    vec![
        Field::new("run_id", DataType::Utf8, false),
        Field::new("point_index", DataType::Int64, false),
    ]
}

fn memory_schema(columns: Vec<Field>) -> SchemaRef {
    let mut fields = memory_identity();
    fields.extend(columns);
    Arc::new(Schema::new(fields))
}

/// A pool id as torch reports it: a pair of integers, `(0, 0)` for the default pool.
fn pool_columns(nullable: bool) -> [Field; 2] {
    [
        Field::new("pool_id_0", DataType::Int64, nullable),
        Field::new("pool_id_1", DataType::Int64, nullable),
    ]
}

/// One row per memory point: where its snapshot came from and how it was taken.
pub static MEMORY_POINTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    memory_schema(vec![
        Field::new("label", DataType::Utf8, false),
        Field::new("source", DataType::Utf8, false),
        Field::new("source_path", DataType::Utf8, true),
        Field::new("marker", DataType::Utf8, true),
        Field::new("boundary_recorded", DataType::Boolean, false),
        Field::new("synchronized", DataType::Boolean, false),
        Field::new("during_capture", DataType::Boolean, false),
        Field::new("torch_version", DataType::Utf8, true),
        Field::new("warnings", utf8_list(), false),
    ])
});

/// One row per (point, device): device-wide memory next to the allocator's, and the state
/// of the allocator history window that ends at this point.
pub static MEMORY_DEVICES: LazyLock<SchemaRef> = LazyLock::new(|| {
    memory_schema(vec![
        Field::new("device", DataType::Int64, false),
        Field::new("free_bytes", DataType::Int64, true),
        Field::new("total_bytes", DataType::Int64, true),
        Field::new("cuda_used", DataType::Int64, true),
        Field::new("allocator_reserved", DataType::Int64, false),
        Field::new("residual", DataType::Int64, true),
        Field::new("probe_device_bytes", DataType::Int64, true),
        Field::new("probe_pinned_bytes", DataType::Int64, true),
        Field::new("history_status", DataType::Utf8, false),
        Field::new("ring_entries", DataType::Int64, false),
        Field::new("window_events", DataType::Int64, false),
        Field::new("window_first_time_us", DataType::Int64, true),
        Field::new("window_last_time_us", DataType::Int64, true),
        // `torch.cuda.memory_stats()` read at the point: peaks (since the previous
        // point when `peak_since_previous_point`, else since the process started or the
        // user last reset them) and the allocator's cumulative retry and OOM counts.
        Field::new("peak_reserved_bytes", DataType::Int64, true),
        Field::new("peak_allocated_bytes", DataType::Int64, true),
        Field::new("peak_active_bytes", DataType::Int64, true),
        Field::new("num_alloc_retries", DataType::Int64, true),
        Field::new("num_ooms", DataType::Int64, true),
        Field::new("peak_since_previous_point", DataType::Boolean, true),
    ])
});

/// One row per (point, device, pool, stream): the allocator statistics of that slice.
pub static MEMORY_STATS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let [p0, p1] = pool_columns(false);
    memory_schema(vec![
        Field::new("point_label", DataType::Utf8, false),
        Field::new("ordinal", DataType::Int64, false),
        Field::new("device", DataType::Int64, false),
        p0,
        p1,
        Field::new("pool_kind", DataType::Utf8, false),
        Field::new("stream", DataType::Int64, false),
        Field::new("reserved", DataType::Int64, false),
        Field::new("allocated", DataType::Int64, false),
        Field::new("active", DataType::Int64, false),
        Field::new("requested", DataType::Int64, false),
        Field::new("awaiting_free", DataType::Int64, false),
        Field::new("inactive", DataType::Int64, false),
        Field::new("internal_fragmentation", DataType::Int64, false),
        Field::new("segment_count", DataType::Int64, false),
        Field::new("block_count", DataType::Int64, false),
        Field::new("inactive_block_count", DataType::Int64, false),
        Field::new("largest_inactive_block", DataType::Int64, false),
        Field::new("expandable_segment_count", DataType::Int64, false),
        Field::new("expandable_reserved", DataType::Int64, false),
        Field::new("expandable_inactive", DataType::Int64, false),
    ])
});

/// One row per allocator segment (for expandable segments: per mapped range) at a point.
pub static MEMORY_SEGMENTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let [p0, p1] = pool_columns(false);
    memory_schema(vec![
        Field::new("segment_index", DataType::Int64, false),
        Field::new("device", DataType::Int64, false),
        Field::new("address", DataType::Int64, true),
        Field::new("total_size", DataType::Int64, false),
        Field::new("allocated_size", DataType::Int64, true),
        Field::new("active_size", DataType::Int64, true),
        Field::new("requested_size", DataType::Int64, true),
        Field::new("stream", DataType::Int64, false),
        p0,
        p1,
        Field::new("segment_type", DataType::Utf8, false),
        Field::new("is_expandable", DataType::Boolean, false),
        Field::new("stack_id", DataType::Int64, true),
    ])
});

/// One row per block of a segment at a point.
pub static MEMORY_BLOCKS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let [p0, p1] = pool_columns(false);
    memory_schema(vec![
        Field::new("segment_index", DataType::Int64, false),
        Field::new("block_index", DataType::Int64, false),
        Field::new("device", DataType::Int64, false),
        p0,
        p1,
        Field::new("stream", DataType::Int64, false),
        Field::new("address", DataType::Int64, true),
        Field::new("address_inferred", DataType::Boolean, false),
        Field::new("size", DataType::Int64, false),
        Field::new("requested_size", DataType::Int64, false),
        Field::new("state", DataType::Utf8, false),
        Field::new("stack_id", DataType::Int64, true),
    ])
});

/// Allocator history: only the trace entries new since the previous point.
pub static MEMORY_EVENTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let [p0, p1] = pool_columns(true);
    memory_schema(vec![
        Field::new("device", DataType::Int64, false),
        Field::new("ring_index", DataType::Int64, false),
        Field::new("action", DataType::Utf8, false),
        Field::new("address", DataType::Int64, true),
        Field::new("size", DataType::Int64, false),
        Field::new("stream", DataType::Int64, false),
        Field::new("time_us", DataType::Int64, true),
        p0,
        p1,
        json_field("user_metadata", true),
        Field::new("compile_context", DataType::Utf8, true),
        Field::new("device_free", DataType::Int64, true),
        Field::new("stack_id", DataType::Int64, true),
    ])
});

/// Stack frames, each stored once per run (in the part of the point that first saw it).
pub static MEMORY_FRAMES: LazyLock<SchemaRef> = LazyLock::new(|| {
    memory_schema(vec![
        Field::new("frame_id", DataType::Int64, false),
        Field::new("filename", DataType::Utf8, false),
        Field::new("line", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        // The FX node of a frame of generated code, when torch's FX memory-profile
        // debugging augmented the snapshot (null otherwise).
        Field::new("fx_node_op", DataType::Utf8, true),
        Field::new("fx_node_name", DataType::Utf8, true),
        Field::new("fx_node_target", DataType::Utf8, true),
        Field::new("fx_original_trace", DataType::Utf8, true),
    ])
});

/// Stacks as lists of frame ids, innermost first (torch's order), each stored once per run.
pub static MEMORY_STACKS: LazyLock<SchemaRef> = LazyLock::new(|| {
    memory_schema(vec![
        Field::new("stack_id", DataType::Int64, false),
        Field::new("frame_ids", int64_list(), false),
    ])
});

/// One row per (point, device, private pool) whose owner was known at the point.
pub static MEMORY_POOL_OWNERS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let [p0, p1] = pool_columns(false);
    memory_schema(vec![
        Field::new("device", DataType::Int64, false),
        p0,
        p1,
        Field::new("owner_kind", DataType::Utf8, false),
        Field::new("owner_name", DataType::Utf8, true),
        Field::new("graph_ids", int64_list(), false),
        Field::new("function_kinds", utf8_list(), false),
        Field::new("compile_ids", utf8_list(), false),
        Field::new("description", DataType::Utf8, false),
    ])
});
