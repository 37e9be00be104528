//! The timeline of a run: at every point, every scope, device and pool with its change
//! since the previous point. A pool seen at an earlier point stays in the timeline with
//! zero state after it disappears, so its release is visible.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::error::{MemoryError, Result, TorchVersion};
use crate::model::PoolId;
use crate::owners::PeaksBetween;
use crate::state::{MemoryState, StateIdentity};
use crate::stats::{MemoryStats, PoolKind, Scope};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TimelineLevel {
    Scope,
    Device,
    Pool,
}

impl TimelineLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            TimelineLevel::Scope => "scope",
            TimelineLevel::Device => "device",
            TimelineLevel::Pool => "pool",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineRow {
    pub point_index: i64,
    pub label: String,
    pub level: TimelineLevel,
    pub scope: Option<Scope>,
    pub device: Option<i64>,
    pub pool: Option<PoolId>,
    pub pool_kind: Option<PoolKind>,
    pub stats: MemoryStats,
    /// `stats` minus the previous point's (for every field); `None` at the first point.
    pub change: Option<MemoryStats>,
    pub cuda_used: Option<i64>,
    pub residual: Option<i64>,
    pub cuda_used_change: Option<i64>,
    pub residual_change: Option<i64>,
    /// Pool rows: who owns the pool at this point (`PoolOwner::describe`).
    pub pool_owner: Option<String>,
    /// Device rows: the `memory_stats()` peaks and counters since the previous point.
    pub peaks: Option<PeaksBetween>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    pub points: Vec<StateIdentity>,
    pub rows: Vec<TimelineRow>,
}

/// A change between two points that does not fit in 64 bits, as an error naming it.
fn overflow(state: &MemoryState, field: String, what: String) -> MemoryError {
    MemoryError::Overflow {
        field,
        what: format!(
            "{what}, the change since the previous point (point '{}')",
            state.identity.label
        ),
        torch: TorchVersion(state.identity.taken.torch_version.clone()),
    }
}

/// `now - before` of a signed reading; `None` when either is unknown.
fn change(
    state: &MemoryState,
    field: impl FnOnce() -> String,
    now: Option<i64>,
    before: Option<i64>,
) -> Result<Option<i64>> {
    match (now, before) {
        (Some(n), Some(b)) => n
            .checked_sub(b)
            .map(Some)
            .ok_or_else(|| overflow(state, field(), format!("{n} - {b}"))),
        _ => Ok(None),
    }
}

pub fn timeline(states: &[&MemoryState]) -> Result<Timeline> {
    let mut rows = Vec::new();
    let mut seen_devices: BTreeSet<i64> = BTreeSet::new();
    let mut seen_pools: BTreeSet<(i64, PoolKind, PoolId)> = BTreeSet::new();
    let mut previous: Option<&MemoryState> = None;
    for state in states {
        seen_devices.extend(state.devices.iter().copied());
        seen_pools.extend(
            state
                .observations
                .iter()
                .map(|(k, _)| (k.device, PoolKind::of(k.pool), k.pool)),
        );
        let identity = &state.identity;
        let row = |level,
                   scope,
                   device,
                   pool: Option<PoolId>,
                   now: MemoryStats,
                   before: Option<MemoryStats>|
         -> Result<TimelineRow> {
            let change = match before {
                Some(b) => Some(now.checked_sub(&b).ok_or_else(|| {
                    overflow(
                        state,
                        "allocator statistics".to_owned(),
                        "a statistic".to_owned(),
                    )
                })?),
                None => None,
            };
            Ok(TimelineRow {
                point_index: identity.index,
                label: identity.label.clone(),
                level,
                scope,
                device,
                pool,
                pool_kind: pool.map(PoolKind::of),
                stats: now,
                change,
                cuda_used: None,
                residual: None,
                cuda_used_change: None,
                residual_change: None,
                pool_owner: None,
                peaks: None,
            })
        };
        for scope in Scope::ALL {
            let now = state.scope_stats(None, scope);
            let before = previous.map(|p| p.scope_stats(None, scope));
            rows.push(row(
                TimelineLevel::Scope,
                Some(scope),
                None,
                None,
                now,
                before,
            )?);
        }
        for &device in &seen_devices {
            let now = state.device_stats(device);
            let before = previous.map(|p| p.device_stats(device));
            let mut r = row(TimelineLevel::Device, None, Some(device), None, now, before)?;
            r.cuda_used = state.memory(device).cuda_used();
            r.residual = state.residual(device);
            r.peaks = state
                .device_peaks(device)
                .map(|now| now.between(previous.and_then(|p| p.device_peaks(device))));
            if let Some(p) = previous {
                let field = |f: &str| format!("device_memory[{device}].{f}");
                r.residual_change =
                    change(state, || field("residual"), r.residual, p.residual(device))?;
                r.cuda_used_change = change(
                    state,
                    || field("cuda_used"),
                    r.cuda_used,
                    p.memory(device).cuda_used(),
                )?;
            }
            rows.push(r);
            for &(d, _, pool) in seen_pools.iter().filter(|(d, _, _)| *d == device) {
                let now = state.pool(d, pool);
                let before = previous.map(|p| p.pool(d, pool));
                let mut r = row(
                    TimelineLevel::Pool,
                    None,
                    Some(device),
                    Some(pool),
                    now,
                    before,
                )?;
                r.pool_owner = state.pool_owner(d, pool).map(|o| o.describe());
                rows.push(r);
            }
        }
        previous = Some(state);
    }
    Ok(Timeline {
        points: states.iter().map(|s| s.identity.clone()).collect(),
        rows,
    })
}
