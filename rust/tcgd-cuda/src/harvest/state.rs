//! What the recorder and its harvester share: sites, captures, staged samples, pending points.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

use crate::memory::{DeviceBuffer, PinnedBuffer};
use crate::summary::HistoryRing;

use super::*;

pub(super) struct Site {
    pub(super) capture: usize,
    /// The site's column in the record table, when the device summarises it.
    pub(super) summary: Option<u32>,
    pub(super) history: Option<Arc<HistoryRing>>,
    pub(super) sample: Option<Sample>,
}

/// A site whose value is brought to the host at some points: a device slot every replay
/// refreshes, copied into pinned memory on the model's stream when a point closes.
pub(super) struct Sample {
    pub(super) slot: Arc<DeviceBuffer>,
    pub(super) nbytes: usize,
    /// Every how many points (1: every point).
    pub(super) every: u32,
    /// Keep the bytes (else only their host summary: dtypes the kernel cannot summarise).
    pub(super) full: bool,
}

pub(super) struct Capture {
    pub(super) harvested: u64,
    pub(super) summary_sites: Vec<usize>,
    /// The graph's replay counter (device), read with sampled values to tell whether the
    /// graph replayed in the point.
    pub(super) counter: u64,
    pub(super) sampled_replay: u64,
}

/// Pinned copies a closed point carries: sampled values and the counters of their graphs.
pub(super) struct Staging {
    pub(super) values: Vec<(usize, PinnedBuffer)>,
    pub(super) counters: Vec<(usize, PinnedBuffer)>,
}

pub(super) struct Pending {
    pub(super) number: u32,
    pub(super) label: String,
    pub(super) metadata: String,
    pub(super) event: usize,
    pub(super) dump: Option<String>,
    pub(super) attachment: Option<Attachment>,
    pub(super) staging: Option<Staging>,
}

pub(super) struct State {
    pub(super) sites: Vec<Site>,
    pub(super) next_column: u32,
    /// Pinned buffers of harvested samples, by size, for the next points: allocating (and
    /// freeing) pinned memory per point would cost milliseconds and synchronise.
    pub(super) pinned: std::collections::HashMap<usize, Vec<PinnedBuffer>>,
    pub(super) captures: Vec<Capture>,
    pub(super) pending: VecDeque<Pending>,
    /// Labels of recent points, for naming the points a history dump lands.
    pub(super) recent: VecDeque<(u32, String)>,
    pub(super) free_events: Vec<usize>,
    /// Points handed to the sink so far.
    pub(super) delivered: u64,
    pub(super) dumps: u64,
    pub(super) failure: Option<String>,
    /// A trigger landed the history and left it frozen: later triggers are ignored until
    /// `rearm` (a run that turned NaN stays NaN; its first moments are what matter).
    pub(super) frozen: bool,
    pub(super) flushing: bool,
    pub(super) stop: bool,
}

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    pub(super) wake: Condvar,
    pub(super) done: Condvar,
}
