//! Allocator statistics per (device, pool, stream), and their sums per pool, scope and
//! device.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::{is_default_pool, Block, BlockState, PoolId, Segment};

/// What the caching allocator holds in one slice of its state. All values in bytes or
/// counts. Sums over slices add every field except `largest_inactive_block` (a maximum).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MemoryStats {
    /// Sum of segment sizes: what the allocator holds from CUDA.
    pub reserved: i64,
    /// Blocks owned by live tensors.
    pub allocated: i64,
    /// Allocated, or freed and waiting for a stream-safe free.
    pub active: i64,
    /// Unrounded sizes the active blocks were requested with.
    pub requested: i64,
    pub segment_count: i64,
    pub block_count: i64,
    pub inactive_block_count: i64,
    pub largest_inactive_block: i64,
    pub expandable_segment_count: i64,
    pub expandable_reserved: i64,
    pub expandable_inactive: i64,
}

impl MemoryStats {
    /// Freed by the owner, still in use by some stream.
    pub fn awaiting_free(&self) -> i64 {
        self.active - self.allocated
    }

    /// Reserved but not active. Reusable only inside its own pool: a private pool's
    /// inactive bytes are not free memory for anyone else.
    pub fn inactive(&self) -> i64 {
        self.reserved - self.active
    }

    /// Rounding inside active blocks.
    pub fn internal_fragmentation(&self) -> i64 {
        self.active - self.requested
    }

    pub fn add(&mut self, other: &MemoryStats) {
        self.reserved += other.reserved;
        self.allocated += other.allocated;
        self.active += other.active;
        self.requested += other.requested;
        self.segment_count += other.segment_count;
        self.block_count += other.block_count;
        self.inactive_block_count += other.inactive_block_count;
        self.largest_inactive_block = self
            .largest_inactive_block
            .max(other.largest_inactive_block);
        self.expandable_segment_count += other.expandable_segment_count;
        self.expandable_reserved += other.expandable_reserved;
        self.expandable_inactive += other.expandable_inactive;
    }

    pub fn sum<'a>(items: impl IntoIterator<Item = &'a MemoryStats>) -> MemoryStats {
        let mut total = MemoryStats::default();
        for s in items {
            total.add(s);
        }
        total
    }

    /// The allocator's invariants; a violation means the snapshot contradicts itself.
    pub fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.allocated > self.active {
            out.push(format!(
                "allocated {} > active {}",
                self.allocated, self.active
            ));
        }
        if self.active > self.reserved {
            out.push(format!(
                "active {} > reserved {}",
                self.active, self.reserved
            ));
        }
        if self.requested > self.active {
            out.push(format!(
                "requested {} > active {}",
                self.requested, self.active
            ));
        }
        out
    }

    /// `(name, value)` of the additive byte metrics reports show, in display order.
    pub fn byte_metrics(&self) -> [(&'static str, i64); 4] {
        [
            ("reserved", self.reserved),
            ("allocated", self.allocated),
            ("active", self.active),
            ("requested", self.requested),
        ]
    }

    /// Every column as stored in `memory_stats`, derived ones included.
    pub fn columns(&self) -> [(&'static str, i64); 14] {
        [
            ("reserved", self.reserved),
            ("allocated", self.allocated),
            ("active", self.active),
            ("requested", self.requested),
            ("awaiting_free", self.awaiting_free()),
            ("inactive", self.inactive()),
            ("internal_fragmentation", self.internal_fragmentation()),
            ("segment_count", self.segment_count),
            ("block_count", self.block_count),
            ("inactive_block_count", self.inactive_block_count),
            ("largest_inactive_block", self.largest_inactive_block),
            ("expandable_segment_count", self.expandable_segment_count),
            ("expandable_reserved", self.expandable_reserved),
            ("expandable_inactive", self.expandable_inactive),
        ]
    }
}

/// Identity of one observation: a (device, pool, stream) slice of the allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ObservationKey {
    pub device: i64,
    pub pool: PoolId,
    pub stream: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PoolKind {
    Default,
    Private,
}

impl PoolKind {
    pub fn of(pool: PoolId) -> PoolKind {
        if is_default_pool(pool) {
            PoolKind::Default
        } else {
            PoolKind::Private
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PoolKind::Default => "default",
            PoolKind::Private => "private",
        }
    }
}

/// The allocator scopes: every pool, the default pool, the private pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    All,
    Default,
    Private,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::All, Scope::Default, Scope::Private];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::All => "all",
            Scope::Default => "default",
            Scope::Private => "private",
        }
    }

    pub fn contains(self, pool: PoolId) -> bool {
        match self {
            Scope::All => true,
            Scope::Default => is_default_pool(pool),
            Scope::Private => !is_default_pool(pool),
        }
    }
}

/// Observations in report order: by device, the default pool first, then private pools by
/// id, then streams.
fn sort_key(key: &ObservationKey) -> (i64, PoolKind, PoolId, i64) {
    (key.device, PoolKind::of(key.pool), key.pool, key.stream)
}

/// One row per (device, pool, stream) found in the segments, ordered for reports.
pub fn observation_stats(
    segments: &[Segment],
    blocks: &[Block],
) -> Vec<(ObservationKey, MemoryStats)> {
    let mut by_key: BTreeMap<(i64, PoolKind, PoolId, i64), MemoryStats> = BTreeMap::new();
    let key_of = |s: &Segment| ObservationKey {
        device: s.device,
        pool: s.pool,
        stream: s.stream,
    };
    for segment in segments {
        let stats = by_key.entry(sort_key(&key_of(segment))).or_default();
        stats.reserved += segment.total_size;
        stats.segment_count += 1;
        if segment.is_expandable {
            stats.expandable_segment_count += 1;
            stats.expandable_reserved += segment.total_size;
        }
    }
    for block in blocks {
        let Some(segment) = segments.get(block.segment as usize) else {
            continue;
        };
        let stats = by_key.entry(sort_key(&key_of(segment))).or_default();
        stats.block_count += 1;
        match block.state {
            BlockState::ActiveAllocated => {
                stats.allocated += block.size;
                stats.active += block.size;
                stats.requested += block.requested_size;
            }
            BlockState::ActiveAwaitingFree => {
                stats.active += block.size;
                stats.requested += block.requested_size;
            }
            BlockState::Inactive => {
                stats.inactive_block_count += 1;
                stats.largest_inactive_block = stats.largest_inactive_block.max(block.size);
                if segment.is_expandable {
                    stats.expandable_inactive += block.size;
                }
            }
        }
    }
    by_key
        .into_iter()
        .map(|((device, _, pool, stream), stats)| {
            (
                ObservationKey {
                    device,
                    pool,
                    stream,
                },
                stats,
            )
        })
        .collect()
}
