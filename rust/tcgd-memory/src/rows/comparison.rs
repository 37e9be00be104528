//! The rows of a two-state comparison: one per allocator scope, per paired or one-sided
//! pool, per `(device, pool, stream)` observation and per device.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use tcgd_report::{Cell, Table};

use super::{
    change, csv_file, pool_cell, public, row_table, stat_cells, stats_delta, stats_names, CsvFile,
    CsvRow, MatchKind, ObservationRef, OriginKind, PoolRef, PublicStats,
};
use crate::compare::{CompareOptions, Comparison, Pair, Relation};
use crate::error::Result;
use crate::lifecycle::Lifecycle;
use crate::state::MemoryState;
use crate::stats::{MemoryStats, PoolKind, Scope};

/// One scope (`all`, `default`, `private`) summed over every device, unmatched private
/// pools included.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeComparison {
    pub scope: Scope,
    pub reference: MemoryStats,
    pub candidate: MemoryStats,
    pub delta: MemoryStats,
}

const SIDES: [&str; 3] = ["reference", "candidate", "delta"];

impl ScopeComparison {
    /// A change of any statistic.
    pub fn changed(&self) -> bool {
        self.delta != MemoryStats::default()
    }

    fn names() -> Vec<String> {
        stats_names(&["scope"], &SIDES)
    }
}

impl CsvRow for ScopeComparison {
    fn csv_names(&self) -> Vec<String> {
        ScopeComparison::names()
    }

    fn csv_cells(&self) -> Vec<Cell> {
        let mut row = vec![self.scope.as_str().into()];
        row.extend(stat_cells(Some(&self.reference)));
        row.extend(stat_cells(Some(&self.candidate)));
        row.extend(stat_cells(Some(&self.delta)));
        row
    }
}

impl Serialize for ScopeComparison {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("scope", self.scope.as_str())?;
        map.serialize_entry("reference", &PublicStats(&self.reference))?;
        map.serialize_entry("candidate", &PublicStats(&self.candidate))?;
        map.serialize_entry("delta", &PublicStats(&self.delta))?;
        map.end()
    }
}

/// How a row key appears in `to_dict()` and in CSV: pool rows spread their key over
/// `*_device_index` / `*_pool_id`; observation rows nest it as `*_key`.
pub trait RowKey: Copy {
    fn pool(&self) -> PoolRef;
    fn serialize_side<M: SerializeMap>(
        side: &str,
        key: Option<&Self>,
        map: &mut M,
    ) -> std::result::Result<(), M::Error>;
    fn csv_names(side: &str) -> Vec<String>;
    fn csv_cells(key: Option<&Self>) -> Vec<Cell>;
}

impl RowKey for PoolRef {
    fn pool(&self) -> PoolRef {
        *self
    }

    fn serialize_side<M: SerializeMap>(
        side: &str,
        key: Option<&Self>,
        map: &mut M,
    ) -> std::result::Result<(), M::Error> {
        map.serialize_entry(
            &format!("{side}_device_index"),
            &key.map(|k| k.device_index),
        )?;
        map.serialize_entry(&format!("{side}_pool_id"), &key.map(|k| k.pool_id))
    }

    fn csv_names(side: &str) -> Vec<String> {
        vec![format!("{side}_device_index"), format!("{side}_pool_id")]
    }

    fn csv_cells(key: Option<&Self>) -> Vec<Cell> {
        vec![
            key.map(|k| k.device_index).into(),
            pool_cell(key.map(|k| k.pool_id)),
        ]
    }
}

impl RowKey for ObservationRef {
    fn pool(&self) -> PoolRef {
        ObservationRef::pool(self)
    }

    fn serialize_side<M: SerializeMap>(
        side: &str,
        key: Option<&Self>,
        map: &mut M,
    ) -> std::result::Result<(), M::Error> {
        map.serialize_entry(&format!("{side}_key"), &key)
    }

    fn csv_names(side: &str) -> Vec<String> {
        ["device_index", "pool_id", "stream"]
            .iter()
            .map(|n| format!("{side}_{n}"))
            .collect()
    }

    fn csv_cells(key: Option<&Self>) -> Vec<Cell> {
        vec![
            key.map(|k| k.device_index).into(),
            pool_cell(key.map(|k| k.pool_id)),
            key.map(|k| k.stream).into(),
        ]
    }
}

/// One pool (`K = PoolRef`) or observation (`K = ObservationRef`) on each side, `None`
/// on the side that lacks it, and how the two were paired.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotComparison<K> {
    pub keys: Pair<Option<K>>,
    pub pool_kind: PoolKind,
    pub match_kind: MatchKind,
    pub stats: Pair<Option<MemoryStats>>,
    pub delta: MemoryStats,
    pub lifecycle: Option<Lifecycle>,
}

pub type PoolComparison = SlotComparison<PoolRef>;
pub type ObservationComparison = SlotComparison<ObservationRef>;

impl<K: RowKey> SlotComparison<K> {
    /// A change of any statistic, or a slot present on one side only.
    pub fn changed(&self) -> bool {
        let s = &self.stats;
        self.delta != MemoryStats::default() || s.reference.is_none() != s.candidate.is_none()
    }

    /// The row's key: the reference side's, or the candidate's for a candidate-only row.
    pub fn key(&self) -> Option<K> {
        self.keys.reference.or(self.keys.candidate)
    }

    fn names() -> Vec<String> {
        let mut identity = K::csv_names("reference");
        identity.extend(K::csv_names("candidate"));
        identity.extend(["pool_kind".to_owned(), "match".to_owned()]);
        stats_names(&identity, &SIDES)
    }
}

impl<K: RowKey> CsvRow for SlotComparison<K> {
    fn csv_names(&self) -> Vec<String> {
        SlotComparison::<K>::names()
    }

    fn csv_cells(&self) -> Vec<Cell> {
        let mut row = K::csv_cells(self.keys.reference.as_ref());
        row.extend(K::csv_cells(self.keys.candidate.as_ref()));
        row.extend([
            self.pool_kind.as_str().into(),
            self.match_kind.as_str().into(),
        ]);
        row.extend(stat_cells(self.stats.reference.as_ref()));
        row.extend(stat_cells(self.stats.candidate.as_ref()));
        row.extend(stat_cells(Some(&self.delta)));
        row
    }
}

impl<K: RowKey> Serialize for SlotComparison<K>
where
    K: Serialize,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        K::serialize_side("reference", self.keys.reference.as_ref(), &mut map)?;
        K::serialize_side("candidate", self.keys.candidate.as_ref(), &mut map)?;
        map.serialize_entry("pool_kind", self.pool_kind.as_str())?;
        map.serialize_entry("match", self.match_kind.as_str())?;
        map.serialize_entry("reference", &public(self.stats.reference.as_ref()))?;
        map.serialize_entry("candidate", &public(self.stats.candidate.as_ref()))?;
        map.serialize_entry("delta", &PublicStats(&self.delta))?;
        map.serialize_entry("lifecycle", &self.lifecycle)?;
        map.end()
    }
}

/// One CUDA Runtime reading of a device (`torch.cuda.mem_get_info`): device-wide, other
/// processes included. Python's `DeviceMemorySample`.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "DeviceMemorySample",
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        eq,
        hash,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceSample {
    pub free_bytes: i64,
    pub total_bytes: i64,
}

impl DeviceSample {
    /// The sample of a device when both readings are known and consistent (a failed
    /// query leaves none).
    pub fn of(state: &MemoryState, device: i64) -> Option<DeviceSample> {
        let m = state.memory(device);
        match (m.free_bytes, m.total_bytes) {
            (Some(free_bytes), Some(total_bytes)) if (0..=total_bytes).contains(&free_bytes) => {
                Some(DeviceSample {
                    free_bytes,
                    total_bytes,
                })
            }
            _ => None,
        }
    }

    /// `total_bytes - free_bytes` (fits: `0 <= free <= total`).
    pub fn used_bytes(&self) -> i64 {
        self.total_bytes - self.free_bytes
    }
}

impl Serialize for DeviceSample {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("free_bytes", &self.free_bytes)?;
        map.serialize_entry("total_bytes", &self.total_bytes)?;
        map.serialize_entry("used_bytes", &self.used_bytes())?;
        map.end()
    }
}

/// The device metrics of a device row, in CSV order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceMetric {
    Used,
    Free,
    Total,
    AllocatorReserved,
    /// `used - allocator reserved`: signed, since the two readings are consecutive, not
    /// atomic, and device-wide used memory includes other processes.
    CudaAllocatorResidual,
}

impl DeviceMetric {
    pub const ALL: [DeviceMetric; 5] = [
        DeviceMetric::Used,
        DeviceMetric::Free,
        DeviceMetric::Total,
        DeviceMetric::AllocatorReserved,
        DeviceMetric::CudaAllocatorResidual,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DeviceMetric::Used => "used_bytes",
            DeviceMetric::Free => "free_bytes",
            DeviceMetric::Total => "total_bytes",
            DeviceMetric::AllocatorReserved => "allocator_reserved_bytes",
            DeviceMetric::CudaAllocatorResidual => "cuda_allocator_residual_bytes",
        }
    }
}

/// Which side of a device row a value is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceSide {
    Reference,
    Candidate,
    /// `candidate - reference` (`None` when either is).
    Delta,
}

/// One device on each side: its sample (`None` when the query failed or the side lacks
/// the device), its allocator rollup, their delta and the address lifecycle.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceComparison {
    pub device_index: Pair<Option<i64>>,
    pub match_kind: MatchKind,
    pub sample: Pair<Option<DeviceSample>>,
    pub stats: Pair<Option<MemoryStats>>,
    pub delta: MemoryStats,
    pub lifecycle: Option<Lifecycle>,
}

impl DeviceComparison {
    /// One device metric of one side.
    pub fn metric(&self, side: DeviceSide, metric: DeviceMetric) -> Option<i64> {
        let (sample, stats) = match side {
            DeviceSide::Reference => (self.sample.reference, self.stats.reference),
            DeviceSide::Candidate => (self.sample.candidate, self.stats.candidate),
            DeviceSide::Delta if metric == DeviceMetric::AllocatorReserved => {
                return Some(self.delta.reserved_bytes)
            }
            DeviceSide::Delta => {
                return change(
                    self.metric(DeviceSide::Candidate, metric),
                    self.metric(DeviceSide::Reference, metric),
                )
            }
        };
        let reserved = stats.map(|s| s.reserved_bytes);
        match metric {
            DeviceMetric::Used => sample.map(|s| s.used_bytes()),
            DeviceMetric::Free => sample.map(|s| s.free_bytes),
            DeviceMetric::Total => sample.map(|s| s.total_bytes),
            DeviceMetric::AllocatorReserved => reserved,
            DeviceMetric::CudaAllocatorResidual => change(sample.map(|s| s.used_bytes()), reserved),
        }
    }

    /// Whether anything differs; a sample present on one side only counts as a change
    /// (no device delta is made up for it).
    pub fn changed(&self) -> bool {
        self.delta != MemoryStats::default() || self.sample.reference != self.sample.candidate
    }

    fn names() -> Vec<String> {
        let mut names: Vec<String> = ["reference_device_index", "candidate_device_index", "match"]
            .map(str::to_owned)
            .into();
        for side in SIDES {
            names.extend(DeviceMetric::ALL.map(|m| format!("{side}_{}", m.name())));
        }
        names
    }
}

impl CsvRow for DeviceComparison {
    fn csv_names(&self) -> Vec<String> {
        DeviceComparison::names()
    }

    fn csv_cells(&self) -> Vec<Cell> {
        let mut row = vec![
            self.device_index.reference.into(),
            self.device_index.candidate.into(),
            self.match_kind.as_str().into(),
        ];
        for side in [
            DeviceSide::Reference,
            DeviceSide::Candidate,
            DeviceSide::Delta,
        ] {
            row.extend(DeviceMetric::ALL.map(|m| self.metric(side, m).into()));
        }
        row
    }
}

/// One side of a device row in `to_dict()`.
struct DeviceSideView<'a>(&'a DeviceComparison, DeviceSide);

impl Serialize for DeviceSideView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let DeviceSideView(row, side) = *self;
        let mut map = serializer.serialize_map(None)?;
        let (sample, stats) = match side {
            DeviceSide::Reference => (Some(row.sample.reference), row.stats.reference.as_ref()),
            DeviceSide::Candidate => (Some(row.sample.candidate), row.stats.candidate.as_ref()),
            DeviceSide::Delta => (None, Some(&row.delta)),
        };
        if let Some(sample) = sample {
            map.serialize_entry("sample", &sample)?;
        }
        for m in DeviceMetric::ALL {
            map.serialize_entry(m.name(), &row.metric(side, m))?;
        }
        map.serialize_entry("allocator", &public(stats))?;
        map.end()
    }
}

impl Serialize for DeviceComparison {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("reference_device_index", &self.device_index.reference)?;
        map.serialize_entry("candidate_device_index", &self.device_index.candidate)?;
        map.serialize_entry("match", self.match_kind.as_str())?;
        map.serialize_entry("changed", &self.changed())?;
        for (key, side) in [
            ("reference", DeviceSide::Reference),
            ("candidate", DeviceSide::Candidate),
            ("delta", DeviceSide::Delta),
        ] {
            map.serialize_entry(key, &DeviceSideView(self, side))?;
        }
        map.serialize_entry("lifecycle", &self.lifecycle)?;
        map.end()
    }
}

/// Every row of one comparison, in report order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonRows {
    pub allocator_scopes: Vec<ScopeComparison>,
    pub pools: Vec<PoolComparison>,
    pub observations: Vec<ObservationComparison>,
    pub device_comparisons: Vec<DeviceComparison>,
}

/// The pairing rules of one comparison, applied to each row.
struct Pairing<'a> {
    same: Option<MatchKind>,
    options: &'a CompareOptions,
}

impl Pairing<'_> {
    fn pool(&self, keys: Pair<Option<PoolRef>>) -> MatchKind {
        match (keys.reference, keys.candidate, self.same) {
            (None, _, _) => MatchKind::CandidateOnly,
            (_, None, _) => MatchKind::ReferenceOnly,
            (_, _, Some(same)) => same,
            (Some(r), _, None) => {
                let key = (r.device_index, r.pool_id);
                if self.options.pool_mapping.iter().any(|(a, _)| *a == key) {
                    MatchKind::Mapped
                } else {
                    // Across runs only default pools pair without a mapping.
                    MatchKind::Default
                }
            }
        }
    }

    fn device(&self, index: Pair<Option<i64>>) -> MatchKind {
        match (index.reference, index.candidate, self.same) {
            (None, _, _) => MatchKind::CandidateOnly,
            (_, None, _) => MatchKind::ReferenceOnly,
            (_, _, Some(same)) => same,
            (Some(r), Some(c), None) => {
                let by_pools = || {
                    self.options
                        .pool_mapping
                        .iter()
                        .any(|(a, b)| a.0 == r && b.0 == c)
                };
                if self.options.device_mapping.contains(&(r, c)) {
                    MatchKind::Mapped
                } else if r != c && by_pools() {
                    MatchKind::PoolMapping
                } else {
                    MatchKind::SameIndex
                }
            }
        }
    }
}

impl ComparisonRows {
    /// The rows of `comparison`, made by [`crate::compare`] from `reference` and
    /// `candidate` with `options`; `origin` names what took states of one origin.
    pub fn build(
        comparison: &Comparison,
        reference: &MemoryState,
        candidate: &MemoryState,
        options: &CompareOptions,
        origin: OriginKind,
    ) -> Result<ComparisonRows> {
        let pairing = Pairing {
            same: (comparison.relation == Relation::SameOrigin).then(|| origin.same()),
            options,
        };
        let allocator_scopes = Scope::ALL
            .iter()
            .map(|&scope| {
                let r = reference.scope_stats(None, scope);
                let c = candidate.scope_stats(None, scope);
                Ok(ScopeComparison {
                    scope,
                    reference: r,
                    candidate: c,
                    delta: stats_delta(&r, &c)?,
                })
            })
            .collect::<Result<_>>()?;
        let (mut pools, mut observations, mut device_comparisons) = (vec![], vec![], vec![]);
        for d in &comparison.devices {
            for p in &d.pools {
                let keys = Pair {
                    reference: PoolRef::of(d.reference_device, p.reference_pool),
                    candidate: PoolRef::of(d.candidate_device, p.candidate_pool),
                };
                let stats = |key: Option<PoolRef>, s: &MemoryStats| key.map(|_| *s);
                pools.push(PoolComparison {
                    keys,
                    pool_kind: p.kind,
                    match_kind: pairing.pool(keys),
                    stats: Pair {
                        reference: stats(keys.reference, &p.stats.reference),
                        candidate: stats(keys.candidate, &p.stats.candidate),
                    },
                    delta: stats_delta(&p.stats.reference, &p.stats.candidate)?,
                    lifecycle: p.lifecycle,
                });
                for s in &p.streams {
                    let observe = |pool: Option<PoolRef>, stream: Option<i64>| {
                        let pool = pool?;
                        Some(ObservationRef {
                            device_index: pool.device_index,
                            pool_id: pool.pool_id,
                            stream: stream?,
                        })
                    };
                    let keys = Pair {
                        reference: observe(keys.reference, s.reference_stream),
                        candidate: observe(keys.candidate, s.candidate_stream),
                    };
                    observations.push(ObservationComparison {
                        keys,
                        pool_kind: p.kind,
                        match_kind: pairing.pool(Pair {
                            reference: keys.reference.map(|k| k.pool()),
                            candidate: keys.candidate.map(|k| k.pool()),
                        }),
                        stats: Pair {
                            reference: keys.reference.map(|_| s.stats.reference),
                            candidate: keys.candidate.map(|_| s.stats.candidate),
                        },
                        delta: stats_delta(&s.stats.reference, &s.stats.candidate)?,
                        lifecycle: s.lifecycle,
                    });
                }
            }
            let device_index = Pair {
                reference: d.reference_device,
                candidate: d.candidate_device,
            };
            device_comparisons.push(DeviceComparison {
                device_index,
                match_kind: pairing.device(device_index),
                sample: Pair {
                    reference: device_index
                        .reference
                        .and_then(|i| DeviceSample::of(reference, i)),
                    candidate: device_index
                        .candidate
                        .and_then(|i| DeviceSample::of(candidate, i)),
                },
                stats: Pair {
                    reference: device_index.reference.map(|_| d.allocator.reference),
                    candidate: device_index.candidate.map(|_| d.allocator.candidate),
                },
                delta: stats_delta(&d.allocator.reference, &d.allocator.candidate)?,
                lifecycle: d.lifecycle,
            });
        }
        Ok(ComparisonRows {
            allocator_scopes,
            pools,
            observations,
            device_comparisons,
        })
    }

    /// `allocator_scopes.csv`, `pools.csv`, `observations.csv` and, when there are
    /// devices, `devices.csv`.
    pub fn csv_files(&self) -> Vec<CsvFile> {
        let scopes = row_table(&ScopeComparison::names(), &self.allocator_scopes);
        let mut files = vec![
            csv_file("allocator_scopes.csv", &scopes),
            csv_file("pools.csv", &slot_table(&self.pools)),
            csv_file("observations.csv", &slot_table(&self.observations)),
        ];
        if let Some(devices) = self.devices_csv() {
            files.push(devices);
        }
        files
    }

    /// `observations.csv` alone (a phase comparison writes its end gap's).
    pub fn observations_csv(&self) -> CsvFile {
        csv_file("observations.csv", &slot_table(&self.observations))
    }

    /// `devices.csv`, when there are devices.
    pub fn devices_csv(&self) -> Option<CsvFile> {
        if self.device_comparisons.is_empty() {
            return None;
        }
        let devices = row_table(&DeviceComparison::names(), &self.device_comparisons);
        Some(csv_file("devices.csv", &devices))
    }
}

fn slot_table<K: RowKey>(rows: &[SlotComparison<K>]) -> Table {
    row_table(&SlotComparison::<K>::names(), rows)
}
