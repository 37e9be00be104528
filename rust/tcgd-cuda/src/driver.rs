//! Checked calls into the CUDA driver, loaded at run time.
//!
//! cudarc's dynamic loader panics on the first call when libcuda is absent, so every entry
//! into this crate goes through [`ensure_driver`] first, which asks whether the library is
//! there without touching it.

use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::{Mutex, OnceLock};

use cudarc::driver::sys::{
    self, CUcontext, CUresult, CUstream, CUstreamCaptureMode, CUstreamCaptureStatus,
};

use crate::error::{CudaError, Result};

/// Turns a driver status into a typed error naming the call.
pub fn check(call: &'static str, status: CUresult) -> Result<()> {
    if status == CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut name: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorName writes a pointer to a static string (or leaves it null).
    let looked_up = unsafe { sys::cuGetErrorName(status, &mut name) };
    let name = if looked_up == CUresult::CUDA_SUCCESS && !name.is_null() {
        // SAFETY: non-null pointers from cuGetErrorName are NUL-terminated static strings.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    } else {
        format!("{status:?}")
    };
    Err(CudaError::Driver {
        call,
        code: status as u32,
        name,
    })
}

/// Loads the driver and initialises it once; an error (not a panic) when there is none.
pub fn ensure_driver() -> Result<()> {
    static READY: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        // SAFETY: only probes for the library by name; loads nothing else.
        if !unsafe { sys::is_culib_present() } {
            return Err("libcuda.so was not found: this machine has no NVIDIA driver".into());
        }
        // SAFETY: cuInit(0) is always valid to call, repeatedly.
        check("cuInit", unsafe { sys::cuInit(0) }).map_err(|e| e.to_string())
    });
    ready
        .clone()
        .map_err(|reason| CudaError::NoDriver { reason })
}

/// The primary context of a device, retained once per process and kept: torch uses the
/// same context, so work we enqueue on torch's streams is in the right context.
pub fn primary_context(device: i32) -> Result<CUcontext> {
    ensure_driver()?;
    static CONTEXTS: OnceLock<Mutex<HashMap<i32, usize>>> = OnceLock::new();
    let map = CONTEXTS.get_or_init(Default::default);
    let mut map = map.lock().map_err(|_| CudaError::Poisoned)?;
    if let Some(&ctx) = map.get(&device) {
        return Ok(ctx as CUcontext);
    }
    let mut dev = 0;
    // SAFETY: out-pointers are valid locals.
    check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut dev, device) })?;
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: as above; the retained context is never released (process lifetime).
    check("cuDevicePrimaryCtxRetain", unsafe {
        sys::cuDevicePrimaryCtxRetain(&mut ctx, dev)
    })?;
    map.insert(device, ctx as usize);
    Ok(ctx)
}

/// Makes `ctx` current on this thread. Torch's threads already have the primary context
/// current; this covers threads that never touched CUDA through torch.
pub fn make_current(ctx: CUcontext) -> Result<()> {
    // SAFETY: `ctx` is a retained primary context.
    check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx) })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureState {
    Idle,
    Capturing { id: u64, graph: usize },
    Invalidated,
}

/// Whether `stream` is capturing, and into which graph.
pub fn capture_state(stream: CUstream) -> Result<CaptureState> {
    let mut status = CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut id: sys::cuuint64_t = 0;
    let mut graph: sys::CUgraph = std::ptr::null_mut();
    let mut deps: *const sys::CUgraphNode = std::ptr::null();
    let mut ndeps: usize = 0;
    // SAFETY: all out-pointers are valid locals; `stream` is a live stream handle from
    // torch (or null, the legacy default stream).
    check("cuStreamGetCaptureInfo_v2", unsafe {
        sys::cuStreamGetCaptureInfo_v2(
            stream,
            &mut status,
            &mut id,
            &mut graph,
            &mut deps,
            &mut ndeps,
        )
    })?;
    Ok(match status {
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE => CaptureState::Idle,
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE => CaptureState::Capturing {
            id,
            graph: graph as usize,
        },
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_INVALIDATED => CaptureState::Invalidated,
    })
}

/// Switches this thread to relaxed capture mode while alive.
///
/// `cuMemAlloc` (and module loading, pinned allocation) on a thread whose stream captures
/// in global mode fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED *and invalidates the
/// capture*. Relaxed mode permits them; they are not recorded into the graph.
pub struct RelaxedCapture {
    previous: CUstreamCaptureMode,
}

impl RelaxedCapture {
    pub fn enter() -> Result<RelaxedCapture> {
        let mut mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: exchanges this thread's mode; the previous one is written to `mode`.
        check("cuThreadExchangeStreamCaptureMode", unsafe {
            sys::cuThreadExchangeStreamCaptureMode(&mut mode)
        })?;
        Ok(RelaxedCapture { previous: mode })
    }
}

impl Drop for RelaxedCapture {
    fn drop(&mut self) {
        let mut mode = self.previous;
        // SAFETY: restores the mode saved by `enter`; a failure leaves relaxed mode, which
        // is harmless, so the status is not checked.
        unsafe {
            sys::cuThreadExchangeStreamCaptureMode(&mut mode);
        }
    }
}

pub fn as_stream(handle: usize) -> CUstream {
    handle as CUstream
}
