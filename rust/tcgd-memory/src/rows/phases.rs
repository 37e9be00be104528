//! The rows of a phase comparison: per scope, pool and device, one row per phase metric
//! with the four terms of `end_gap = start_gap + candidate_change - baseline_change`.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use tcgd_report::{Cell, Table};

use super::{csv_file, pool_cell, CsvFile, PoolRef};
use crate::phases::{PhaseComparison, PhaseLevel, PhaseValues};
use crate::stats::{public_metric_name, Scope};

/// The terms of one phase equation (each `None` when a reading is missing, such as a
/// device without a CUDA Runtime sample) and what follows from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PhaseComponents {
    pub baseline_change_bytes: Option<i64>,
    pub candidate_change_bytes: Option<i64>,
    pub start_gap_bytes: Option<i64>,
    pub end_gap_bytes: Option<i64>,
    /// `candidate_change_bytes - baseline_change_bytes`.
    pub change_gap_bytes: Option<i64>,
    /// Whether `end_gap = start_gap + candidate_change - baseline_change` holds (`None`
    /// when a term is missing): false only when something is wrong.
    pub identity_holds: Option<bool>,
}

impl PhaseComponents {
    pub const NAMES: [&'static str; 6] = [
        "baseline_change_bytes",
        "candidate_change_bytes",
        "start_gap_bytes",
        "end_gap_bytes",
        "change_gap_bytes",
        "identity_holds",
    ];

    pub fn of(values: &PhaseValues) -> PhaseComponents {
        let (baseline, candidate) = (values.baseline_change(), values.candidate_change());
        PhaseComponents {
            baseline_change_bytes: baseline,
            candidate_change_bytes: candidate,
            start_gap_bytes: values.start_gap(),
            end_gap_bytes: values.end_gap(),
            change_gap_bytes: candidate.zip(baseline).and_then(|(c, b)| c.checked_sub(b)),
            identity_holds: values.identity_holds(),
        }
    }

    /// The six terms as `to_dict()` entries (after a row's own identity fields).
    fn serialize_into<M: SerializeMap>(&self, map: &mut M) -> std::result::Result<(), M::Error> {
        let values = [
            self.baseline_change_bytes,
            self.candidate_change_bytes,
            self.start_gap_bytes,
            self.end_gap_bytes,
            self.change_gap_bytes,
        ];
        for (name, value) in Self::NAMES.iter().zip(values) {
            map.serialize_entry(name, &value)?;
        }
        map.serialize_entry(Self::NAMES[5], &self.identity_holds)
    }

    fn cells(&self) -> [Cell; 6] {
        [
            self.baseline_change_bytes.into(),
            self.candidate_change_bytes.into(),
            self.start_gap_bytes.into(),
            self.end_gap_bytes.into(),
            self.change_gap_bytes.into(),
            self.identity_holds.into(),
        ]
    }
}

/// One phase metric of one scope, pool pair or device pair.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseDecomposition {
    pub level: PhaseLevel,
    /// Scope rows.
    pub scope: Option<Scope>,
    /// Pool and device rows.
    pub baseline_device_index: Option<i64>,
    pub candidate_device_index: Option<i64>,
    /// Pool rows.
    pub baseline_pool: Option<PoolRef>,
    pub candidate_pool: Option<PoolRef>,
    /// The public name: `*_bytes`; a device's allocator rollup and CUDA readings are named
    /// as device metrics (`allocator_reserved_bytes`, `used_bytes`,
    /// `cuda_allocator_residual_bytes`).
    pub metric: String,
    pub components: PhaseComponents,
}

/// The public name of a phase metric at one level.
pub fn phase_metric_name(level: PhaseLevel, metric: &str) -> String {
    match (level, metric) {
        (PhaseLevel::Device, "reserved") => "allocator_reserved_bytes".to_owned(),
        (PhaseLevel::Device, "cuda_used") => "used_bytes".to_owned(),
        (PhaseLevel::Device, "residual") => "cuda_allocator_residual_bytes".to_owned(),
        _ => public_metric_name(metric),
    }
}

impl PhaseDecomposition {
    fn identity_names(level: PhaseLevel) -> &'static [&'static str] {
        match level {
            PhaseLevel::Scope => &["scope", "metric"],
            PhaseLevel::Pool => &[
                "baseline_device_index",
                "baseline_pool_id",
                "candidate_device_index",
                "candidate_pool_id",
                "metric",
            ],
            PhaseLevel::Device => &["baseline_device_index", "candidate_device_index", "metric"],
        }
    }

    fn identity_cells(&self) -> Vec<Cell> {
        let metric: Cell = self.metric.as_str().into();
        match self.level {
            PhaseLevel::Scope => vec![self.scope.map(Scope::as_str).into(), metric],
            PhaseLevel::Pool => vec![
                self.baseline_device_index.into(),
                pool_cell(self.baseline_pool.map(|p| p.pool_id)),
                self.candidate_device_index.into(),
                pool_cell(self.candidate_pool.map(|p| p.pool_id)),
                metric,
            ],
            PhaseLevel::Device => vec![
                self.baseline_device_index.into(),
                self.candidate_device_index.into(),
                metric,
            ],
        }
    }
}

impl Serialize for PhaseDecomposition {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self.level {
            PhaseLevel::Scope => map.serialize_entry("scope", &self.scope.map(Scope::as_str))?,
            PhaseLevel::Pool => {
                map.serialize_entry("baseline_device_index", &self.baseline_device_index)?;
                map.serialize_entry("baseline_pool_id", &self.baseline_pool.map(|p| p.pool_id))?;
                map.serialize_entry("candidate_device_index", &self.candidate_device_index)?;
                map.serialize_entry("candidate_pool_id", &self.candidate_pool.map(|p| p.pool_id))?;
            }
            PhaseLevel::Device => {
                map.serialize_entry("baseline_device_index", &self.baseline_device_index)?;
                map.serialize_entry("candidate_device_index", &self.candidate_device_index)?;
            }
        }
        map.serialize_entry("metric", &self.metric)?;
        self.components.serialize_into(&mut map)?;
        map.end()
    }
}

impl Serialize for PhaseComponents {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(Self::NAMES.len()))?;
        self.serialize_into(&mut map)?;
        map.end()
    }
}

/// Every row of one phase comparison, by level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseRows {
    pub allocator_scope_decomposition: Vec<PhaseDecomposition>,
    pub pool_decomposition: Vec<PhaseDecomposition>,
    pub device_decomposition: Vec<PhaseDecomposition>,
}

impl PhaseRows {
    pub fn build(phases: &PhaseComparison) -> PhaseRows {
        let mut rows = PhaseRows {
            allocator_scope_decomposition: Vec::new(),
            pool_decomposition: Vec::new(),
            device_decomposition: Vec::new(),
        };
        for r in &phases.rows {
            let pool = |device: Option<i64>, pool| {
                Some(PoolRef {
                    device_index: device?,
                    pool_id: pool?,
                })
            };
            let row = PhaseDecomposition {
                level: r.level,
                scope: r.scope,
                baseline_device_index: r.baseline_device,
                candidate_device_index: r.candidate_device,
                baseline_pool: pool(r.baseline_device, r.baseline_pool),
                candidate_pool: pool(r.candidate_device, r.candidate_pool),
                metric: phase_metric_name(r.level, r.metric),
                components: PhaseComponents::of(&r.values),
            };
            match r.level {
                PhaseLevel::Scope => rows.allocator_scope_decomposition.push(row),
                PhaseLevel::Pool => rows.pool_decomposition.push(row),
                PhaseLevel::Device => rows.device_decomposition.push(row),
            }
        }
        rows
    }

    /// `allocator_scopes.csv`, `pools.csv` and, when there are devices,
    /// `device_decomposition.csv` (a phase comparison adds its end gap's
    /// `observations.csv` and `devices.csv`).
    pub fn csv_files(&self) -> Vec<CsvFile> {
        let mut files = vec![
            csv_file(
                "allocator_scopes.csv",
                &table(PhaseLevel::Scope, &self.allocator_scope_decomposition),
            ),
            csv_file(
                "pools.csv",
                &table(PhaseLevel::Pool, &self.pool_decomposition),
            ),
        ];
        if !self.device_decomposition.is_empty() {
            files.push(csv_file(
                "device_decomposition.csv",
                &table(PhaseLevel::Device, &self.device_decomposition),
            ));
        }
        files
    }
}

fn table(level: PhaseLevel, rows: &[PhaseDecomposition]) -> Table {
    let mut names = PhaseDecomposition::identity_names(level).to_vec();
    names.extend(PhaseComponents::NAMES);
    let rows = rows
        .iter()
        .map(|r| {
            let mut cells = r.identity_cells();
            cells.extend(r.components.cells());
            cells
        })
        .collect();
    Table::with_rows(&names, rows)
}
