//! Small device kernels, written as PTX and JIT-compiled by the driver for whatever GPU is
//! present: no nvcc at build time, no NVRTC at run time (torch's CUDA 13 wheels keep
//! libnvrtc off the loader path).

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

use cudarc::driver::sys::{self, CUcontext, CUdeviceptr, CUfunction, CUmodule, CUstream};

use crate::driver::{check, RelaxedCapture};
use crate::error::{CudaError, Result};

/// `tcgd_count_replay(u64* counter)`: one thread adds 1. Captured once per graph, so the
/// counter advances once per replay.
const COUNTER_PTX: &str = "\
.version 7.0
.target sm_50
.address_size 64

.visible .entry tcgd_count_replay(.param .u64 counter)
{
    .reg .u64 %rd<4>;
    ld.param.u64 %rd1, [counter];
    cvta.to.global.u64 %rd2, %rd1;
    atom.global.add.u64 %rd3, [%rd2], 1;
    ret;
}
\0";

const COUNTER_ENTRY: &[u8] = b"tcgd_count_replay\0";

fn counter_function(ctx: CUcontext) -> Result<CUfunction> {
    static FUNCTIONS: OnceLock<Mutex<HashMap<usize, usize>>> = OnceLock::new();
    let map = FUNCTIONS.get_or_init(Default::default);
    let mut map = map.lock().map_err(|_| CudaError::Poisoned)?;
    if let Some(&f) = map.get(&(ctx as usize)) {
        return Ok(f as CUfunction);
    }
    // Loading a module during a global-mode capture would invalidate it.
    let _relaxed = RelaxedCapture::enter()?;
    let mut module: CUmodule = std::ptr::null_mut();
    // SAFETY: COUNTER_PTX is NUL-terminated PTX text; `module` is a valid out-pointer.
    check("cuModuleLoadData", unsafe {
        sys::cuModuleLoadData(&mut module, COUNTER_PTX.as_ptr() as *const c_void)
    })?;
    let mut function: CUfunction = std::ptr::null_mut();
    // SAFETY: `module` was just loaded; the entry name is NUL-terminated.
    check("cuModuleGetFunction", unsafe {
        sys::cuModuleGetFunction(&mut function, module, COUNTER_ENTRY.as_ptr().cast())
    })?;
    // The module stays loaded for the life of the process: captured graphs refer to it.
    map.insert(ctx as usize, function as usize);
    Ok(function)
}

/// Enqueues (or, during capture, records) one increment of `counter` on `stream`.
pub fn enqueue_counter_increment(
    ctx: CUcontext,
    counter: CUdeviceptr,
    stream: CUstream,
) -> Result<()> {
    let function = counter_function(ctx)?;
    let mut arg: CUdeviceptr = counter;
    let mut params = [&mut arg as *mut CUdeviceptr as *mut c_void];
    // SAFETY: one parameter of the kernel's declared type (u64 pointer); the driver copies
    // the parameter values before returning.
    check("cuLaunchKernel", unsafe {
        sys::cuLaunchKernel(
            function,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            stream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    })
}
