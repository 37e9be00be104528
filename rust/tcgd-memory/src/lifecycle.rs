//! Address lifecycle between two states of one origin: which segment bytes appeared or
//! went away, which block bytes became active or inactive. Computed from the two states
//! alone (no history): an address freed and reused in between looks unchanged.
//!
//! Segments and blocks are matched as address ranges, so an expandable segment, which
//! torch reports as one segment per contiguous mapped range, is matched by the ranges it
//! maps: growing it by 2 MiB shows as 2 MiB of new segment bytes.
//!
//! The sums here cannot overflow: a state is only made when its sizes are `>= 0`, its
//! ranges end at or below `i64::MAX`, each segment's blocks fit in it and its total
//! reserved bytes fit in 64 bits ([`MemoryState::new`]). Every value below is at most the
//! reserved (or active) total of one state.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::model::BlockState;
use crate::state::MemoryState;
use crate::stats::ObservationKey;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LifecycleLabel {
    /// Every address is known on both sides: ranges were matched exactly.
    Exact,
    /// Some address is unknown: matched by sizes within each (device, pool, stream).
    Approximate,
    /// The states come from independent runs: their addresses mean nothing to each other.
    Unavailable,
}

impl LifecycleLabel {
    pub fn as_str(self) -> &'static str {
        match self {
            LifecycleLabel::Exact => "exact",
            LifecycleLabel::Approximate => "approximate",
            LifecycleLabel::Unavailable => "unavailable",
        }
    }
}

/// How the allocator's address lifecycle changed between two states of one origin:
/// segments created and removed, blocks that became active and inactive. Python's
/// `MemoryLifecycleDelta`.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "MemoryLifecycleDelta",
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        eq,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Lifecycle {
    pub new_segment_bytes: i64,
    pub removed_segment_bytes: i64,
    pub newly_active_bytes: i64,
    pub became_inactive_bytes: i64,
}

impl Lifecycle {
    pub fn add(&mut self, other: &Lifecycle) {
        self.new_segment_bytes += other.new_segment_bytes;
        self.removed_segment_bytes += other.removed_segment_bytes;
        self.newly_active_bytes += other.newly_active_bytes;
        self.became_inactive_bytes += other.became_inactive_bytes;
    }

    pub fn is_zero(&self) -> bool {
        *self == Lifecycle::default()
    }

    pub fn fields(&self) -> [(&'static str, i64); 4] {
        [
            ("new_segment", self.new_segment_bytes),
            ("removed_segment", self.removed_segment_bytes),
            ("newly_active", self.newly_active_bytes),
            ("became_inactive", self.became_inactive_bytes),
        ]
    }
}

/// Half-open byte ranges of one slice of a state.
#[derive(Default)]
struct Ranges {
    segments: Vec<(i64, i64)>,
    active: Vec<(i64, i64)>,
    inactive: Vec<(i64, i64)>,
    segment_sizes: Vec<i64>,
    active_sizes: Vec<i64>,
    inactive_bytes: i64,
}

fn ranges_by_key(state: &MemoryState) -> HashMap<ObservationKey, Ranges> {
    let mut out: HashMap<ObservationKey, Ranges> = HashMap::new();
    let key = |s: &crate::model::Segment| ObservationKey {
        device: s.device,
        pool: s.pool,
        stream: s.stream,
    };
    for segment in &state.segments {
        let r = out.entry(key(segment)).or_default();
        r.segment_sizes.push(segment.total_size);
        if let Some(a) = segment.address {
            r.segments.push((a, a + segment.total_size));
        }
    }
    for block in &state.blocks {
        let Some(segment) = state.segments.get(block.segment as usize) else {
            continue;
        };
        let r = out.entry(key(segment)).or_default();
        let range = block.address.map(|a| (a, a + block.size));
        if block.state == BlockState::Inactive {
            r.inactive_bytes += block.size;
            r.inactive.extend(range);
        } else {
            r.active_sizes.push(block.size);
            r.active.extend(range);
        }
    }
    out
}

/// Sorted, non-overlapping union of ranges.
fn merged(mut ranges: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    ranges.retain(|(a, b)| b > a);
    ranges.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

fn measure(ranges: &[(i64, i64)]) -> i64 {
    ranges.iter().map(|(a, b)| b - a).sum()
}

/// Bytes in both merged range lists.
fn overlap(a: &[(i64, i64)], b: &[(i64, i64)]) -> i64 {
    let (mut i, mut j, mut total) = (0, 0, 0i64);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if hi > lo {
            total += hi - lo;
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// Bytes of `a` not in `b`.
fn minus(a: &[(i64, i64)], b: &[(i64, i64)]) -> i64 {
    measure(a) - overlap(a, b)
}

/// Sum of the sizes in `a` left after removing one equal size for each size in `b`.
fn multiset_minus(a: &[i64], b: &[i64]) -> i64 {
    let mut counts: BTreeMap<i64, i64> = BTreeMap::new();
    for &x in b {
        *counts.entry(x).or_default() += 1;
    }
    let mut total = 0;
    for &x in a {
        match counts.get_mut(&x) {
            Some(c) if *c > 0 => *c -= 1,
            _ => total += x,
        }
    }
    total
}

fn exact(r: &Ranges, c: &Ranges) -> Lifecycle {
    let (rs, cs) = (merged(r.segments.clone()), merged(c.segments.clone()));
    let (ra, ca) = (merged(r.active.clone()), merged(c.active.clone()));
    let ci = merged(c.inactive.clone());
    Lifecycle {
        new_segment_bytes: minus(&cs, &rs),
        removed_segment_bytes: minus(&rs, &cs),
        newly_active_bytes: minus(&ca, &ra),
        became_inactive_bytes: overlap(&ra, &ci),
    }
}

fn by_sizes(r: &Ranges, c: &Ranges) -> Lifecycle {
    let left_active = multiset_minus(&r.active_sizes, &c.active_sizes);
    Lifecycle {
        new_segment_bytes: multiset_minus(&c.segment_sizes, &r.segment_sizes),
        removed_segment_bytes: multiset_minus(&r.segment_sizes, &c.segment_sizes),
        newly_active_bytes: multiset_minus(&c.active_sizes, &r.active_sizes),
        // Bytes that left the active set can only have become inactive where the
        // candidate still holds inactive bytes; the rest went with freed segments.
        became_inactive_bytes: left_active.min(c.inactive_bytes),
    }
}

/// Lifecycle per observation key between two states of one origin. Keys present on one
/// side only are included (everything there is new or removed).
pub fn lifecycle(
    reference: &MemoryState,
    candidate: &MemoryState,
) -> (LifecycleLabel, HashMap<ObservationKey, Lifecycle>) {
    let label = if reference.addresses_complete() && candidate.addresses_complete() {
        LifecycleLabel::Exact
    } else {
        LifecycleLabel::Approximate
    };
    let r = ranges_by_key(reference);
    let c = ranges_by_key(candidate);
    let empty = Ranges::default();
    let mut out = HashMap::new();
    for key in r.keys().chain(c.keys()) {
        if out.contains_key(key) {
            continue;
        }
        let (rk, ck) = (r.get(key).unwrap_or(&empty), c.get(key).unwrap_or(&empty));
        let value = match label {
            LifecycleLabel::Exact => exact(rk, ck),
            _ => by_sizes(rk, ck),
        };
        out.insert(*key, value);
    }
    (label, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_arithmetic() {
        let a = merged(vec![(0, 10), (5, 20), (30, 40)]);
        assert_eq!(a, vec![(0, 20), (30, 40)]);
        let b = merged(vec![(10, 35)]);
        assert_eq!(overlap(&a, &b), 10 + 5);
        assert_eq!(minus(&a, &b), 30 - 15);
        assert_eq!(minus(&b, &a), 25 - 15);
        assert_eq!(multiset_minus(&[4, 4, 8], &[4, 16]), 12);
    }
}
