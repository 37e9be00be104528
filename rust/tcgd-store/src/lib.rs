//! Runs as Arrow/Parquet directories.
//!
//! A run is a directory: `run.json` (the manifest, the authority on what is committed),
//! `run.parquet` (the manifest as a one-row table), and one directory of Parquet parts per
//! table (`points/`, `observations/`, `payloads/`). `docs/storage.md` is the user-facing
//! description of every file and column.

mod claim;
mod digest;
mod durable;
mod error;
mod manifest;
mod parts;
mod pool;
mod queue;
mod reader;
mod record;
pub mod schema;
mod writer;

pub use claim::LOCK_FILE;
pub use digest::content_digest;
pub use error::{Result, StoreError};
pub use manifest::{Manifest, PartEntry, RunHeader, RunKind, MANIFEST_FILE};
pub use queue::{CommitJob, CommitQueue};
pub use reader::{Damage, OnDamage, RunReader, ValidationIssue};
pub use record::{CommittedPoint, ObservationInput, PayloadKind, PointInput, Site, Value};
pub use schema::{Table, FORMAT_VERSION};
pub use writer::{check_point, now_micros, rfc3339, RunWriter, RUN_TABLE_FILE};
