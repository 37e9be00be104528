//! Attribution of a comparison: which allocation stacks hold the memory that changed
//! ([`stacks`]) and which allocator events happened in between ([`events`]), with the
//! evidence status of each analysis. Lifetimes are a third kind whose status is kept
//! here; their analysis lives elsewhere.
//!
//! Stack attribution reads the live blocks' frames, so it works on any state and across
//! runs (matched pools only). Event attribution reads the history windows that the
//! points after the interval start stored, so it needs one origin and complete history
//! on every analysed device; anything less is a typed error, raised only when events
//! are requested.

pub mod events;
pub mod stacks;

use serde::{Serialize, Serializer};

use crate::compare::{Comparison, Relation};
use crate::error::{MemoryError, Result};
use crate::lifetimes::LifetimeAnalysis;
use crate::model::StackTable;
use crate::state::MemoryState;

pub use events::{EventSummary, PointWindow, PoolConfidence};
pub use stacks::{BlockFilter, StackCoverage, StackDelta, StackSummary};

/// One frame of an allocation or event stack (attribution and lifetimes alike). The FX
/// fields are there when torch augmented the snapshot with the FX node a frame of
/// generated code ran for; they take part in the fingerprint, not in the location key.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct StackFrame {
    pub filename: String,
    pub line: i64,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fx_node_op: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fx_node_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fx_node_target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fx_original_trace: Option<String>,
}

impl StackFrame {
    pub fn of(frame: &crate::model::Frame) -> StackFrame {
        let fx = frame.fx.as_deref();
        let field = |f: fn(&crate::model::FxNode) -> &Option<String>| fx.and_then(|n| f(n).clone());
        StackFrame {
            filename: frame.filename.clone(),
            line: frame.line,
            name: frame.name.clone(),
            fx_node_op: field(|n| &n.op),
            fx_node_name: field(|n| &n.name),
            fx_node_target: field(|n| &n.target),
            fx_original_trace: field(|n| &n.original_trace),
        }
    }

    /// `file:line:function`, then the FX node when there is one: `[fx call_function
    /// addmm]`.
    pub fn display(&self) -> String {
        let location = format!("{}:{}:{}", self.filename, self.line, self.name);
        match (&self.fx_node_op, &self.fx_node_name) {
            (None, None) => location,
            (op, name) => format!(
                "{location} [fx {}]",
                [op.as_deref(), name.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        }
    }
}

/// A complete stack, innermost frame first; empty for blocks or events without frames
/// (the `<unattributed>` bucket).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StackFrames(pub Vec<StackFrame>);

pub const UNATTRIBUTED: &str = "<unattributed>";

impl StackFrames {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Locations only (`file:line:function`, innermost first, joined by ` <- `), for
    /// reading; `<unattributed>` when there are no frames.
    pub fn key(&self) -> String {
        if self.0.is_empty() {
            return UNATTRIBUTED.to_owned();
        }
        self.0
            .iter()
            .map(|f| format!("{}:{}:{}", f.filename, f.line, f.name))
            .collect::<Vec<_>>()
            .join(" <- ")
    }

    /// What reports show of a stack: [`frames_at_depth`].
    pub fn key_at_depth(&self, depth: usize) -> String {
        frames_at_depth(&self.0, depth)
    }

    /// Canonical JSON: an array of `{"filename", "line", "name"}` objects.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_else(|_| "[]".to_owned())
    }

    /// [`frames_fingerprint`] of the frames.
    pub fn fingerprint(&self) -> String {
        frames_fingerprint(&self.0)
    }
}

impl Serialize for StackFrames {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// What reports show of a stack: its first `depth` frames (innermost first, joined by
/// ` <- `), each `file:line:function` with its FX node where torch gave one, and the
/// number of frames left out; `<unattributed>` when there are no frames.
pub fn frames_at_depth(frames: &[StackFrame], depth: usize) -> String {
    if frames.is_empty() {
        return UNATTRIBUTED.to_owned();
    }
    let shown = frames[..depth.min(frames.len())]
        .iter()
        .map(StackFrame::display)
        .collect::<Vec<_>>()
        .join(" <- ");
    match frames.len().saturating_sub(depth) {
        0 => shown,
        more => format!("{shown} (+{more} frames)"),
    }
}

/// FNV-1a (64 bits) of the frames' canonical JSON, as 16 hex digits: every frame field
/// takes part, so two stacks with the same locations but different names differ.
pub fn frames_fingerprint(frames: &[StackFrame]) -> String {
    let json = serde_json::to_string(frames).unwrap_or_else(|_| "[]".to_owned());
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in json.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The share of `total` bytes that allocation stacks explain: `1.0` when there are none,
/// since nothing is left to explain.
pub fn stack_share(attributed: i64, total: i64) -> f64 {
    if total == 0 {
        1.0
    } else {
        attributed as f64 / total as f64
    }
}

/// The frames of a stack id of `table` (none for `None` or an unknown id).
pub fn resolve(table: &StackTable, stack: Option<u32>) -> StackFrames {
    let Some(ids) = stack.and_then(|s| table.stack(s)) else {
        return StackFrames::default();
    };
    StackFrames(
        ids.iter()
            .filter_map(|&f| table.frame(f))
            .map(StackFrame::of)
            .collect(),
    )
}

/// Whether an analysis was asked for, whether its evidence existed, and whether that
/// evidence was complete.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EvidenceStatus {
    pub requested: bool,
    pub available: bool,
    pub complete: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AttributionStatus {
    pub stacks: EvidenceStatus,
    pub events: EvidenceStatus,
    pub lifetimes: EvidenceStatus,
}

impl AttributionStatus {
    /// Whether any analysis was asked for.
    pub fn requested(&self) -> bool {
        self.stacks.requested || self.events.requested || self.lifetimes.requested
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttributionRequest {
    pub stacks: bool,
    pub events: bool,
    pub lifetimes: bool,
}

impl AttributionRequest {
    pub fn any(&self) -> bool {
        self.stacks || self.events || self.lifetimes
    }
}

/// What an attribution says of one of its two endpoints.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AttributionSide {
    /// `name@label`, as reports title the endpoint.
    pub title: String,
    /// With a stack request.
    pub stack_coverage: Option<StackCoverage>,
}

/// The attribution attached to one comparison.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Attribution {
    pub reference: AttributionSide,
    pub candidate: AttributionSide,
    pub status: AttributionStatus,
    pub stack_deltas: Vec<StackDelta>,
    pub events: Vec<EventSummary>,
    /// With a lifetime request on two points of one run: the cohort report of their range
    /// (its own result, not part of the attribution sections).
    #[serde(skip)]
    pub lifetimes: Option<LifetimeAnalysis>,
    pub warnings: Vec<String>,
}

/// Refuses history analyses across independent runs: their allocator histories are
/// unrelated.
pub fn check_request(relation: Relation, request: &AttributionRequest) -> Result<()> {
    if relation == Relation::CrossRun {
        for (kind, asked) in [("events", request.events), ("lifetimes", request.lifetimes)] {
            if asked {
                return Err(MemoryError::CrossRun(format!(
                    "{kind} attribution reads allocator history, which exists only inside \
                     one run or probe; compare points of one run, or request only stacks \
                     for independent runs"
                )));
            }
        }
    }
    Ok(())
}

/// Attributes a comparison of `reference` and `candidate`. `windows` are the stored
/// history windows of the points after `reference` up to and including `candidate`
/// (needed only for events). Lifetime requests are recorded as unavailable here.
pub fn attribute(
    reference: &MemoryState,
    candidate: &MemoryState,
    comparison: &Comparison,
    request: &AttributionRequest,
    windows: Option<&[PointWindow<'_>]>,
) -> Result<Attribution> {
    check_request(comparison.relation, request)?;
    let side = |s: &MemoryState| AttributionSide {
        title: s.identity.title(),
        stack_coverage: None,
    };
    let mut out = Attribution {
        reference: side(reference),
        candidate: side(candidate),
        ..Attribution::default()
    };
    if request.stacks {
        let all = BlockFilter::default();
        let r = stacks::coverage(reference, all)?;
        let c = stacks::coverage(candidate, all)?;
        stacks::require_frames(reference, &r)?;
        stacks::require_frames(candidate, &c)?;
        let pairs = stacks::pool_pairs(comparison);
        out.stack_deltas = stacks::compare_stacks(reference, candidate, &pairs, None, false, true)?;
        for (side, cov, state) in [("reference", &r, reference), ("candidate", &c, candidate)] {
            if !cov.complete() {
                out.warnings.push(format!(
                    "{side} '{}': {} of {} active bytes have no allocation stack; they are \
                     reported as {UNATTRIBUTED}",
                    state.identity.title(),
                    cov.unattributed_bytes,
                    cov.active_bytes
                ));
            }
        }
        out.status.stacks = EvidenceStatus {
            requested: true,
            available: true,
            complete: r.complete() && c.complete(),
        };
        out.reference.stack_coverage = Some(r);
        out.candidate.stack_coverage = Some(c);
    }
    if request.events {
        let windows = windows.ok_or_else(|| {
            MemoryError::invalid("event attribution needs the history windows of the interval")
        })?;
        if candidate.identity.index < reference.identity.index {
            return Err(MemoryError::invalid(format!(
                "event attribution reads the history from '{}' forward to '{}', but the \
                 candidate comes first; swap reference and candidate",
                reference.identity.title(),
                candidate.identity.title()
            )));
        }
        let mut devices = reference.devices.clone();
        devices.extend(&candidate.devices);
        devices.sort_unstable();
        devices.dedup();
        let entries = events::interval_events(&reference.identity.label, windows, &devices)?;
        let ranges = events::segment_ranges(&[reference, candidate]);
        out.events = events::summarize_events(&entries, &candidate.stacks, &ranges);
        out.status.events = EvidenceStatus {
            requested: true,
            available: true,
            complete: true,
        };
    }
    if request.lifetimes {
        // Available once `attach_lifetimes` gives the run's report of the range.
        out.status.lifetimes = EvidenceStatus {
            requested: true,
            available: false,
            complete: false,
        };
    }
    Ok(out)
}

const LIFETIMES_NEED_A_RUN: &str = "lifetime attribution is not available here: it replays \
     the stored history of one recorded run, so it needs two different points of one run \
     (MemoryRun.lifetimes() analyses a whole run)";

/// Completes a lifetime request with the run's cohort report of the compared range
/// (`None`: there is no run history to replay, as for probe snapshots or one point):
/// attached when the history covers the range; when it does not (disabled, truncated,
/// unrecognisable boundary), the status stays unavailable and the warning says why.
/// History that contradicts the states is an error, as it is for `run.lifetimes()`.
pub fn attach_lifetimes(
    out: &mut Attribution,
    found: Option<Result<LifetimeAnalysis>>,
) -> Result<()> {
    let Some(found) = found else {
        out.warnings.push(LIFETIMES_NEED_A_RUN.to_owned());
        return Ok(());
    };
    match found {
        Ok(analysis) => {
            out.status.lifetimes = EvidenceStatus {
                requested: true,
                available: true,
                complete: true,
            };
            out.lifetimes = Some(analysis);
            Ok(())
        }
        Err(
            error @ (MemoryError::HistoryDisabled(_)
            | MemoryError::HistoryBoundary(_)
            | MemoryError::HistoryTruncated(_)),
        ) => {
            out.warnings
                .push(format!("lifetime attribution is unavailable: {error}"));
            Ok(())
        }
        Err(error) => Err(error),
    }
}
