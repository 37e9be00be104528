//! `DeviceRecorder`: points of a session whose values stay on the device until a thread of
//! ours harvests them, so a call of a captured model costs the host two driver calls.
//!
//! Per call the host closes the point that just ended: it records an event on the stream
//! the model runs on and sets the session's point word (a 4-byte memset ordered on that
//! stream) to the next point's number. Summary kernels captured into the graphs tag every
//! record with the point word they read. The harvester thread waits for each point's event,
//! then takes from every graph's rings the records tagged with that point: no
//! synchronisation of the model's stream, ever. A summary that fired the trigger freezes the
//! history rings on the device (the kernel does it), and the harvester lands the frozen
//! history in the run before re-arming it.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cudarc::driver::sys::{self, CUcontext, CUevent};

use crate::driver::{
    as_stream, capture_state, check, make_current, primary_context, CaptureState, RelaxedCapture,
};
use crate::error::{CudaError, Result};
use crate::memory::{DeviceBuffer, PinnedBuffer, PrivateStream};
use crate::runtime::ProbeRuntime;
use crate::summary::{
    copies_while_summarising, enqueue_history_copies, enqueue_slot_copies, enqueue_summaries,
    prepare, summarizable_on_device, CopyInput, HistoryRing, RecordTable, SessionWords,
    SummaryInput, Trigger, MAX_SITES_PER_LAUNCH,
};

mod output;
mod state;

pub use output::*;
use state::*;

use tcgd_tensor::DType;

mod worker;
use worker::{harvest_loop, HarvestContext};

/// Settings of a session's device recording.
#[derive(Debug, Clone, Copy)]
pub struct RecorderSettings {
    /// Points whose records can be in flight at once (rows of the record table); the host
    /// waits when the harvester is half of them behind.
    pub points_in_flight: u32,
    /// Past values kept per site on the device (0: no flight recorder).
    pub history: u64,
    pub trigger: Trigger,
}

pub struct DeviceRecorder {
    device: i32,
    ctx: CUcontext,
    settings: RecorderSettings,
    private: Arc<PrivateStream>,
    /// [point number: u32, pad][frozen_at: u64]
    words: Arc<DeviceBuffer>,
    table: Arc<RecordTable>,
    next_point: u32,
    /// Host time spent in `close_point`: (closes, total), the per-call cost a user pays.
    close_time: (u64, Duration),
    shared: Arc<Shared>,
    worker: Option<JoinHandle<()>>,
}

// SAFETY: `ctx` is a process-lifetime primary context; the rest is Send + Sync.
unsafe impl Send for DeviceRecorder {}
// SAFETY: as above.
unsafe impl Sync for DeviceRecorder {}

const FROZEN_OFFSET: u64 = 8;
/// Columns of the record table: sites a session can summarise on the device.
pub const MAX_SUMMARY_SITES: u32 = 2048;
/// Points whose sampled values wait in pinned memory at most.
const MAX_STAGED_POINTS: usize = 3;

/// A sampled value due at a point: (site, slot address, bytes).
type Due = (usize, u64, usize);

/// Which values of a registration are brought to the host whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// None (summaries only), but for dtypes the kernel cannot summarise, which are
    /// copied every point and summarised on the host.
    Never,
    /// Every `points`-th point (1: every point, and then no device summary is needed);
    /// `full`: keep the bytes in the run.
    Every { points: u32, full: bool },
}
const ARMED: u32 = u32::MAX;

fn lock(shared: &Shared) -> Result<MutexGuard<'_, State>> {
    shared.state.lock().map_err(|_| CudaError::Poisoned)
}

/// Waits, woken by the harvester after every point, while `busy` holds and nothing failed.
fn wait_while<'a>(
    shared: &'a Shared,
    mut state: MutexGuard<'a, State>,
    busy: impl Fn(&State) -> bool,
) -> Result<MutexGuard<'a, State>> {
    while busy(&state) && state.failure.is_none() {
        state = shared
            .done
            .wait_timeout(state, Duration::from_millis(20))
            .map_err(|_| CudaError::Poisoned)?
            .0;
    }
    Ok(state)
}

impl DeviceRecorder {
    pub fn start(device: i32, settings: RecorderSettings, sink: Sink) -> Result<DeviceRecorder> {
        let ctx = primary_context(device)?;
        make_current(ctx)?;
        prepare(ctx, device)?;
        let private = Arc::new(PrivateStream::new()?);
        let words = Arc::new(DeviceBuffer::alloc(16)?);
        words.zero(&private)?;
        arm(&words, &private)?;
        let table = Arc::new(RecordTable::new(
            settings.points_in_flight.max(4),
            MAX_SUMMARY_SITES,
        )?);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                sites: Vec::new(),
                next_column: 0,
                pinned: Default::default(),
                captures: Vec::new(),
                pending: VecDeque::new(),
                recent: VecDeque::new(),
                free_events: Vec::new(),
                delivered: 0,
                dumps: 0,
                failure: None,
                frozen: false,
                flushing: false,
                stop: false,
            }),
            wake: Condvar::new(),
            done: Condvar::new(),
        });
        let worker = {
            let shared = Arc::clone(&shared);
            let private = Arc::clone(&private);
            let words = Arc::clone(&words);
            let table = Arc::clone(&table);
            let ctx_handle = ctx as usize;
            std::thread::Builder::new()
                .name("tcgd-harvester".into())
                .spawn(move || {
                    let context = HarvestContext {
                        private: &private,
                        words: &words,
                        table: &table,
                        settings,
                    };
                    harvest_loop(ctx_handle as CUcontext, &shared, &context, sink)
                })
                .map_err(|e| CudaError::Invalid(format!("starting the harvester thread: {e}")))?
        };
        Ok(DeviceRecorder {
            device,
            ctx,
            settings,
            private,
            words,
            table,
            next_point: 0,
            close_time: (0, Duration::ZERO),
            shared,
            worker: Some(worker),
        })
    }

    fn session_words(&self) -> SessionWords {
        SessionWords {
            point: self.words.ptr,
            frozen_at: self.words.ptr + FROZEN_OFFSET,
        }
    }

    /// A graph (capture) of the session, probed through `runtime`: its index for
    /// `register_sites`.
    pub fn add_capture(&self, runtime: &ProbeRuntime) -> Result<usize> {
        let counter = runtime.counter_ptr()?;
        let mut state = lock(&self.shared)?;
        state.captures.push(Capture {
            harvested: 0,
            summary_sites: Vec::new(),
            counter,
            sampled_replay: 0,
        });
        Ok(state.captures.len() - 1)
    }

    /// Registers probed values inside a capture on `stream` and records their kernels:
    /// one summary launch for the values the device summarises, and with a history one
    /// copy launch into the sites' history rings (before the summaries, so the replay that
    /// fires the trigger is in the history too). Returns each site's index (harvested
    /// values carry it). The values must be alive together here (one probe op's inputs).
    pub fn register_sites(
        &self,
        runtime: &ProbeRuntime,
        capture: usize,
        values: &[SiteValue],
        sampling: Sampling,
        stream: usize,
    ) -> Result<Vec<usize>> {
        make_current(self.ctx)?;
        let counter = runtime.counter_ptr()?;
        let words = self.session_words();
        let s = as_stream(stream);
        let mut histories: Vec<Option<Arc<HistoryRing>>> = vec![None; values.len()];
        let mut columns: Vec<Option<u32>> = vec![None; values.len()];
        let mut samples: Vec<Option<Sample>> = (0..values.len()).map(|_| None).collect();
        for (start, chunk) in values.chunks(MAX_SITES_PER_LAUNCH).enumerate() {
            let base = start * MAX_SITES_PER_LAUNCH;
            // Sampled values: the kernel cannot summarise them, or some points keep them
            // whole. One copy launch per chunk into slots every replay refreshes.
            let sampled: Vec<usize> = (0..chunk.len())
                .filter(|&i| match sampling {
                    Sampling::Never => !summarizable_on_device(chunk[i].dtype),
                    Sampling::Every { .. } => true,
                })
                .collect();
            if !sampled.is_empty() {
                let mut copies = Vec::with_capacity(sampled.len());
                for &i in &sampled {
                    let v = &chunk[i];
                    let nbytes = v.numel as usize * v.dtype.itemsize();
                    let slot = Arc::new(DeviceBuffer::alloc(nbytes)?);
                    if nbytes > 0 {
                        copies.push((v.src, slot.ptr, nbytes as u64));
                    }
                    runtime.keep(Box::new(Arc::clone(&slot)))?;
                    let (every, full) = match sampling {
                        Sampling::Every { points, full } if summarizable_on_device(v.dtype) => {
                            (points.max(1), full)
                        }
                        // A value only the host can summarise: every point, summary only
                        // (unless the session keeps full values anyway).
                        Sampling::Every { full, .. } => (1, full),
                        Sampling::Never => (1, false),
                    };
                    samples[base + i] = Some(Sample {
                        slot,
                        nbytes,
                        every,
                        full,
                    });
                }
                if !copies.is_empty() {
                    enqueue_slot_copies(self.ctx, self.device, &copies, counter, s)?;
                }
            }
            let summarise = !matches!(sampling, Sampling::Every { points: 1, .. });
            let summarised: Vec<usize> = (0..chunk.len())
                .filter(|&i| summarise && summarizable_on_device(chunk[i].dtype))
                .map(|i| base + i)
                .collect();
            // History rings. A summarised value is copied into its ring by the summary
            // launch as it is read (one read per replay); the others, and values the
            // summary launch cannot copy (see `copies_while_summarising`), by a copy launch
            // of their own, enqueued first as every history copy used to be.
            let mut fused = vec![false; chunk.len()];
            if self.settings.history > 0 {
                let made: Vec<Arc<HistoryRing>> = chunk
                    .iter()
                    .map(|v| {
                        let nbytes = v.numel as usize * v.dtype.itemsize();
                        runtime
                            .with_private_stream(|p| {
                                HistoryRing::new(nbytes, self.settings.history, p)
                            })
                            .map(Arc::new)
                    })
                    .collect::<Result<_>>()?;
                for &i in &summarised {
                    let k = i - base;
                    fused[k] = copies_while_summarising(chunk[k].src, &made[k]);
                }
                let inputs: Vec<CopyInput<'_>> = chunk
                    .iter()
                    .zip(&made)
                    .zip(&fused)
                    .filter(|(_, &f)| !f)
                    .map(|((v, ring), _)| CopyInput { src: v.src, ring })
                    .collect();
                if !inputs.is_empty() {
                    enqueue_history_copies(self.ctx, self.device, &inputs, counter, words, s)?;
                }
                for (i, ring) in made.into_iter().enumerate() {
                    runtime.keep(Box::new(Arc::clone(&ring)))?;
                    histories[base + i] = Some(ring);
                }
            }
            if !summarised.is_empty() {
                let first = {
                    let mut state = lock(&self.shared)?;
                    let first = state.next_column;
                    if first as usize + summarised.len() > MAX_SUMMARY_SITES as usize {
                        return Err(CudaError::Invalid(format!(
                            "a session summarises at most {MAX_SUMMARY_SITES} sites on the \
                             device; select fewer sites"
                        )));
                    }
                    state.next_column += summarised.len() as u32;
                    first
                };
                let inputs: Vec<SummaryInput<'_>> = summarised
                    .iter()
                    .enumerate()
                    .map(|(k, &i)| SummaryInput {
                        src: values[i].src,
                        numel: values[i].numel,
                        dtype: values[i].dtype,
                        column: first + k as u32,
                        ring: histories[i].as_deref().filter(|_| fused[i - base]),
                    })
                    .collect();
                let launch = runtime.with_private_stream(|p| {
                    enqueue_summaries(
                        self.ctx,
                        self.device,
                        &inputs,
                        &self.table,
                        counter,
                        words,
                        self.settings.trigger,
                        p,
                        s,
                    )
                })?;
                runtime.keep(Box::new(launch))?;
                for (k, &i) in summarised.iter().enumerate() {
                    columns[i] = Some(first + k as u32);
                }
            }
        }
        let mut state = lock(&self.shared)?;
        if capture >= state.captures.len() {
            return Err(CudaError::Invalid(format!("no capture {capture}")));
        }
        let mut indices = Vec::with_capacity(values.len());
        for ((summary, history), sample) in columns.into_iter().zip(histories).zip(samples) {
            let index = state.sites.len();
            if summary.is_some() {
                state.captures[capture].summary_sites.push(index);
            }
            state.sites.push(Site {
                capture,
                summary,
                history,
                sample,
            });
            indices.push(index);
        }
        Ok(indices)
    }

    fn take_event(&self) -> Result<CUevent> {
        if let Some(e) = lock(&self.shared)?.free_events.pop() {
            return Ok(e as CUevent);
        }
        let mut event: CUevent = std::ptr::null_mut();
        // SAFETY: valid out-pointer; DISABLE_TIMING (2) makes record and query cheap.
        check("cuEventCreate", unsafe {
            sys::cuEventCreate(&mut event, 2)
        })?;
        Ok(event)
    }

    /// Ends the current point (its work is what `stream` has been given so far) and starts
    /// the next; `dump` asks for the history to land in the run after this point.
    /// Never waits for the device unless the harvester is a whole ring behind.
    pub fn close_point(
        &mut self,
        label: String,
        metadata: String,
        stream: usize,
        dump: Option<String>,
        attachment: Option<Attachment>,
    ) -> Result<u32> {
        let started = Instant::now();
        let close = || -> Result<u32> {
            make_current(self.ctx)?;
            let s = as_stream(stream);
            if let CaptureState::Capturing { .. } = capture_state(s)? {
                return Err(CudaError::Invalid(
                    "a point cannot end while its stream is capturing a graph".into(),
                ));
            }
            self.apply_backpressure()?;
            let number = self.next_point;
            if dump.is_some() {
                // Freeze the history at this point, in stream order after its work.
                // SAFETY: our own 16-byte buffer; 32-bit writes at offsets 8 and 12.
                check("cuMemsetD32Async", unsafe {
                    sys::cuMemsetD32Async(self.words.ptr + FROZEN_OFFSET, number, 1, s)
                })?;
                check("cuMemsetD32Async", unsafe {
                    sys::cuMemsetD32Async(self.words.ptr + FROZEN_OFFSET + 4, 0, 1, s)
                })?;
            }
            let staging = self.stage_samples(number, s)?;
            // The point's records are in the mapped record table once its kernels are done:
            // the event says when.
            let event = self.take_event()?;
            // SAFETY: a live event and torch's stream handle.
            check("cuEventRecord", unsafe { sys::cuEventRecord(event, s) })?;
            // SAFETY: our own buffer; the next point's number, ordered after this point's work.
            check("cuMemsetD32Async", unsafe {
                sys::cuMemsetD32Async(self.words.ptr, number.wrapping_add(1), 1, s)
            })?;
            self.next_point = number.wrapping_add(1);
            let mut state = lock(&self.shared)?;
            if let Some(failure) = &state.failure {
                return Err(CudaError::Invalid(failure.clone()));
            }
            state.pending.push_back(Pending {
                number,
                label,
                metadata,
                event: event as usize,
                dump,
                attachment,
                staging,
            });
            drop(state);
            self.shared.wake.notify_one();
            Ok(number)
        };
        let closed = close();
        self.close_time.0 += 1;
        self.close_time.1 += started.elapsed();
        closed
    }

    /// Enqueues on the model's stream, after the point's work, the copies of the values
    /// sampled at point `number` (and of their graphs' replay counters) into pinned memory.
    fn stage_samples(&self, number: u32, s: sys::CUstream) -> Result<Option<Staging>> {
        // (site, slot address, bytes) due at this point, and (capture, counter address).
        let (due, counters): (Vec<Due>, Vec<(usize, u64)>) = {
            let state = lock(&self.shared)?;
            let due: Vec<Due> = state
                .sites
                .iter()
                .enumerate()
                .filter_map(|(i, site)| {
                    let sample = site.sample.as_ref()?;
                    (number % sample.every == 0).then_some((i, sample.slot.ptr, sample.nbytes))
                })
                .collect();
            let mut captures: Vec<usize> = due
                .iter()
                .map(|&(i, _, _)| state.sites[i].capture)
                .collect();
            captures.sort_unstable();
            captures.dedup();
            let counters = captures
                .iter()
                .map(|&c| (c, state.captures[c].counter))
                .collect();
            (due, counters)
        };
        if due.is_empty() {
            return Ok(None);
        }
        self.wait_for_staging_room()?;
        let mut staging = Staging {
            values: Vec::with_capacity(due.len()),
            counters: Vec::with_capacity(counters.len()),
        };
        for (site, src, nbytes) in due {
            let buffer = self.pinned_buffer(nbytes)?;
            if nbytes > 0 {
                // SAFETY: `buffer` holds `nbytes`; the slot too; the copy is ordered after
                // the point's replays and before the next point's, on the model's stream.
                check("cuMemcpyDtoHAsync_v2", unsafe {
                    sys::cuMemcpyDtoHAsync_v2(buffer.ptr.cast(), src, nbytes, s)
                })?;
            }
            staging.values.push((site, buffer));
        }
        for (capture, counter) in counters {
            let buffer = self.pinned_buffer(8)?;
            // SAFETY: as above, 8 bytes of the graph's counter.
            check("cuMemcpyDtoHAsync_v2", unsafe {
                sys::cuMemcpyDtoHAsync_v2(buffer.ptr.cast(), counter, 8, s)
            })?;
            staging.counters.push((capture, buffer));
        }
        Ok(Some(staging))
    }

    fn pinned_buffer(&self, nbytes: usize) -> Result<PinnedBuffer> {
        let reused = lock(&self.shared)?
            .pinned
            .get_mut(&nbytes)
            .and_then(|free| free.pop());
        match reused {
            Some(buffer) => Ok(buffer),
            None => PinnedBuffer::alloc(nbytes),
        }
    }

    /// Pinned copies wait for the harvester in at most a few points: the device copies
    /// at the bandwidth the host takes them, never piling up host memory.
    fn wait_for_staging_room(&self) -> Result<()> {
        let state = lock(&self.shared)?;
        wait_while(&self.shared, state, |state| {
            state.pending.iter().filter(|p| p.staging.is_some()).count() >= MAX_STAGED_POINTS
        })
        .map(drop)
    }

    /// Waits for the oldest pending point while every row of the record table but one
    /// holds a point in flight. A row is reused `rows` points later: its device copy is
    /// ordered after the earlier point's on the stream, and its host copy is enqueued only
    /// at that later point's close, which this holds until the earlier point is harvested.
    /// (Half a ring held a host running ahead of a busy device to 32 points of 64.)
    fn apply_backpressure(&self) -> Result<()> {
        let limit = (self.table.rows - 1).max(1) as usize;
        let state = lock(&self.shared)?;
        wait_while(&self.shared, state, |state| state.pending.len() >= limit).map(drop)
    }

    /// Waits until every closed point was handed to the sink.
    pub fn flush(&self) -> Result<()> {
        let mut state = lock(&self.shared)?;
        state.flushing = true;
        self.shared.wake.notify_one();
        let mut state = wait_while(&self.shared, state, |state| !state.pending.is_empty())?;
        state.flushing = false;
        match &state.failure {
            Some(f) => Err(CudaError::Invalid(f.clone())),
            None => Ok(()),
        }
    }

    /// (points delivered, history dumps)
    pub fn counts(&self) -> (u64, u64) {
        lock(&self.shared)
            .map(|s| (s.delivered, s.dumps))
            .unwrap_or((0, 0))
    }

    /// (points closed, host time spent closing them).
    pub fn close_time(&self) -> (u64, Duration) {
        self.close_time
    }

    /// The number the next closed point gets.
    pub fn next_point(&self) -> u32 {
        self.next_point
    }

    /// Lets the history record again after a trigger froze it (the next trigger lands a new
    /// history).
    pub fn rearm(&self) -> Result<()> {
        make_current(self.ctx)?;
        self.flush()?;
        arm(&self.words, &self.private)?;
        lock(&self.shared)?.frozen = false;
        Ok(())
    }

    /// Stops the harvester after delivering what is pending.
    pub fn close(&mut self) -> Result<()> {
        let flushed = self.flush();
        if let Ok(mut state) = lock(&self.shared) {
            state.stop = true;
        }
        self.shared.wake.notify_one();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
        flushed
    }
}

impl Drop for DeviceRecorder {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

fn arm(words: &DeviceBuffer, private: &PrivateStream) -> Result<()> {
    // A capture may be under way on a torch stream (the recorder starts inside one).
    let _relaxed = RelaxedCapture::enter()?;
    // SAFETY: our own buffer; frozen_at = u64::MAX is "armed".
    check("cuMemsetD32Async", unsafe {
        sys::cuMemsetD32Async(words.ptr + FROZEN_OFFSET, ARMED, 2, private.handle)
    })?;
    private.synchronize()
}
