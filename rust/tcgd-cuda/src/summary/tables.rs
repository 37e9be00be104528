//! What the kernels write and the host reads: summary records and their table, history rings, the trigger and the session words.

use tcgd_tensor::{ElementCounts, TensorSummary};

use crate::error::Result;
use crate::memory::{DeviceBuffer, PinnedBuffer, PrivateStream};

/// One summary as the kernel writes it (`Record` in kernels.cu).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DeviceRecord {
    pub counts: ElementCounts,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub m2: f64,
    pub ssq: f64,
    /// The session's point number when the replay ran.
    pub point: u64,
    /// Bit 0: this summary fired the trigger.
    pub flags: u64,
    /// The replay that wrote the record (the graph's own counter, from 1).
    pub replay: u64,
}

impl DeviceRecord {
    pub fn triggered(&self) -> bool {
        self.flags & 1 != 0
    }

    /// The summary in the store's terms (population std, L2 over finite values).
    pub fn to_summary(&self) -> TensorSummary {
        let finite = self.counts.finite;
        TensorSummary::from_parts(
            self.counts,
            self.min,
            self.max,
            (finite > 0).then_some(self.mean),
            (finite > 0).then(|| (self.m2 / finite as f64).max(0.0).sqrt()),
            self.ssq.max(0.0).sqrt(),
        )
    }
}

/// The session's summary records: `rows` points in flight times `columns` sites, in pinned
/// host memory mapped into the device. The kernels write each record there directly, so
/// closing a point enqueues no copy; the host reads a point's row once the point's event
/// completed (a kernel's writes to mapped memory are visible to the host once it is
/// complete).
pub struct RecordTable {
    pub(super) host: PinnedBuffer,
    /// The device's address of `host`.
    pub(super) device_ptr: u64,
    pub rows: u32,
    pub columns: u32,
}

pub(crate) const RECORD_BYTES: usize = std::mem::size_of::<DeviceRecord>();

impl RecordTable {
    pub fn new(rows: u32, columns: u32) -> Result<RecordTable> {
        let bytes = rows as usize * columns as usize * RECORD_BYTES;
        // Zeroed at allocation: every record starts tagged with replay 0, "never written".
        let (host, device_ptr) = PinnedBuffer::alloc_mapped(bytes)?;
        Ok(RecordTable {
            host,
            device_ptr,
            rows,
            columns,
        })
    }

    pub(super) fn row_offset(&self, point: u32) -> usize {
        (point % self.rows) as usize * self.columns as usize * RECORD_BYTES
    }

    /// The record of `column` in point `point`'s row.
    ///
    /// # Safety
    /// The point's kernels must have completed (its event), and no kernel of the point
    /// `rows` later, which reuses the row, may have been launched.
    pub unsafe fn read(&self, point: u32, column: u32) -> DeviceRecord {
        let offset = self.row_offset(point) + column as usize * RECORD_BYTES;
        // SAFETY: in bounds (see above); records are plain old data, read unaligned-safe.
        unsafe { std::ptr::read_unaligned(self.host.ptr.add(offset) as *const DeviceRecord) }
    }
}

/// A history site's device ring: `depth` slots of the value, and (replay, point) per slot.
pub struct HistoryRing {
    pub(super) values: DeviceBuffer,
    pub(super) tags: DeviceBuffer,
    pub nbytes: usize,
    pub depth: u64,
}

/// A history ring read back: the values by slot and what each slot holds.
pub struct HistoryContents {
    pub values: Vec<u8>,
    /// (replay, point) per slot; replay 0 marks a slot never written.
    pub tags: Vec<(u64, u64)>,
}

impl HistoryRing {
    pub fn new(nbytes: usize, depth: u64, stream: &PrivateStream) -> Result<HistoryRing> {
        let depth = depth.max(1);
        let tags = DeviceBuffer::alloc(16 * depth as usize)?;
        tags.zero(stream)?;
        Ok(HistoryRing {
            values: DeviceBuffer::alloc(nbytes * depth as usize)?,
            tags,
            nbytes,
            depth,
        })
    }

    /// Copies the ring to the host (the caller makes sure no replay writes it: frozen, or
    /// synchronised).
    pub fn read(&self, stream: &PrivateStream) -> Result<HistoryContents> {
        let mut values = vec![0u8; self.nbytes * self.depth as usize];
        stream.read(self.values.ptr, &mut values)?;
        let mut raw = vec![0u8; 16 * self.depth as usize];
        stream.read(self.tags.ptr, &mut raw)?;
        let tags = raw
            .chunks_exact(16)
            .map(|c| {
                let replay = u64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
                let point = u64::from_le_bytes(c[8..].try_into().expect("8 bytes"));
                (replay, point)
            })
            .collect();
        Ok(HistoryContents { values, tags })
    }

    /// The value a slot holds.
    pub fn slot_value<'a>(&self, contents: &'a HistoryContents, slot: usize) -> &'a [u8] {
        &contents.values[slot * self.nbytes..(slot + 1) * self.nbytes]
    }
}

/// What triggers a flight-recorder dump, checked by the summary kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Trigger {
    pub nonfinite: bool,
    pub abs_max: Option<f64>,
}

impl Trigger {
    pub(super) fn flags(&self) -> u32 {
        (self.nonfinite as u32) | ((self.abs_max.is_some() as u32) << 1)
    }
}

/// The device words every kernel of a session reads: the point number the host advances
/// per call, and the point the history froze at.
#[derive(Debug, Clone, Copy)]
pub struct SessionWords {
    pub point: u64,
    pub frozen_at: u64,
}
