//! Event attribution: the allocator history entries of an interval, checked for
//! completeness per device and grouped by device, pool, stream, action and stack.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{resolve, StackFrames};
use crate::error::{MemoryError, Result};
use crate::model::{Event, HistoryStatus, HistoryWindow, PoolId, StackTable};
use crate::state::MemoryState;

/// How an event row's pool was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolConfidence {
    /// The entry carries its pool id (newer torch).
    Reported,
    /// Its address lies in segments of exactly one pool at the endpoints.
    Matched,
    /// Endpoint segments holding its address belong to different pools.
    Ambiguous,
    /// No address, or no endpoint segment holds it.
    Unknown,
    /// The entry describes the device, not a block (`oom`).
    NotApplicable,
}

impl PoolConfidence {
    pub fn as_str(self) -> &'static str {
        match self {
            PoolConfidence::Reported => "reported",
            PoolConfidence::Matched => "matched",
            PoolConfidence::Ambiguous => "ambiguous",
            PoolConfidence::Unknown => "unknown",
            PoolConfidence::NotApplicable => "not_applicable",
        }
    }
}

/// Allocator events of one (device, pool, stream, action, complete stack) in an interval.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        module = "torch_cudagraph_debug._native",
        name = "AllocatorEventSummary",
        frozen,
        get_all,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventSummary {
    pub device_index: i64,
    /// `None` unless the confidence is `reported` or `matched`.
    pub pool_id: Option<PoolId>,
    pub stream: i64,
    /// The trace action (`alloc`, `free_requested`, `free_completed`, `oom`, ...).
    pub action: String,
    /// Every frame as a dict (`filename`, `line`, `name`, FX fields when present),
    /// innermost first.
    pub stack_frames: StackFrames,
    /// Sum of the entries' absolute sizes.
    pub total_bytes: i64,
    /// Events.
    pub count: i64,
    /// `reported`, `matched`, `ambiguous`, `unknown` or `not_applicable`.
    pub attribution_confidence: PoolConfidence,
}

impl EventSummary {
    /// The pool as reports name it: `pool[a,b]`, `pool[n/a]` for an event about the
    /// device rather than a block (`oom`), `pool[unknown]` when no evidence gave it.
    pub fn pool_label(&self) -> String {
        match (self.pool_id, self.attribution_confidence) {
            (_, PoolConfidence::NotApplicable) => "pool[n/a]".to_owned(),
            (Some((a, b)), _) => format!("pool[{a},{b}]"),
            (None, _) => "pool[unknown]".to_owned(),
        }
    }
}

/// The stored window of one point: its entries and the per-device status of its cut.
pub struct PointWindow<'a> {
    pub label: &'a str,
    pub index: i64,
    pub events: &'a [Event],
    pub windows: &'a [HistoryWindow],
}

/// Checks that the windows of the points after the interval start up to its end hold
/// every entry on each of `devices`, and returns those entries in order. Failures are
/// the typed history errors; `start` names the interval's first point.
pub fn interval_events(
    start: &str,
    points: &[PointWindow<'_>],
    devices: &[i64],
) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    for p in points {
        for &device in devices {
            let status = p
                .windows
                .iter()
                .find(|w| w.device == device)
                .map_or(HistoryStatus::Disabled, |w| w.status);
            let place = format!(
                "device {device}, interval '{start}' -> '{}' (window of point {} '{}')",
                points.last().map_or(p.label, |l| l.label),
                p.index,
                p.label
            );
            match status {
                HistoryStatus::Complete => {}
                HistoryStatus::Disabled => {
                    return Err(MemoryError::HistoryDisabled(format!(
                        "event attribution needs allocator history on {place}, and none was \
                         recorded; call torch.cuda.memory._record_memory_history(enabled=\
                         \"all\", context=\"all\") before the interval, or drop events=True"
                    )))
                }
                HistoryStatus::BoundaryUnavailable => {
                    return Err(MemoryError::HistoryBoundary(format!(
                        "event attribution on {place}: the previous point's boundary marker \
                         could not be recorded or found, so the window cannot be cut exactly; \
                         use a torch with torch.cuda.memory._set_memory_metadata and do not \
                         set allocator metadata while points are taken (imported \
                         _dump_snapshot files: history on before the first dump, 'snapshot' \
                         entries kept, the files of one process in dump order)"
                    )))
                }
                HistoryStatus::Truncated | HistoryStatus::FirstPoint => {
                    return Err(MemoryError::HistoryTruncated(format!(
                        "event attribution on {place}: the window's start marker is not in \
                         the allocator history (the ring overwrote it, or history was \
                         enabled late); enlarge max_entries of _record_memory_history or take \
                         points closer together"
                    )))
                }
                HistoryStatus::InvalidOrder => {
                    return Err(MemoryError::Reconciliation(format!(
                        "event attribution on {place}: history timestamps go backwards inside \
                         the window; marker-bearing snapshots overlapped, the allocator was \
                         used while a point was taken, or the input is corrupted"
                    )))
                }
            }
        }
        out.extend(
            p.events
                .iter()
                .filter(|e| devices.contains(&e.device))
                .cloned(),
        );
    }
    Ok(out)
}

/// `(device, start, end, pool)` ranges of the endpoint segments, for address lookup.
pub fn segment_ranges(states: &[&MemoryState]) -> Vec<(i64, i64, i64, PoolId)> {
    let mut out: Vec<(i64, i64, i64, PoolId)> = states
        .iter()
        .flat_map(|s| s.segments.iter())
        .filter_map(|s| Some((s.device, s.address?, s.address? + s.total_size, s.pool)))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

fn pool_of(event: &Event, ranges: &[(i64, i64, i64, PoolId)]) -> (Option<PoolId>, PoolConfidence) {
    if event.action == "oom" {
        return (None, PoolConfidence::NotApplicable);
    }
    if let Some(pool) = event.pool {
        return (Some(pool), PoolConfidence::Reported);
    }
    let Some(address) = event.address else {
        return (None, PoolConfidence::Unknown);
    };
    let pools: BTreeSet<PoolId> = ranges
        .iter()
        .filter(|(d, start, end, _)| *d == event.device && *start <= address && address < *end)
        .map(|r| r.3)
        .collect();
    match pools.len() {
        0 => (None, PoolConfidence::Unknown),
        1 => (pools.first().copied(), PoolConfidence::Matched),
        _ => (None, PoolConfidence::Ambiguous),
    }
}

/// Groups entries by device, pool, stream, action and complete stack; pools come from the
/// entry or from `ranges` (the endpoint segments). Rows are ordered by device, then
/// largest total first.
pub fn summarize_events(
    events: &[Event],
    stacks: &StackTable,
    ranges: &[(i64, i64, i64, PoolId)],
) -> Vec<EventSummary> {
    type Key = (
        i64,
        Option<PoolId>,
        i64,
        String,
        Option<u32>,
        PoolConfidence,
    );
    let mut groups: BTreeMap<Key, (i64, i64)> = BTreeMap::new();
    for e in events {
        let (pool, confidence) = pool_of(e, ranges);
        let slot = groups
            .entry((
                e.device,
                pool,
                e.stream,
                e.action.clone(),
                e.stack,
                confidence,
            ))
            .or_default();
        // Saturating: a history of more than i64::MAX bytes cannot be real, and one row's
        // total is a report value, not an input to further arithmetic.
        slot.0 = slot.0.saturating_add(e.size.saturating_abs());
        slot.1 += 1;
    }
    let mut rows: Vec<EventSummary> = groups
        .into_iter()
        .map(
            |((device, pool, stream, action, stack, confidence), (bytes, count))| EventSummary {
                device_index: device,
                pool_id: pool,
                stream,
                action,
                stack_frames: resolve(stacks, stack),
                total_bytes: bytes,
                count,
                attribution_confidence: confidence,
            },
        )
        .collect();
    rows.sort_by(|a, b| {
        a.device_index
            .cmp(&b.device_index)
            .then_with(|| b.total_bytes.cmp(&a.total_bytes))
            .then_with(|| b.count.cmp(&a.count))
            .then_with(|| a.action.cmp(&b.action))
            .then_with(|| a.pool_id.cmp(&b.pool_id))
            .then_with(|| a.stream.cmp(&b.stream))
            .then_with(|| a.stack_frames.key().cmp(&b.stack_frames.key()))
    });
    rows
}

/// The entries of one trace list after the last `start_marker` entry and up to the last
/// `end_marker` entry (to the end when `end_marker` is `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowStatus {
    Complete,
    /// A marker is not in the trace.
    Truncated,
    /// The end marker comes before the start marker.
    InvalidOrder,
}

impl WindowStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            WindowStatus::Complete => "complete",
            WindowStatus::Truncated => "truncated",
            WindowStatus::InvalidOrder => "invalid_order",
        }
    }
}

/// Cuts `[start, end)` positions out of a trace list whose entry metadata is
/// `metadata[i]` (the `user_metadata` of `snapshot` entries, `None` elsewhere).
pub fn event_window(
    metadata: &[Option<&str>],
    start_marker: &str,
    end_marker: Option<&str>,
) -> (usize, usize, WindowStatus) {
    let last = |marker: &str| metadata.iter().rposition(|m| *m == Some(marker));
    let Some(start) = last(start_marker) else {
        return (0, 0, WindowStatus::Truncated);
    };
    match end_marker {
        None => (start + 1, metadata.len(), WindowStatus::Complete),
        Some(end_marker) => match last(end_marker) {
            None => (start + 1, start + 1, WindowStatus::Truncated),
            Some(end) if end < start => (start + 1, start + 1, WindowStatus::InvalidOrder),
            Some(end) => (start + 1, end, WindowStatus::Complete),
        },
    }
}
