//! Phase comparison: how much a baseline phase (two points of one run) and a candidate
//! phase changed, and how far apart they were at the start and at the end. Every row
//! checks `end_gap = start_gap + candidate_change - baseline_change`: the four values are
//! read independently, so a pairing mistake shows up as a row whose identity fails.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::compare::{CompareOptions, PoolKey};
use crate::error::{MemoryError, Result, TorchVersion};
use crate::model::{PoolId, DEFAULT_POOL};
use crate::state::{MemoryState, StateIdentity};
use crate::stats::{MemoryStats, Scope};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseLevel {
    Scope,
    Device,
    Pool,
}

impl PhaseLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseLevel::Scope => "scope",
            PhaseLevel::Device => "device",
            PhaseLevel::Pool => "pool",
        }
    }
}

/// The four readings of one quantity and what follows from them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PhaseValues {
    pub baseline_start: Option<i64>,
    pub baseline_end: Option<i64>,
    pub candidate_start: Option<i64>,
    pub candidate_end: Option<i64>,
}

impl PhaseValues {
    pub fn baseline_change(&self) -> Option<i64> {
        self.baseline_end?.checked_sub(self.baseline_start?)
    }

    pub fn candidate_change(&self) -> Option<i64> {
        self.candidate_end?.checked_sub(self.candidate_start?)
    }

    pub fn start_gap(&self) -> Option<i64> {
        self.candidate_start?.checked_sub(self.baseline_start?)
    }

    pub fn end_gap(&self) -> Option<i64> {
        self.candidate_end?.checked_sub(self.baseline_end?)
    }

    /// `candidate_change - baseline_change`: how much more the candidate phase changed.
    pub fn change_gap(&self) -> Option<i64> {
        self.candidate_change()?
            .checked_sub(self.baseline_change()?)
    }

    /// Whether any of the four terms is known and not zero: a phase row whose terms are
    /// all zero (or unknown) is unchanged.
    pub fn changed(&self) -> bool {
        [
            self.baseline_change(),
            self.candidate_change(),
            self.start_gap(),
            self.end_gap(),
        ]
        .into_iter()
        .any(|t| t.is_some_and(|v| v != 0))
    }

    /// `None` when a value is missing (no counterpart, or no CUDA reading). Evaluated in
    /// 128 bits: the right-hand side of the identity can exceed 64 bits on its way even
    /// when every term fits.
    pub fn identity_holds(&self) -> Option<bool> {
        let wide = |v: i64| i128::from(v);
        let rhs = wide(self.start_gap()?) + wide(self.candidate_change()?)
            - wide(self.baseline_change()?);
        Some(rhs == wide(self.end_gap()?))
    }

    /// The first derived value (change or gap) whose two readings are known but differ by
    /// more than 64 bits can hold, as `(name, from, to)`.
    fn overflowing(&self) -> Option<(&'static str, i64, i64)> {
        let pairs = [
            ("baseline change", self.baseline_start, self.baseline_end),
            ("candidate change", self.candidate_start, self.candidate_end),
            ("start gap", self.baseline_start, self.candidate_start),
            ("end gap", self.baseline_end, self.candidate_end),
        ];
        pairs.into_iter().find_map(|(name, from, to)| {
            let (from, to) = (from?, to?);
            to.checked_sub(from).is_none().then_some((name, from, to))
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseRow {
    pub level: PhaseLevel,
    pub scope: Option<Scope>,
    pub baseline_device: Option<i64>,
    pub candidate_device: Option<i64>,
    pub baseline_pool: Option<PoolId>,
    pub candidate_pool: Option<PoolId>,
    pub metric: &'static str,
    pub values: PhaseValues,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseComparison {
    pub baseline: (StateIdentity, StateIdentity),
    pub candidate: (StateIdentity, StateIdentity),
    pub same_origin: bool,
    pub rows: Vec<PhaseRow>,
    pub warnings: Vec<String>,
}

impl PhaseComparison {
    /// Rows whose identity does not hold: always empty unless something is wrong.
    pub fn identity_failures(&self) -> Vec<&PhaseRow> {
        self.rows
            .iter()
            .filter(|r| r.values.identity_holds() == Some(false))
            .collect()
    }
}

/// The byte metrics a phase decomposes (the reference's `PhaseMetric`, without the
/// `_bytes` suffix the bindings add). Counts are point diagnostics, not phase metrics.
const METRICS: [&str; 9] = [
    "reserved",
    "allocated",
    "active",
    "awaiting_free",
    "inactive",
    "requested",
    "internal_fragmentation",
    "expandable_reserved",
    "expandable_inactive",
];

fn metric(stats: &MemoryStats, name: &str) -> i64 {
    stats
        .columns()
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, v)| *v)
}

fn check_range(start: &MemoryState, end: &MemoryState, what: &str) -> Result<()> {
    if start.identity.origin != end.identity.origin || start.identity.origin.is_empty() {
        return Err(MemoryError::invalid(format!(
            "the {what} range goes from '{}' to '{}', which belong to different runs; a \
             phase is two points of one run",
            start.identity.title(),
            end.identity.title()
        )));
    }
    Ok(())
}

fn pools(states: [&MemoryState; 2], device: i64) -> BTreeSet<PoolId> {
    states
        .iter()
        .flat_map(|s| s.observations.iter())
        .filter(|(k, _)| k.device == device)
        .map(|(k, _)| k.pool)
        .collect()
}

/// Each baseline key with its candidate counterpart (the key `counterpart` names, when the
/// candidate has it and no earlier baseline key took it), then each candidate key that no
/// baseline key took, alone.
fn pair_up<K: Ord + Copy>(
    baseline: &BTreeSet<K>,
    candidate: &BTreeSet<K>,
    counterpart: impl Fn(K) -> Option<K>,
) -> Vec<(Option<K>, Option<K>)> {
    let mut taken = BTreeSet::new();
    let mut pairs: Vec<(Option<K>, Option<K>)> = baseline
        .iter()
        .map(|&b| {
            let c = counterpart(b).filter(|c| candidate.contains(c) && taken.insert(*c));
            (Some(b), c)
        })
        .collect();
    pairs.extend(
        candidate
            .iter()
            .filter(|c| !taken.contains(c))
            .map(|&c| (None, Some(c))),
    );
    pairs
}

/// The devices either end of a phase saw.
fn phase_devices((start, end): (&MemoryState, &MemoryState)) -> BTreeSet<i64> {
    start.devices.iter().chain(&end.devices).copied().collect()
}

pub fn compare_phases(
    baseline: (&MemoryState, &MemoryState),
    candidate: (&MemoryState, &MemoryState),
    options: &CompareOptions,
) -> Result<PhaseComparison> {
    check_range(baseline.0, baseline.1, "baseline")?;
    check_range(candidate.0, candidate.1, "candidate")?;
    let same_origin = baseline.0.identity.origin == candidate.0.identity.origin;
    let mut rows = Vec::new();
    let both = |v: [i64; 4]| PhaseValues {
        baseline_start: Some(v[0]),
        baseline_end: Some(v[1]),
        candidate_start: Some(v[2]),
        candidate_end: Some(v[3]),
    };

    for scope in Scope::ALL {
        let s = [baseline.0, baseline.1, candidate.0, candidate.1]
            .map(|state| state.scope_stats(None, scope));
        for name in METRICS {
            rows.push(PhaseRow {
                level: PhaseLevel::Scope,
                scope: Some(scope),
                baseline_device: None,
                candidate_device: None,
                baseline_pool: None,
                candidate_pool: None,
                metric: name,
                values: both(s.map(|x| metric(&x, name))),
            });
        }
    }

    let device_map: BTreeMap<i64, i64> = options.device_mapping.iter().copied().collect();
    let pool_map: HashMap<PoolKey, PoolKey> = options.pool_mapping.iter().copied().collect();
    let (base_devices, cand_devices) = (phase_devices(baseline), phase_devices(candidate));
    let pairs = pair_up(&base_devices, &cand_devices, |d| {
        Some(device_map.get(&d).copied().unwrap_or(d))
    });

    let mut warnings = Vec::new();
    for (bd, cd) in pairs {
        let device_reading = |state: &MemoryState, device: Option<i64>, what: &str| {
            let d = device?;
            match what {
                "cuda_used" => state.memory(d).cuda_used(),
                "residual" => state.residual(d),
                other => Some(metric(&state.device_stats(d), other)),
            }
        };
        for name in ["cuda_used", "residual"].into_iter().chain(METRICS) {
            rows.push(PhaseRow {
                level: PhaseLevel::Device,
                scope: None,
                baseline_device: bd,
                candidate_device: cd,
                baseline_pool: None,
                candidate_pool: None,
                metric: name,
                values: PhaseValues {
                    baseline_start: device_reading(baseline.0, bd, name),
                    baseline_end: device_reading(baseline.1, bd, name),
                    candidate_start: device_reading(candidate.0, cd, name),
                    candidate_end: device_reading(candidate.1, cd, name),
                },
            });
        }
        let base_pools = bd
            .map(|d| pools([baseline.0, baseline.1], d))
            .unwrap_or_default();
        let cand_pools = cd
            .map(|d| pools([candidate.0, candidate.1], d))
            .unwrap_or_default();
        let pool_pairs = pair_up(&base_pools, &cand_pools, |bp| {
            match bd.and_then(|d| pool_map.get(&(d, bp))) {
                Some(&(_, p)) => Some(p),
                None if same_origin || bp == DEFAULT_POOL => Some(bp),
                None => None,
            }
        });
        for &(bp, cp) in &pool_pairs {
            if let (Some(bp), None) = (bp, cp) {
                if !same_origin && bp != DEFAULT_POOL {
                    warnings.push(format!(
                        "baseline pool [{},{}] of device {} has no candidate counterpart; map \
                         it with pool_mapping to compare it",
                        bp.0,
                        bp.1,
                        bd.map_or_else(|| "?".to_owned(), |d| d.to_string())
                    ));
                }
            }
        }
        for (bp, cp) in pool_pairs {
            let reading = |state: &MemoryState, device: Option<i64>, pool: Option<PoolId>| {
                Some(state.pool(device?, pool?))
            };
            let s = [
                reading(baseline.0, bd, bp),
                reading(baseline.1, bd, bp),
                reading(candidate.0, cd, cp),
                reading(candidate.1, cd, cp),
            ];
            for name in METRICS {
                let v = s.map(|x| x.map(|x| metric(&x, name)));
                rows.push(PhaseRow {
                    level: PhaseLevel::Pool,
                    scope: None,
                    baseline_device: bd,
                    candidate_device: cd,
                    baseline_pool: bp,
                    candidate_pool: cp,
                    metric: name,
                    values: PhaseValues {
                        baseline_start: v[0],
                        baseline_end: v[1],
                        candidate_start: v[2],
                        candidate_end: v[3],
                    },
                });
            }
        }
    }
    // A change or gap that does not fit would show as missing: refuse the comparison and
    // say which reading it was (only signed readings, the residual, can get there).
    for row in &rows {
        if let Some((name, from, to)) = row.values.overflowing() {
            let place = match (row.level, row.baseline_device.or(row.candidate_device)) {
                (PhaseLevel::Scope, _) | (_, None) => row
                    .scope
                    .map_or_else(|| "scope".to_owned(), |s| format!("scope {}", s.as_str())),
                (_, Some(d)) => format!("device_memory[{d}]"),
            };
            return Err(MemoryError::Overflow {
                field: format!("{place}.{}", row.metric),
                what: format!("the {name}, from {from} to {to}"),
                torch: TorchVersion(candidate.1.identity.taken.torch_version.clone()),
            });
        }
    }
    Ok(PhaseComparison {
        baseline: (baseline.0.identity.clone(), baseline.1.identity.clone()),
        candidate: (candidate.0.identity.clone(), candidate.1.identity.clone()),
        same_origin,
        rows,
        warnings,
    })
}
