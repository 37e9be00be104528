//! One probe's device-side state and the work it enqueues.
//!
//! Lifetime: everything a captured graph refers to (slots, the counter, the pinned buffers
//! and host-function state) lives in one `Resources`, shared by the probe and, through a
//! CUDA user object, by the graph it was captured into. Closing the probe drops one
//! reference; destroying the graph drops the other. The user object's destructor runs on a
//! driver thread where CUDA calls are forbidden, so it only queues the reference. Closing a
//! probe queues its reference the same way. Freeing device memory while any stream
//! captures in global mode would invalidate that capture, so nothing here frees on its
//! own: the caller drains the queue with `release_deferred()` when it knows no capture is
//! under way.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{self, CUcontext, CUstream};

use crate::driver::{as_stream, capture_state, check, make_current, primary_context, CaptureState};
use crate::error::{CudaError, Result};
use crate::host_actions::{
    run_host_action, ActionKind, CheckFailure, CheckLog, CheckSpec, HostAction, PrintSpec,
};
use crate::kernels::enqueue_counter_increment;
use crate::memory::{DeviceBuffer, PinnedBuffer, PrivateStream};
use crate::summary::{
    enqueue_history_copies, CopyInput, HistoryContents, HistoryRing, SessionWords,
    MAX_SITES_PER_LAUNCH,
};

struct Resources {
    ctx: usize,
    stream: PrivateStream,
    counter: DeviceBuffer,
    slots: Mutex<Vec<DeviceBuffer>>,
    /// Boxed so the addresses handed to host functions never move when the vector grows.
    #[allow(clippy::vec_box)]
    actions: Mutex<Vec<Box<HostAction>>>,
    /// Whatever else a captured launch refers to on every replay (summary scratch, rings),
    /// kept for as long as the graph can replay.
    kept: Mutex<Vec<Box<dyn std::any::Any + Send + Sync>>>,
    /// The history rings of `RecordAction(history=N)`, one per captured site.
    rings: Mutex<Vec<HistoryRing>>,
    /// The replay the rings froze at (u64 max: armed). Host memory the copy kernel reads
    /// (pinned memory is device-addressable at the same address under unified
    /// addressing), so a failing check - a host function - freezes the rings without any
    /// CUDA call: the next replay's copies see it.
    freeze: PinnedBuffer,
}

// SAFETY: the raw handles inside (context, device addresses, pinned pointers) are valid
// from any thread; mutation goes through the mutexes, and host functions only read their
// own action's buffers in stream order.
unsafe impl Send for Resources {}
// SAFETY: as above.
unsafe impl Sync for Resources {}

impl Drop for Resources {
    fn drop(&mut self) {
        // The buffers are freed right after this body; their context must be current.
        let _ = make_current(self.ctx as CUcontext);
    }
}

/// References released by graphs, waiting for an ordinary thread to free them.
static RELEASED: Mutex<Vec<Arc<Resources>>> = Mutex::new(Vec::new());

unsafe extern "C" fn release_from_graph(user: *mut c_void) {
    // SAFETY: `user` is the pointer made by Arc::into_raw in `bind_capture`, handed back
    // exactly once by the driver.
    let resources = unsafe { Arc::from_raw(user as *const Resources) };
    match RELEASED.lock() {
        Ok(mut queue) => queue.push(resources),
        // A poisoned queue: leak rather than free on this thread.
        Err(_) => std::mem::forget(resources),
    }
}

/// Frees the resources released by graphs and closed probes since the last call; returns
/// how many. Call it only when no stream captures (freeing would invalidate a capture).
pub fn release_deferred() -> usize {
    let released = match RELEASED.lock() {
        Ok(mut queue) => std::mem::take(&mut *queue),
        Err(_) => return 0,
    };
    let count = released.len();
    drop(released);
    count
}

pub struct ProbeRuntime {
    device: i32,
    ctx: CUcontext,
    resources: Option<Arc<Resources>>,
    bound: Option<(u64, usize)>,
    checks: Arc<CheckLog>,
}

// SAFETY: `ctx` is a process-lifetime primary context handle, valid on any thread.
unsafe impl Send for ProbeRuntime {}
// SAFETY: as above; all mutation needs `&mut self` or goes through `Resources`' mutexes.
unsafe impl Sync for ProbeRuntime {}

impl ProbeRuntime {
    /// A runtime on `device`, with its replay counter allocated and zeroed. Safe to call
    /// during a capture (allocation switches to relaxed capture mode).
    pub fn new(device: i32) -> Result<ProbeRuntime> {
        let ctx = primary_context(device)?;
        make_current(ctx)?;
        let stream = PrivateStream::new()?;
        let counter = DeviceBuffer::alloc(8)?;
        counter.zero(&stream)?;
        let freeze = PinnedBuffer::alloc(8)?;
        // SAFETY: our fresh 8-byte pinned buffer; no copy or kernel refers to it yet.
        unsafe { (freeze.ptr as *mut u64).write(u64::MAX) };
        let checks = CheckLog::default();
        checks
            .freeze
            .store(freeze.ptr as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(ProbeRuntime {
            device,
            ctx,
            resources: Some(Arc::new(Resources {
                ctx: ctx as usize,
                stream,
                counter,
                slots: Mutex::new(Vec::new()),
                actions: Mutex::new(Vec::new()),
                kept: Mutex::new(Vec::new()),
                rings: Mutex::new(Vec::new()),
                freeze,
            })),
            bound: None,
            checks: Arc::new(checks),
        })
    }

    pub fn device(&self) -> i32 {
        self.device
    }

    fn resources(&self) -> Result<&Arc<Resources>> {
        make_current(self.ctx)?;
        self.resources.as_ref().ok_or(CudaError::Closed)
    }

    pub fn capture_state(&self, stream: usize) -> Result<CaptureState> {
        self.resources()?;
        capture_state(as_stream(stream))
    }

    /// Called on every probe call made while `stream` captures. The first call ties the
    /// probe's resources to the graph being captured and records the replay-counter
    /// increment; later calls of the same capture do nothing; a call from another capture
    /// is an error (a probe binds to one capture). Returns whether this call bound.
    pub fn bind_capture(&mut self, stream: usize) -> Result<bool> {
        let resources = self.resources()?.clone();
        let (id, graph) = match capture_state(as_stream(stream))? {
            CaptureState::Capturing { id, graph } => (id, graph),
            CaptureState::Invalidated => return Err(CudaError::CaptureInvalidated),
            CaptureState::Idle => {
                return Err(CudaError::Invalid(
                    "bind_capture outside a capture: the stream is not capturing".into(),
                ))
            }
        };
        match self.bound {
            Some((bound_id, _)) if bound_id == id => return Ok(false),
            Some((_, bound_graph)) => return Err(CudaError::SecondCapture { bound: bound_graph }),
            None => {}
        }
        let raw = Arc::into_raw(resources) as *mut c_void;
        let mut object: sys::CUuserObject = std::ptr::null_mut();
        // SAFETY: `raw` is an owned Arc reference; the destructor takes it back exactly once.
        let created = check("cuUserObjectCreate", unsafe {
            sys::cuUserObjectCreate(
                &mut object,
                raw,
                Some(release_from_graph),
                1,
                sys::CUuserObject_flags::CU_USER_OBJECT_NO_DESTRUCTOR_SYNC as u32,
            )
        });
        if let Err(e) = created {
            // SAFETY: the driver did not take the reference; reclaim it.
            drop(unsafe { Arc::from_raw(raw as *const Resources) });
            return Err(e);
        }
        // SAFETY: `graph` is the graph being captured (from the capture info); MOVE hands
        // our one reference on `object` to it.
        let retained = check("cuGraphRetainUserObject", unsafe {
            sys::cuGraphRetainUserObject(
                graph as sys::CUgraph,
                object,
                1,
                sys::CUuserObjectRetain_flags::CU_GRAPH_USER_OBJECT_MOVE as u32,
            )
        });
        if let Err(e) = retained {
            // SAFETY: we still own the reference; releasing it runs the destructor, which
            // queues the Arc for release.
            unsafe { sys::cuUserObjectRelease(object, 1) };
            return Err(e);
        }
        let counter = self.resources()?.counter.ptr;
        enqueue_counter_increment(self.ctx, counter, as_stream(stream))?;
        self.bound = Some((id, graph));
        Ok(true)
    }

    pub fn is_bound(&self) -> bool {
        self.bound.is_some()
    }

    /// The device address of the replay counter (kernels captured into the same graph
    /// read it).
    pub fn counter_ptr(&self) -> Result<u64> {
        Ok(self.resources()?.counter.ptr)
    }

    pub fn context(&self) -> CUcontext {
        self.ctx
    }

    /// Keeps `item` alive as long as the probe or any graph that captured it.
    pub fn keep(&self, item: Box<dyn std::any::Any + Send + Sync>) -> Result<()> {
        let resources = self.resources()?;
        resources
            .kept
            .lock()
            .map_err(|_| CudaError::Poisoned)?
            .push(item);
        Ok(())
    }

    /// Runs `f` with the runtime's private (never capturing) stream.
    pub fn with_private_stream<T>(&self, f: impl FnOnce(&PrivateStream) -> Result<T>) -> Result<T> {
        f(&self.resources()?.stream)
    }

    /// A new device slot of `nbytes`; returns its index.
    pub fn add_slot(&self, nbytes: usize) -> Result<usize> {
        let resources = self.resources()?;
        let buffer = DeviceBuffer::alloc(nbytes)?;
        let mut slots = resources.slots.lock().map_err(|_| CudaError::Poisoned)?;
        slots.push(buffer);
        Ok(slots.len() - 1)
    }

    fn slot(&self, slot: usize) -> Result<(u64, usize)> {
        let slots = self
            .resources()?
            .slots
            .lock()
            .map_err(|_| CudaError::Poisoned)?;
        slots
            .get(slot)
            .map(|b| (b.ptr, b.nbytes))
            .ok_or(CudaError::NoSuchSlot { slot })
    }

    /// Enqueues (or records) a device-to-device copy of `nbytes` from `src` into `slot`.
    pub fn copy_into_slot(
        &self,
        slot: usize,
        src: u64,
        nbytes: usize,
        stream: usize,
    ) -> Result<()> {
        let (dst, size) = self.slot(slot)?;
        if nbytes != size {
            return Err(CudaError::Invalid(format!(
                "slot {slot} holds {size} bytes, the value has {nbytes}"
            )));
        }
        if nbytes == 0 {
            return Ok(());
        }
        // SAFETY: `dst` is our allocation of `nbytes`; `src` is the device address of a
        // live tensor of `nbytes` contiguous bytes, kept alive by the caller until the copy
        // ran (torch's stream semantics for the probed tensor).
        check("cuMemcpyDtoDAsync_v2", unsafe {
            sys::cuMemcpyDtoDAsync_v2(dst, src, nbytes, as_stream(stream))
        })
    }

    /// Enqueues (or records) kernel launches copying each `(slot, src)` value into its
    /// slot, `MAX_SITES_PER_LAUNCH` values per launch: for many small values, one graph
    /// node per launch instead of one memcpy node each, with the same bytes landing in the
    /// same slots.
    pub fn copy_into_slots(&self, copies: &[(usize, u64)], stream: usize) -> Result<()> {
        let mut resolved = Vec::with_capacity(copies.len());
        for &(slot, src) in copies {
            let (dst, nbytes) = self.slot(slot)?;
            if nbytes > 0 {
                resolved.push((src, dst, nbytes as u64));
            }
        }
        if resolved.is_empty() {
            return Ok(());
        }
        let counter = self.resources()?.counter.ptr;
        for chunk in resolved.chunks(MAX_SITES_PER_LAUNCH) {
            crate::summary::enqueue_slot_copies(
                self.ctx,
                self.device,
                chunk,
                counter,
                as_stream(stream),
            )?;
        }
        Ok(())
    }

    /// A history ring of `depth` values of `slot`'s size; returns its index. Every ring of a
    /// probe has the same depth.
    pub fn add_ring(&self, slot: usize, depth: u64) -> Result<usize> {
        let resources = self.resources()?;
        let (_, nbytes) = self.slot(slot)?;
        let ring = HistoryRing::new(nbytes, depth, &resources.stream)?;
        let mut rings = resources.rings.lock().map_err(|_| CudaError::Poisoned)?;
        rings.push(ring);
        Ok(rings.len() - 1)
    }

    /// Enqueues (or records) launches copying each `(ring, slot)` slot's value into slot
    /// `replay % depth` of its ring, tagged with the replay, unless the rings are frozen at
    /// an earlier replay.
    pub fn copy_slots_into_rings(&self, copies: &[(usize, usize)], stream: usize) -> Result<()> {
        let resources = self.resources()?;
        let words = SessionWords {
            point: resources.counter.ptr,
            frozen_at: resources.freeze.ptr as u64,
        };
        let slots = resources.slots.lock().map_err(|_| CudaError::Poisoned)?;
        let rings = resources.rings.lock().map_err(|_| CudaError::Poisoned)?;
        let mut inputs = Vec::with_capacity(copies.len());
        for &(ring, slot) in copies {
            let ring = rings
                .get(ring)
                .ok_or_else(|| CudaError::Invalid(format!("no history ring {ring}")))?;
            let src = slots.get(slot).ok_or(CudaError::NoSuchSlot { slot })?;
            if src.nbytes != ring.nbytes {
                return Err(CudaError::Invalid(format!(
                    "slot {slot} holds {} bytes, its ring {}",
                    src.nbytes, ring.nbytes
                )));
            }
            if ring.nbytes > 0 {
                inputs.push(CopyInput { src: src.ptr, ring });
            }
        }
        for chunk in inputs.chunks(MAX_SITES_PER_LAUNCH) {
            enqueue_history_copies(
                self.ctx,
                self.device,
                chunk,
                resources.counter.ptr,
                words,
                as_stream(stream),
            )?;
        }
        Ok(())
    }

    /// A ring's values and (replay, replay) tags (the caller synchronises with the replays
    /// first).
    pub fn read_ring(&self, ring: usize) -> Result<HistoryContents> {
        let resources = self.resources()?;
        let rings = resources.rings.lock().map_err(|_| CudaError::Poisoned)?;
        rings
            .get(ring)
            .ok_or_else(|| CudaError::Invalid(format!("no history ring {ring}")))?
            .read(&resources.stream)
    }

    fn freeze_word(&self) -> Result<&AtomicU64> {
        let resources = self.resources()?;
        // SAFETY: the 8-byte aligned pinned word lives as long as `resources`; the host
        // writes it only atomically, the device only reads it.
        Ok(unsafe { AtomicU64::from_ptr(resources.freeze.ptr as *mut u64) })
    }

    /// The replay the history rings froze at, if frozen (a failed check, or
    /// `freeze_history`).
    pub fn history_frozen_at(&self) -> Result<Option<u64>> {
        let at = self.freeze_word()?.load(Ordering::SeqCst);
        Ok((at != u64::MAX).then_some(at))
    }

    /// Freezes the rings at replay `at` (an earlier freeze stands).
    pub fn freeze_history(&self, at: u64) -> Result<()> {
        self.freeze_word()?.fetch_min(at, Ordering::SeqCst);
        Ok(())
    }

    /// Lets the rings record again.
    pub fn rearm_history(&self) -> Result<()> {
        self.freeze_word()?.store(u64::MAX, Ordering::SeqCst);
        Ok(())
    }

    /// Records the host action's copies and launch on `stream`.
    fn launch(&self, resources: &Resources, action: &HostAction, stream: usize) -> Result<()> {
        let (src, nbytes) = self.slot(action.slot)?;
        let s: CUstream = as_stream(stream);
        // SAFETY: destinations are the action's pinned buffers of the given sizes; sources
        // are our slot and counter. The host function reads them after both copies (stream
        // order).
        unsafe {
            if nbytes > 0 {
                check(
                    "cuMemcpyDtoHAsync_v2",
                    sys::cuMemcpyDtoHAsync_v2(action.value.ptr.cast(), src, nbytes, s),
                )?;
            }
            check(
                "cuMemcpyDtoHAsync_v2",
                sys::cuMemcpyDtoHAsync_v2(action.replay.ptr.cast(), resources.counter.ptr, 8, s),
            )?;
        }
        let user = action as *const HostAction as *mut c_void;
        // SAFETY: `user` points into a Box owned by `resources`, which outlives every launch
        // of this host function (see the module comment).
        check("cuLaunchHostFunc", unsafe {
            sys::cuLaunchHostFunc(s, Some(run_host_action), user)
        })
    }

    fn enqueue_host_action(&self, slot: usize, kind: ActionKind, stream: usize) -> Result<usize> {
        let resources = self.resources()?;
        let (_, nbytes) = self.slot(slot)?;
        let action = Box::new(HostAction {
            kind,
            slot,
            value: PinnedBuffer::alloc(nbytes)?,
            replay: PinnedBuffer::alloc(8)?,
        });
        self.launch(resources, &action, stream)?;
        let mut actions = resources.actions.lock().map_err(|_| CudaError::Poisoned)?;
        actions.push(action);
        Ok(actions.len() - 1)
    }

    /// Launches an existing action again (eager probes re-sample the same slot in place,
    /// so their actions are registered once and relaunched on every call).
    pub fn relaunch_action(&self, action: usize, stream: usize) -> Result<()> {
        let resources = self.resources()?;
        let actions = resources.actions.lock().map_err(|_| CudaError::Poisoned)?;
        let action = actions
            .get(action)
            .ok_or_else(|| CudaError::Invalid(format!("no action {action}")))?;
        self.launch(resources, action, stream)
    }

    /// Registers and launches a Print action; returns its index for `relaunch_action`.
    pub fn enqueue_print(&self, slot: usize, spec: PrintSpec, stream: usize) -> Result<usize> {
        self.enqueue_host_action(slot, ActionKind::Print(spec), stream)
    }

    /// Registers and launches a Check action; returns its index for `relaunch_action`.
    pub fn enqueue_check(&self, slot: usize, spec: CheckSpec, stream: usize) -> Result<usize> {
        let (_, nbytes) = self.slot(slot)?;
        let numel = nbytes / spec.dtype.itemsize().max(1);
        if spec.expected.len() != numel * spec.expected_dtype.itemsize() {
            return Err(CudaError::Invalid(format!(
                "check '{}': expected value has {} bytes of {}, the observed value {numel} elements",
                spec.name,
                spec.expected.len(),
                spec.expected_dtype
            )));
        }
        let log = self.checks.clone();
        self.enqueue_host_action(slot, ActionKind::Check(spec, log), stream)
    }

    /// The replay counter (the caller synchronises with the replays first).
    pub fn replay_count(&self) -> Result<u64> {
        let resources = self.resources()?;
        let mut bytes = [0u8; 8];
        resources.stream.read(resources.counter.ptr, &mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// A slot's bytes (the caller synchronises with the replays first).
    pub fn read_slot(&self, slot: usize) -> Result<Vec<u8>> {
        let (src, nbytes) = self.slot(slot)?;
        let mut out = vec![0u8; nbytes];
        self.resources()?.stream.read(src, &mut out)?;
        Ok(out)
    }

    /// (checks evaluated, checks failed, first failure).
    pub fn check_status(&self) -> (u64, u64, Option<CheckFailure>) {
        let first = self.checks.first.lock().ok().and_then(|f| f.clone());
        (
            self.checks.evaluations.load(Ordering::Relaxed),
            self.checks.failures.load(Ordering::Relaxed),
            first,
        )
    }

    /// Device bytes of this probe's slots.
    pub fn slot_bytes(&self) -> u64 {
        self.resources
            .as_ref()
            .and_then(|r| {
                r.slots
                    .lock()
                    .ok()
                    .map(|s| s.iter().map(|b| b.nbytes as u64).sum())
            })
            .unwrap_or(0)
    }

    /// Gives up the probe's reference (queued for `release_deferred`); a graph that
    /// captured the probe keeps its own.
    pub fn close(&mut self) {
        if let Some(resources) = self.resources.take() {
            match RELEASED.lock() {
                Ok(mut queue) => queue.push(resources),
                Err(_) => std::mem::forget(resources),
            }
        }
    }

    pub fn is_closed(&self) -> bool {
        self.resources.is_none()
    }
}

impl Drop for ProbeRuntime {
    fn drop(&mut self) {
        self.close();
    }
}
