//! From a snapshot (any [`SnapshotTree`]) to rows: segments, blocks, and the history
//! entries new since the previous point.
//!
//! Field policy (documented in docs/memory-debug.md): a *required* field that is missing
//! or has the wrong type is a [`MemoryError`] naming it; a missing *optional* field gets
//! its default and one warning per field per snapshot; fields that torch omits by design
//! (trace `frames` when no context is recorded, `pool_id` before it existed, ...) default
//! silently. A present field of the wrong type is always an error.
//!
//! History windows: torch's ring (`device_traces`) is cumulative and ordered by time. A
//! point stores only the entries after the previous point's boundary entry, found by
//! binary search on `time_us` and confirmed by the boundary's marker (the `snapshot` entry
//! carrying the metadata string set while the previous snapshot was taken) or by its
//! fingerprint. Cost is logarithmic in the ring plus linear in the new entries.
//!
//! Without a marker (imported `_dump_snapshot` files, torch without the metadata API) the
//! boundary is the `snapshot` entry torch records each time a snapshot is taken: it goes
//! into the ring after the traces were gathered, so snapshot N's entry is in snapshot
//! N + 1's ring, after the last entry N saw, and its `size` is the bytes N saw active on
//! that device. Finding it there proves the rings join with nothing lost between them,
//! even when snapshot N's ring was empty (history switched on just before it).

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::error::{MemoryError, Result, TorchVersion};
use crate::model::{Block, BlockState, Event, HistoryWindow, PoolId, Segment, StackTable};
use crate::tree::{Field, IntValue, SnapshotTree};

mod history;
mod segments;

#[derive(Debug, Clone, Default)]
pub struct IngestOptions {
    /// Devices to keep; `None` keeps every device the snapshot mentions.
    pub devices: Option<Vec<i64>>,
    /// The metadata string that was set while the snapshot was taken, if any.
    pub marker: Option<String>,
    pub torch_version: Option<String>,
}

/// Where one device's history stood when a point was taken.
#[derive(Debug, Clone, PartialEq)]
struct Boundary {
    /// The last entry the point saw; `None` when its ring was empty.
    last: Option<EntryMark>,
    /// The point's marker. Torch records a snapshot's own `snapshot` entry after it has
    /// gathered the traces, so the marker shows up in the *next* snapshot, right after
    /// `last`: finding it there proves the next window starts exactly here.
    pending_marker: Option<String>,
    /// Without a marker: the active bytes the point saw on this device. Torch records the
    /// snapshot's own `snapshot` entry with this size right after gathering the traces;
    /// the next point looks for it after `last` to prove its window starts there.
    own_entry_size: Option<i64>,
}

/// What identifies one ring entry without its position (the ring drops old entries).
#[derive(Debug, Clone, PartialEq)]
struct EntryMark {
    time_us: i64,
    /// Entries with this `time_us` up to and including this one.
    seen_at_time: usize,
    fingerprint: Fingerprint,
}

#[derive(Debug, Clone, PartialEq)]
struct Fingerprint {
    action: String,
    address: Option<i64>,
    size: Option<i64>,
    stream: Option<i64>,
}

/// Where the previous point left each device's history. A cursor only moves forward
/// when its point was committed (see [`Ingested::next_cursor`]).
#[derive(Debug, Clone, Default)]
pub struct HistoryCursor {
    started: bool,
    boundaries: HashMap<i64, Boundary>,
}

impl HistoryCursor {
    /// No point yet: the next window is the whole ring.
    pub fn new() -> HistoryCursor {
        HistoryCursor::default()
    }
}

/// One ingested snapshot.
#[derive(Debug, Clone, Default)]
pub struct Ingested {
    pub segments: Vec<Segment>,
    pub blocks: Vec<Block>,
    pub events: Vec<Event>,
    pub windows: Vec<HistoryWindow>,
    pub warnings: Vec<String>,
    /// Devices the state covers, ascending.
    pub devices: Vec<i64>,
    /// Whether a marker was set while the snapshot was taken (the marker API exists): the
    /// next point can then cut its window exactly here; its window status says whether
    /// it did.
    pub boundary_recorded: bool,
    /// The cursor to use for the next point once this one is kept.
    pub next_cursor: HistoryCursor,
}

struct Ingester<'t, T: SnapshotTree> {
    tree: &'t T,
    torch: TorchVersion,
    warned: HashSet<&'static str>,
    warnings: Vec<String>,
    stacks: &'t mut StackTable,
    /// Frame dicts already decoded in this snapshot, by identity: torch shares one dict
    /// per distinct frame across all entries.
    frame_cache: HashMap<usize, u32>,
    frame_ids: Vec<u32>,
}

/// Reads a snapshot. `stacks` receives the frames and stacks it refers to (ids stay valid
/// in that table); `cursor` says where the previous point's history ended.
pub fn ingest<T: SnapshotTree>(
    tree: &T,
    root: &T::Node,
    options: &IngestOptions,
    cursor: &HistoryCursor,
    stacks: &mut StackTable,
) -> Result<Ingested> {
    let mut ing = Ingester {
        tree,
        torch: TorchVersion(options.torch_version.clone()),
        warned: HashSet::new(),
        warnings: Vec::new(),
        stacks,
        frame_cache: HashMap::new(),
        frame_ids: Vec::new(),
    };
    let keep = |device: i64| options.devices.as_ref().is_none_or(|d| d.contains(&device));

    let segments_node = ing.required(root, Field::Segments, &|| "segments".to_owned())?;
    let segment_count = ing.seq_len(&segments_node, &|| "segments".to_owned())?;
    let mut out = Ingested::default();
    let mut devices = BTreeSet::new();
    let mut uncovered = 0usize;
    for i in 0..segment_count {
        let node = ing.item(&segments_node, i, &|| format!("segments[{i}]"))?;
        let path = |f: &str| format!("segments[{i}].{f}");
        let device = ing.req(&node, Field::Device, &path, Ingester::as_int)?;
        if !keep(device) {
            continue;
        }
        devices.insert(device);
        let segment_index = out.segments.len() as u32;
        let segment = ing.segment(&node, device, &path)?;
        let first_block = out.blocks.len();
        let covered = ing.blocks(&node, &segment, segment_index, i, &mut out.blocks)?;
        if covered != segment.total_size {
            uncovered += 1;
            // A gap somewhere makes every inferred address after it a guess: drop them.
            for block in &mut out.blocks[first_block..] {
                if block.address_inferred {
                    block.address = None;
                }
            }
        }
        out.segments.push(segment);
    }
    if uncovered > 0 {
        ing.warn_always(format!(
            "{uncovered} segment(s) have blocks that do not add up to the segment's \
             total_size; their block addresses cannot be inferred exactly"
        ));
    }

    // What torch sums for the `size` of the snapshot entry it records on each device:
    // every block that is not inactive (allocated, or awaiting a stream-safe free).
    let mut active_bytes: HashMap<i64, i64> = HashMap::new();
    for block in &out.blocks {
        if block.state != BlockState::Inactive {
            let device = out.segments[block.segment as usize].device;
            // Saturating: sizes that overflow are refused later, with their own error.
            let sum = active_bytes.entry(device).or_default();
            *sum = sum.saturating_add(block.size);
        }
    }

    let mut next = cursor.clone();
    next.started = true;
    match ing.tree.get(root, Field::DeviceTraces) {
        Err(()) => return Err(ing.wrong_type(root, "dict", "snapshot")),
        Ok(None) => {
            ing.warn_once(
                "device_traces",
                "the snapshot has no 'device_traces': no allocator history is available",
            );
        }
        Ok(Some(traces)) => {
            let device_count = ing.seq_len(&traces, &|| "device_traces".to_owned())?;
            for device in 0..device_count {
                let device_i64 = device as i64;
                if !keep(device_i64) {
                    continue;
                }
                let list = ing.item(&traces, device, &|| format!("device_traces[{device}]"))?;
                ing.history(
                    device_i64,
                    &list,
                    cursor,
                    options.marker.as_deref(),
                    &mut next,
                    &mut out,
                )?;
                if options.marker.is_none() {
                    if let Some(b) = next.boundaries.get_mut(&device_i64) {
                        b.own_entry_size =
                            Some(active_bytes.get(&device_i64).copied().unwrap_or(0));
                    }
                }
                if out.windows.last().is_some_and(|w| w.ring_entries > 0) {
                    devices.insert(device_i64);
                }
            }
        }
    }
    if let Some(wanted) = &options.devices {
        devices.extend(wanted.iter().copied());
    }
    out.devices = devices.into_iter().collect();
    out.warnings = ing.warnings;
    out.boundary_recorded = options.marker.is_some();
    out.next_cursor = next;
    Ok(out)
}

impl<T: SnapshotTree> Ingester<'_, T> {
    // ------------------------------------------------------------------ field access

    pub(super) fn wrong_type(
        &self,
        node: &T::Node,
        expected: &'static str,
        field: &str,
    ) -> MemoryError {
        MemoryError::WrongType {
            field: field.to_owned(),
            expected,
            found: self.tree.type_name(node),
            torch: self.torch.clone(),
        }
    }

    pub(super) fn missing(&self, field: String) -> MemoryError {
        MemoryError::MissingField {
            field,
            torch: self.torch.clone(),
        }
    }

    pub(super) fn get(
        &self,
        node: &T::Node,
        field: Field,
        path: &dyn Fn() -> String,
    ) -> Result<Option<T::Node>> {
        self.tree.get(node, field).map_err(|()| {
            let whole = path();
            let parent = whole
                .rsplit_once('.')
                .map_or_else(|| "snapshot".to_owned(), |(p, _)| p.to_owned());
            self.wrong_type(node, "dict", &parent)
        })
    }

    pub(super) fn required(
        &self,
        node: &T::Node,
        field: Field,
        path: &dyn Fn() -> String,
    ) -> Result<T::Node> {
        self.get(node, field, path)?
            .ok_or_else(|| self.missing(path()))
    }

    pub(super) fn seq_len(&self, node: &T::Node, path: &dyn Fn() -> String) -> Result<usize> {
        self.tree
            .seq_len(node)
            .ok_or_else(|| self.wrong_type(node, "list", &path()))
    }

    pub(super) fn item(
        &self,
        node: &T::Node,
        index: usize,
        path: &dyn Fn() -> String,
    ) -> Result<T::Node> {
        self.tree
            .seq_item(node, index)
            .ok_or_else(|| self.missing(path()))
    }

    pub(super) fn as_int(&self, node: &T::Node, path: &dyn Fn() -> String) -> Result<i64> {
        match self.tree.int(node) {
            IntValue::Int(v) => Ok(v),
            IntValue::OutOfRange => Err(MemoryError::Inconsistent {
                field: path(),
                reason: "integer outside the signed 64-bit range".into(),
                torch: self.torch.clone(),
            }),
            IntValue::NotAnInt => Err(self.wrong_type(node, "int", &path())),
        }
    }

    /// A required field as `read` converts it (`Self::as_int`, ...), its path
    /// `at(field.key())`.
    pub(super) fn req<V>(
        &self,
        node: &T::Node,
        field: Field,
        at: &dyn Fn(&str) -> String,
        read: impl Fn(&Self, &T::Node, &dyn Fn() -> String) -> Result<V>,
    ) -> Result<V> {
        let path = || at(field.key());
        let value = self.required(node, field, &path)?;
        read(self, &value, &path)
    }

    /// `field` of `node` when present, its path `at(field.key())`. A missing one gets the
    /// once-per-snapshot warning that `warn` names; `None` for fields that torch omits by
    /// design.
    pub(super) fn optional(
        &mut self,
        node: &T::Node,
        field: Field,
        at: &dyn Fn(&str) -> String,
        warn: Option<&'static str>,
    ) -> Result<Option<T::Node>> {
        let value = self.get(node, field, &|| at(field.key()))?;
        if let (None, Some(what)) = (&value, warn) {
            self.warn_missing(what);
        }
        Ok(value)
    }

    /// An [`optional`](Self::optional) field as `read` converts it (`Self::as_int`, ...).
    pub(super) fn opt<V>(
        &mut self,
        node: &T::Node,
        field: Field,
        at: &dyn Fn(&str) -> String,
        warn: Option<&'static str>,
        read: impl Fn(&Self, &T::Node, &dyn Fn() -> String) -> Result<V>,
    ) -> Result<Option<V>> {
        self.optional(node, field, at, warn)?
            .map(|value| read(self, &value, &|| at(field.key())))
            .transpose()
    }

    /// A pool id: a sequence of two ints.
    pub(super) fn pool_pair(&self, value: &T::Node, path: &dyn Fn() -> String) -> Result<PoolId> {
        let pair = (self.tree.seq_len(value) == Some(2))
            .then(|| (self.tree.seq_item(value, 0), self.tree.seq_item(value, 1)));
        match pair {
            Some((Some(a), Some(b))) => Ok((
                self.as_int(&a, &|| format!("{}[0]", path()))?,
                self.as_int(&b, &|| format!("{}[1]", path()))?,
            )),
            _ => Err(self.wrong_type(value, "a tuple of two ints", &path())),
        }
    }

    pub(super) fn negative(&self, field: String, value: i64) -> MemoryError {
        MemoryError::Inconsistent {
            field,
            reason: format!("negative size {value}"),
            torch: self.torch.clone(),
        }
    }

    pub(super) fn overflow(&self, field: String, what: String) -> MemoryError {
        MemoryError::Overflow {
            field,
            what,
            torch: self.torch.clone(),
        }
    }

    pub(super) fn warn_missing(&mut self, what: &'static str) {
        self.warn_once(
            what,
            &format!(
                "snapshot field '{what}' is missing{}; its default was used (see the field \
                 policy in docs/memory-debug.md)",
                self.torch
            ),
        );
    }

    pub(super) fn warn_once(&mut self, key: &'static str, message: &str) {
        if self.warned.insert(key) {
            self.warnings.push(message.to_owned());
        }
    }

    pub(super) fn warn_always(&mut self, message: String) {
        self.warnings.push(message);
    }

    pub(super) fn as_string(&self, node: &T::Node, path: &dyn Fn() -> String) -> Result<String> {
        self.tree
            .with_str(node, str::to_owned)
            .ok_or_else(|| self.wrong_type(node, "str", &path()))
    }

    pub(super) fn as_bool(&self, node: &T::Node, path: &dyn Fn() -> String) -> Result<bool> {
        self.tree
            .boolean(node)
            .ok_or_else(|| self.wrong_type(node, "bool", &path()))
    }
}
