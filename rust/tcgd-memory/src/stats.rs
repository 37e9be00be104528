//! Allocator statistics per (device, pool, stream), and their sums per pool, scope and
//! device.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::{is_default_pool, Block, BlockState, PoolId, Segment};

/// What the caching allocator holds in one slice of its state. All values in bytes or
/// counts. Sums over slices add every field except `largest_inactive_block` (a maximum).
///
/// Every field of a state's statistics is in `0..=i64::MAX`: sizes are refused when
/// negative and every sum is checked when the state is made ([`MemoryState::new`]), so
/// the difference of two readings (a change, a gap) always fits.
///
/// The fields are named as Python's `MemoryStats` names its attributes; serialized (the
/// timeline's JSON rows) they keep the `memory_stats` column names, which have no unit.
///
/// [`MemoryState::new`]: crate::state::MemoryState::new
///
/// In Python this is the base class of `MemoryStats` (absolute) and `MemoryStatsDelta`
/// (signed): the fields are its attributes.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "_MemoryStatsBase",
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        subclass,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
pub struct MemoryStats {
    /// Sum of segment sizes: what the allocator holds from CUDA.
    #[serde(rename = "reserved")]
    pub reserved_bytes: i64,
    /// Blocks owned by live tensors.
    #[serde(rename = "allocated")]
    pub allocated_bytes: i64,
    /// Allocated, or freed and waiting for a stream-safe free.
    #[serde(rename = "active")]
    pub active_bytes: i64,
    /// Unrounded sizes the active blocks were requested with.
    #[serde(rename = "requested")]
    pub requested_bytes: i64,
    pub segment_count: i64,
    pub block_count: i64,
    pub inactive_block_count: i64,
    #[serde(rename = "largest_inactive_block")]
    pub largest_inactive_block_bytes: i64,
    pub expandable_segment_count: i64,
    #[serde(rename = "expandable_reserved")]
    pub expandable_reserved_bytes: i64,
    #[serde(rename = "expandable_inactive")]
    pub expandable_inactive_bytes: i64,
}

/// A sum of statistics that does not fit in 64 bits; `metric` names the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SumOverflow {
    pub metric: &'static str,
}

/// `total += value`, or the metric whose sum does not fit.
fn accumulate(total: &mut i64, value: i64, metric: &'static str) -> Result<(), SumOverflow> {
    *total = total.checked_add(value).ok_or(SumOverflow { metric })?;
    Ok(())
}

impl MemoryStats {
    /// Freed by the owner, still in use by some stream. (`allocated <= active` holds for
    /// every state, so this is never negative.)
    pub fn awaiting_free_bytes(&self) -> i64 {
        self.active_bytes - self.allocated_bytes
    }

    /// Reserved but not active. Reusable only inside its own pool: a private pool's
    /// inactive bytes are not free memory for anyone else.
    pub fn inactive_bytes(&self) -> i64 {
        self.reserved_bytes - self.active_bytes
    }

    /// Rounding inside active blocks.
    pub fn internal_fragmentation_bytes(&self) -> i64 {
        self.active_bytes - self.requested_bytes
    }

    /// The sum of two slices, checked field by field.
    pub fn checked_add(&self, other: &MemoryStats) -> Result<MemoryStats, SumOverflow> {
        let mut total = *self;
        for (field, metric, value) in [
            (&mut total.reserved_bytes, "reserved", other.reserved_bytes),
            (
                &mut total.allocated_bytes,
                "allocated",
                other.allocated_bytes,
            ),
            (&mut total.active_bytes, "active", other.active_bytes),
            (
                &mut total.requested_bytes,
                "requested",
                other.requested_bytes,
            ),
            (
                &mut total.segment_count,
                "segment_count",
                other.segment_count,
            ),
            (&mut total.block_count, "block_count", other.block_count),
            (
                &mut total.inactive_block_count,
                "inactive_block_count",
                other.inactive_block_count,
            ),
            (
                &mut total.expandable_segment_count,
                "expandable_segment_count",
                other.expandable_segment_count,
            ),
            (
                &mut total.expandable_reserved_bytes,
                "expandable_reserved",
                other.expandable_reserved_bytes,
            ),
            (
                &mut total.expandable_inactive_bytes,
                "expandable_inactive",
                other.expandable_inactive_bytes,
            ),
        ] {
            accumulate(field, value, metric)?;
        }
        total.largest_inactive_block_bytes = self
            .largest_inactive_block_bytes
            .max(other.largest_inactive_block_bytes);
        Ok(total)
    }

    pub fn try_sum<'a>(
        items: impl IntoIterator<Item = &'a MemoryStats>,
    ) -> Result<MemoryStats, SumOverflow> {
        items
            .into_iter()
            .try_fold(MemoryStats::default(), |total, s| total.checked_add(s))
    }

    /// The allocator's invariants; a violation means the snapshot contradicts itself.
    pub fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.allocated_bytes > self.active_bytes {
            out.push(format!(
                "allocated {} > active {}",
                self.allocated_bytes, self.active_bytes
            ));
        }
        if self.active_bytes > self.reserved_bytes {
            out.push(format!(
                "active {} > reserved {}",
                self.active_bytes, self.reserved_bytes
            ));
        }
        if self.requested_bytes > self.active_bytes {
            out.push(format!(
                "requested {} > active {}",
                self.requested_bytes, self.active_bytes
            ));
        }
        out
    }

    /// `(name, value)` of the additive byte metrics reports show, in display order.
    pub fn byte_metrics(&self) -> [(&'static str, i64); 4] {
        [
            ("reserved", self.reserved_bytes),
            ("allocated", self.allocated_bytes),
            ("active", self.active_bytes),
            ("requested", self.requested_bytes),
        ]
    }

    /// `self - other` for every field, `None` when a difference does not fit. The fields
    /// of a state's statistics are `>= 0`, so two readings always differ by a value that
    /// fits; checked all the same, as every difference of snapshot values is.
    pub fn checked_sub(&self, other: &MemoryStats) -> Option<MemoryStats> {
        let [a, b] = [self, other].map(MemoryStats::stored);
        let mut out = [0i64; 11];
        for (slot, (x, y)) in out.iter_mut().zip(a.iter().zip(b)) {
            *slot = x.checked_sub(y)?;
        }
        Some(MemoryStats::from_stored(out))
    }

    /// The eleven stored fields in [`PUBLIC_STAT_NAMES`] order.
    pub fn stored(&self) -> [i64; 11] {
        [
            self.reserved_bytes,
            self.allocated_bytes,
            self.active_bytes,
            self.requested_bytes,
            self.segment_count,
            self.block_count,
            self.inactive_block_count,
            self.largest_inactive_block_bytes,
            self.expandable_segment_count,
            self.expandable_reserved_bytes,
            self.expandable_inactive_bytes,
        ]
    }

    /// The inverse of [`MemoryStats::stored`].
    pub fn from_stored(v: [i64; 11]) -> MemoryStats {
        let [reserved_bytes, allocated_bytes, active_bytes, requested_bytes, segment_count, block_count, inactive_block_count, largest_inactive_block_bytes, expandable_segment_count, expandable_reserved_bytes, expandable_inactive_bytes] =
            v;
        MemoryStats {
            reserved_bytes,
            allocated_bytes,
            active_bytes,
            requested_bytes,
            segment_count,
            block_count,
            inactive_block_count,
            largest_inactive_block_bytes,
            expandable_segment_count,
            expandable_reserved_bytes,
            expandable_inactive_bytes,
        }
    }

    /// Every field under its public name ([`PUBLIC_STAT_NAMES`]), the derived ones last:
    /// what Python's `MemoryStats` shows and what `to_dict()` and reference-shaped CSV
    /// files hold.
    pub fn public_columns(&self) -> [(&'static str, i64); 14] {
        let stored = self.stored();
        let derived = [
            self.awaiting_free_bytes(),
            self.inactive_bytes(),
            self.internal_fragmentation_bytes(),
        ];
        std::array::from_fn(|i| {
            let value = if i < 11 { stored[i] } else { derived[i - 11] };
            (PUBLIC_STAT_NAMES[i], value)
        })
    }

    /// Every column as stored in `memory_stats`, derived ones included.
    pub fn columns(&self) -> [(&'static str, i64); 14] {
        [
            ("reserved", self.reserved_bytes),
            ("allocated", self.allocated_bytes),
            ("active", self.active_bytes),
            ("requested", self.requested_bytes),
            ("awaiting_free", self.awaiting_free_bytes()),
            ("inactive", self.inactive_bytes()),
            (
                "internal_fragmentation",
                self.internal_fragmentation_bytes(),
            ),
            ("segment_count", self.segment_count),
            ("block_count", self.block_count),
            ("inactive_block_count", self.inactive_block_count),
            ("largest_inactive_block", self.largest_inactive_block_bytes),
            ("expandable_segment_count", self.expandable_segment_count),
            ("expandable_reserved", self.expandable_reserved_bytes),
            ("expandable_inactive", self.expandable_inactive_bytes),
        ]
    }
}

impl MemoryStats {
    /// Statistics from `(public name, value)` pairs as `to_dict()` gives them: every
    /// stored field by its public name, missing ones 0. A derived field
    /// (`awaiting_free_bytes`, ...) may be present and must then equal what the stored
    /// ones give; any other name is an error.
    pub fn from_public(pairs: &[(String, i64)]) -> Result<MemoryStats, String> {
        let mut stored = [0i64; 11];
        for (name, value) in pairs {
            match PUBLIC_STAT_NAMES.iter().position(|n| n == name) {
                Some(i) if i < 11 => stored[i] = *value,
                Some(_) => {}
                None => {
                    return Err(format!(
                        "unknown MemoryStats field '{name}'; the fields are {:?}",
                        PUBLIC_STAT_NAMES
                    ))
                }
            }
        }
        let stats = MemoryStats::from_stored(stored);
        let columns = stats.public_columns();
        for (name, value) in pairs {
            if let Some((_, derived)) = columns[11..].iter().find(|(n, _)| n == name) {
                if derived != value {
                    return Err(format!(
                        "{name} is {value} but the stored fields give {derived}"
                    ));
                }
            }
        }
        Ok(stats)
    }
}

/// The public names of the statistics: the eleven stored fields, then the three derived
/// ones (`awaiting_free_bytes`, `inactive_bytes`, `internal_fragmentation_bytes`).
pub const PUBLIC_STAT_NAMES: [&str; 14] = [
    "reserved_bytes",
    "allocated_bytes",
    "active_bytes",
    "requested_bytes",
    "segment_count",
    "block_count",
    "inactive_block_count",
    "largest_inactive_block_bytes",
    "expandable_segment_count",
    "expandable_reserved_bytes",
    "expandable_inactive_bytes",
    "awaiting_free_bytes",
    "inactive_bytes",
    "internal_fragmentation_bytes",
];

/// A metric's public name from its short one (`reserved` -> `reserved_bytes`); counts keep
/// theirs.
pub fn public_metric_name(metric: &str) -> String {
    if metric.ends_with("_bytes") || metric.ends_with("_count") {
        metric.to_owned()
    } else {
        format!("{metric}_bytes")
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

/// One row per (device, pool, stream) found in the segments, ordered for reports; every
/// sum checked (the error names the slice and the metric that does not fit).
pub fn observation_stats(
    segments: &[Segment],
    blocks: &[Block],
) -> Result<Vec<(ObservationKey, MemoryStats)>, (ObservationKey, SumOverflow)> {
    let mut by_key: BTreeMap<(i64, PoolKind, PoolId, i64), MemoryStats> = BTreeMap::new();
    let key_of = |s: &Segment| ObservationKey {
        device: s.device,
        pool: s.pool,
        stream: s.stream,
    };
    for segment in segments {
        let key = key_of(segment);
        let stats = by_key.entry(sort_key(&key)).or_default();
        let add = |stats: &mut MemoryStats| -> Result<(), SumOverflow> {
            accumulate(&mut stats.reserved_bytes, segment.total_size, "reserved")?;
            accumulate(&mut stats.segment_count, 1, "segment_count")?;
            if segment.is_expandable {
                accumulate(
                    &mut stats.expandable_segment_count,
                    1,
                    "expandable_segment_count",
                )?;
                accumulate(
                    &mut stats.expandable_reserved_bytes,
                    segment.total_size,
                    "expandable_reserved",
                )?;
            }
            Ok(())
        };
        add(stats).map_err(|e| (key, e))?;
    }
    for block in blocks {
        let Some(segment) = segments.get(block.segment as usize) else {
            continue;
        };
        let key = key_of(segment);
        let stats = by_key.entry(sort_key(&key)).or_default();
        let add = |stats: &mut MemoryStats| -> Result<(), SumOverflow> {
            accumulate(&mut stats.block_count, 1, "block_count")?;
            match block.state {
                BlockState::ActiveAllocated | BlockState::ActiveAwaitingFree => {
                    // A block awaiting a stream-safe free is active, no longer allocated.
                    if block.state == BlockState::ActiveAllocated {
                        accumulate(&mut stats.allocated_bytes, block.size, "allocated")?;
                    }
                    accumulate(&mut stats.active_bytes, block.size, "active")?;
                    let requested = block.requested_size;
                    accumulate(&mut stats.requested_bytes, requested, "requested")?;
                }
                BlockState::Inactive => {
                    accumulate(&mut stats.inactive_block_count, 1, "inactive_block_count")?;
                    stats.largest_inactive_block_bytes =
                        stats.largest_inactive_block_bytes.max(block.size);
                    if segment.is_expandable {
                        accumulate(
                            &mut stats.expandable_inactive_bytes,
                            block.size,
                            "expandable_inactive",
                        )?;
                    }
                }
            }
            Ok(())
        };
        add(stats).map_err(|e| (key, e))?;
    }
    Ok(by_key
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
        .collect())
}
