//! The rows of a phase comparison: per scope, pool and device, one row per phase metric
//! with the terms of `end_gap = start_gap + candidate_change - baseline_change`. Each row
//! is a view of the comparison's own [`PhaseRow`]: the reference's names, its
//! `to_dict()` and its CSV line.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use tcgd_report::{Cell, Table};

use super::{csv_file, pool_cell, row_table, CsvFile, CsvRow, PoolRef};
use crate::model::{pool_key_label, pool_label};
use crate::phases::{PhaseComparison, PhaseLevel, PhaseRow, PhaseValues};
use crate::stats::{public_metric_name, Scope};

/// The terms of one phase equation of one metric (each `None` when a reading is missing,
/// such as a device without a CUDA Runtime sample) and what follows from them: the
/// reference's `MemoryPhaseComponents`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseComponents {
    pub metric: String,
    pub values: PhaseValues,
}

impl PhaseComponents {
    const NAMES: [&'static str; 5] = [
        "baseline_change_bytes",
        "candidate_change_bytes",
        "start_gap_bytes",
        "end_gap_bytes",
        "change_gap_bytes",
    ];

    /// The terms in [`Self::NAMES`] order.
    pub fn terms(&self) -> [Option<i64>; 5] {
        let v = &self.values;
        [
            v.baseline_change(),
            v.candidate_change(),
            v.start_gap(),
            v.end_gap(),
            v.change_gap(),
        ]
    }

    /// The terms, then `identity_holds`, as `to_dict()` entries.
    fn serialize_into<M: SerializeMap>(&self, map: &mut M) -> std::result::Result<(), M::Error> {
        for (name, value) in Self::NAMES.iter().zip(self.terms()) {
            map.serialize_entry(name, &value)?;
        }
        map.serialize_entry("identity_holds", &self.values.identity_holds())
    }

    fn cells(&self) -> impl Iterator<Item = Cell> {
        let holds = self.values.identity_holds();
        self.terms()
            .into_iter()
            .map(Cell::from)
            .chain([holds.into()])
    }
}

impl Serialize for PhaseComponents {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(Self::NAMES.len() + 2))?;
        map.serialize_entry("metric", &self.metric)?;
        self.serialize_into(&mut map)?;
        map.end()
    }
}

/// One phase metric of one scope, pool pair or device pair.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseDecomposition(pub PhaseRow);

/// The public name of a phase metric at one level: `*_bytes`; a device's allocator
/// rollup and CUDA readings are named as device metrics.
pub fn phase_metric_name(level: PhaseLevel, metric: &str) -> String {
    match (level, metric) {
        (PhaseLevel::Device, "reserved") => "allocator_reserved_bytes".to_owned(),
        (PhaseLevel::Device, "cuda_used") => "used_bytes".to_owned(),
        (PhaseLevel::Device, "residual") => "cuda_allocator_residual_bytes".to_owned(),
        _ => public_metric_name(metric),
    }
}

impl PhaseDecomposition {
    pub fn metric(&self) -> String {
        phase_metric_name(self.0.level, self.0.metric)
    }

    pub fn components(&self) -> PhaseComponents {
        PhaseComponents {
            metric: self.metric(),
            values: self.0.values,
        }
    }

    /// Whether any term of the equation is known and not zero.
    pub fn changed(&self) -> bool {
        self.0.values.changed()
    }

    /// `device[0] pool[a,b] -> device[1] pool[c,d]`, `pool[unknown]` for a side the other
    /// lacks: the mapped pair as labels name it.
    pub fn pool_pair_label(&self) -> String {
        let side = |device: Option<i64>, pool: Option<_>| match (device, pool) {
            (Some(d), Some(p)) => pool_key_label(d, p),
            _ => pool_label(None),
        };
        format!(
            "{} -> {}",
            side(self.0.baseline_device, self.0.baseline_pool),
            side(self.0.candidate_device, self.0.candidate_pool)
        )
    }

    pub fn baseline_pool(&self) -> Option<PoolRef> {
        PoolRef::of(self.0.baseline_device, self.0.baseline_pool)
    }

    pub fn candidate_pool(&self) -> Option<PoolRef> {
        PoolRef::of(self.0.candidate_device, self.0.candidate_pool)
    }

    fn names(level: PhaseLevel) -> Vec<String> {
        let mut names = PhaseDecomposition::identity_names(level).to_vec();
        names.extend(PhaseComponents::NAMES);
        names.push("identity_holds");
        names.into_iter().map(str::to_owned).collect()
    }

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
        let r = &self.0;
        let metric = self.metric().into();
        match r.level {
            PhaseLevel::Scope => vec![r.scope.map(Scope::as_str).into(), metric],
            PhaseLevel::Pool => vec![
                r.baseline_device.into(),
                pool_cell(r.baseline_pool),
                r.candidate_device.into(),
                pool_cell(r.candidate_pool),
                metric,
            ],
            PhaseLevel::Device => vec![r.baseline_device.into(), r.candidate_device.into(), metric],
        }
    }
}

impl CsvRow for PhaseDecomposition {
    fn csv_names(&self) -> Vec<String> {
        PhaseDecomposition::names(self.0.level)
    }

    fn csv_cells(&self) -> Vec<Cell> {
        let mut cells = self.identity_cells();
        cells.extend(self.components().cells());
        cells
    }
}

impl Serialize for PhaseDecomposition {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let r = &self.0;
        let mut map = serializer.serialize_map(None)?;
        match r.level {
            PhaseLevel::Scope => map.serialize_entry("scope", &r.scope.map(Scope::as_str))?,
            PhaseLevel::Pool => {
                map.serialize_entry("baseline_device_index", &r.baseline_device)?;
                map.serialize_entry("baseline_pool_id", &self.baseline_pool().map(|p| p.pool_id))?;
                map.serialize_entry("candidate_device_index", &r.candidate_device)?;
                let candidate = self.candidate_pool().map(|p| p.pool_id);
                map.serialize_entry("candidate_pool_id", &candidate)?;
            }
            PhaseLevel::Device => {
                map.serialize_entry("baseline_device_index", &r.baseline_device)?;
                map.serialize_entry("candidate_device_index", &r.candidate_device)?;
            }
        }
        map.serialize_entry("metric", &self.metric())?;
        self.components().serialize_into(&mut map)?;
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
        let level = |level: PhaseLevel| -> Vec<PhaseDecomposition> {
            phases
                .rows
                .iter()
                .filter(|r| r.level == level)
                .map(|r| PhaseDecomposition(r.clone()))
                .collect()
        };
        PhaseRows {
            allocator_scope_decomposition: level(PhaseLevel::Scope),
            pool_decomposition: level(PhaseLevel::Pool),
            device_decomposition: level(PhaseLevel::Device),
        }
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
            let devices = table(PhaseLevel::Device, &self.device_decomposition);
            files.push(csv_file("device_decomposition.csv", &devices));
        }
        files
    }
}

fn table(level: PhaseLevel, rows: &[PhaseDecomposition]) -> Table {
    row_table(&PhaseDecomposition::names(level), rows)
}
