//! The row models of comparisons, timelines and phase decompositions, as the reference
//! design names them (`MemoryPoolComparison`, `MemoryDeviceTimelineEntry`,
//! `MemoryPoolPhaseDecomposition`, ...).
//!
//! Each row is built once here from a native result and the states behind it: how its
//! two sides were paired ([`MatchKind`]), its statistics and their delta, device samples
//! and their changes. The same rows give the structured form (`to_dict()` and
//! `report.json`, through their `Serialize` impls) and the reference's CSV file set
//! ([`comparison::ComparisonRows::csv_files`] and its siblings), so the Python facade only
//! names them.

pub mod comparison;
pub mod phases;
pub mod timeline;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use tcgd_report::{Cell, Table};

use crate::error::{MemoryError, Result, TorchVersion};
use crate::model::PoolId;
use crate::stats::{MemoryStats, PUBLIC_STAT_NAMES};

pub use comparison::{
    ComparisonRows, DeviceComparison, DeviceSample, ObservationComparison, PoolComparison,
    ScopeComparison, SlotComparison,
};
pub use phases::{PhaseComponents, PhaseDecomposition, PhaseRows};
pub use timeline::{
    DeviceTimelineEntry, ObservationTimelineEntry, PoolTimelineEntry, ScopeTimelineEntry,
    TimelineRows,
};

/// Every CSV file a comparison, timeline or phase result can write: rewriting a report
/// with `overwrite` replaces them all, so no stale file of an earlier result stays.
pub const ROW_CSV_FILES: [&str; 5] = [
    "allocator_scopes.csv",
    "pools.csv",
    "observations.csv",
    "devices.csv",
    "device_decomposition.csv",
];

/// A pool of one device, as rows name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PoolRef {
    pub device_index: i64,
    pub pool_id: PoolId,
}

impl PoolRef {
    /// The pool of a row side that has both a device and a pool.
    pub fn of(device: Option<i64>, pool: Option<PoolId>) -> Option<PoolRef> {
        Some(PoolRef {
            device_index: device?,
            pool_id: pool?,
        })
    }
}

/// One `(device, pool, stream)` slice of the allocator, as rows name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ObservationRef {
    pub device_index: i64,
    pub pool_id: PoolId,
    pub stream: i64,
}

impl ObservationRef {
    pub fn pool(&self) -> PoolRef {
        PoolRef {
            device_index: self.device_index,
            pool_id: self.pool_id,
        }
    }
}

/// How the two sides of a row were paired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchKind {
    /// One probe took both states: everything pairs by identity.
    SameProbe,
    /// One run recorded both points: everything pairs by identity.
    SameRun,
    /// Default pools of independent runs, which pair without a mapping.
    Default,
    /// Paired by the caller's `pool_mapping` (pools) or `device_mapping` (devices).
    Mapped,
    /// A device pair implied by a pool mapping across devices.
    PoolMapping,
    /// Devices of independent runs paired by their index.
    SameIndex,
    ReferenceOnly,
    CandidateOnly,
}

impl MatchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MatchKind::SameProbe => "same_probe",
            MatchKind::SameRun => "same_run",
            MatchKind::Default => "default",
            MatchKind::Mapped => "mapped",
            MatchKind::PoolMapping => "pool_mapping",
            MatchKind::SameIndex => "same_index",
            MatchKind::ReferenceOnly => "reference_only",
            MatchKind::CandidateOnly => "candidate_only",
        }
    }
}

/// What took the states of a same-origin comparison, which names its pairing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OriginKind {
    Run,
    Probe,
}

impl OriginKind {
    fn same(self) -> MatchKind {
        match self {
            OriginKind::Run => MatchKind::SameRun,
            OriginKind::Probe => MatchKind::SameProbe,
        }
    }
}

/// `candidate - reference` of every statistic (a missing side is empty state).
pub fn stats_delta(reference: &MemoryStats, candidate: &MemoryStats) -> Result<MemoryStats> {
    candidate
        .checked_sub(reference)
        .ok_or_else(|| MemoryError::Overflow {
            field: "allocator statistics".to_owned(),
            what: "a change of a statistic".to_owned(),
            torch: TorchVersion(None),
        })
}

/// `now - before` of two optional readings.
fn change(now: Option<i64>, before: Option<i64>) -> Option<i64> {
    now?.checked_sub(before?)
}

/// Statistics under their public names, as `to_dict()` holds them.
pub struct PublicStats<'a>(pub &'a MemoryStats);

impl Serialize for PublicStats<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(PUBLIC_STAT_NAMES.len()))?;
        for (name, value) in self.0.public_columns() {
            map.serialize_entry(name, &value)?;
        }
        map.end()
    }
}

/// Optional statistics as `to_dict()` holds them (`null` for a missing side).
fn public(stats: Option<&MemoryStats>) -> Option<PublicStats<'_>> {
    stats.map(PublicStats)
}

/// `"a,b"`, the CSV form of a pool id.
fn pool_cell(pool: Option<PoolId>) -> Cell {
    Cell::text(pool.map(|(a, b)| format!("{a},{b}")))
}

/// The 14 statistic columns of one side (`{prefix}_{name}`).
fn stat_columns(prefix: &str) -> impl Iterator<Item = String> + '_ {
    PUBLIC_STAT_NAMES
        .iter()
        .map(move |n| format!("{prefix}_{n}"))
}

/// The 14 statistic cells of one side (empty for a missing side).
fn stat_cells(stats: Option<&MemoryStats>) -> impl Iterator<Item = Cell> {
    let values = stats.map(MemoryStats::public_columns);
    (0..PUBLIC_STAT_NAMES.len()).map(move |i| values.map(|v| v[i].1).into())
}

/// Columns `identity` then the statistics of each side in `sides`.
fn stats_names<S: AsRef<str>>(identity: &[S], sides: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = identity.iter().map(|s| s.as_ref().to_owned()).collect();
    for side in sides {
        names.extend(stat_columns(side));
    }
    names
}

/// `(file name, CSV text)` of a report file set.
pub type CsvFile = (String, String);

/// One line of a report's CSV file: the file's column names and this row's cells. The
/// file is these lines; a row's `to_row()` is the same line as a mapping, so the two never
/// disagree.
pub trait CsvRow {
    fn csv_names(&self) -> Vec<String>;
    fn csv_cells(&self) -> Vec<Cell>;
}

/// A CSV table of `rows` under `names` (the names of an empty table come from the caller).
fn row_table<R: CsvRow>(names: &[String], rows: &[R]) -> Table {
    Table::with_rows(names, rows.iter().map(CsvRow::csv_cells).collect())
}

fn csv_file(name: &str, table: &Table) -> CsvFile {
    (name.to_owned(), crate::report::csv_table(table))
}
