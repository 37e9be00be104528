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

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::error::{MemoryError, Result, TorchVersion};
use crate::model::{
    Block, BlockState, Event, Frame, HistoryStatus, HistoryWindow, PoolId, Segment, StackTable,
    DEFAULT_POOL,
};
use crate::tree::{Field, IntValue, SnapshotTree};

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
        let device = ing.req_int(&node, Field::Device, &|| path("device"))?;
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

    fn wrong_type(&self, node: &T::Node, expected: &'static str, field: &str) -> MemoryError {
        MemoryError::WrongType {
            field: field.to_owned(),
            expected,
            found: self.tree.type_name(node),
            torch: self.torch.clone(),
        }
    }

    fn missing(&self, field: String) -> MemoryError {
        MemoryError::MissingField {
            field,
            torch: self.torch.clone(),
        }
    }

    fn get(
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

    fn required(&self, node: &T::Node, field: Field, path: &dyn Fn() -> String) -> Result<T::Node> {
        self.get(node, field, path)?
            .ok_or_else(|| self.missing(path()))
    }

    fn seq_len(&self, node: &T::Node, path: &dyn Fn() -> String) -> Result<usize> {
        self.tree
            .seq_len(node)
            .ok_or_else(|| self.wrong_type(node, "list", &path()))
    }

    fn item(&self, node: &T::Node, index: usize, path: &dyn Fn() -> String) -> Result<T::Node> {
        self.tree
            .seq_item(node, index)
            .ok_or_else(|| self.missing(path()))
    }

    fn as_int(&self, node: &T::Node, path: &dyn Fn() -> String) -> Result<i64> {
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

    fn req_int(&self, node: &T::Node, field: Field, path: &dyn Fn() -> String) -> Result<i64> {
        let value = self.required(node, field, path)?;
        self.as_int(&value, path)
    }

    /// An optional int: `warn` names the field for the once-per-snapshot warning, `None`
    /// for fields that torch omits by design.
    fn opt_int(
        &mut self,
        node: &T::Node,
        field: Field,
        path: &dyn Fn() -> String,
        warn: Option<&'static str>,
    ) -> Result<Option<i64>> {
        match self.get(node, field, path)? {
            Some(value) => self.as_int(&value, path).map(Some),
            None => {
                if let Some(what) = warn {
                    self.warn_missing(what);
                }
                Ok(None)
            }
        }
    }

    fn opt_str(
        &mut self,
        node: &T::Node,
        field: Field,
        path: &dyn Fn() -> String,
        warn: Option<&'static str>,
    ) -> Result<Option<String>> {
        match self.get(node, field, path)? {
            Some(value) => self
                .tree
                .with_str(&value, str::to_owned)
                .map(Some)
                .ok_or_else(|| self.wrong_type(&value, "str", &path())),
            None => {
                if let Some(what) = warn {
                    self.warn_missing(what);
                }
                Ok(None)
            }
        }
    }

    fn negative(&self, field: String, value: i64) -> MemoryError {
        MemoryError::Inconsistent {
            field,
            reason: format!("negative size {value}"),
            torch: self.torch.clone(),
        }
    }

    fn overflow(&self, field: String, what: String) -> MemoryError {
        MemoryError::Overflow {
            field,
            what,
            torch: self.torch.clone(),
        }
    }

    fn warn_missing(&mut self, what: &'static str) {
        self.warn_once(
            what,
            &format!(
                "snapshot field '{what}' is missing{}; its default was used (see the field \
                 policy in docs/memory-debug.md)",
                self.torch
            ),
        );
    }

    fn warn_once(&mut self, key: &'static str, message: &str) {
        if self.warned.insert(key) {
            self.warnings.push(message.to_owned());
        }
    }

    fn warn_always(&mut self, message: String) {
        self.warnings.push(message);
    }

    // ------------------------------------------------------------------ state

    fn pool_id(&mut self, node: &T::Node, path: &dyn Fn() -> String) -> Result<PoolId> {
        let Some(value) = self.get(node, Field::SegmentPoolId, path)? else {
            self.warn_missing("segment.segment_pool_id");
            return Ok(DEFAULT_POOL);
        };
        let pair = (self.tree.seq_len(&value) == Some(2))
            .then(|| (self.tree.seq_item(&value, 0), self.tree.seq_item(&value, 1)));
        match pair {
            Some((Some(a), Some(b))) => Ok((
                self.as_int(&a, &|| format!("{}[0]", path()))?,
                self.as_int(&b, &|| format!("{}[1]", path()))?,
            )),
            _ => Err(self.wrong_type(&value, "a tuple of two ints", &path())),
        }
    }

    fn segment(
        &mut self,
        node: &T::Node,
        device: i64,
        path: &dyn Fn(&str) -> String,
    ) -> Result<Segment> {
        let total_size = self.req_int(node, Field::TotalSize, &|| path("total_size"))?;
        let stream = self.req_int(node, Field::Stream, &|| path("stream"))?;
        let address = self.opt_int(
            node,
            Field::Address,
            &|| path("address"),
            Some("segment.address"),
        )?;
        let allocated_size = self.opt_int(
            node,
            Field::AllocatedSize,
            &|| path("allocated_size"),
            Some("segment.allocated_size"),
        )?;
        let active_size = self.opt_int(
            node,
            Field::ActiveSize,
            &|| path("active_size"),
            Some("segment.active_size"),
        )?;
        let requested_size = self.opt_int(
            node,
            Field::RequestedSize,
            &|| path("requested_size"),
            Some("segment.requested_size"),
        )?;
        let pool = self.pool_id(node, &|| path("segment_pool_id"))?;
        let segment_type = self
            .opt_str(
                node,
                Field::SegmentType,
                &|| path("segment_type"),
                Some("segment.segment_type"),
            )?
            .unwrap_or_else(|| "unknown".to_owned());
        let is_expandable = match self.get(node, Field::IsExpandable, &|| path("is_expandable"))? {
            Some(v) => self
                .tree
                .boolean(&v)
                .ok_or_else(|| self.wrong_type(&v, "bool", &path("is_expandable")))?,
            None => {
                self.warn_missing("segment.is_expandable");
                false
            }
        };
        for (name, value) in [
            ("total_size", Some(total_size)),
            ("address", address),
            ("allocated_size", allocated_size),
            ("active_size", active_size),
            ("requested_size", requested_size),
        ] {
            if let Some(v) = value.filter(|v| *v < 0) {
                return Err(self.negative(path(name), v));
            }
        }
        if let Some(a) = address {
            if a.checked_add(total_size).is_none() {
                return Err(self.overflow(
                    path("total_size"),
                    format!("the segment's end, address {a} + total_size {total_size}"),
                ));
            }
        }
        let stack = self.frames(node, &|| path("frames"), Some("segment.frames"))?;
        Ok(Segment {
            device,
            address,
            total_size,
            allocated_size,
            active_size,
            requested_size,
            stream,
            pool,
            segment_type,
            is_expandable,
            stack,
        })
    }

    /// Reads a segment's blocks; returns the bytes they cover.
    fn blocks(
        &mut self,
        node: &T::Node,
        segment: &Segment,
        segment_index: u32,
        i: usize,
        out: &mut Vec<Block>,
    ) -> Result<i64> {
        let blocks_path = || format!("segments[{i}].blocks");
        let blocks = self.required(node, Field::Blocks, &blocks_path)?;
        let n = self.seq_len(&blocks, &blocks_path)?;
        let mut offset = 0i64;
        for j in 0..n {
            let path = |f: &str| format!("segments[{i}].blocks[{j}].{f}");
            let block = self.item(&blocks, j, &|| format!("segments[{i}].blocks[{j}]"))?;
            let size = self.req_int(&block, Field::Size, &|| path("size"))?;
            let state_node = self.required(&block, Field::State, &|| path("state"))?;
            let state = self
                .tree
                .with_str(&state_node, BlockState::parse)
                .ok_or_else(|| self.wrong_type(&state_node, "str", &path("state")))?
                .ok_or_else(|| MemoryError::Inconsistent {
                    field: path("state"),
                    reason: format!(
                        "unknown block state {:?}",
                        self.tree
                            .with_str(&state_node, str::to_owned)
                            .unwrap_or_default()
                    ),
                    torch: self.torch.clone(),
                })?;
            let reported = self.opt_int(
                &block,
                Field::Address,
                &|| path("address"),
                Some("block.address"),
            )?;
            let requested = self.opt_int(
                &block,
                Field::RequestedSize,
                &|| path("requested_size"),
                Some("block.requested_size"),
            )?;
            let requested_size = requested.unwrap_or(if state.is_active() { size } else { 0 });
            if size < 0 || requested_size < 0 {
                return Err(MemoryError::Inconsistent {
                    field: path("size"),
                    reason: format!("negative size ({size}, requested {requested_size})"),
                    torch: self.torch.clone(),
                });
            }
            if let Some(a) = reported {
                if a < 0 {
                    return Err(self.negative(path("address"), a));
                }
                if a.checked_add(size).is_none() {
                    return Err(self.overflow(
                        path("size"),
                        format!("the block's end, address {a} + size {size}"),
                    ));
                }
            }
            if state.is_active() && requested_size > size {
                return Err(MemoryError::Inconsistent {
                    field: path("requested_size"),
                    reason: format!("{requested_size} is larger than the block's size {size}"),
                    torch: self.torch.clone(),
                });
            }
            let stack = self.frames(&block, &|| path("frames"), Some("block.frames"))?;
            let (address, address_inferred) = match reported {
                Some(a) => (Some(a), false),
                // `offset <= total_size` (checked below for every earlier block) and the
                // segment's end fits, so this fits.
                None => (
                    segment.address.and_then(|base| base.checked_add(offset)),
                    true,
                ),
            };
            offset = offset.checked_add(size).ok_or_else(|| {
                self.overflow(
                    format!("segments[{i}].blocks"),
                    format!("the sum of the block sizes, {offset} + {size}"),
                )
            })?;
            if offset > segment.total_size {
                return Err(MemoryError::Inconsistent {
                    field: format!("segments[{i}].blocks"),
                    reason: format!(
                        "blocks add up to {offset} bytes by block {j}, more than the \
                         segment's total_size {}",
                        segment.total_size
                    ),
                    torch: self.torch.clone(),
                });
            }
            out.push(Block {
                segment: segment_index,
                address,
                address_inferred,
                size,
                requested_size,
                state,
                stack,
            });
        }
        Ok(offset)
    }

    /// The stack of `node`'s `frames`, deduplicated into the stack table; `None` when no
    /// frames were recorded.
    fn frames(
        &mut self,
        node: &T::Node,
        path: &dyn Fn() -> String,
        warn: Option<&'static str>,
    ) -> Result<Option<u32>> {
        let Some(frames) = self.get(node, Field::Frames, path)? else {
            if let Some(what) = warn {
                self.warn_missing(what);
            }
            return Ok(None);
        };
        let n = self.seq_len(&frames, path)?;
        if n == 0 {
            return Ok(None);
        }
        let mut ids = std::mem::take(&mut self.frame_ids);
        ids.clear();
        for k in 0..n {
            let frame = self.item(&frames, k, &|| format!("{}[{k}]", path()))?;
            let identity = self.tree.identity(&frame);
            let id = match self.frame_cache.get(&identity) {
                Some(&id) if identity != usize::MAX => id,
                _ => {
                    let fpath = |f: &str| format!("{}[{k}].{f}", path());
                    let line = self.req_int(&frame, Field::Line, &|| fpath("line"))?;
                    let filename = self.req_str(&frame, Field::Filename, &|| fpath("filename"))?;
                    let name = self.req_str(&frame, Field::Name, &|| fpath("name"))?;
                    let id = self.stacks.frame_id(Frame {
                        filename,
                        line,
                        name,
                    });
                    if identity != usize::MAX {
                        self.frame_cache.insert(identity, id);
                    }
                    id
                }
            };
            ids.push(id);
        }
        let stack = self.stacks.stack_id(&ids);
        self.frame_ids = ids;
        Ok(Some(stack))
    }

    fn req_str(&self, node: &T::Node, field: Field, path: &dyn Fn() -> String) -> Result<String> {
        let value = self.required(node, field, path)?;
        self.tree
            .with_str(&value, str::to_owned)
            .ok_or_else(|| self.wrong_type(&value, "str", &path()))
    }

    // ------------------------------------------------------------------ history

    fn entry(&self, list: &T::Node, device: usize, i: usize) -> Result<T::Node> {
        self.item(list, i, &|| format!("device_traces[{device}][{i}]"))
    }

    /// `time_us` of entry `i`; `None` when it has none.
    fn time_of(&self, list: &T::Node, device: usize, i: usize) -> Result<Option<i64>> {
        let entry = self.entry(list, device, i)?;
        let path = || format!("device_traces[{device}][{i}].time_us");
        match self.get(&entry, Field::TimeUs, &path)? {
            Some(v) => self.as_int(&v, &path).map(Some),
            None => Ok(None),
        }
    }

    /// First index in `[lo, hi)` whose time is `>= t` (`strict`: `> t`), assuming times
    /// never decrease. `None` when an entry without a time is met.
    fn partition(
        &self,
        list: &T::Node,
        device: usize,
        mut lo: usize,
        mut hi: usize,
        t: i64,
        strict: bool,
    ) -> Result<Option<usize>> {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let Some(time) = self.time_of(list, device, mid)? else {
                return Ok(None);
            };
            if time < t || (strict && time == t) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(Some(lo))
    }

    fn is_marker(&self, list: &T::Node, device: usize, i: usize, marker: &str) -> Result<bool> {
        let entry = self.entry(list, device, i)?;
        let action = self.tree.get(&entry, Field::Action).ok().flatten();
        let is_snapshot = action
            .and_then(|a| self.tree.with_str(&a, |s| s == "snapshot"))
            .unwrap_or(false);
        if !is_snapshot {
            return Ok(false);
        }
        let metadata = self.tree.get(&entry, Field::UserMetadata).ok().flatten();
        Ok(metadata
            .and_then(|m| self.tree.with_str(&m, |s| s == marker))
            .unwrap_or(false))
    }

    fn fingerprint(&self, list: &T::Node, device: usize, i: usize) -> Result<Fingerprint> {
        let entry = self.entry(list, device, i)?;
        let int = |f: Field| {
            self.tree
                .get(&entry, f)
                .ok()
                .flatten()
                .and_then(|v| match self.tree.int(&v) {
                    IntValue::Int(x) => Some(x),
                    _ => None,
                })
        };
        let action = self
            .tree
            .get(&entry, Field::Action)
            .ok()
            .flatten()
            .and_then(|a| self.tree.with_str(&a, str::to_owned))
            .unwrap_or_default();
        Ok(Fingerprint {
            action,
            address: int(Field::Addr),
            size: int(Field::Size),
            stream: int(Field::Stream),
        })
    }

    /// Cuts one device's ring into this point's window, stores its entries, and records
    /// the new boundary in `next`.
    fn history(
        &mut self,
        device: i64,
        list: &T::Node,
        cursor: &HistoryCursor,
        marker: Option<&str>,
        next: &mut HistoryCursor,
        out: &mut Ingested,
    ) -> Result<()> {
        let d = device as usize;
        let n = self.seq_len(list, &|| format!("device_traces[{d}]"))?;
        let previous = cursor.boundaries.get(&device);
        let mut window = HistoryWindow {
            device,
            status: HistoryStatus::Disabled,
            ring_entries: n as i64,
            events: 0,
            first_time_us: None,
            last_time_us: None,
        };
        if n == 0 {
            // An empty ring at the first point may only mean history was switched on just
            // before; later, a ring without even the previous point's marker is off.
            if !cursor.started {
                window.status = HistoryStatus::FirstPoint;
            }
            next.boundaries.insert(
                device,
                Boundary {
                    last: None,
                    pending_marker: marker.map(str::to_owned),
                },
            );
            out.windows.push(window);
            return Ok(());
        }

        // Older torch releases may record the snapshot entry before gathering: then this
        // snapshot's own marker closes the window.
        let mut end = n;
        let mut own_marker = false;
        if let Some(marker) = marker {
            for i in (n.saturating_sub(64)..n).rev() {
                if self.is_marker(list, d, i, marker)? {
                    end = i + 1;
                    own_marker = true;
                    break;
                }
            }
        }

        let (start, mut status) = match previous {
            None if cursor.started => (0, HistoryStatus::BoundaryUnavailable),
            None => (0, HistoryStatus::FirstPoint),
            Some(b) => self.window_start(list, d, end, b)?,
        };
        let start = start.min(end);

        let mut last_time: Option<i64> = None;
        let mut ordered = true;
        out.events.reserve(end - start);
        for i in start..end {
            let event = self.event(list, d, i, device)?;
            if let (Some(prev), Some(t)) = (last_time, event.time_us) {
                ordered &= t >= prev;
            }
            if event.time_us.is_some() {
                last_time = event.time_us;
            }
            if window.first_time_us.is_none() {
                window.first_time_us = event.time_us;
            }
            out.events.push(event);
        }
        if !ordered {
            status = HistoryStatus::InvalidOrder;
        }
        window.status = status;
        window.events = (end - start) as i64;
        window.last_time_us = last_time;

        let last = match self.time_of(list, d, end - 1)? {
            Some(t) => {
                let first_same = self.partition(list, d, 0, end, t, false)?;
                Some(EntryMark {
                    time_us: t,
                    seen_at_time: first_same.map_or(1, |f| end - f),
                    fingerprint: self.fingerprint(list, d, end - 1)?,
                })
            }
            None => None,
        };
        next.boundaries.insert(
            device,
            Boundary {
                last,
                pending_marker: marker.filter(|_| !own_marker).map(str::to_owned),
            },
        );
        out.windows.push(window);
        Ok(())
    }

    /// The previous point's marker entry, searched where it must be: right after the
    /// previous boundary entry (among the entries sharing or following its time).
    fn find_marker(
        &self,
        list: &T::Node,
        d: usize,
        end: usize,
        b: &Boundary,
        marker: &str,
    ) -> Result<Option<usize>> {
        let from = match &b.last {
            None => 0,
            Some(e) => match self.partition(list, d, 0, end, e.time_us, false)? {
                Some(lo) => lo,
                None => return Ok(None),
            },
        };
        let span = b.last.as_ref().map_or(0, |e| e.seen_at_time) + 64;
        for i in from..end.min(from.saturating_add(span)) {
            if self.is_marker(list, d, i, marker)? {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Where the window starts after boundary `b`, and how sure that is.
    fn window_start(
        &mut self,
        list: &T::Node,
        d: usize,
        end: usize,
        b: &Boundary,
    ) -> Result<(usize, HistoryStatus)> {
        if let Some(marker) = &b.pending_marker {
            if let Some(i) = self.find_marker(list, d, end, b, marker)? {
                return Ok((i + 1, HistoryStatus::Complete));
            }
        }
        let Some(e) = &b.last else {
            // The previous ring was empty and no marker is here to anchor on.
            return Ok((0, HistoryStatus::BoundaryUnavailable));
        };
        let Some(first_time) = self.time_of(list, d, 0)? else {
            self.warn_missing("trace.time_us");
            return Ok((0, HistoryStatus::BoundaryUnavailable));
        };
        if first_time > e.time_us {
            // Everything up to and past the boundary was overwritten.
            return Ok((0, HistoryStatus::Truncated));
        }
        let (Some(lo), Some(hi)) = (
            self.partition(list, d, 0, end, e.time_us, false)?,
            self.partition(list, d, 0, end, e.time_us, true)?,
        ) else {
            self.warn_missing("trace.time_us");
            return Ok((0, HistoryStatus::BoundaryUnavailable));
        };
        let same = hi - lo;
        if same >= e.seen_at_time && e.seen_at_time > 0 {
            let at = lo + e.seen_at_time - 1;
            if self.fingerprint(list, d, at)? == e.fingerprint {
                return Ok((at + 1, HistoryStatus::Complete));
            }
        } else if lo == 0 {
            // Entries sharing the boundary's time were overwritten.
            return Ok((hi, HistoryStatus::Truncated));
        }
        Ok((hi, HistoryStatus::BoundaryUnavailable))
    }

    fn event(&mut self, list: &T::Node, d: usize, i: usize, device: i64) -> Result<Event> {
        let node = self.entry(list, d, i)?;
        let path = |f: &str| format!("device_traces[{d}][{i}].{f}");
        let action_node = self.required(&node, Field::Action, &|| path("action"))?;
        let action = self
            .tree
            .with_str(&action_node, str::to_owned)
            .ok_or_else(|| self.wrong_type(&action_node, "str", &path("action")))?;
        // Entries that have no address by design: OOM (it carries device_free), snapshot
        // markers (torch writes addr 0 for them anyway).
        let addressless = action == "oom";
        let address = self.opt_int(
            &node,
            Field::Addr,
            &|| path("addr"),
            (!addressless).then_some("trace.addr"),
        )?;
        let size = self
            .opt_int(&node, Field::Size, &|| path("size"), Some("trace.size"))?
            .unwrap_or(0);
        let stream = self
            .opt_int(
                &node,
                Field::Stream,
                &|| path("stream"),
                Some("trace.stream"),
            )?
            .unwrap_or(0);
        let time_us = self.opt_int(
            &node,
            Field::TimeUs,
            &|| path("time_us"),
            Some("trace.time_us"),
        )?;
        let user_metadata =
            self.opt_str(&node, Field::UserMetadata, &|| path("user_metadata"), None)?;
        let compile_context = self.opt_str(
            &node,
            Field::CompileContext,
            &|| path("compile_context"),
            None,
        )?;
        let device_free = self.opt_int(&node, Field::DeviceFree, &|| path("device_free"), None)?;
        for (name, value) in [("size", Some(size)), ("device_free", device_free)] {
            if let Some(v) = value.filter(|v| *v < 0) {
                return Err(self.negative(path(name), v));
            }
        }
        let pool = match self.get(&node, Field::PoolId, &|| path("pool_id"))? {
            Some(v) if !self.tree.is_none(&v) => {
                let pair = (self.tree.seq_len(&v) == Some(2))
                    .then(|| (self.tree.seq_item(&v, 0), self.tree.seq_item(&v, 1)));
                match pair {
                    Some((Some(a), Some(b))) => Some((
                        self.as_int(&a, &|| path("pool_id[0]"))?,
                        self.as_int(&b, &|| path("pool_id[1]"))?,
                    )),
                    _ => return Err(self.wrong_type(&v, "a tuple of two ints", &path("pool_id"))),
                }
            }
            _ => None,
        };
        let stack = self.frames(&node, &|| path("frames"), None)?;
        Ok(Event {
            device,
            ring_index: i as i64,
            action,
            address,
            size,
            stream,
            time_us,
            pool,
            user_metadata,
            compile_context,
            device_free,
            stack,
        })
    }
}
