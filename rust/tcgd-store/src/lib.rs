//! Runs as Delta Lake tables of Parquet files.
//!
//! A job root holds one Delta table per kind of row (`runs`, `points`, `observations`,
//! `payloads`, the memory tables), each partitioned by rank; every run of the job (every
//! rank, eager and compiled, baseline and candidate) appends to the same tables and is told
//! apart by `run_id`. `docs/storage.md` is the user-facing description of every table and
//! column.

mod claim;
mod clock;
mod compact;
mod delta;
mod digest;
mod durable;
mod error;
pub mod group;
pub mod layout;
mod log_cleanup;
mod manifest;
mod parts;
mod pool;
#[cfg(feature = "python")]
mod python;
mod queue;
mod reader;
mod record;
pub mod schema;
mod stats;
mod writer;

pub use claim::LOCK_FILE;
pub use clock::{now_micros, rfc3339};
pub use compact::{compact_root, remove_expired_log_files, set_log_retention, CompactionReport};
pub use delta::{
    parse_log_retention, CommittedFile, DeltaTable, DEFAULT_LOG_RETENTION, EXPIRED_LOG_CLEANUP,
    LOG_RETENTION,
};
pub use digest::content_digest;
pub use error::{Result, StoreError};
pub use manifest::{Manifest, PartEntry, RunHeader, RunKind};
pub use queue::{CommitJob, CommitQueue};
pub use reader::{
    list_runs, runs_batch, Columns, Damage, ObservationMeta, ObservationRows, OnDamage,
    RecordedPoint, RunReader, RunRow, RunSelector, ValidationIssue,
};
pub use record::{
    CommittedPoint, ObservationDescriptor, ObservationInput, PayloadKind, PointInput, Site,
    SiteFacts, SiteLocation, SiteLocationRef, Value,
};
pub use schema::{Table, FORMAT_VERSION};
pub use writer::{check_point, run_path, CommitPolicy, RunWriter, DEFAULT_COMMIT_INTERVAL};
