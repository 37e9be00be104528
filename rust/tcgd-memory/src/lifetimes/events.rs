//! History entries as the replay reads them: borrowed straight from the stored Arrow
//! columns (no `String` or `Event` per entry), or from in-memory events in tests.

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};

use crate::error::{MemoryError, Result};
use crate::model::{Event, PoolId};
use crate::run::MemoryRunReader;
use tcgd_store::Table;

/// The raw trace actions the replay distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Snapshot,
    Oom,
    Other,
}

/// Every action torch's caching allocator writes to its history, by its trace name
/// (`c10::CachingDeviceAllocator::TraceEntry::Action`): the one list the replay parses
/// and Python's `advanced.KNOWN_TRACE_ACTIONS` shows.
const KNOWN: [(&str, Action); 9] = [
    ("alloc", Action::Alloc),
    ("free_requested", Action::FreeRequested),
    ("free_completed", Action::FreeCompleted),
    ("segment_alloc", Action::SegmentAlloc),
    ("segment_free", Action::SegmentFree),
    ("segment_map", Action::SegmentMap),
    ("segment_unmap", Action::SegmentUnmap),
    ("snapshot", Action::Snapshot),
    ("oom", Action::Oom),
];

impl Action {
    pub fn parse(s: &str) -> Action {
        KNOWN
            .iter()
            .find(|(name, _)| *name == s)
            .map_or(Action::Other, |&(_, action)| action)
    }

    /// The trace names of every known action, in the allocator's order.
    pub fn known_names() -> impl Iterator<Item = &'static str> {
        KNOWN.iter().map(|(name, _)| *name)
    }

    /// The trace names of the actions of one allocation's tenancy of a block address, in
    /// order: what the lifetime replay follows.
    pub fn lifetime_names() -> impl Iterator<Item = &'static str> {
        KNOWN
            .iter()
            .filter(|(_, a)| {
                matches!(
                    a,
                    Action::Alloc | Action::FreeRequested | Action::FreeCompleted
                )
            })
            .map(|(name, _)| *name)
    }

    pub fn is_segment(self) -> bool {
        matches!(
            self,
            Action::SegmentAlloc | Action::SegmentFree | Action::SegmentMap | Action::SegmentUnmap
        )
    }
}

/// One history entry, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct RawEvent<'a> {
    pub device: i64,
    pub action: Action,
    pub action_name: &'a str,
    pub address: Option<i64>,
    pub size: i64,
    pub stream: i64,
    pub pool: Option<PoolId>,
    pub stack: Option<u32>,
}

/// The history windows of a run, by point index, each in ring order per device.
pub trait EventSource {
    fn for_each<'s>(&'s self, point_index: i64, f: impl FnMut(RawEvent<'s>)) -> Result<()>;
    /// Entries in every window (sizes the replay's tables up front).
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The run's `memory_events` table, read once; rows of one point are located by runs of
/// equal `point_index` (points are committed in order, so each is one run).
pub struct StoredEvents {
    batch: RecordBatch,
    runs: Vec<(i64, usize, usize)>,
}

fn int<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a Int64Array> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<arrow::datatypes::Int64Type>())
        .ok_or_else(|| {
            MemoryError::invalid(format!(
                "memory_events has no int64 column '{name}'; the run is damaged"
            ))
        })
}

fn text<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a StringArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| {
            MemoryError::invalid(format!(
                "memory_events has no string column '{name}'; the run is damaged"
            ))
        })
}

impl StoredEvents {
    pub fn read(reader: &MemoryRunReader) -> Result<StoredEvents> {
        let batch = reader.store().table(Table::MemoryEvents)?;
        StoredEvents::from_batch(batch)
    }

    pub fn from_batch(batch: RecordBatch) -> Result<StoredEvents> {
        let points = int(&batch, "point_index")?;
        let mut runs: Vec<(i64, usize, usize)> = Vec::new();
        for (i, &p) in points.values().iter().enumerate() {
            match runs.last_mut() {
                Some((q, _, end)) if *q == p => *end = i + 1,
                _ => runs.push((p, i, i + 1)),
            }
        }
        Ok(StoredEvents { batch, runs })
    }
}

fn opt(a: &Int64Array, i: usize) -> Option<i64> {
    (!a.is_null(i)).then(|| a.value(i))
}

impl EventSource for StoredEvents {
    fn for_each<'s>(&'s self, point_index: i64, mut f: impl FnMut(RawEvent<'s>)) -> Result<()> {
        let b = &self.batch;
        let (device, action, address, size, stream) = (
            int(b, "device")?,
            text(b, "action")?,
            int(b, "address")?,
            int(b, "size")?,
            int(b, "stream")?,
        );
        let (p0, p1, stack) = (
            int(b, "pool_id_0")?,
            int(b, "pool_id_1")?,
            int(b, "stack_id")?,
        );
        let (device, size, stream) = (device.values(), size.values(), stream.values());
        for &(_, lo, hi) in self.runs.iter().filter(|r| r.0 == point_index) {
            for i in lo..hi {
                let name = action.value(i);
                f(RawEvent {
                    device: device[i],
                    action: Action::parse(name),
                    action_name: name,
                    address: opt(address, i),
                    size: size[i],
                    stream: stream[i],
                    pool: opt(p0, i).zip(opt(p1, i)),
                    stack: opt(stack, i).and_then(|v| u32::try_from(v).ok()),
                });
            }
        }
        Ok(())
    }

    fn len(&self) -> usize {
        self.batch.num_rows()
    }
}

/// In-memory windows: `(point_index, event)` pairs in order.
#[derive(Debug, Clone, Default)]
pub struct VecEvents(pub Vec<(i64, Event)>);

impl EventSource for VecEvents {
    fn for_each<'s>(&'s self, point_index: i64, mut f: impl FnMut(RawEvent<'s>)) -> Result<()> {
        for (p, e) in &self.0 {
            if *p == point_index {
                f(RawEvent {
                    device: e.device,
                    action: Action::parse(&e.action),
                    action_name: &e.action,
                    address: e.address,
                    size: e.size,
                    stream: e.stream,
                    pool: e.pool,
                    stack: e.stack,
                });
            }
        }
        Ok(())
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}
