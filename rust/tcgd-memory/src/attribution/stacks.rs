//! Stack attribution: the live blocks of a state grouped by their complete allocation
//! stack, per device and pool (and stream on request), the share of active bytes those
//! stacks explain, and the change per stack between two states.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{resolve, StackFrames};
use crate::compare::{Comparison, Relation};
use crate::error::{MemoryError, Result};
use crate::model::PoolId;
use crate::state::MemoryState;

/// Which blocks a stack analysis looks at; `None` means every value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockFilter {
    pub device: Option<i64>,
    pub pool: Option<PoolId>,
    pub stream: Option<i64>,
}

/// Attributed active bytes over active bytes. `coverage` is `1.0` when nothing is active:
/// an empty state has nothing left to explain.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        module = "torch_cudagraph_debug._native",
        name = "AllocationStackCoverage",
        frozen,
        get_all,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StackCoverage {
    pub device_index: Option<i64>,
    pub pool_id: Option<PoolId>,
    /// Bytes of the active blocks.
    pub active_bytes: i64,
    /// Bytes of the active blocks that have allocation frames.
    pub attributed_bytes: i64,
    /// `active_bytes - attributed_bytes`: the `<unattributed>` bucket.
    pub unattributed_bytes: i64,
    pub active_blocks: i64,
    pub attributed_blocks: i64,
    /// `attributed_bytes / active_bytes`; `1.0` when nothing is active.
    pub coverage: f64,
}

impl StackCoverage {
    pub fn complete(&self) -> bool {
        self.unattributed_bytes == 0 && self.attributed_blocks == self.active_blocks
    }
}

/// Active blocks of one (device, pool, stream?, stack): the `<unattributed>` bucket is
/// the row with no frames.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        module = "torch_cudagraph_debug._native",
        name = "AllocationStackSummary",
        frozen,
        get_all,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StackSummary {
    pub device_index: i64,
    pub pool_id: PoolId,
    /// `None` when streams were summed.
    pub stream: Option<i64>,
    /// Every frame as a dict (`filename`, `line`, `name`, FX fields when present),
    /// innermost first.
    pub stack_frames: StackFrames,
    /// Bytes (allocator-rounded) of the blocks.
    pub size_bytes: i64,
    /// Requested (unrounded) bytes of the blocks.
    pub requested_bytes: i64,
    /// Blocks.
    pub count: i64,
}

/// One pool key of a delta: `(device, pool)`; `None` on the side that lacks the pool.
pub type SideKey = Option<(i64, PoolId)>;

/// The change of one (pool pair, stream when asked, complete stack) between two states.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        module = "torch_cudagraph_debug._native",
        name = "AllocationStackDelta",
        frozen,
        get_all,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StackDelta {
    /// `(device, (a, b))` of the reference side; `None` where it lacks the pool.
    pub reference_key: SideKey,
    pub candidate_key: SideKey,
    pub stream: Option<i64>,
    pub stack_frames: StackFrames,
    pub reference_size_bytes: i64,
    pub candidate_size_bytes: i64,
    pub delta_size_bytes: i64,
    pub reference_requested_bytes: i64,
    pub candidate_requested_bytes: i64,
    pub delta_requested_bytes: i64,
    pub reference_count: i64,
    pub candidate_count: i64,
    pub delta_count: i64,
}

impl StackDelta {
    pub fn changed(&self) -> bool {
        self.delta_size_bytes != 0 || self.delta_requested_bytes != 0 || self.delta_count != 0
    }
}

fn overflow(what: &str, state: &MemoryState) -> MemoryError {
    MemoryError::invalid(format!(
        "'{}': the {what} of its active blocks does not fit in 64 bits; the state is damaged",
        state.identity.title()
    ))
}

/// Active blocks with their (device, pool, stream).
fn active_blocks<'a>(
    state: &'a MemoryState,
    filter: BlockFilter,
) -> impl Iterator<Item = (i64, PoolId, i64, &'a crate::model::Block)> + 'a {
    state.blocks.iter().filter_map(move |b| {
        let segment = state.segments.get(b.segment as usize)?;
        let keep = b.state.is_active()
            && filter.device.is_none_or(|d| d == segment.device)
            && filter.pool.is_none_or(|p| p == segment.pool)
            && filter.stream.is_none_or(|s| s == segment.stream);
        keep.then_some((segment.device, segment.pool, segment.stream, b))
    })
}

/// The coverage of the blocks `filter` selects.
pub fn coverage(state: &MemoryState, filter: BlockFilter) -> Result<StackCoverage> {
    let (mut active, mut attributed, mut blocks, mut framed) = (0i64, 0i64, 0i64, 0i64);
    for (_, _, _, b) in active_blocks(state, filter) {
        active = active
            .checked_add(b.size)
            .ok_or_else(|| overflow("size", state))?;
        blocks += 1;
        if b.stack.is_some() {
            attributed += b.size;
            framed += 1;
        }
    }
    Ok(StackCoverage {
        device_index: filter.device,
        pool_id: filter.pool,
        active_bytes: active,
        attributed_bytes: attributed,
        unattributed_bytes: active - attributed,
        active_blocks: blocks,
        attributed_blocks: framed,
        coverage: super::stack_share(attributed, active),
    })
}

/// Refuses stack attribution when active bytes exist but not one of them has frames:
/// the application did not record allocation stacks.
pub fn require_frames(state: &MemoryState, coverage: &StackCoverage) -> Result<()> {
    if coverage.active_bytes > 0 && coverage.attributed_bytes == 0 {
        return Err(MemoryError::HistoryDisabled(format!(
            "stack attribution for '{}': none of its {} active bytes ({} blocks) has an \
             allocation stack; call torch.cuda.memory._record_memory_history(\
             enabled=\"state\" or \"all\", context=\"state\" or \"all\", stacks=\"python\") \
             before the allocations of interest, or drop stacks=True",
            state.identity.title(),
            coverage.active_bytes,
            coverage.active_blocks
        )));
    }
    Ok(())
}

type GroupKey = (i64, PoolId, Option<i64>, StackFrames);
type Values = (i64, i64, i64);

/// Sums per (device, pool, stream?, stack). Keyed by the resolved frames, not stack ids:
/// ids are local to one run's stack table.
fn groups(
    state: &MemoryState,
    filter: BlockFilter,
    by_stream: bool,
) -> Result<BTreeMap<GroupKey, Values>> {
    let mut by_id: BTreeMap<(i64, PoolId, Option<i64>, Option<u32>), Values> = BTreeMap::new();
    let out = &mut by_id;
    for (device, pool, stream, b) in active_blocks(state, filter) {
        let entry = out
            .entry((device, pool, by_stream.then_some(stream), b.stack))
            .or_default();
        entry.0 = entry
            .0
            .checked_add(b.size)
            .ok_or_else(|| overflow("size", state))?;
        entry.1 = entry
            .1
            .checked_add(b.requested_size)
            .ok_or_else(|| overflow("requested size", state))?;
        entry.2 += 1;
    }
    let mut out: BTreeMap<GroupKey, Values> = BTreeMap::new();
    for ((device, pool, stream, stack), v) in by_id {
        // Distinct ids are distinct stacks of one table, so keys stay distinct.
        out.insert((device, pool, stream, resolve(&state.stacks, stack)), v);
    }
    Ok(out)
}

/// Active blocks grouped by (device, pool, stream when `by_stream`, complete stack),
/// largest first. Every row is kept.
pub fn summarize(
    state: &MemoryState,
    filter: BlockFilter,
    by_stream: bool,
) -> Result<Vec<StackSummary>> {
    let mut rows: Vec<StackSummary> = groups(state, filter, by_stream)?
        .into_iter()
        .map(
            |((device, pool, stream, stack), (size, requested, count))| StackSummary {
                device_index: device,
                pool_id: pool,
                stream,
                stack_frames: stack,
                size_bytes: size,
                requested_bytes: requested,
                count,
            },
        )
        .collect();
    rows.sort_by(|a, b| {
        (b.size_bytes, a.device_index, a.pool_id, a.stream)
            .cmp(&(a.size_bytes, b.device_index, b.pool_id, b.stream))
            // On ties the frameless bucket goes last: it is what is left to explain.
            .then_with(|| a.stack_frames.is_empty().cmp(&b.stack_frames.is_empty()))
            .then_with(|| a.stack_frames.key().cmp(&b.stack_frames.key()))
    });
    Ok(rows)
}

/// Pool pairs to compare: `(reference (device, pool), candidate (device, pool))`.
pub type PoolPairs = Vec<(SideKey, SideKey)>;

/// The pool pairing of a comparison. Across independent runs only pools matched on both
/// sides take part (their stacks say nothing about an unmatched pool of the other run).
pub fn pool_pairs(comparison: &Comparison) -> PoolPairs {
    let mut out = Vec::new();
    for device in &comparison.devices {
        for pool in &device.pools {
            let r = device.reference_device.zip(pool.reference_pool);
            let c = device.candidate_device.zip(pool.candidate_pool);
            if comparison.relation == Relation::CrossRun && (r.is_none() || c.is_none()) {
                continue;
            }
            if r.is_some() || c.is_some() {
                out.push((r, c));
            }
        }
    }
    out
}

/// Pairs of one origin: every (device, pool) of either state, matched by identity.
pub fn identity_pairs(reference: &MemoryState, candidate: &MemoryState) -> PoolPairs {
    let mut keys: Vec<(i64, PoolId)> = reference
        .pool_stats()
        .iter()
        .chain(candidate.pool_stats())
        .map(|(k, _)| *k)
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let has = |s: &MemoryState, k: &(i64, PoolId)| s.pool_stats().iter().any(|(p, _)| p == k);
    keys.into_iter()
        .map(|k| {
            (
                has(reference, &k).then_some(k),
                has(candidate, &k).then_some(k),
            )
        })
        .collect()
}

/// Per stack, the change from `reference` to `candidate` inside each pool pair, largest
/// absolute change first. `by_stream` pairs stream ids too (meaningful only within one
/// origin). Unchanged stacks are dropped unless `include_unchanged`.
pub fn compare_stacks(
    reference: &MemoryState,
    candidate: &MemoryState,
    pairs: &PoolPairs,
    stream: Option<i64>,
    by_stream: bool,
    include_unchanged: bool,
) -> Result<Vec<StackDelta>> {
    let filter = BlockFilter {
        stream,
        ..BlockFilter::default()
    };
    let rg = groups(reference, filter, by_stream)?;
    let cg = groups(candidate, filter, by_stream)?;
    let mut rows = Vec::new();
    for (r, c) in pairs {
        // (stream, stack) -> (reference values, candidate values)
        let mut merged: BTreeMap<(Option<i64>, StackFrames), (Values, Values)> = BTreeMap::new();
        for (side, key, g) in [(0, r, &rg), (1, c, &cg)] {
            let Some((device, pool)) = key else { continue };
            for ((d, p, s, stack), v) in g {
                if d == device && p == pool {
                    let slot = merged.entry((*s, stack.clone())).or_default();
                    if side == 0 {
                        slot.0 = *v;
                    } else {
                        slot.1 = *v;
                    }
                }
            }
        }
        for ((s, stack), (rv, cv)) in merged {
            // Both sides are sums of non-negative sizes that fit, so differences fit.
            let delta = StackDelta {
                reference_key: *r,
                candidate_key: *c,
                stream: s,
                stack_frames: stack,
                reference_size_bytes: rv.0,
                candidate_size_bytes: cv.0,
                delta_size_bytes: cv.0 - rv.0,
                reference_requested_bytes: rv.1,
                candidate_requested_bytes: cv.1,
                delta_requested_bytes: cv.1 - rv.1,
                reference_count: rv.2,
                candidate_count: cv.2,
                delta_count: cv.2 - rv.2,
            };
            if include_unchanged || delta.changed() {
                rows.push(delta);
            }
        }
    }
    rows.sort_by(|a, b| {
        b.delta_size_bytes
            .unsigned_abs()
            .cmp(&a.delta_size_bytes.unsigned_abs())
            .then_with(|| b.delta_size_bytes.cmp(&a.delta_size_bytes))
            .then_with(|| a.reference_key.cmp(&b.reference_key))
            .then_with(|| a.candidate_key.cmp(&b.candidate_key))
            .then_with(|| a.stream.cmp(&b.stream))
            .then_with(|| a.stack_frames.is_empty().cmp(&b.stack_frames.is_empty()))
            .then_with(|| a.stack_frames.key().cmp(&b.stack_frames.key()))
    });
    Ok(rows)
}
