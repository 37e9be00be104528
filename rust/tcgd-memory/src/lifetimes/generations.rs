//! The replay: one pass over the history windows of the analysed points, keyed by
//! (device, address), reconciled with every point's state.
//!
//! A generation starts at an `alloc` (provisional: the event's size, which torch may
//! report as the requested size), is confirmed by the first snapshot that shows its
//! block (allocator-rounded size, requested size, pool, stream, live-block stack), and
//! ends at `free_completed`; a later `alloc` at the address starts a new generation.
//! Later snapshots must show the confirmed identity unchanged. Each contradiction is
//! counted by reason and device with up to three example addresses and raised once, after
//! the pass, as [`MemoryError::Reconciliation`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::error::{MemoryError, Result};
use crate::model::{BlockState, HistoryStatus, PoolId, StackTable};
use crate::state::MemoryState;

use super::cohorts::{CohortTable, Generation, Mark, Replay, Step, NO_COHORT};
use super::events::{Action, EventSource};
use super::selection::Plan;
use super::{HistoryCoverage, Origin};

/// Contradictions by (reason, device): count and up to three example addresses.
#[derive(Default)]
struct Contradictions {
    found: BTreeMap<(&'static str, i64), (u64, Vec<i64>)>,
}

impl Contradictions {
    fn add(&mut self, reason: &'static str, device: i64, address: Option<i64>) {
        let entry = self.found.entry((reason, device)).or_default();
        entry.0 += 1;
        if let Some(a) = address {
            if entry.1.len() < 3 {
                entry.1.push(a);
            }
        }
    }

    fn into_error(self, first: &str, last: &str) -> Option<MemoryError> {
        if self.found.is_empty() {
            return None;
        }
        let total: u64 = self.found.values().map(|v| v.0).sum();
        let parts: Vec<String> = self
            .found
            .iter()
            .map(|((reason, device), (count, examples))| {
                let shown: Vec<String> = examples.iter().map(|a| format!("0x{a:x}")).collect();
                let eg = if shown.is_empty() {
                    String::new()
                } else {
                    format!(" (e.g. {})", shown.join(", "))
                };
                format!("{reason} on device {device}: {count}{eg}")
            })
            .collect();
        Some(MemoryError::Reconciliation(format!(
            "the allocator history from {first} through {last} cannot be reconciled with the \
             recorded states ({total} contradictions): {}. Possible causes: another tool \
             collecting markers at the same time, allocator activity between a marker and its \
             snapshot, a damaged run, or a defect in this analysis (please report it)",
            parts.join("; ")
        )))
    }
}

fn point_name(state: &MemoryState) -> String {
    format!(
        "'{}' (index {})",
        state.identity.label, state.identity.index
    )
}

/// Refuses windows that are not complete, before any replay work.
fn check_history(states: &[Arc<MemoryState>], plan: &Plan) -> Result<Vec<i64>> {
    let start = &states[plan.start];
    let mut devices: Vec<i64> = start.windows.iter().map(|w| w.device).collect();
    for w in &start.windows {
        if w.status == HistoryStatus::Disabled {
            return Err(MemoryError::HistoryDisabled(format!(
                "allocator history of device {} is disabled at point {}: lifetimes need \
                 complete event history; call torch.cuda.memory._record_memory_history(\
                 enabled='all') before the allocations of interest and record again",
                w.device,
                point_name(start)
            )));
        }
    }
    for k in plan.start + 1..=plan.through {
        let (prev, here) = (&states[k - 1], &states[k]);
        let between = format!(
            "between points {} and {}",
            point_name(prev),
            point_name(here)
        );
        for &d in &devices {
            if !here.windows.iter().any(|w| w.device == d) {
                return Err(MemoryError::HistoryDisabled(format!(
                    "point {} has no allocator history for device {d} ({between}); lifetimes \
                     need complete event history on every analysed device",
                    point_name(here)
                )));
            }
        }
        for w in &here.windows {
            if !devices.contains(&w.device) {
                devices.push(w.device);
            }
            let d = w.device;
            match w.status {
                HistoryStatus::Complete => {}
                HistoryStatus::Disabled => {
                    return Err(MemoryError::HistoryDisabled(format!(
                        "allocator history of device {d} is disabled {between}: lifetimes need \
                         complete event history; keep torch.cuda.memory._record_memory_history(\
                         enabled='all') on for the whole range"
                    )))
                }
                HistoryStatus::BoundaryUnavailable => {
                    return Err(MemoryError::HistoryBoundary(format!(
                        "the history window of device {d} {between} has no recorded boundary \
                         (the marker of {} is not in the trace, or markers are unavailable), \
                         so its events cannot be cut exactly; record the points with a \
                         MemoryRecorder on a torch with allocator metadata support, or, for \
                         imported _dump_snapshot files, switch history on before the first \
                         dump, keep its 'snapshot' entries (no skip_actions=['snapshot']) and \
                         import the files of one process in the order they were dumped",
                        point_name(prev)
                    )))
                }
                HistoryStatus::Truncated | HistoryStatus::FirstPoint => {
                    return Err(MemoryError::HistoryTruncated(format!(
                        "the history window of device {d} {between} is truncated: its start \
                         marker is not in the trace (the ring overwrote it, or history was \
                         enabled late); raise max_entries of \
                         torch.cuda.memory._record_memory_history or record points more often"
                    )))
                }
                HistoryStatus::InvalidOrder => {
                    return Err(MemoryError::Reconciliation(format!(
                        "the history window of device {d} {between} has timestamps out of \
                         order; the boundaries cannot be trusted"
                    )))
                }
            }
        }
    }
    devices.sort_unstable();
    Ok(devices)
}

/// A segment range of one state, for pool anchoring.
#[derive(Clone, Copy)]
struct Range {
    device: i64,
    start: i64,
    end: i64,
    pool: PoolId,
    expandable: bool,
}

fn ranges(state: &MemoryState) -> Vec<Range> {
    let mut out: Vec<Range> = state
        .segments
        .iter()
        .filter_map(|s| {
            Some(Range {
                device: s.device,
                start: s.address?,
                end: s.address? + s.total_size,
                pool: s.pool,
                expandable: s.is_expandable,
            })
        })
        .collect();
    out.sort_unstable_by_key(|r| (r.device, r.start));
    out
}

fn lookup(ranges: &[Range], device: i64, address: i64) -> Option<Range> {
    let i = ranges.partition_point(|r| (r.device, r.start) <= (device, address));
    let r = *ranges.get(i.checked_sub(1)?)?;
    (r.device == device && address < r.end).then_some(r)
}

/// A segment event of the current window.
struct Churn {
    seq: u64,
    device: i64,
    lo: i64,
    hi: i64,
    /// `segment_alloc`/`segment_free` (a reservation came or went) rather than a
    /// mapping change of an expandable segment.
    hard: bool,
}

/// What an endpoint snapshot says about a transient's pool.
enum Testimony {
    Pool(PoolId),
    Silent,
    Invisible,
}

fn testify(ranges: &[Range], churn: &[&Churn], device: i64, address: i64) -> Testimony {
    let found = lookup(ranges, device, address);
    if churn.iter().any(|c| c.hard) {
        return Testimony::Silent;
    }
    if !churn.is_empty() {
        // Mapping churn of an expandable segment: every mapped range with the same
        // (device, stream, pool, segment type) is one reservation, so an endpoint that
        // still maps the address in an expandable segment speaks for it.
        return match found {
            Some(r) if r.expandable => Testimony::Pool(r.pool),
            _ => Testimony::Silent,
        };
    }
    match found {
        Some(r) => Testimony::Pool(r.pool),
        None => Testimony::Invisible,
    }
}

fn normalise(stacks: &StackTable, stack: Option<u32>) -> Option<u32> {
    stack.filter(|&s| stacks.stack(s).is_some_and(|f| !f.is_empty()))
}

pub(crate) fn replay<E: EventSource>(
    states: &[Arc<MemoryState>],
    stacks: &StackTable,
    events: &E,
    plan: &Plan,
) -> Result<Replay> {
    let devices = check_history(states, plan)?;
    let n_points = plan.through - plan.start + 1;
    let start_state = &states[plan.start];
    let initial_blocks = start_state
        .blocks
        .iter()
        .filter(|b| b.state.is_active())
        .count();
    // Sized up front: at most one generation per alloc event plus the starting blocks.
    let capacity = initial_blocks + events.len() / 2 + 16;
    let mut generations: Vec<Generation> = Vec::with_capacity(capacity);
    let mut live: HashMap<(i64, i64), u32> = HashMap::with_capacity(initial_blocks * 2 + 1024);
    let mut cohorts = CohortTable::new(n_points);
    let mut bad = Contradictions::default();
    let mut unknown_actions: HashSet<String> = HashSet::new();
    let mut coverage: Vec<HistoryCoverage> = devices
        .iter()
        .map(|&device| HistoryCoverage {
            device,
            windows: 0,
            events: 0,
            complete: true,
        })
        .collect();

    // The range-start state: every live block is a generation whose birth (and, when
    // awaiting free, free request) happened before the range.
    let here = plan.start as u32;
    for b in start_state.blocks.iter().filter(|b| b.state.is_active()) {
        let seg = &start_state.segments[b.segment as usize];
        let Some(address) = b.address else {
            bad.add("active block without an address", seg.device, None);
            continue;
        };
        let stack = normalise(stacks, b.stack);
        let idx = generations.len() as u32;
        if live.insert((seg.device, address), idx).is_some() {
            bad.add("duplicate active address", seg.device, Some(address));
        }
        let awaiting = b.state == BlockState::ActiveAwaitingFree;
        let kept = plan.keeps(plan.start, true);
        let mut g = Generation {
            device: seg.device,
            address,
            size: b.size,
            requested: b.requested_size,
            confirmed: true,
            pool: Some(seg.pool),
            stream: seg.stream,
            stack,
            birth: Mark {
                window: here,
                origin: Origin::RangeBoundary,
                stack,
            },
            birth_seq: 0,
            request: awaiting.then_some(Mark {
                window: here,
                origin: Origin::RangeBoundary,
                stack: None,
            }),
            complete: None,
            cohort: NO_COHORT,
            kept,
            seen: here,
        };
        if kept {
            g.cohort = cohorts.assign(&g);
            cohorts.apply(
                &g,
                if awaiting {
                    Step::Awaiting
                } else {
                    Step::Birth
                },
            );
        }
        generations.push(g);
    }
    cohorts.sample(0, live.values().map(|&i| &generations[i as usize]));

    let mut seq: u64 = 0;
    let mut born: Vec<u32> = Vec::new();
    let mut steps: Vec<(u32, Step)> = Vec::new();
    let mut transients: Vec<u32> = Vec::new();
    let mut churn: Vec<Churn> = Vec::new();
    for k in plan.start + 1..=plan.through {
        let state = &states[k];
        let window = k as u32;
        born.clear();
        steps.clear();
        transients.clear();
        churn.clear();
        let mut counted: Vec<(i64, i64)> = devices.iter().map(|&d| (d, 0)).collect();
        events.for_each(state.identity.index, |e| {
            seq += 1;
            if let Some(c) = counted.iter_mut().find(|c| c.0 == e.device) {
                c.1 += 1;
            }
            match e.action {
                Action::Alloc => {
                    let Some(address) = e.address else {
                        bad.add("alloc event without an address", e.device, None);
                        return;
                    };
                    let idx = generations.len() as u32;
                    if live.insert((e.device, address), idx).is_some() {
                        bad.add(
                            "alloc at an address whose generation is not free_completed",
                            e.device,
                            Some(address),
                        );
                    }
                    let stack = normalise(stacks, e.stack);
                    let kept = plan.keeps(k, false);
                    generations.push(Generation {
                        device: e.device,
                        address,
                        size: e.size,
                        requested: e.size,
                        confirmed: false,
                        pool: e.pool,
                        stream: e.stream,
                        stack,
                        birth: Mark {
                            window,
                            origin: Origin::Event,
                            stack,
                        },
                        birth_seq: seq,
                        request: None,
                        complete: None,
                        cohort: NO_COHORT,
                        kept,
                        seen: u32::MAX,
                    });
                    if kept {
                        born.push(idx);
                        steps.push((idx, Step::Birth));
                    }
                }
                Action::FreeRequested | Action::FreeCompleted => {
                    let Some(address) = e.address else {
                        bad.add("free event without an address", e.device, None);
                        return;
                    };
                    let completed = e.action == Action::FreeCompleted;
                    let found = if completed {
                        live.remove(&(e.device, address))
                    } else {
                        live.get(&(e.device, address)).copied()
                    };
                    let Some(idx) = found else {
                        bad.add(
                            if completed {
                                "free_completed for an address with no live generation"
                            } else {
                                "free_requested for an address with no live generation"
                            },
                            e.device,
                            Some(address),
                        );
                        return;
                    };
                    let g = &mut generations[idx as usize];
                    // A generation no snapshot confirmed (a transient between two points)
                    // only knows the size its alloc entry reported, which may be the
                    // requested size; its free reports the allocator-rounded block, which
                    // is at least that: the free then tells the block size.
                    if !g.confirmed && e.size >= g.requested && e.size != g.size {
                        g.size = e.size;
                    }
                    if e.size != g.size && e.size != g.requested {
                        bad.add(
                            "free size matches neither the block nor the requested size",
                            e.device,
                            Some(address),
                        );
                    }
                    let mark = Mark {
                        window,
                        origin: Origin::Event,
                        stack: normalise(stacks, e.stack),
                    };
                    if completed {
                        if g.request.is_none() {
                            bad.add(
                                "free_completed without free_requested",
                                e.device,
                                Some(address),
                            );
                            g.request = Some(mark);
                            if g.kept {
                                steps.push((idx, Step::Request));
                            }
                        }
                        g.complete = Some(mark);
                        if g.kept {
                            steps.push((idx, Step::Complete));
                        }
                        if !g.confirmed {
                            transients.push(idx);
                        }
                    } else if g.request.is_some() {
                        bad.add("duplicate free_requested", e.device, Some(address));
                    } else {
                        g.request = Some(mark);
                        if g.kept {
                            steps.push((idx, Step::Request));
                        }
                    }
                }
                action if action.is_segment() => {
                    if let Some(lo) = e.address {
                        churn.push(Churn {
                            seq,
                            device: e.device,
                            lo,
                            hi: lo.saturating_add(e.size.max(1)),
                            hard: matches!(action, Action::SegmentAlloc | Action::SegmentFree),
                        });
                    }
                }
                Action::Snapshot | Action::Oom => {}
                _ => {
                    if !unknown_actions.contains(e.action_name) {
                        unknown_actions.insert(e.action_name.to_owned());
                    }
                }
            }
        })?;
        for (c, (_, n)) in coverage.iter_mut().zip(&counted) {
            c.windows += 1;
            c.events += n;
        }

        // Reconcile with this point's snapshot: confirm new generations, check the others.
        for b in state.blocks.iter().filter(|b| b.state.is_active()) {
            let seg = &state.segments[b.segment as usize];
            let Some(address) = b.address else {
                bad.add("active block without an address", seg.device, None);
                continue;
            };
            let Some(&idx) = live.get(&(seg.device, address)) else {
                bad.add(
                    "active block with no live generation (its alloc is not in the history)",
                    seg.device,
                    Some(address),
                );
                continue;
            };
            let g = &mut generations[idx as usize];
            if g.seen == window {
                bad.add("duplicate active address", seg.device, Some(address));
                continue;
            }
            g.seen = window;
            if !g.confirmed {
                if g.size != b.size && g.size != b.requested_size {
                    bad.add(
                        "block size differs from its alloc event",
                        seg.device,
                        Some(address),
                    );
                }
                if g.pool.is_some_and(|p| p != seg.pool) {
                    bad.add(
                        "block pool differs from its alloc event",
                        seg.device,
                        Some(address),
                    );
                }
                g.size = b.size;
                g.requested = b.requested_size;
                g.pool = Some(seg.pool);
                g.stream = seg.stream;
                if let Some(s) = normalise(stacks, b.stack) {
                    g.stack = Some(s);
                }
                g.confirmed = true;
            } else if g.size != b.size
                || g.requested != b.requested_size
                || g.pool != Some(seg.pool)
                || g.stream != seg.stream
            {
                bad.add(
                    "confirmed generation changed identity without free_completed/alloc",
                    seg.device,
                    Some(address),
                );
            }
            let awaiting = b.state == BlockState::ActiveAwaitingFree;
            if awaiting != g.request.is_some() {
                bad.add(
                    "block state disagrees with the replayed free transitions",
                    seg.device,
                    Some(address),
                );
            }
        }
        for &idx in live.values() {
            let g = &generations[idx as usize];
            if g.seen != window && devices.binary_search(&g.device).is_ok() {
                bad.add(
                    "live generation missing from the snapshot",
                    g.device,
                    Some(g.address),
                );
            }
        }

        // Pools of transients (born and freed inside this window) without a reported pool,
        // anchored to the window's endpoint snapshots.
        if transients
            .iter()
            .any(|&i| generations[i as usize].pool.is_none())
        {
            let before = ranges(&states[k - 1]);
            let after = ranges(state);
            for &idx in &transients {
                let g = &generations[idx as usize];
                if g.pool.is_some() {
                    continue;
                }
                let (dev, a, b) = (g.device, g.address, g.birth_seq);
                let covering = |c: &&Churn| c.device == dev && c.lo <= a && a < c.hi;
                let earlier: Vec<&Churn> = churn
                    .iter()
                    .filter(covering)
                    .filter(|c| c.seq < b)
                    .collect();
                let later: Vec<&Churn> = churn
                    .iter()
                    .filter(covering)
                    .filter(|c| c.seq > b)
                    .collect();
                let start = testify(&before, &earlier, dev, a);
                let end = testify(&after, &later, dev, a);
                let pool = match (start, end) {
                    (Testimony::Invisible, _) | (_, Testimony::Invisible) => {
                        bad.add(
                            "birth address invisible at an endpoint without a covering segment event",
                            dev,
                            Some(a),
                        );
                        None
                    }
                    (Testimony::Pool(p), Testimony::Pool(q)) if p != q => {
                        bad.add(
                            "endpoint pools disagree without covering segment churn",
                            dev,
                            Some(a),
                        );
                        None
                    }
                    (Testimony::Pool(p), _) | (_, Testimony::Pool(p)) => Some(p),
                    (Testimony::Silent, Testimony::Silent) => None,
                };
                generations[idx as usize].pool = pool;
            }
        }

        for &idx in &born {
            let c = cohorts.assign(&generations[idx as usize]);
            generations[idx as usize].cohort = c;
        }
        for &(idx, step) in &steps {
            cohorts.apply(&generations[idx as usize], step);
        }
        cohorts.sample(
            k - plan.start,
            live.values().map(|&i| &generations[i as usize]),
        );
    }

    if let Some(error) = bad.into_error(
        &point_name(&states[plan.start]),
        &point_name(&states[plan.through]),
    ) {
        return Err(error);
    }
    let mut warnings: Vec<String> = unknown_actions
        .into_iter()
        .map(|a| {
            format!(
                "allocator history holds entries with the unknown action '{a}'; they were \
                 left out of the lifetime replay"
            )
        })
        .collect();
    warnings.sort();
    Ok(Replay {
        generations,
        cohorts,
        history: coverage,
        warnings,
    })
}
