//! Allocator snapshots as Arrow tables: ingestion, pool/stream statistics, comparisons,
//! reports.
//!
//! A snapshot (the dict `torch.cuda.memory._snapshot()` returns, or the pickle
//! `_dump_snapshot` writes, read by [`pickle`] without executing anything) is ingested once
//! into rows ([`ingest`]), summarised per (device, pool, stream) ([`stats`]), stored in a
//! run with the crash-safe machinery of tcgd-store ([`run`]), compared ([`compare`],
//! [`phases`], [`timeline`]), named as the reference design's rows ([`rows`]) and reported
//! ([`report`]). `docs/memory-debug.md` is the user
//! guide; `docs/storage.md` documents the tables.

pub mod attribution;
pub mod compare;
pub mod error;
pub mod frames;
pub mod group;
pub mod ingest;
pub mod lifecycle;
pub mod lifetimes;
pub mod model;
pub mod owners;
pub mod phases;
pub mod pickle;
pub mod pickle_write;
#[cfg(feature = "python")]
pub mod python;
pub mod report;
pub mod rows;
pub mod run;
pub mod state;
pub mod stats;
pub mod timeline;
pub mod tree;
pub mod viz;

pub use compare::{compare, summary, CompareOptions, Comparison, PoolKey, Relation};
pub use error::{MemoryError, Result};
pub use group::{compare_run_group_phases, GroupPhaseComparison, GroupSummary, MemoryRunGroup};
pub use ingest::{ingest, HistoryCursor, IngestOptions, Ingested};
pub use lifecycle::{Lifecycle, LifecycleLabel};
pub use model::{DeviceMemory, PoolId, StackTable, DEFAULT_POOL};
pub use owners::{DevicePeaks, OwnerKind, PeakBytes, PeaksBetween, PoolOwner};
pub use phases::{compare_phases, PhaseComparison};
pub use report::{Depth, Format, ReportOptions};
pub use run::{MemoryRunReader, MemoryRunWriter, PendingPoint, PointExtras, PointMeta};
pub use state::{MemoryState, StateIdentity};
pub use stats::{MemoryStats, ObservationKey, PoolKind, Scope, PUBLIC_STAT_NAMES};
pub use timeline::{timeline, Timeline};
pub use tree::{Field, JsonSnapshot, PickleSnapshot, SnapshotTree};
