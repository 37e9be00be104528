//! The harvester thread: waits for each closed point's event, takes the point's records
//! (and sampled values) from the host mirrors, lands a frozen history when a trigger fired,
//! and hands every point to the sink.

use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::sys::{self, CUcontext, CUevent};

use super::*;

/// What the harvester thread reads besides the shared state.
pub(super) struct HarvestContext<'a> {
    pub(super) private: &'a PrivateStream,
    pub(super) words: &'a DeviceBuffer,
    pub(super) table: &'a RecordTable,
    pub(super) settings: RecorderSettings,
}

pub(super) fn harvest_loop(
    ctx: CUcontext,
    shared: &Shared,
    context: &HarvestContext<'_>,
    mut sink: Sink,
) {
    // Relaxed for good on this thread: its event queries and copies must not count as
    // unsafe calls against a global-mode capture on a torch stream (which they would
    // invalidate).
    let relaxed = make_current(ctx).and_then(|()| RelaxedCapture::enter());
    if let Err(e) = relaxed.as_ref().map(|_| ()) {
        if let Ok(mut state) = shared.state.lock() {
            state.failure = Some(e.to_string());
        }
        shared.done.notify_all();
        return;
    }
    loop {
        let Ok(state) = shared.state.lock() else {
            return;
        };
        let Some(front) = state.pending.front() else {
            if state.stop {
                return;
            }
            drop(
                shared
                    .wake
                    .wait_timeout(state, Duration::from_millis(20))
                    .map_err(|_| ()),
            );
            continue;
        };
        let event = front.event as CUevent;
        let flushing = state.flushing || state.stop;
        drop(state);
        // SAFETY: a live event recorded by close_point.
        let status = unsafe {
            if flushing {
                sys::cuEventSynchronize(event)
            } else {
                sys::cuEventQuery(event)
            }
        };
        if status == sys::CUresult::CUDA_ERROR_NOT_READY {
            // The device is still on it: look again shortly (a condvar wait, so a flush
            // wakes this at once).
            if let Ok(state) = shared.state.lock() {
                drop(shared.wake.wait_timeout(state, Duration::from_micros(500)));
            }
            continue;
        }
        let outcome = check("cuEventQuery", status)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                let points = harvest_front(shared, context).map_err(|e| e.to_string())?;
                for point in points {
                    sink(point)?;
                }
                Ok(())
            });
        let Ok(mut state) = shared.state.lock() else {
            return;
        };
        if let Some(done) = state.pending.pop_front() {
            state.free_events.push(done.event);
        }
        match outcome {
            Ok(()) => state.delivered += 1,
            Err(e) => {
                state
                    .failure
                    .get_or_insert(format!("recording a point failed: {e}"));
                state.pending.clear();
            }
        }
        drop(state);
        shared.done.notify_all();
    }
}

/// Takes the front pending point's records (its event completed, so its row of the record
/// table is on the host) and, when a summary of it fired the trigger or the host asked,
/// the history rings.
fn harvest_front(shared: &Shared, context: &HarvestContext<'_>) -> Result<Vec<HarvestedPoint>> {
    let settings = context.settings;
    let mut state = lock(shared)?;
    let front = state.pending.front_mut().expect("a pending point");
    let (number, label, metadata, dump, attachment, staging) = (
        front.number,
        front.label.clone(),
        front.metadata.clone(),
        front.dump.clone(),
        front.attachment.take(),
        front.staging.take(),
    );
    let mut values = Vec::new();
    let mut replays = Vec::new();
    let mut fired: Option<String> = None;
    let State {
        sites, captures, ..
    } = &mut *state;
    for (capture_index, capture) in captures.iter_mut().enumerate() {
        let mut last = capture.harvested;
        for &site in &capture.summary_sites {
            let Some(column) = sites[site].summary else {
                continue;
            };
            // SAFETY: the point's event completed (its kernels too), and the host never
            // runs `rows` points ahead of the harvester (backpressure in close_point).
            let record = unsafe { context.table.read(number, column) };
            // A record of an earlier point: the graph did not replay in this one.
            if record.point as u32 != number || record.replay <= capture.harvested {
                continue;
            }
            if record.triggered() && fired.is_none() {
                fired = Some(
                    if record.counts.nan + record.counts.pos_inf + record.counts.neg_inf > 0 {
                        "nonfinite".into()
                    } else {
                        "abs_max".into()
                    },
                );
            }
            last = last.max(record.replay);
            values.push(HarvestedValue {
                site,
                replay: record.replay,
                data: HarvestedData::Summary(record),
            });
        }
        if last > capture.harvested {
            // A graph that replayed several times in one point keeps its last replay's
            // values; the metadata says how many replays there were.
            replays.push((capture_index, capture.harvested + 1, last));
            capture.harvested = last;
        }
    }
    if let Some(staging) = staging {
        take_samples(&mut state, staging, &mut values, &mut replays);
    }
    state.recent.push_back((number, label.clone()));
    while state.recent.len() as u64 > settings.history.max(1) + 1 {
        state.recent.pop_front();
    }
    let mut out = vec![HarvestedPoint {
        number,
        label: label.clone(),
        metadata,
        kind: PointKind::Call,
        values,
        replays,
        attachment,
    }];
    let asked = dump.is_some();
    let fired = fired.filter(|_| !state.frozen);
    let reason = dump.or(fired);
    if let (Some(reason), true) = (reason, settings.history > 0) {
        // The kernel froze the history at this point (or the host did, for a dump): no
        // replay writes it until it is re-armed.
        let recent: Vec<(u32, String)> = state.recent.iter().cloned().collect();
        let histories: Vec<(usize, Arc<HistoryRing>)> = state
            .sites
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.history.as_ref().map(|h| (i, Arc::clone(h))))
            .collect();
        state.dumps += 1;
        state.frozen = !asked;
        drop(state);
        out.extend(land_history(
            &histories,
            context.private,
            &recent,
            number,
            &label,
            &reason,
        )?);
        if asked {
            arm(context.words, context.private)?;
        }
    }
    Ok(out)
}

/// Adds the sampled values of graphs that replayed since their last sample; a sampled value
/// stands in for the site's summary of the same replay (its host summary is computed from
/// the bytes).
fn take_samples(
    state: &mut State,
    staging: Staging,
    values: &mut Vec<HarvestedValue>,
    replays: &mut Vec<(usize, u64, u64)>,
) {
    let mut replayed: std::collections::HashMap<usize, u64> = Default::default();
    for (capture, buffer) in &staging.counters {
        // SAFETY: the point's event completed, so the copy into `buffer` is done.
        let bytes = unsafe { buffer.bytes() };
        let replay = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
        let track = &mut state.captures[*capture];
        if replay > track.sampled_replay {
            if !replays.iter().any(|r| r.0 == *capture) {
                replays.push((*capture, track.sampled_replay + 1, replay));
            }
            track.sampled_replay = replay;
            replayed.insert(*capture, replay);
        }
    }
    for (site, buffer) in staging.values {
        let capture = state.sites[site].capture;
        let Some(&replay) = replayed.get(&capture) else {
            // The graph did not replay: the slot holds an older value.
            state.pinned.entry(buffer.nbytes).or_default().push(buffer);
            continue;
        };
        let full = state.sites[site].sample.as_ref().is_some_and(|s| s.full);
        values.retain(|v| v.site != site);
        values.push(HarvestedValue {
            site,
            replay,
            // SAFETY: as above.
            data: HarvestedData::Bytes {
                bytes: unsafe { buffer.bytes() }.to_vec(),
                full,
            },
        });
        state.pinned.entry(buffer.nbytes).or_default().push(buffer);
    }
    for (_, buffer) in staging.counters {
        state.pinned.entry(buffer.nbytes).or_default().push(buffer);
    }
}

/// One flight point per past point the history rings hold, oldest first.
fn land_history(
    histories: &[(usize, Arc<HistoryRing>)],
    private: &PrivateStream,
    recent: &[(u32, String)],
    trigger_point: u32,
    trigger_label: &str,
    reason: &str,
) -> Result<Vec<HarvestedPoint>> {
    let mut by_point: std::collections::BTreeMap<u32, Vec<HarvestedValue>> = Default::default();
    for (site, ring) in histories {
        let contents = ring.read(private)?;
        for (slot, &(replay, point)) in contents.tags.iter().enumerate() {
            let point = point as u32;
            if replay == 0 || point > trigger_point {
                continue;
            }
            if trigger_point - point >= ring.depth as u32 {
                continue; // older than the history this dump is about
            }
            by_point.entry(point).or_default().push(HarvestedValue {
                site: *site,
                replay,
                data: HarvestedData::Bytes {
                    bytes: ring.slot_value(&contents, slot).to_vec(),
                    full: true,
                },
            });
        }
    }
    Ok(by_point
        .into_iter()
        .map(|(point, values)| {
            let label = recent
                .iter()
                .find(|(n, _)| *n == point)
                .map(|(_, l)| l.clone())
                .unwrap_or_else(|| format!("point{point}"));
            let (first, last) = values.iter().fold((u64::MAX, 0), |(a, b), v| {
                (a.min(v.replay), b.max(v.replay))
            });
            HarvestedPoint {
                number: point,
                label: format!("history:{trigger_label}:{label}"),
                metadata: String::from("{}"),
                kind: PointKind::Flight {
                    trigger_label: trigger_label.to_owned(),
                    reason: reason.to_owned(),
                },
                values,
                replays: vec![(usize::MAX, first, last)],
                attachment: None,
            }
        })
        .collect())
}
