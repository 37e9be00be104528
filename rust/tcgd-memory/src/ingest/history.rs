//! History windows: the entries of each device's ring since the previous point's boundary, found by time and confirmed by marker or fingerprint.

use crate::error::Result;
use crate::model::{Event, HistoryStatus, HistoryWindow};
use crate::tree::{Field, IntValue, SnapshotTree};

use super::*;

/// How far past the previous snapshot's last entry its own `snapshot` entry may lie: torch
/// gathers the trace and reads the segments under two separate locks, so another thread's
/// few entries can fall between.
const OWN_ENTRY_SPAN: usize = 64;

/// Where a window starts in the ring, how sure that is, and the previous snapshot's own
/// entry when it lies inside the window (a boundary, stored in no window).
pub(super) struct WindowStart {
    start: usize,
    status: HistoryStatus,
    skip: Option<usize>,
}

impl WindowStart {
    fn at(start: usize, status: HistoryStatus) -> WindowStart {
        WindowStart {
            start,
            status,
            skip: None,
        }
    }
}

impl<T: SnapshotTree> Ingester<'_, T> {
    pub(super) fn entry(&self, list: &T::Node, device: usize, i: usize) -> Result<T::Node> {
        self.item(list, i, &|| format!("device_traces[{device}][{i}]"))
    }

    /// `time_us` of entry `i`; `None` when it has none.
    pub(super) fn time_of(&self, list: &T::Node, device: usize, i: usize) -> Result<Option<i64>> {
        let entry = self.entry(list, device, i)?;
        let path = || format!("device_traces[{device}][{i}].time_us");
        match self.get(&entry, Field::TimeUs, &path)? {
            Some(v) => self.as_int(&v, &path).map(Some),
            None => Ok(None),
        }
    }

    /// First index in `[lo, hi)` whose time is `>= t` (`strict`: `> t`), assuming times
    /// never decrease. `None` when an entry without a time is met.
    pub(super) fn partition(
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

    pub(super) fn is_marker(
        &self,
        list: &T::Node,
        device: usize,
        i: usize,
        marker: &str,
    ) -> Result<bool> {
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

    pub(super) fn fingerprint(
        &self,
        list: &T::Node,
        device: usize,
        i: usize,
    ) -> Result<Fingerprint> {
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
    pub(super) fn history(
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
                    own_entry_size: None,
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

        let cut = match previous {
            None if cursor.started => WindowStart::at(0, HistoryStatus::BoundaryUnavailable),
            None => WindowStart::at(0, HistoryStatus::FirstPoint),
            Some(b) => self.window_start(list, d, end, b)?,
        };
        let (start, mut status) = (cut.start.min(end), cut.status);
        // The previous snapshot's own entry is a boundary, stored in no window (as a
        // marker is): counted out of the window, not just skipped.
        let skip = cut.skip.filter(|&i| i >= start && i < end);
        if let Some(i) = skip.filter(|&i| i > start) {
            self.warn_always(format!(
                "device {device}: {} allocator history entr{} recorded while the previous \
                 snapshot was being taken (by another thread, between torch gathering the \
                 trace and reading the segments); the previous state may already include \
                 them, and they are stored in this point's window",
                i - start,
                if i - start == 1 { "y was" } else { "ies were" },
            ));
        }

        let mut last_time: Option<i64> = None;
        let mut ordered = true;
        out.events.reserve(end - start);
        for i in start..end {
            if skip == Some(i) {
                continue;
            }
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
        window.events = (end - start - usize::from(skip.is_some())) as i64;
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
                own_entry_size: None,
            },
        );
        out.windows.push(window);
        Ok(())
    }

    /// The previous point's marker entry, searched where it must be: right after the
    /// previous boundary entry (among the entries sharing or following its time).
    pub(super) fn find_marker(
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

    /// Whether entry `i` is a `snapshot` entry of `size` bytes: the entry a snapshot that
    /// saw `size` active bytes on this device recorded.
    pub(super) fn is_own_entry(
        &self,
        list: &T::Node,
        device: usize,
        i: usize,
        size: i64,
    ) -> Result<bool> {
        let entry = self.entry(list, device, i)?;
        let action = self.tree.get(&entry, Field::Action).ok().flatten();
        let is_snapshot = action
            .and_then(|a| self.tree.with_str(&a, |s| s == "snapshot"))
            .unwrap_or(false);
        if !is_snapshot {
            return Ok(false);
        }
        let recorded = self.tree.get(&entry, Field::Size).ok().flatten();
        Ok(recorded.is_some_and(|v| matches!(self.tree.int(&v), IntValue::Int(x) if x == size)))
    }

    /// The previous snapshot's own `snapshot` entry, when the window starts at `from`
    /// right after the previous snapshot's last entry: the first `snapshot` entry of the
    /// entries that follow (another thread may have recorded a few between torch
    /// gathering the trace and recording the entry), if its size is the bytes that
    /// snapshot saw active. Any other `snapshot` entry first means it is not there.
    fn find_own_entry(
        &self,
        list: &T::Node,
        d: usize,
        from: usize,
        end: usize,
        size: i64,
    ) -> Result<Option<usize>> {
        for i in from..end.min(from.saturating_add(OWN_ENTRY_SPAN)) {
            let entry = self.entry(list, d, i)?;
            let action = self.tree.get(&entry, Field::Action).ok().flatten();
            if action
                .and_then(|a| self.tree.with_str(&a, |s| s == "snapshot"))
                .unwrap_or(false)
            {
                return Ok(self.is_own_entry(list, d, i, size)?.then_some(i));
            }
        }
        Ok(None)
    }

    /// Where the window starts after boundary `b`, and how sure that is.
    pub(super) fn window_start(
        &mut self,
        list: &T::Node,
        d: usize,
        end: usize,
        b: &Boundary,
    ) -> Result<WindowStart> {
        let cut = self.window_start_after_last(list, d, end, b)?;
        let Some(size) = b.own_entry_size else {
            return Ok(cut);
        };
        match (&b.last, cut.status) {
            // The previous ring joins this one at `cut.start`: the previous snapshot's
            // own entry follows, unless torch was told to skip `snapshot` entries.
            (Some(_), HistoryStatus::Complete) => Ok(WindowStart {
                skip: self.find_own_entry(list, d, cut.start, end, size)?,
                ..cut
            }),
            // The previous ring was empty. With history on, the previous snapshot's entry
            // is the first one recorded after it, so this ring starts with it (unless the
            // ring has since overwritten it, which then reads as a missing boundary).
            // History switched on later leaves no such entry: the boundary stays unknown.
            (None, _) if end > 0 && self.is_own_entry(list, d, 0, size)? => Ok(WindowStart {
                start: 1,
                status: HistoryStatus::Complete,
                skip: None,
            }),
            _ => Ok(cut),
        }
    }

    /// Where the window starts after the previous point's marker or last entry.
    fn window_start_after_last(
        &mut self,
        list: &T::Node,
        d: usize,
        end: usize,
        b: &Boundary,
    ) -> Result<WindowStart> {
        if let Some(marker) = &b.pending_marker {
            if let Some(i) = self.find_marker(list, d, end, b, marker)? {
                return Ok(WindowStart::at(i + 1, HistoryStatus::Complete));
            }
        }
        // The previous point's marker was recorded but is not in the ring: the entries up
        // to it were overwritten, or recording stopped and started again (the two cannot be
        // told apart); either way the window lost its start.
        let lost = if b.pending_marker.is_some() {
            HistoryStatus::Truncated
        } else {
            HistoryStatus::BoundaryUnavailable
        };
        let Some(e) = &b.last else {
            // The previous ring was empty and no marker is here to anchor on.
            return Ok(WindowStart::at(0, lost));
        };
        let Some(first_time) = self.time_of(list, d, 0)? else {
            self.warn_missing("trace.time_us");
            return Ok(WindowStart::at(0, HistoryStatus::BoundaryUnavailable));
        };
        if first_time > e.time_us {
            // Everything up to and past the boundary was overwritten.
            return Ok(WindowStart::at(0, HistoryStatus::Truncated));
        }
        let (Some(lo), Some(hi)) = (
            self.partition(list, d, 0, end, e.time_us, false)?,
            self.partition(list, d, 0, end, e.time_us, true)?,
        ) else {
            self.warn_missing("trace.time_us");
            return Ok(WindowStart::at(0, HistoryStatus::BoundaryUnavailable));
        };
        let same = hi - lo;
        if same >= e.seen_at_time && e.seen_at_time > 0 {
            let at = lo + e.seen_at_time - 1;
            if self.fingerprint(list, d, at)? == e.fingerprint {
                return Ok(WindowStart::at(at + 1, HistoryStatus::Complete));
            }
        } else if lo == 0 {
            // Entries sharing the boundary's time were overwritten.
            return Ok(WindowStart::at(hi, HistoryStatus::Truncated));
        }
        Ok(WindowStart::at(hi, lost))
    }

    pub(super) fn event(
        &mut self,
        list: &T::Node,
        d: usize,
        i: usize,
        device: i64,
    ) -> Result<Event> {
        let node = self.entry(list, d, i)?;
        let path = |f: &str| format!("device_traces[{d}][{i}].{f}");
        let action = self.req(&node, Field::Action, &path, Self::as_string)?;
        // Entries that have no address by design: OOM (it carries device_free), snapshot
        // markers (torch writes addr 0 for them anyway).
        let addressless = action == "oom";
        let int = Self::as_int;
        let address_warn = (!addressless).then_some("trace.addr");
        let address = self.opt(&node, Field::Addr, &path, address_warn, int)?;
        let size = self.opt(&node, Field::Size, &path, Some("trace.size"), int)?;
        let stream = self.opt(&node, Field::Stream, &path, Some("trace.stream"), int)?;
        let time_us = self.opt(&node, Field::TimeUs, &path, Some("trace.time_us"), int)?;
        let text = Self::as_string;
        let user_metadata = self.opt(&node, Field::UserMetadata, &path, None, text)?;
        let compile_context = self.opt(&node, Field::CompileContext, &path, None, text)?;
        let device_free = self.opt(&node, Field::DeviceFree, &path, None, int)?;
        let (size, stream) = (size.unwrap_or(0), stream.unwrap_or(0));
        for (name, value) in [("size", Some(size)), ("device_free", device_free)] {
            if let Some(v) = value.filter(|v| *v < 0) {
                return Err(self.negative(path(name), v));
            }
        }
        let pool = match self.get(&node, Field::PoolId, &|| path("pool_id"))? {
            Some(v) if !self.tree.is_none(&v) => Some(self.pool_pair(&v, &|| path("pool_id"))?),
            _ => None,
        };
        let stack = self.frames(&node, &path, None)?;
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
