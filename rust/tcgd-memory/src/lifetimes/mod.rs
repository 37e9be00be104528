//! Allocation lifetimes from a run's stored allocator history: every allocation
//! *generation* (one tenancy of one block address, `alloc -> free_requested ->
//! free_completed`) replayed from a range-start state through the history windows of
//! the later points, reconciled with every point's state, and grouped into *cohorts*
//! (device, pool, complete allocation stack).
//!
//! - [`generations`]: the replay, one pass over the events with integer keys;
//! - [`cohorts`]: per-cohort accumulation (point states, event peaks, transitions,
//!   sizes) and the final rows;
//! - [`selection`]: `all`, `active_at(point)`, `born_between(start, end]`, `through`.
//!
//! History that is disabled, truncated or without a recognisable boundary in the analysed
//! range is refused ([`MemoryError::HistoryDisabled`], [`MemoryError::HistoryTruncated`],
//! [`MemoryError::HistoryBoundary`]): transitions are never inferred from a block
//! disappearing from a snapshot. Replay contradictions are collected and raised once as
//! [`MemoryError::Reconciliation`].

use serde::{Serialize, Serializer};

use crate::error::{MemoryError, Result};
use crate::model::PoolId;
use crate::run::MemoryRunReader;

mod cohorts;
mod events;
mod generations;
#[cfg(feature = "python")]
mod python;
mod selection;

pub use events::{Action, EventSource, RawEvent, StoredEvents, VecEvents};
pub use selection::Selection;

/// A point as the analysis names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PointRef {
    pub index: i64,
    pub label: String,
}

/// Where a transition's evidence comes from: an allocator event inside the range, or the
/// range-start state (the transition happened before the first analysed point).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Event,
    RangeBoundary,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Event => "event",
            Origin::RangeBoundary => "range_boundary",
        }
    }
}

/// Where a generation ended up at the last analysed point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    OwnerActive,
    AwaitingFree,
    FreeCompleted,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::OwnerActive => "owner_active",
            Outcome::AwaitingFree => "awaiting_free",
            Outcome::FreeCompleted => "free_completed",
        }
    }
}

pub use crate::frames::StackFrame;

/// A cohort's state at one point (after reconciliation with that point's snapshot).
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CohortPointState {
    /// The cohort the row belongs to (the rows of `report.json` sit under it).
    #[serde(skip)]
    pub cohort_id: String,
    pub point_index: i64,
    /// The point's label.
    pub label: String,
    /// Bytes (allocator-rounded) of the blocks the application still owns.
    pub owner_active_bytes: i64,
    pub owner_active_count: i64,
    /// Bytes of the blocks freed by the application that stream work still holds.
    pub awaiting_free_bytes: i64,
    pub awaiting_free_count: i64,
    /// `owner_active_bytes + awaiting_free_bytes`: what the snapshot shows as active.
    pub active_bytes: i64,
    /// `owner_active_count + awaiting_free_count`.
    pub block_count: i64,
    /// Requested (unrounded) sizes of the owner-active blocks.
    pub owner_requested_bytes: i64,
    /// Requested (unrounded) sizes of the awaiting-free blocks.
    pub awaiting_free_requested_bytes: i64,
    /// `owner_requested_bytes + awaiting_free_requested_bytes`.
    pub requested_bytes: i64,
}

/// Generations of one (block size, requested size), each counted once.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CohortSizeBucket {
    /// The cohort the row belongs to (the rows of `report.json` sit under it).
    #[serde(skip)]
    pub cohort_id: String,
    /// The allocator-rounded block size.
    pub size_bytes: i64,
    /// The size the generations were requested with.
    pub requested_size_bytes: i64,
    pub count: i64,
    /// `size_bytes * count`.
    pub total_bytes: i64,
}

/// Generations of one size by where they ended at the last analysed point.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CohortSizeOutcome {
    /// The cohort the row belongs to (the rows of `report.json` sit under it).
    #[serde(skip)]
    pub cohort_id: String,
    pub size_bytes: i64,
    pub requested_size_bytes: i64,
    /// `owner_active`, `awaiting_free` or `free_completed`.
    pub outcome: Outcome,
    pub count: i64,
    pub total_bytes: i64,
}

/// Births, free requests or free completions of one cohort in one interval with one
/// origin and one event stack. `start_point` is `None` for a range-boundary row (before
/// the first analysed point).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CohortTransition {
    pub start_point: Option<PointRef>,
    pub end_point: PointRef,
    pub origin: Origin,
    pub stack_frames: Vec<StackFrame>,
    pub stack_key: String,
    pub bytes: i64,
    pub count: i64,
}

impl CohortTransition {
    /// Whether the row's stack is not the call stack of its own allocator event: a
    /// range-boundary row (its transition happened before the first analysed point, so
    /// a birth shows the live block's allocation stack from the range-start snapshot and
    /// a free request none), or an event that carried no frames.
    pub fn stack_fallback(&self) -> bool {
        self.origin == Origin::RangeBoundary || self.stack_frames.is_empty()
    }
}

pub type CohortBirth = CohortTransition;
pub type CohortFreeRequest = CohortTransition;
pub type CohortFreeCompletion = CohortTransition;

fn pool_json<S: Serializer>(pool: &Option<PoolId>, s: S) -> std::result::Result<S::Ok, S::Error> {
    match pool {
        Some((a, b)) => [*a, *b].serialize(s),
        None => ["unknown"].serialize(s),
    }
}

/// One cohort: identity, per-point states, sizes, transitions, peaks and terminal totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AllocationCohort {
    /// Stable fingerprint of the identity (device, pool, complete stack, and the sizes of
    /// an unframed cohort): the same allocation site gets the same id in every report.
    pub cohort_id: String,
    /// Position in this report's ordering (largest unreusable footprint first).
    pub display_rank: usize,
    pub device: i64,
    /// `None`: an unattributable transient (`("unknown",)` in Python, `["unknown"]` in
    /// JSON).
    #[serde(serialize_with = "pool_json")]
    pub pool_id: Option<PoolId>,
    pub pool_label: String,
    pub stack_frames: Vec<StackFrame>,
    pub stack_key: String,
    /// Part of the identity only for allocations without frames.
    pub block_size_bytes: Option<i64>,
    pub requested_size_bytes: Option<i64>,
    pub streams: Vec<i64>,
    pub generation_count: i64,
    pub points: Vec<CohortPointState>,
    pub size_histogram: Vec<CohortSizeBucket>,
    pub size_outcomes: Vec<CohortSizeOutcome>,
    #[serde(flatten)]
    pub transitions: CohortTransitions,
    #[serde(flatten)]
    pub peaks: CohortPeaks,
    #[serde(flatten)]
    pub span: CohortSpan,
    #[serde(flatten)]
    pub totals: CohortTotals,
}

/// A cohort's transitions, each by interval, origin and event stack.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CohortTransitions {
    pub births: Vec<CohortBirth>,
    pub free_requests: Vec<CohortFreeRequest>,
    pub free_completions: Vec<CohortFreeCompletion>,
}

/// A cohort's peaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CohortPeaks {
    /// Sampled-point peaks (`snapshot_peak`, `snapshot_blocks`).
    pub peak_active_bytes: i64,
    pub peak_owner_active_bytes: i64,
    pub peak_awaiting_free_bytes: i64,
    pub peak_block_count: i64,
    /// Largest minus smallest sampled active bytes.
    pub active_span_bytes: i64,
    /// Reconstructed from the range-start state and the events (`owner_event_peak`,
    /// `unreusable_event_peak`): transients between points count here.
    pub event_owner_peak_bytes: i64,
    pub event_unreusable_peak_bytes: i64,
}

/// The first and last points that showed a cohort's blocks, and the first and last whose
/// windows hold its events.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CohortSpan {
    pub first_sampled_point: Option<PointRef>,
    pub last_sampled_point: Option<PointRef>,
    pub first_event_point: Option<PointRef>,
    pub last_event_point: Option<PointRef>,
}

impl CohortSpan {
    /// The earliest point that showed the cohort, in a snapshot or through an event
    /// window ending there.
    pub fn first_seen(&self) -> Option<&PointRef> {
        [&self.first_sampled_point, &self.first_event_point]
            .into_iter()
            .flatten()
            .min_by_key(|p| p.index)
    }

    /// The latest point that showed the cohort, in a snapshot or through an event window
    /// ending there.
    pub fn last_seen(&self) -> Option<&PointRef> {
        [&self.last_sampled_point, &self.last_event_point]
            .into_iter()
            .flatten()
            .max_by_key(|p| p.index)
    }
}

/// What a cohort's transitions moved over the range, and what it held at the last
/// analysed point.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CohortTotals {
    pub born_bytes: i64,
    pub born_count: i64,
    pub free_requested_bytes: i64,
    pub free_requested_count: i64,
    pub free_completed_bytes: i64,
    pub free_completed_count: i64,
    pub terminal_owner_active_bytes: i64,
    pub terminal_owner_active_count: i64,
    pub terminal_awaiting_free_bytes: i64,
    pub terminal_awaiting_free_count: i64,
}

impl AllocationCohort {
    /// The fingerprint of the complete stack, every frame field included (the one
    /// attribution rows carry): equal for equal stacks in any report.
    pub fn stack_fingerprint(&self) -> String {
        crate::frames::frames_fingerprint(&self.stack_frames)
    }
}

/// One device's history over the analysed range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryCoverage {
    pub device: i64,
    /// Windows replayed (points after the range start).
    pub windows: i64,
    pub events: i64,
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelectionInfo {
    pub kind: &'static str,
    pub anchor: Option<PointRef>,
    pub start: Option<PointRef>,
    pub end: Option<PointRef>,
}

/// The result of a lifetime analysis (`MemoryAllocationLifetimeAnalysis`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LifetimeAnalysis {
    pub source_kind: &'static str,
    pub run_id: String,
    pub name: String,
    pub selection: SelectionInfo,
    #[serde(flatten)]
    pub range: AnalysedRange,
    pub history: Vec<HistoryCoverage>,
    #[serde(flatten)]
    pub tracked: Tracked,
    pub cohorts: Vec<AllocationCohort>,
    pub warnings: Vec<String>,
}

/// The points an analysis replayed: from the range start through the last analysed point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnalysedRange {
    pub start_point: PointRef,
    pub through_point: PointRef,
    pub points: Vec<PointRef>,
}

/// The generations an analysis tracked, and how much of them allocation stacks explain.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tracked {
    pub tracked_generations: i64,
    pub tracked_bytes: i64,
    /// Bytes of tracked generations that have allocation frames.
    pub attributed_bytes: i64,
    /// `attributed_bytes / tracked_bytes` (each generation counted once; not a peak).
    pub instance_stack_coverage: f64,
}

impl Tracked {
    /// `generations` of `bytes` in all, `attributed` of them with frames; nothing tracked
    /// is fully covered.
    pub fn new(generations: i64, bytes: i64, attributed: i64) -> Tracked {
        Tracked {
            tracked_generations: generations,
            tracked_bytes: bytes,
            attributed_bytes: attributed,
            instance_stack_coverage: crate::frames::stack_share(attributed, bytes),
        }
    }
}

/// Lifetimes over a run's states and stored history.
pub fn analyze<E: EventSource>(
    states: &[std::sync::Arc<crate::state::MemoryState>],
    stacks: &crate::model::StackTable,
    events: &E,
    selection: Selection,
    through: Option<i64>,
) -> Result<LifetimeAnalysis> {
    let plan = selection::plan(states, selection, through)?;
    let replay = generations::replay(states, stacks, events, &plan)?;
    Ok(cohorts::assemble(states, stacks, &plan, selection, replay))
}

/// `run.lifetimes(selection, through=...)` over a stored run.
pub fn run_lifetimes(
    reader: &MemoryRunReader,
    selection: Selection,
    through: Option<i64>,
) -> Result<LifetimeAnalysis> {
    let events = StoredEvents::read(reader)?;
    analyze(
        reader.states(),
        reader.stacks(),
        &events,
        selection,
        through,
    )
}

/// The cohort report of one range `(start, end]` of a run: generations live at `start`
/// plus those born up to `end`, replayed through `end`. This is what a same-run
/// comparison or a timeline attaches when lifetimes are requested.
pub fn range_lifetimes(reader: &MemoryRunReader, start: i64, end: i64) -> Result<LifetimeAnalysis> {
    let states = reader.states();
    let a = states.iter().position(|s| s.identity.index == start);
    let b = states.iter().position(|s| s.identity.index == end);
    let (Some(a), Some(b)) = (a, b) else {
        return Err(MemoryError::invalid(format!(
            "range_lifetimes({start}, {end}): the run has no such point"
        )));
    };
    if b < a {
        return Err(MemoryError::invalid(format!(
            "range_lifetimes({start}, {end}): the end comes before the start"
        )));
    }
    let events = StoredEvents::read(reader)?;
    let plan = selection::Plan {
        start: a,
        through: b,
        born: None,
        active_only: false,
    };
    let replay = generations::replay(states, reader.stacks(), &events, &plan)?;
    Ok(cohorts::assemble(
        states,
        reader.stacks(),
        &plan,
        Selection::All,
        replay,
    ))
}

#[cfg(test)]
mod tests;
