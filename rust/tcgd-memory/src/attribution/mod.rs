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
#[cfg(feature = "python")]
mod python;
pub mod stacks;

use serde::Serialize;

use crate::compare::{Comparison, Relation};
use crate::error::{MemoryError, Result};
use crate::lifetimes::LifetimeAnalysis;
use crate::state::MemoryState;

pub use crate::frames::{
    frames_at_depth, frames_fingerprint, resolve, stack_share, StackFrame, StackFrames,
    UNATTRIBUTED,
};
pub use events::{EventSummary, PointWindow, PoolConfidence};
pub use stacks::{BlockFilter, StackCoverage, StackDelta, StackSummary};

/// Whether an analysis was asked for, whether its evidence existed, and whether that
/// evidence was complete.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        module = "torch_cudagraph_debug._native",
        name = "MemoryEvidenceStatus",
        frozen,
        get_all,
        eq,
        from_py_object
    )
)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EvidenceStatus {
    pub requested: bool,
    pub available: bool,
    pub complete: bool,
}

/// Whether each kind of evidence an attribution can use was asked for, found and
/// complete.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        module = "torch_cudagraph_debug._native",
        name = "MemoryAttributionStatus",
        frozen,
        get_all,
        eq,
        from_py_object
    )
)]
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
