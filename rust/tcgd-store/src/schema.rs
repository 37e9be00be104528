//! Arrow schemas of the run tables: the one definition every writer, reader and query
//! relies on. `docs/storage.md` documents each column; keep the two in step.

use std::sync::{Arc, LazyLock};

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// Version of the on-disk layout. Readers refuse a newer one; older ones keep loading.
pub const FORMAT_VERSION: u32 = 1;
/// Name written in every manifest so a stray `run.json` of another tool is not mistaken
/// for a run.
pub const SCHEMA_NAME: &str = "torch-cudagraph-debug/run";
/// Parquet key-value metadata keys written into every part.
pub const KV_FORMAT_VERSION: &str = "tcgd.format_version";
pub const KV_TABLE: &str = "tcgd.table";

/// Tensor payloads are split into chunks of this size: Parquet byte arrays stop at 2 GiB,
/// and smaller chunks keep reader memory bounded and row groups scannable.
pub const PAYLOAD_CHUNK_BYTES: usize = 16 << 20;

/// The tables of a run, each stored as one directory of parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    Points,
    Observations,
    Payloads,
}

impl Table {
    pub const ALL: [Table; 3] = [Table::Points, Table::Observations, Table::Payloads];

    pub fn dir_name(self) -> &'static str {
        match self {
            Table::Points => "points",
            Table::Observations => "observations",
            Table::Payloads => "payloads",
        }
    }

    pub fn from_dir_name(name: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.dir_name() == name)
    }

    pub fn schema(self) -> SchemaRef {
        match self {
            Table::Points => POINTS.clone(),
            Table::Observations => OBSERVATIONS.clone(),
            Table::Payloads => PAYLOADS.clone(),
        }
    }
}

fn utc_micros() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn int64_list() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Int64, false)))
}

/// One row per run: the manifest's facts as a table (`run.parquet`), so a query over a
/// whole job directory sees every rank's run, its status and provenance.
pub static RUNS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("run_id", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("execution", DataType::Utf8, false),
        Field::new("rank", DataType::Int64, true),
        Field::new("group_id", DataType::Utf8, true),
        Field::new("world_size", DataType::Int64, true),
        Field::new("created_at", utc_micros(), false),
        Field::new("finished_at", utc_micros(), true),
        Field::new("complete", DataType::Boolean, false),
        Field::new("point_count", DataType::Int64, false),
        Field::new("format_version", DataType::Int64, false),
        Field::new("producer", DataType::Utf8, false),
        Field::new("provenance", DataType::Utf8, false),
        Field::new("run_metadata", DataType::Utf8, false),
    ]))
});

/// One row per committed point.
pub static POINTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("run_id", DataType::Utf8, false),
        Field::new("rank", DataType::Int64, true),
        Field::new("point_index", DataType::Int64, false),
        Field::new("label", DataType::Utf8, false),
        Field::new("timestamp", utc_micros(), false),
        Field::new("replay_index", DataType::Int64, true),
        Field::new("observation_count", DataType::Int64, false),
        Field::new("metadata", DataType::Utf8, false),
    ]))
});

/// One row per observed tensor value. Payload bytes live in `payloads` so that metadata
/// queries never read tensor bytes; the summary columns are always present.
pub static OBSERVATIONS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("run_id", DataType::Utf8, false),
        Field::new("rank", DataType::Int64, true),
        Field::new("point_index", DataType::Int64, false),
        Field::new("point_label", DataType::Utf8, false),
        Field::new("order", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("invocation_index", DataType::Int64, false),
        Field::new("site_id", DataType::Utf8, true),
        Field::new("graph_kind", DataType::Utf8, true),
        Field::new("node_name", DataType::Utf8, true),
        Field::new("aten_op", DataType::Utf8, true),
        Field::new("module_path", DataType::Utf8, true),
        Field::new("source_location", DataType::Utf8, true),
        Field::new("compile_id", DataType::Utf8, true),
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
        Field::new("digest", DataType::Utf8, false),
        Field::new("chunk_index", DataType::Int64, false),
        Field::new("chunk_count", DataType::Int64, false),
        Field::new("total_nbytes", DataType::Int64, false),
        Field::new("data", DataType::LargeBinary, false),
    ]))
});
