//! The allocator state of one snapshot, as plain rows: segments, blocks, history events,
//! and the stack frames they refer to.

use std::collections::HashMap;

use serde::Serialize;

/// A pool id as torch reports it. `(0, 0)` is the default pool; every other id is a
/// private pool (a CUDA graph's pool, or a `torch.cuda.MemPool`).
pub type PoolId = (i64, i64);
pub const DEFAULT_POOL: PoolId = (0, 0);

/// A pool as every report names it: `pool[a,b]`, or `pool[unknown]` when no evidence
/// attributes it.
pub fn pool_label(pool: Option<PoolId>) -> String {
    match pool {
        Some((a, b)) => format!("pool[{a},{b}]"),
        None => "pool[unknown]".to_owned(),
    }
}

/// A pool of one device as labels name it: `device[d] pool[a,b]`.
pub fn pool_key_label(device_index: i64, pool: PoolId) -> String {
    format!("device[{device_index}] {}", pool_label(Some(pool)))
}

pub fn is_default_pool(pool: PoolId) -> bool {
    pool == DEFAULT_POOL
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockState {
    /// Owned by a live tensor.
    ActiveAllocated,
    /// Freed by its owner, waiting for the streams that used it (a stream-safe free).
    ActiveAwaitingFree,
    Inactive,
}

impl BlockState {
    /// Torch's names; `active_pending_free` is what `_snapshot()` says for the state its
    /// documentation calls `active_awaiting_free`.
    pub fn parse(s: &str) -> Option<BlockState> {
        match s {
            "active_allocated" => Some(BlockState::ActiveAllocated),
            "active_awaiting_free" | "active_pending_free" => Some(BlockState::ActiveAwaitingFree),
            "inactive" => Some(BlockState::Inactive),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BlockState::ActiveAllocated => "active_allocated",
            BlockState::ActiveAwaitingFree => "active_awaiting_free",
            BlockState::Inactive => "inactive",
        }
    }

    pub fn is_active(self) -> bool {
        self != BlockState::Inactive
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub device: i64,
    /// `None` when the snapshot did not say (then lifecycle matching falls back to sizes).
    pub address: Option<i64>,
    pub total_size: i64,
    /// As torch reported them; statistics are computed from the blocks.
    pub allocated_size: Option<i64>,
    pub active_size: Option<i64>,
    pub requested_size: Option<i64>,
    pub stream: i64,
    pub pool: PoolId,
    pub segment_type: String,
    pub is_expandable: bool,
    pub stack: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// Index into the snapshot's segments.
    pub segment: u32,
    pub address: Option<i64>,
    /// The address was not in the snapshot: segment address plus the sizes before it.
    pub address_inferred: bool,
    pub size: i64,
    pub requested_size: i64,
    pub state: BlockState,
    pub stack: Option<u32>,
}

/// One allocator history entry (`device_traces`).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub device: i64,
    /// Position in the snapshot's trace list of its device.
    pub ring_index: i64,
    pub action: String,
    pub address: Option<i64>,
    pub size: i64,
    pub stream: i64,
    pub time_us: Option<i64>,
    /// Reported by newer torch only.
    pub pool: Option<PoolId>,
    pub user_metadata: Option<String>,
    pub compile_context: Option<String>,
    /// Out-of-memory entries only: what CUDA still had free.
    pub device_free: Option<i64>,
    pub stack: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Frame {
    pub filename: String,
    pub line: i64,
    pub name: String,
    /// The FX node a frame of generated code ran for, when torch augmented the snapshot
    /// with it (its FX memory-profile debugging): `op`, `name`, `target` and the original
    /// model source (`original_trace`). Part of the frame's identity.
    pub fx: Option<Box<FxNode>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct FxNode {
    pub op: Option<String>,
    pub name: Option<String>,
    pub target: Option<String>,
    pub original_trace: Option<String>,
}

impl FxNode {
    /// `None` when torch gave none of the fields.
    pub fn of(
        op: Option<String>,
        name: Option<String>,
        target: Option<String>,
        original_trace: Option<String>,
    ) -> Option<Box<FxNode>> {
        let node = FxNode {
            op,
            name,
            target,
            original_trace,
        };
        (node != FxNode::default()).then(|| Box::new(node))
    }
}

/// Frames and stacks, each stored once. Ids are stable for the life of the table, so a
/// run can give them run-wide meaning: the table grows point after point and a point's
/// parts hold only what it added.
#[derive(Debug, Clone, Default)]
pub struct StackTable {
    frames: Vec<Frame>,
    frame_ids: HashMap<Frame, u32>,
    stacks: Vec<Vec<u32>>,
    stack_ids: HashMap<Vec<u32>, u32>,
}

/// A position in a [`StackTable`]: what existed at some moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StackMark {
    pub frames: usize,
    pub stacks: usize,
}

impl StackTable {
    pub fn frame_id(&mut self, frame: Frame) -> u32 {
        if let Some(&id) = self.frame_ids.get(&frame) {
            return id;
        }
        let id = self.frames.len() as u32;
        self.frames.push(frame.clone());
        self.frame_ids.insert(frame, id);
        id
    }

    pub fn stack_id(&mut self, frames: &[u32]) -> u32 {
        if let Some(&id) = self.stack_ids.get(frames) {
            return id;
        }
        let id = self.stacks.len() as u32;
        self.stacks.push(frames.to_vec());
        self.stack_ids.insert(frames.to_vec(), id);
        id
    }

    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    pub fn stacks(&self) -> &[Vec<u32>] {
        &self.stacks
    }

    pub fn stack(&self, id: u32) -> Option<&[u32]> {
        self.stacks.get(id as usize).map(Vec::as_slice)
    }

    pub fn frame(&self, id: u32) -> Option<&Frame> {
        self.frames.get(id as usize)
    }

    pub fn mark(&self) -> StackMark {
        StackMark {
            frames: self.frames.len(),
            stacks: self.stacks.len(),
        }
    }

    /// Forgets everything added after `mark` (a point that failed to commit).
    pub fn rollback(&mut self, mark: StackMark) {
        for frame in self.frames.drain(mark.frames.min(self.frames.len())..) {
            self.frame_ids.remove(&frame);
        }
        for stack in self.stacks.drain(mark.stacks.min(self.stacks.len())..) {
            self.stack_ids.remove(&stack);
        }
    }

    /// Rebuilds a table from stored rows (ids must be dense, in order).
    pub fn from_rows(frames: Vec<Frame>, stacks: Vec<Vec<u32>>) -> StackTable {
        let frame_ids = frames
            .iter()
            .enumerate()
            .map(|(i, f)| (f.clone(), i as u32))
            .collect();
        let stack_ids = stacks
            .iter()
            .enumerate()
            .map(|(i, s)| (s.clone(), i as u32))
            .collect();
        StackTable {
            frames,
            frame_ids,
            stacks,
            stack_ids,
        }
    }
}

/// Where the allocator history of one device stands at a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryStatus {
    /// Every entry since the previous point is here (its boundary entry was found).
    Complete,
    /// The first point of a run or probe: the window is whatever the ring held.
    FirstPoint,
    /// No history: recording is off (`torch.cuda.memory._record_memory_history`).
    Disabled,
    /// The previous point's boundary entry is not recognisable in the ring; the window was
    /// cut by time and may miss or repeat entries at the boundary's timestamp.
    BoundaryUnavailable,
    /// The ring overwrote the start of the window: entries were lost.
    Truncated,
    /// Timestamps go backwards inside the window.
    InvalidOrder,
}

impl HistoryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryStatus::Complete => "complete",
            HistoryStatus::FirstPoint => "first_point",
            HistoryStatus::Disabled => "disabled",
            HistoryStatus::BoundaryUnavailable => "boundary_unavailable",
            HistoryStatus::Truncated => "truncated",
            HistoryStatus::InvalidOrder => "invalid_order",
        }
    }

    pub fn parse(s: &str) -> Option<HistoryStatus> {
        [
            HistoryStatus::Complete,
            HistoryStatus::FirstPoint,
            HistoryStatus::Disabled,
            HistoryStatus::BoundaryUnavailable,
            HistoryStatus::Truncated,
            HistoryStatus::InvalidOrder,
        ]
        .into_iter()
        .find(|h| h.as_str() == s)
    }
}

/// The slice of one device's history ring that a point stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryWindow {
    pub device: i64,
    pub status: HistoryStatus,
    /// Entries in the ring when the snapshot was taken.
    pub ring_entries: i64,
    /// Entries stored by this point.
    pub events: i64,
    pub first_time_us: Option<i64>,
    pub last_time_us: Option<i64>,
}

/// Device-wide memory next to the allocator's, sampled right after the snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DeviceMemory {
    pub device: i64,
    pub free_bytes: Option<i64>,
    pub total_bytes: Option<i64>,
    /// Bytes this package's probe runtime holds on the device (its own slots).
    pub probe_device_bytes: Option<i64>,
    /// Pinned host bytes of the probe runtime: host memory, not part of CUDA used.
    pub probe_pinned_bytes: Option<i64>,
}

impl DeviceMemory {
    /// `total - free`; `None` when either is unknown. (Both are `>= 0` in a state, so the
    /// difference fits.)
    pub fn cuda_used(&self) -> Option<i64> {
        self.total_bytes?.checked_sub(self.free_bytes?)
    }
}
