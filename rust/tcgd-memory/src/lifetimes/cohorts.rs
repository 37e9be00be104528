//! Generations (one allocation's life at an address, as the replay in `generations`
//! builds it) and cohorts: generations grouped by (device, pool, complete allocation stack), with the
//! sizes of an unframed allocation added to the identity so unrelated sizes stay apart.
//! Point states and event peaks accumulate during the replay; sizes, outcomes and
//! transitions are gathered from the generations afterwards.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::model::{PoolId, StackTable};
use crate::state::MemoryState;

use super::selection::{Plan, Selection};
use super::{
    AllocationCohort, AnalysedRange, CohortPeaks, CohortPointState, CohortSizeBucket,
    CohortSizeOutcome, CohortSpan, CohortTotals, CohortTransition, CohortTransitions,
    HistoryCoverage, LifetimeAnalysis, Origin, Outcome, PointRef, SelectionInfo, StackFrame,
    Tracked,
};

/// No cohort: the generation is replayed for reconciliation but not selected.
pub(crate) const NO_COHORT: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    /// Position (in the states) of the point whose window holds the transition; the
    /// range start for a range-boundary transition.
    pub window: u32,
    pub origin: Origin,
    pub stack: Option<u32>,
}

#[derive(Debug, Clone)]
pub(crate) struct Generation {
    pub device: i64,
    pub address: i64,
    pub size: i64,
    pub requested: i64,
    pub confirmed: bool,
    /// `None` after anchoring: an unattributable transient.
    pub pool: Option<PoolId>,
    pub stream: i64,
    /// The allocation stack; `None` when it has no frames.
    pub stack: Option<u32>,
    pub birth: Mark,
    pub birth_seq: u64,
    pub request: Option<Mark>,
    pub complete: Option<Mark>,
    pub cohort: u32,
    pub kept: bool,
    /// The last point position whose snapshot showed the block.
    pub seen: u32,
}

pub(crate) struct Replay {
    pub generations: Vec<Generation>,
    pub cohorts: CohortTable,
    pub history: Vec<HistoryCoverage>,
    pub warnings: Vec<String>,
}

#[derive(Clone, Copy)]
pub(crate) enum Step {
    Birth,
    /// A range-start generation already awaiting free: unreusable, not owner-active.
    Awaiting,
    Request,
    Complete,
}

/// (device, pool or none, stack or none, unframed block size, unframed requested size).
type Key = (i64, Option<PoolId>, Option<u32>, i64, i64);

#[derive(Debug, Clone, Copy, Default)]
struct PointAcc {
    owner_bytes: i64,
    owner_count: i64,
    awaiting_bytes: i64,
    awaiting_count: i64,
    owner_requested: i64,
    awaiting_requested: i64,
}

#[derive(Debug, Clone)]
struct Acc {
    key: Key,
    points: Vec<PointAcc>,
    owner_now: i64,
    unreusable_now: i64,
    owner_peak: i64,
    unreusable_peak: i64,
}

pub(crate) struct CohortTable {
    ids: HashMap<Key, u32>,
    accs: Vec<Acc>,
    n_points: usize,
}

fn key_of(g: &Generation) -> Key {
    match g.stack {
        Some(s) => (g.device, g.pool, Some(s), -1, -1),
        None => (g.device, g.pool, None, g.size, g.requested),
    }
}

impl CohortTable {
    pub fn new(n_points: usize) -> CohortTable {
        CohortTable {
            ids: HashMap::with_capacity(256),
            accs: Vec::with_capacity(256),
            n_points,
        }
    }

    pub fn assign(&mut self, g: &Generation) -> u32 {
        let key = key_of(g);
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.accs.len() as u32;
        self.accs.push(Acc {
            key,
            points: vec![PointAcc::default(); self.n_points],
            owner_now: 0,
            unreusable_now: 0,
            owner_peak: 0,
            unreusable_peak: 0,
        });
        self.ids.insert(key, id);
        id
    }

    pub fn apply(&mut self, g: &Generation, step: Step) {
        if g.cohort == NO_COHORT {
            return;
        }
        let a = &mut self.accs[g.cohort as usize];
        match step {
            Step::Birth => {
                a.owner_now += g.size;
                a.unreusable_now += g.size;
            }
            Step::Awaiting => a.unreusable_now += g.size,
            Step::Request => a.owner_now -= g.size,
            Step::Complete => a.unreusable_now -= g.size,
        }
        a.owner_peak = a.owner_peak.max(a.owner_now);
        a.unreusable_peak = a.unreusable_peak.max(a.unreusable_now);
    }

    /// Adds the live generations (as reconciled with the point's snapshot) to point `pos`.
    pub fn sample<'g>(&mut self, pos: usize, live: impl Iterator<Item = &'g Generation>) {
        for g in live {
            if !g.kept || g.cohort == NO_COHORT {
                continue;
            }
            let p = &mut self.accs[g.cohort as usize].points[pos];
            if g.request.is_some() {
                p.awaiting_bytes += g.size;
                p.awaiting_count += 1;
                p.awaiting_requested += g.requested;
            } else {
                p.owner_bytes += g.size;
                p.owner_count += 1;
                p.owner_requested += g.requested;
            }
        }
    }
}

/// FNV-1a, 64 bits: stable across runs and builds (the std hasher is seeded).
fn fingerprint(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &byte in part.as_bytes().iter().chain(std::iter::once(&0x1f)) {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

pub(crate) fn frames_of(stacks: &StackTable, stack: Option<u32>) -> Vec<StackFrame> {
    crate::frames::resolve(stacks, stack).0
}

/// Location-only text of a stack: `file:line` per frame, innermost first.
pub(crate) fn stack_key(frames: &[StackFrame]) -> String {
    if frames.is_empty() {
        return "<unattributed>".to_owned();
    }
    frames
        .iter()
        .map(|f| format!("{}:{}", f.filename, f.line))
        .collect::<Vec<_>>()
        .join(" < ")
}

pub(crate) fn pool_label(pool: Option<PoolId>) -> String {
    match pool {
        Some((a, b)) => format!("pool[{a},{b}]"),
        None => "pool[unknown]".to_owned(),
    }
}

fn point_ref(states: &[Arc<MemoryState>], pos: usize) -> PointRef {
    PointRef {
        index: states[pos].identity.index,
        label: states[pos].identity.label.clone(),
    }
}

type TransitionKey = (u32, Origin, Option<u32>);

#[derive(Default)]
struct Gathered {
    generations: i64,
    streams: Vec<i64>,
    sizes: BTreeMap<(i64, i64), i64>,
    outcomes: BTreeMap<(i64, i64, Outcome), i64>,
    births: BTreeMap<TransitionKey, (i64, i64)>,
    requests: BTreeMap<TransitionKey, (i64, i64)>,
    completions: BTreeMap<TransitionKey, (i64, i64)>,
}

fn add(map: &mut BTreeMap<TransitionKey, (i64, i64)>, mark: &Mark, size: i64) {
    let e = map
        .entry((mark.window, mark.origin, mark.stack))
        .or_default();
    e.0 += size;
    e.1 += 1;
}

pub(crate) fn assemble(
    states: &[Arc<MemoryState>],
    stacks: &StackTable,
    plan: &Plan,
    selection: Selection,
    replay: Replay,
) -> LifetimeAnalysis {
    let Replay {
        generations,
        cohorts,
        history,
        warnings,
    } = replay;
    let mut gathered: Vec<Gathered> = (0..cohorts.accs.len())
        .map(|_| Gathered::default())
        .collect();
    let (mut tracked, mut tracked_bytes, mut attributed_bytes) = (0i64, 0i64, 0i64);
    for g in generations
        .iter()
        .filter(|g| g.kept && g.cohort != NO_COHORT)
    {
        tracked += 1;
        tracked_bytes += g.size;
        if g.stack.is_some() {
            attributed_bytes += g.size;
        }
        let c = &mut gathered[g.cohort as usize];
        c.generations += 1;
        if !c.streams.contains(&g.stream) {
            c.streams.push(g.stream);
        }
        *c.sizes.entry((g.size, g.requested)).or_default() += 1;
        let outcome = match (g.request, g.complete) {
            (_, Some(_)) => Outcome::FreeCompleted,
            (Some(_), None) => Outcome::AwaitingFree,
            (None, None) => Outcome::OwnerActive,
        };
        *c.outcomes
            .entry((g.size, g.requested, outcome))
            .or_default() += 1;
        add(&mut c.births, &g.birth, g.size);
        if let Some(m) = &g.request {
            add(&mut c.requests, m, g.size);
        }
        if let Some(m) = &g.complete {
            add(&mut c.completions, m, g.size);
        }
    }

    let transitions = |map: &BTreeMap<TransitionKey, (i64, i64)>| -> Vec<CohortTransition> {
        map.iter()
            .map(|(&(window, origin, stack), &(bytes, count))| {
                let frames = frames_of(stacks, stack);
                let w = window as usize;
                CohortTransition {
                    start_point: match origin {
                        Origin::Event if w > 0 => Some(point_ref(states, w - 1)),
                        _ => None,
                    },
                    end_point: point_ref(states, w),
                    origin,
                    stack_key: stack_key(&frames),
                    stack_frames: frames,
                    bytes,
                    count,
                }
            })
            .collect()
    };
    let refs: Vec<PointRef> = (plan.start..=plan.through)
        .map(|p| point_ref(states, p))
        .collect();

    let mut rows: Vec<AllocationCohort> = Vec::with_capacity(cohorts.accs.len());
    for (acc, got) in cohorts.accs.iter().zip(&gathered) {
        let (device, pool, stack, block, requested) = acc.key;
        let frames = frames_of(stacks, stack);
        let mut identity: Vec<String> = vec![
            device.to_string(),
            pool.map_or_else(|| "unknown".to_owned(), |(a, b)| format!("{a},{b}")),
        ];
        identity.extend(
            frames
                .iter()
                .map(|f| format!("{}\u{1e}{}\u{1e}{}", f.filename, f.line, f.name)),
        );
        if stack.is_none() {
            identity.push(format!("unframed\u{1e}{block}\u{1e}{requested}"));
        }
        let parts: Vec<&str> = identity.iter().map(String::as_str).collect();
        let cohort_id = fingerprint(&parts);
        let points: Vec<CohortPointState> = acc
            .points
            .iter()
            .zip(&refs)
            .map(|(p, r)| CohortPointState {
                cohort_id: cohort_id.clone(),
                point_index: r.index,
                label: r.label.clone(),
                owner_active_bytes: p.owner_bytes,
                owner_active_count: p.owner_count,
                awaiting_free_bytes: p.awaiting_bytes,
                awaiting_free_count: p.awaiting_count,
                active_bytes: p.owner_bytes + p.awaiting_bytes,
                block_count: p.owner_count + p.awaiting_count,
                owner_requested_bytes: p.owner_requested,
                awaiting_free_requested_bytes: p.awaiting_requested,
                requested_bytes: p.owner_requested + p.awaiting_requested,
            })
            .collect();
        let max = |f: fn(&CohortPointState) -> i64| points.iter().map(f).max().unwrap_or(0);
        let min_active = points.iter().map(|p| p.active_bytes).min().unwrap_or(0);
        let sampled: Vec<&CohortPointState> = points.iter().filter(|p| p.block_count > 0).collect();
        let as_ref = |p: &&CohortPointState| PointRef {
            index: p.point_index,
            label: p.label.clone(),
        };
        let births = transitions(&got.births);
        let free_requests = transitions(&got.requests);
        let free_completions = transitions(&got.completions);
        let event_windows = got
            .births
            .keys()
            .chain(got.requests.keys())
            .chain(got.completions.keys())
            .filter(|k| k.1 == Origin::Event)
            .map(|k| k.0 as usize);
        let (first_event, last_event) =
            event_windows.fold((None::<usize>, None::<usize>), |(lo, hi), w| {
                (
                    Some(lo.map_or(w, |l| l.min(w))),
                    Some(hi.map_or(w, |h| h.max(w))),
                )
            });
        let total = |m: &BTreeMap<TransitionKey, (i64, i64)>| {
            m.values().fold((0, 0), |(b, c), v| (b + v.0, c + v.1))
        };
        let (born_bytes, born_count) = total(&got.births);
        let (req_bytes, req_count) = total(&got.requests);
        let (done_bytes, done_count) = total(&got.completions);
        let last = points.last().cloned().unwrap_or_default();
        let mut streams = got.streams.clone();
        streams.sort_unstable();
        rows.push(AllocationCohort {
            cohort_id: cohort_id.clone(),
            display_rank: 0,
            device,
            pool_id: pool,
            pool_label: pool_label(pool),
            stack_key: stack_key(&frames),
            stack_frames: frames,
            block_size_bytes: stack.is_none().then_some(block),
            requested_size_bytes: stack.is_none().then_some(requested),
            streams,
            generation_count: got.generations,
            size_histogram: got
                .sizes
                .iter()
                .map(|(&(size, req), &count)| CohortSizeBucket {
                    cohort_id: cohort_id.clone(),
                    size_bytes: size,
                    requested_size_bytes: req,
                    count,
                    total_bytes: size * count,
                })
                .collect(),
            size_outcomes: got
                .outcomes
                .iter()
                .map(|(&(size, req, outcome), &count)| CohortSizeOutcome {
                    cohort_id: cohort_id.clone(),
                    size_bytes: size,
                    requested_size_bytes: req,
                    outcome,
                    count,
                    total_bytes: size * count,
                })
                .collect(),
            transitions: CohortTransitions {
                births,
                free_requests,
                free_completions,
            },
            peaks: CohortPeaks {
                peak_active_bytes: max(|p| p.active_bytes),
                peak_owner_active_bytes: max(|p| p.owner_active_bytes),
                peak_awaiting_free_bytes: max(|p| p.awaiting_free_bytes),
                peak_block_count: max(|p| p.block_count),
                active_span_bytes: max(|p| p.active_bytes) - min_active,
                event_owner_peak_bytes: acc.owner_peak,
                event_unreusable_peak_bytes: acc.unreusable_peak,
            },
            span: CohortSpan {
                first_sampled_point: sampled.first().map(as_ref),
                last_sampled_point: sampled.last().map(as_ref),
                first_event_point: first_event.map(|w| point_ref(states, w)),
                last_event_point: last_event.map(|w| point_ref(states, w)),
            },
            totals: CohortTotals {
                born_bytes,
                born_count,
                free_requested_bytes: req_bytes,
                free_requested_count: req_count,
                free_completed_bytes: done_bytes,
                free_completed_count: done_count,
                terminal_owner_active_bytes: last.owner_active_bytes,
                terminal_owner_active_count: last.owner_active_count,
                terminal_awaiting_free_bytes: last.awaiting_free_bytes,
                terminal_awaiting_free_count: last.awaiting_free_count,
            },
            points,
        });
    }
    rows.sort_by(|a, b| {
        let key = |c: &AllocationCohort| {
            (
                c.peaks.event_unreusable_peak_bytes,
                c.peaks.peak_active_bytes,
            )
        };
        key(b)
            .cmp(&key(a))
            .then_with(|| a.cohort_id.cmp(&b.cohort_id))
    });
    for (i, row) in rows.iter_mut().enumerate() {
        row.display_rank = i + 1;
    }

    let pos = |index: i64| {
        states
            .iter()
            .position(|s| s.identity.index == index)
            .map(|p| point_ref(states, p))
    };
    let selection_info = match selection {
        Selection::All => SelectionInfo {
            kind: "all",
            anchor: None,
            start: None,
            end: None,
        },
        Selection::ActiveAt { point } => SelectionInfo {
            kind: "active_at",
            anchor: pos(point),
            start: None,
            end: None,
        },
        Selection::BornBetween { start, end } => SelectionInfo {
            kind: "born_between",
            anchor: None,
            start: pos(start),
            end: pos(end),
        },
    };
    let first = &states[plan.start].identity;
    LifetimeAnalysis {
        source_kind: "run",
        run_id: first.origin.clone(),
        name: first.name.clone(),
        selection: selection_info,
        range: AnalysedRange {
            start_point: point_ref(states, plan.start),
            through_point: point_ref(states, plan.through),
            points: refs,
        },
        history,
        tracked: Tracked::new(tracked, tracked_bytes, attributed_bytes),
        cohorts: rows,
        warnings,
    }
}
