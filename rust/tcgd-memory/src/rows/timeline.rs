//! The rows of a run's timeline: per point, every scope, pool, observation and device with
//! its change since the previous point (`None` at the first point). A pool or observation
//! that disappears stays with zero state, so its release shows as a negative delta.

use std::collections::{BTreeMap, HashMap};

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use tcgd_report::{Cell, Table};

use super::comparison::DeviceSample;
use super::{
    change, csv_file, pool_cell, public, row_table, stat_cells, stats_delta, stats_names, CsvFile,
    CsvRow, ObservationRef, PoolRef, PublicStats,
};
use crate::error::Result;
use crate::model::DEFAULT_POOL;
use crate::state::MemoryState;
use crate::stats::{MemoryStats, PoolKind, Scope};
use crate::timeline::{Timeline, TimelineLevel};

/// Which point a timeline entry belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointTag {
    pub point_index: i64,
    pub point_label: String,
}

/// An entry of the timeline: the point, what it is about (`T`), absolute statistics and
/// the change since the previous point.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineEntry<T> {
    pub point: PointTag,
    pub subject: T,
    pub stats: MemoryStats,
    pub delta: Option<MemoryStats>,
}

/// What a timeline entry is about, and how it shows in `to_dict()` and CSV.
pub trait EntrySubject {
    /// Identity columns after `point_index`, `point_label`.
    const CSV_NAMES: &'static [&'static str];
    fn serialize_fields<M: SerializeMap>(&self, map: &mut M) -> std::result::Result<(), M::Error>;
    fn csv_cells(&self) -> Vec<Cell>;
}

impl EntrySubject for Scope {
    const CSV_NAMES: &'static [&'static str] = &["scope"];

    fn serialize_fields<M: SerializeMap>(&self, map: &mut M) -> std::result::Result<(), M::Error> {
        map.serialize_entry("scope", self.as_str())
    }

    fn csv_cells(&self) -> Vec<Cell> {
        vec![self.as_str().into()]
    }
}

impl EntrySubject for PoolRef {
    const CSV_NAMES: &'static [&'static str] = &["device_index", "pool_id", "pool_kind"];

    fn serialize_fields<M: SerializeMap>(&self, map: &mut M) -> std::result::Result<(), M::Error> {
        map.serialize_entry("device_index", &self.device_index)?;
        map.serialize_entry("pool_id", &self.pool_id)?;
        map.serialize_entry("pool_kind", PoolKind::of(self.pool_id).as_str())
    }

    fn csv_cells(&self) -> Vec<Cell> {
        vec![
            self.device_index.into(),
            pool_cell(Some(self.pool_id)),
            PoolKind::of(self.pool_id).as_str().into(),
        ]
    }
}

impl EntrySubject for ObservationRef {
    const CSV_NAMES: &'static [&'static str] = &["device_index", "pool_id", "stream"];

    fn serialize_fields<M: SerializeMap>(&self, map: &mut M) -> std::result::Result<(), M::Error> {
        map.serialize_entry("device_index", &self.device_index)?;
        map.serialize_entry("pool_id", &self.pool_id)?;
        map.serialize_entry("stream", &self.stream)
    }

    fn csv_cells(&self) -> Vec<Cell> {
        vec![
            self.device_index.into(),
            pool_cell(Some(self.pool_id)),
            self.stream.into(),
        ]
    }
}

impl<T: EntrySubject> Serialize for TimelineEntry<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("point_index", &self.point.point_index)?;
        map.serialize_entry("point_label", &self.point.point_label)?;
        self.subject.serialize_fields(&mut map)?;
        map.serialize_entry("stats", &PublicStats(&self.stats))?;
        map.serialize_entry("delta", &public(self.delta.as_ref()))?;
        map.end()
    }
}

impl<T: EntrySubject> TimelineEntry<T> {
    fn names() -> Vec<String> {
        let mut identity = vec!["point_index", "point_label"];
        identity.extend(T::CSV_NAMES);
        stats_names(&identity, &["stats", "delta"])
    }
}

impl<T: EntrySubject> CsvRow for TimelineEntry<T> {
    fn csv_names(&self) -> Vec<String> {
        TimelineEntry::<T>::names()
    }

    fn csv_cells(&self) -> Vec<Cell> {
        let mut row = vec![
            self.point.point_index.into(),
            self.point.point_label.as_str().into(),
        ];
        row.extend(self.subject.csv_cells());
        row.extend(stat_cells(Some(&self.stats)));
        row.extend(stat_cells(self.delta.as_ref()));
        row
    }
}

pub type ScopeTimelineEntry = TimelineEntry<Scope>;
pub type PoolTimelineEntry = TimelineEntry<PoolRef>;
pub type ObservationTimelineEntry = TimelineEntry<ObservationRef>;

/// One device at one point: its sample (`None` when the query failed), the allocator
/// rollup with its previous-point delta, and sample changes that are `None` together
/// when either point lacks a sample.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceTimelineEntry {
    pub point: PointTag,
    pub device_index: i64,
    pub sample: Option<DeviceSample>,
    /// The sample at the previous point (`None` at the device's first point, or when that
    /// query failed).
    pub previous_sample: Option<DeviceSample>,
    pub stats: MemoryStats,
    pub delta: Option<MemoryStats>,
}

impl DeviceTimelineEntry {
    /// `used_bytes - allocator reserved bytes` (signed; `None` without a sample).
    pub fn cuda_allocator_residual_bytes(&self) -> Option<i64> {
        change(
            self.sample.map(|s| s.used_bytes()),
            Some(self.stats.reserved_bytes),
        )
    }

    /// The change of one sample reading since the previous point.
    pub fn sample_change(&self, reading: fn(&DeviceSample) -> i64) -> Option<i64> {
        change(
            self.sample.as_ref().map(reading),
            self.previous_sample.as_ref().map(reading),
        )
    }

    pub fn delta_used_bytes(&self) -> Option<i64> {
        self.sample_change(DeviceSample::used_bytes)
    }

    pub fn delta_free_bytes(&self) -> Option<i64> {
        self.sample_change(|s| s.free_bytes)
    }

    pub fn delta_total_bytes(&self) -> Option<i64> {
        self.sample_change(|s| s.total_bytes)
    }

    /// The change of the residual since the previous point: `None` at the first point
    /// or when either point lacks a sample.
    pub fn delta_cuda_allocator_residual_bytes(&self) -> Option<i64> {
        let before_reserved = self
            .stats
            .reserved_bytes
            .checked_sub(self.delta?.reserved_bytes)?;
        let before = change(
            self.previous_sample.map(|s| s.used_bytes()),
            Some(before_reserved),
        );
        change(self.cuda_allocator_residual_bytes(), before)
    }

    const CSV_NAMES: [&'static str; 12] = [
        "point_index",
        "point_label",
        "device_index",
        "used_bytes",
        "free_bytes",
        "total_bytes",
        "allocator_reserved_bytes",
        "cuda_allocator_residual_bytes",
        "delta_used_bytes",
        "delta_free_bytes",
        "delta_total_bytes",
        "delta_allocator_reserved_bytes",
    ];

    fn names() -> Vec<String> {
        DeviceTimelineEntry::CSV_NAMES.map(str::to_owned).into()
    }
}

impl CsvRow for DeviceTimelineEntry {
    fn csv_names(&self) -> Vec<String> {
        DeviceTimelineEntry::names()
    }

    fn csv_cells(&self) -> Vec<Cell> {
        vec![
            self.point.point_index.into(),
            self.point.point_label.as_str().into(),
            self.device_index.into(),
            self.sample.map(|s| s.used_bytes()).into(),
            self.sample.map(|s| s.free_bytes).into(),
            self.sample.map(|s| s.total_bytes).into(),
            self.stats.reserved_bytes.into(),
            self.cuda_allocator_residual_bytes().into(),
            self.delta_used_bytes().into(),
            self.delta_free_bytes().into(),
            self.delta_total_bytes().into(),
            self.delta.map(|d| d.reserved_bytes).into(),
        ]
    }
}

impl Serialize for DeviceTimelineEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("point_index", &self.point.point_index)?;
        map.serialize_entry("point_label", &self.point.point_label)?;
        map.serialize_entry("device_index", &self.device_index)?;
        map.serialize_entry("sample", &self.sample)?;
        map.serialize_entry(
            "cuda_allocator_residual_bytes",
            &self.cuda_allocator_residual_bytes(),
        )?;
        map.serialize_entry("stats", &PublicStats(&self.stats))?;
        map.serialize_entry("delta", &public(self.delta.as_ref()))?;
        map.serialize_entry("delta_used_bytes", &self.delta_used_bytes())?;
        map.serialize_entry("delta_free_bytes", &self.delta_free_bytes())?;
        map.serialize_entry("delta_total_bytes", &self.delta_total_bytes())?;
        map.end()
    }
}

/// Every entry of one timeline, in report order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineRows {
    pub allocator_scope_entries: Vec<ScopeTimelineEntry>,
    pub pool_entries: Vec<PoolTimelineEntry>,
    pub observation_entries: Vec<ObservationTimelineEntry>,
    pub device_entries: Vec<DeviceTimelineEntry>,
}

impl TimelineRows {
    /// The entries of `timeline`, made by [`crate::timeline`] from `states`.
    pub fn build(timeline: &Timeline, states: &[&MemoryState]) -> Result<TimelineRows> {
        let by_index: HashMap<i64, &MemoryState> =
            states.iter().map(|s| (s.identity.index, *s)).collect();
        let mut rows = TimelineRows {
            allocator_scope_entries: Vec::new(),
            pool_entries: Vec::new(),
            observation_entries: observation_entries(states)?,
            device_entries: Vec::new(),
        };
        // The sample of each device at the previous point it was seen at.
        let mut previous: HashMap<i64, Option<DeviceSample>> = HashMap::new();
        for r in &timeline.rows {
            let point = PointTag {
                point_index: r.point_index,
                point_label: r.label.clone(),
            };
            match (r.level, r.scope, r.device, r.pool) {
                (TimelineLevel::Scope, Some(scope), _, _) => {
                    rows.allocator_scope_entries.push(TimelineEntry {
                        point,
                        subject: scope,
                        stats: r.stats,
                        delta: r.change,
                    })
                }
                (TimelineLevel::Pool, _, Some(device_index), Some(pool_id)) => {
                    rows.pool_entries.push(TimelineEntry {
                        point,
                        subject: PoolRef {
                            device_index,
                            pool_id,
                        },
                        stats: r.stats,
                        delta: r.change,
                    })
                }
                (TimelineLevel::Device, _, Some(device), _) => {
                    let sample = by_index
                        .get(&r.point_index)
                        .and_then(|s| DeviceSample::of(s, device));
                    rows.device_entries.push(DeviceTimelineEntry {
                        point,
                        device_index: device,
                        sample,
                        previous_sample: previous.insert(device, sample).flatten(),
                        stats: r.stats,
                        delta: r.change,
                    });
                }
                _ => {}
            }
        }
        Ok(rows)
    }

    /// `allocator_scopes.csv`, `pools.csv`, `observations.csv` and, when there are
    /// devices, `devices.csv`.
    pub fn csv_files(&self) -> Vec<CsvFile> {
        let mut files = vec![
            csv_file(
                "allocator_scopes.csv",
                &entry_table(&self.allocator_scope_entries),
            ),
            csv_file("pools.csv", &entry_table(&self.pool_entries)),
            csv_file("observations.csv", &entry_table(&self.observation_entries)),
        ];
        if !self.device_entries.is_empty() {
            let devices = row_table(&DeviceTimelineEntry::names(), &self.device_entries);
            files.push(csv_file("devices.csv", &devices));
        }
        files
    }
}

fn entry_table<T: EntrySubject>(entries: &[TimelineEntry<T>]) -> Table {
    row_table(&TimelineEntry::<T>::names(), entries)
}

/// Per point, every observation seen at it or at an earlier point (kept at zero once it
/// disappears), ordered by device, the default pool first, pool id, stream.
fn observation_entries(states: &[&MemoryState]) -> Result<Vec<ObservationTimelineEntry>> {
    let mut out = Vec::new();
    let mut seen: BTreeMap<(i64, bool, (i64, i64), i64), MemoryStats> = BTreeMap::new();
    for (i, state) in states.iter().enumerate() {
        let mut current: BTreeMap<_, MemoryStats> =
            seen.keys().map(|k| (*k, MemoryStats::default())).collect();
        for (k, stats) in &state.observations {
            current.insert((k.device, k.pool != DEFAULT_POOL, k.pool, k.stream), *stats);
        }
        for (&(device_index, _, pool_id, stream), stats) in &current {
            let before = seen
                .get(&(device_index, pool_id != DEFAULT_POOL, pool_id, stream))
                .copied()
                .unwrap_or_default();
            out.push(TimelineEntry {
                point: PointTag {
                    point_index: state.identity.index,
                    point_label: state.identity.label.clone(),
                },
                subject: ObservationRef {
                    device_index,
                    pool_id,
                    stream,
                },
                stats: *stats,
                delta: if i == 0 {
                    None
                } else {
                    Some(stats_delta(&before, stats)?)
                },
            });
        }
        seen = current;
    }
    Ok(out)
}
