//! Comparing two states: the report tree device -> CUDA used -> residual + allocator ->
//! pools -> streams, each side's values, and the address lifecycle where it means
//! something.
//!
//! Pairing rules: states of one origin pair devices, pools and streams by identity.
//! Across independent runs, devices pair by index unless `device_mapping` says otherwise,
//! default pools pair automatically, private pools only through `pool_mapping`, and
//! streams never pair (a stream handle of one process says nothing about another's).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::error::{MemoryError, Result, TorchVersion};
use crate::lifecycle::{lifecycle, Lifecycle, LifecycleLabel};
use crate::model::{PoolId, DEFAULT_POOL};
use crate::state::{MemoryState, StateIdentity};
use crate::stats::{MemoryStats, ObservationKey, PoolKind};

/// A pool of one device: what users name when they map pools across runs.
pub type PoolKey = (i64, PoolId);

#[derive(Debug, Clone, Default)]
pub struct CompareOptions {
    /// Reference pool -> candidate pool. Private pools of independent runs pair only
    /// through this.
    pub pool_mapping: Vec<(PoolKey, PoolKey)>,
    /// Reference device -> candidate device; unmapped devices pair with the same index.
    pub device_mapping: Vec<(i64, i64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// Both states come from one run or one probe: one process, one history.
    SameOrigin,
    /// Independent runs (or probes): only state totals compare.
    CrossRun,
    /// A single state, reported on its own.
    Single,
}

impl Relation {
    pub fn as_str(self) -> &'static str {
        match self {
            Relation::SameOrigin => "same_origin",
            Relation::CrossRun => "cross_run",
            Relation::Single => "single",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Pair<T> {
    pub reference: T,
    pub candidate: T,
}

impl Pair<Option<i64>> {
    /// `candidate - reference`; `None` when a side is unknown. (A comparison is refused
    /// when a change does not fit, so `None` never means an overflow here.)
    pub fn change(&self) -> Option<i64> {
        self.candidate?.checked_sub(self.reference?)
    }

    /// Whether both sides are known but their difference does not fit in 64 bits.
    fn change_overflows(&self) -> bool {
        self.candidate.is_some() && self.reference.is_some() && self.change().is_none()
    }
}

impl Pair<MemoryStats> {
    pub fn changed(&self) -> bool {
        self.reference != self.candidate
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamNode {
    pub reference_stream: Option<i64>,
    pub candidate_stream: Option<i64>,
    pub stats: Pair<MemoryStats>,
    pub lifecycle: Option<Lifecycle>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolNode {
    pub reference_pool: Option<PoolId>,
    pub candidate_pool: Option<PoolId>,
    pub kind: PoolKind,
    pub stats: Pair<MemoryStats>,
    pub lifecycle: Option<Lifecycle>,
    pub streams: Vec<StreamNode>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceNode {
    pub reference_device: Option<i64>,
    pub candidate_device: Option<i64>,
    pub cuda_used: Pair<Option<i64>>,
    pub residual: Pair<Option<i64>>,
    /// This package's probe slots: part of the residual, reported on their own line.
    pub probe_slots: Pair<Option<i64>>,
    /// Residual without the probe slots.
    pub residual_other: Pair<Option<i64>>,
    /// Pinned host memory of the probe runtime: not device memory, shown for context.
    pub probe_pinned: Pair<Option<i64>>,
    pub allocator: Pair<MemoryStats>,
    pub lifecycle: Option<Lifecycle>,
    pub pools: Vec<PoolNode>,
}

impl DeviceNode {
    /// The device readings by the names reports give them, in report order.
    pub fn readings(&self) -> [(&'static str, Pair<Option<i64>>); 5] {
        [
            ("cuda_used", self.cuda_used),
            ("residual", self.residual),
            ("probe_slots", self.probe_slots),
            ("residual_other", self.residual_other),
            ("probe_pinned", self.probe_pinned),
        ]
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub reference: Option<StateIdentity>,
    pub candidate: StateIdentity,
    pub relation: Relation,
    pub lifecycle: LifecycleLabel,
    pub devices: Vec<DeviceNode>,
    pub warnings: Vec<String>,
    /// Beyond the reference design: private pools paired by capture order (ascending
    /// pool ids per device). Never applied; pass it as `pool_mapping` if it is right.
    pub suggested_pool_mapping: Vec<(PoolKey, PoolKey)>,
}

fn device_values(state: Option<&MemoryState>, device: Option<i64>) -> [Option<i64>; 5] {
    let (Some(state), Some(device)) = (state, device) else {
        return [None; 5];
    };
    let memory = state.memory(device);
    [
        memory.cuda_used(),
        state.residual(device),
        memory.probe_device_bytes,
        state.residual_other(device),
        memory.probe_pinned_bytes,
    ]
}

/// Streams of one (device, pool) of a state, with their stats.
fn streams_of(state: &MemoryState, device: i64, pool: PoolId) -> Vec<(i64, MemoryStats)> {
    state
        .observations
        .iter()
        .filter(|(k, _)| k.device == device && k.pool == pool)
        .map(|(k, s)| (k.stream, *s))
        .collect()
}

fn pools_of(state: &MemoryState, device: i64) -> Vec<PoolId> {
    let mut pools: Vec<PoolId> = Vec::new();
    for (k, _) in &state.observations {
        if k.device == device && pools.last() != Some(&k.pool) {
            pools.push(k.pool);
        }
    }
    pools
}

struct Builder<'a> {
    reference: Option<&'a MemoryState>,
    candidate: &'a MemoryState,
    same_origin: bool,
    lifecycles: Option<HashMap<ObservationKey, Lifecycle>>,
}

impl Builder<'_> {
    fn lifecycle_of(
        &self,
        reference: Option<ObservationKey>,
        candidate: Option<ObservationKey>,
    ) -> Option<Lifecycle> {
        let map = self.lifecycles.as_ref()?;
        match (reference, candidate) {
            (Some(r), Some(c)) if r == c => map.get(&r).copied().or(Some(Lifecycle::default())),
            (Some(_), Some(_)) => None,
            (Some(k), None) | (None, Some(k)) => {
                map.get(&k).copied().or(Some(Lifecycle::default()))
            }
            (None, None) => None,
        }
    }

    fn streams(
        &self,
        devices: (Option<i64>, Option<i64>),
        pools: (Option<PoolId>, Option<PoolId>),
    ) -> Vec<StreamNode> {
        let reference = match (self.reference, devices.0, pools.0) {
            (Some(s), Some(d), Some(p)) => streams_of(s, d, p),
            _ => Vec::new(),
        };
        let candidate = match (devices.1, pools.1) {
            (Some(d), Some(p)) => streams_of(self.candidate, d, p),
            _ => Vec::new(),
        };
        let ref_key = |stream| {
            Some(ObservationKey {
                device: devices.0?,
                pool: pools.0?,
                stream,
            })
        };
        let cand_key = |stream| {
            Some(ObservationKey {
                device: devices.1?,
                pool: pools.1?,
                stream,
            })
        };
        let mut out = Vec::new();
        if self.same_origin {
            let mut ids: BTreeSet<i64> = reference.iter().map(|(s, _)| *s).collect();
            ids.extend(candidate.iter().map(|(s, _)| *s));
            for id in ids {
                let r = reference.iter().find(|(s, _)| *s == id).map(|(_, v)| *v);
                let c = candidate.iter().find(|(s, _)| *s == id).map(|(_, v)| *v);
                out.push(StreamNode {
                    reference_stream: r.map(|_| id),
                    candidate_stream: c.map(|_| id),
                    stats: Pair {
                        reference: r.unwrap_or_default(),
                        candidate: c.unwrap_or_default(),
                    },
                    lifecycle: self
                        .lifecycle_of(r.and_then(|_| ref_key(id)), c.and_then(|_| cand_key(id))),
                });
            }
        } else {
            for (id, stats) in reference {
                out.push(StreamNode {
                    reference_stream: Some(id),
                    candidate_stream: None,
                    stats: Pair {
                        reference: stats,
                        candidate: MemoryStats::default(),
                    },
                    lifecycle: None,
                });
            }
            for (id, stats) in candidate {
                out.push(StreamNode {
                    reference_stream: None,
                    candidate_stream: Some(id),
                    stats: Pair {
                        reference: MemoryStats::default(),
                        candidate: stats,
                    },
                    lifecycle: None,
                });
            }
        }
        out
    }

    fn pool(
        &self,
        devices: (Option<i64>, Option<i64>),
        pools: (Option<PoolId>, Option<PoolId>),
    ) -> PoolNode {
        let streams = self.streams(devices, pools);
        // A pool's values are the sums over its streams, computed (and checked) when each
        // state was made.
        let stats = Pair {
            reference: match (self.reference, devices.0, pools.0) {
                (Some(s), Some(d), Some(p)) => s.pool(d, p),
                _ => MemoryStats::default(),
            },
            candidate: match (devices.1, pools.1) {
                (Some(d), Some(p)) => self.candidate.pool(d, p),
                _ => MemoryStats::default(),
            },
        };
        let lifecycle = sum_lifecycles(streams.iter().map(|s| s.lifecycle));
        let kind = PoolKind::of(pools.0.or(pools.1).unwrap_or(DEFAULT_POOL));
        PoolNode {
            reference_pool: pools.0,
            candidate_pool: pools.1,
            kind,
            stats,
            lifecycle,
            streams,
        }
    }

    fn device(
        &self,
        devices: (Option<i64>, Option<i64>),
        pool_map: &HashMap<PoolKey, PoolKey>,
    ) -> DeviceNode {
        let ref_pools = match (self.reference, devices.0) {
            (Some(s), Some(d)) => pools_of(s, d),
            _ => Vec::new(),
        };
        let cand_pools = devices
            .1
            .map(|d| pools_of(self.candidate, d))
            .unwrap_or_default();
        let mut taken: BTreeSet<PoolId> = BTreeSet::new();
        let mut pools = Vec::new();
        for &r in &ref_pools {
            let target = match devices.0.and_then(|d| pool_map.get(&(d, r))) {
                Some(&(_, p)) => Some(p),
                None if self.same_origin || r == DEFAULT_POOL => Some(r),
                None => None,
            }
            .filter(|p| cand_pools.contains(p) && !taken.contains(p));
            if let Some(p) = target {
                taken.insert(p);
            }
            pools.push(self.pool(devices, (Some(r), target)));
        }
        for &c in &cand_pools {
            if !taken.contains(&c) {
                pools.push(self.pool(devices, (None, Some(c))));
            }
        }
        // Every pool of each device is listed once, so the device's totals are the sums
        // over its pools.
        let allocator = Pair {
            reference: match (self.reference, devices.0) {
                (Some(s), Some(d)) => s.device_stats(d),
                _ => MemoryStats::default(),
            },
            candidate: devices
                .1
                .map(|d| self.candidate.device_stats(d))
                .unwrap_or_default(),
        };
        let lifecycle = sum_lifecycles(pools.iter().map(|p| p.lifecycle));
        let r = device_values(self.reference, devices.0);
        let c = device_values(Some(self.candidate), devices.1);
        let pair = |i: usize| Pair {
            reference: r[i],
            candidate: c[i],
        };
        DeviceNode {
            reference_device: devices.0,
            candidate_device: devices.1,
            cuda_used: pair(0),
            residual: pair(1),
            probe_slots: pair(2),
            residual_other: pair(3),
            probe_pinned: pair(4),
            allocator,
            lifecycle,
            pools,
        }
    }
}

/// Refuses a comparison whose device readings differ by more than 64 bits can hold (a
/// residual is signed, so two of them can): reports would otherwise show a wrapped or
/// missing change.
fn check_changes(devices: &[DeviceNode], torch: &TorchVersion) -> Result<()> {
    for d in devices {
        let device = d
            .candidate_device
            .or(d.reference_device)
            .unwrap_or_default();
        for (metric, pair) in d.readings() {
            if pair.change_overflows() {
                return Err(MemoryError::Overflow {
                    field: format!("device_memory[{device}].{metric}"),
                    what: format!(
                        "the change from {} to {}",
                        pair.reference.unwrap_or_default(),
                        pair.candidate.unwrap_or_default()
                    ),
                    torch: torch.clone(),
                });
            }
        }
    }
    Ok(())
}

fn sum_lifecycles(items: impl Iterator<Item = Option<Lifecycle>>) -> Option<Lifecycle> {
    let mut total: Option<Lifecycle> = None;
    for item in items.flatten() {
        total.get_or_insert_with(Lifecycle::default).add(&item);
    }
    total
}

fn check_mappings(
    reference: &MemoryState,
    candidate: &MemoryState,
    options: &CompareOptions,
) -> Result<()> {
    for (r, c) in &options.device_mapping {
        if !reference.devices.contains(r) {
            return Err(MemoryError::invalid(format!(
                "device_mapping names reference device {r}, which '{}' does not cover \
                 (devices {:?})",
                reference.identity.title(),
                reference.devices
            )));
        }
        if !candidate.devices.contains(c) {
            return Err(MemoryError::invalid(format!(
                "device_mapping names candidate device {c}, which '{}' does not cover \
                 (devices {:?})",
                candidate.identity.title(),
                candidate.devices
            )));
        }
    }
    let pools = |s: &MemoryState| -> BTreeSet<PoolKey> {
        s.observations
            .iter()
            .map(|(k, _)| (k.device, k.pool))
            .collect()
    };
    let (rp, cp) = (pools(reference), pools(candidate));
    for (r, c) in &options.pool_mapping {
        if !rp.contains(r) {
            return Err(MemoryError::invalid(format!(
                "pool_mapping names reference pool {r:?} (device, pool id), which '{}' does \
                 not have; its pools: {rp:?}",
                reference.identity.title()
            )));
        }
        if !cp.contains(c) {
            return Err(MemoryError::invalid(format!(
                "pool_mapping names candidate pool {c:?} (device, pool id), which '{}' does \
                 not have; its pools: {cp:?}",
                candidate.identity.title()
            )));
        }
    }
    Ok(())
}

/// Compares two states. `same_origin` is decided from the identities: the same run id or
/// probe id means one process and one history.
pub fn compare(
    reference: &MemoryState,
    candidate: &MemoryState,
    options: &CompareOptions,
) -> Result<Comparison> {
    check_mappings(reference, candidate, options)?;
    let same_origin = !reference.identity.origin.is_empty()
        && reference.identity.origin == candidate.identity.origin;
    let mut warnings = Vec::new();
    let (label, lifecycles) = if same_origin {
        let (label, map) = lifecycle(reference, candidate);
        if label == LifecycleLabel::Approximate {
            warnings.push(
                "address lifecycle is approximate: some segment or block addresses are \
                 unknown, so segments and blocks were matched by size within each device, \
                 pool and stream"
                    .to_owned(),
            );
        }
        (label, Some(map))
    } else {
        (LifecycleLabel::Unavailable, None)
    };
    let builder = Builder {
        reference: Some(reference),
        candidate,
        same_origin,
        lifecycles,
    };
    let device_map: BTreeMap<i64, i64> = options.device_mapping.iter().copied().collect();
    let pool_map: HashMap<PoolKey, PoolKey> = options.pool_mapping.iter().copied().collect();
    for ((rd, _), (cd, _)) in &options.pool_mapping {
        let paired = device_map.get(rd).copied().unwrap_or(*rd);
        if paired != *cd {
            return Err(MemoryError::invalid(format!(
                "pool_mapping pairs a pool of reference device {rd} with one of candidate \
                 device {cd}, but device {rd} pairs with device {paired}; add {rd} -> {cd} \
                 to device_mapping"
            )));
        }
    }
    let mut devices = Vec::new();
    let mut taken = BTreeSet::new();
    for &rd in &reference.devices {
        let target = device_map.get(&rd).copied().unwrap_or(rd);
        let cd =
            (candidate.devices.contains(&target) && !taken.contains(&target)).then_some(target);
        if let Some(cd) = cd {
            taken.insert(cd);
        }
        devices.push(builder.device((Some(rd), cd), &pool_map));
    }
    for &cd in &candidate.devices {
        if !taken.contains(&cd) {
            devices.push(builder.device((None, Some(cd)), &pool_map));
        }
    }

    check_changes(
        &devices,
        &TorchVersion(candidate.identity.taken.torch_version.clone()),
    )?;

    let mut suggested = Vec::new();
    if !same_origin {
        for device in &devices {
            let (Some(rd), Some(cd)) = (device.reference_device, device.candidate_device) else {
                continue;
            };
            let unpaired = |side: fn(&PoolNode) -> Option<PoolId>,
                            other: fn(&PoolNode) -> Option<PoolId>| {
                device
                    .pools
                    .iter()
                    .filter(|p| p.kind == PoolKind::Private && other(p).is_none())
                    .filter_map(side)
                    .collect::<Vec<_>>()
            };
            let mut r = unpaired(|p| p.reference_pool, |p| p.candidate_pool);
            let mut c = unpaired(|p| p.candidate_pool, |p| p.reference_pool);
            r.sort_unstable();
            c.sort_unstable();
            if !r.is_empty() || !c.is_empty() {
                warnings.push(format!(
                    "device {rd} -> {cd}: private pools of independent runs pair only through \
                     pool_mapping; {} reference and {} candidate private pools are shown \
                     unpaired",
                    r.len(),
                    c.len()
                ));
            }
            suggested.extend(r.into_iter().zip(c).map(|(a, b)| ((rd, a), (cd, b))));
        }
        warnings.push(
            "independent runs: address lifecycle is unavailable and streams are not paired"
                .to_owned(),
        );
    }
    for (side, state) in [("reference", reference), ("candidate", candidate)] {
        for w in &state.warnings {
            warnings.push(format!("{side} '{}': {w}", state.identity.title()));
        }
    }
    Ok(Comparison {
        reference: Some(reference.identity.clone()),
        candidate: candidate.identity.clone(),
        relation: if same_origin {
            Relation::SameOrigin
        } else {
            Relation::CrossRun
        },
        lifecycle: label,
        devices,
        warnings,
        suggested_pool_mapping: suggested,
    })
}

/// One state on its own, in the same tree (the reference side is empty).
pub fn summary(state: &MemoryState) -> Comparison {
    let builder = Builder {
        reference: None,
        candidate: state,
        same_origin: true,
        lifecycles: None,
    };
    let devices = state
        .devices
        .iter()
        .map(|&d| builder.device((None, Some(d)), &HashMap::new()))
        .collect();
    Comparison {
        reference: None,
        candidate: state.identity.clone(),
        relation: Relation::Single,
        lifecycle: LifecycleLabel::Unavailable,
        devices,
        warnings: state.warnings.clone(),
        suggested_pool_mapping: Vec::new(),
    }
}
