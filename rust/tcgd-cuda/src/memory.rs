//! Device and pinned host buffers owned by the runtime, with process-wide accounting so the
//! memory a probe holds can be reported (and a leak test can see zero).

use std::sync::atomic::{AtomicU64, Ordering};

use cudarc::driver::sys::{self, CUdeviceptr};

use crate::driver::{check, RelaxedCapture};
use crate::error::Result;

static LIVE_DEVICE_BYTES: AtomicU64 = AtomicU64::new(0);
static LIVE_PINNED_BYTES: AtomicU64 = AtomicU64::new(0);

/// Device bytes held by probe runtimes in this process (slots and counters).
pub fn live_device_bytes() -> u64 {
    LIVE_DEVICE_BYTES.load(Ordering::Relaxed)
}

/// Pinned host bytes held for Print and Check actions.
pub fn live_pinned_bytes() -> u64 {
    LIVE_PINNED_BYTES.load(Ordering::Relaxed)
}

/// A device allocation. Freed on drop, which must happen on an ordinary thread with the
/// owning context current (never inside a CUDA callback).
#[derive(Debug)]
pub struct DeviceBuffer {
    pub ptr: CUdeviceptr,
    pub nbytes: usize,
}

impl DeviceBuffer {
    /// Allocates at least one byte (empty tensors still get a distinct address). Safe to
    /// call while the thread's stream is capturing.
    pub fn alloc(nbytes: usize) -> Result<DeviceBuffer> {
        let _relaxed = RelaxedCapture::enter()?;
        let mut ptr: CUdeviceptr = 0;
        let size = nbytes.max(1);
        // SAFETY: `ptr` is a valid out-pointer; the caller made the context current.
        check("cuMemAlloc_v2", unsafe {
            sys::cuMemAlloc_v2(&mut ptr, size)
        })?;
        LIVE_DEVICE_BYTES.fetch_add(size as u64, Ordering::Relaxed);
        Ok(DeviceBuffer { ptr, nbytes })
    }

    /// Sets every byte to zero and waits for it, on the runtime's private stream (which
    /// never captures, so this is safe while another stream captures).
    pub fn zero(&self, stream: &PrivateStream) -> Result<()> {
        let _relaxed = RelaxedCapture::enter()?;
        // SAFETY: `ptr` addresses at least `max(nbytes, 1)` bytes we own.
        check("cuMemsetD8Async", unsafe {
            sys::cuMemsetD8Async(self.ptr, 0, self.nbytes.max(1), stream.handle)
        })?;
        stream.synchronize()
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from cuMemAlloc and is freed once. Errors cannot be reported
        // from a destructor; a failed free leaks rather than crashing.
        let status = unsafe { sys::cuMemFree_v2(self.ptr) };
        if status == sys::CUresult::CUDA_SUCCESS {
            LIVE_DEVICE_BYTES.fetch_sub(self.nbytes.max(1) as u64, Ordering::Relaxed);
        }
    }
}

/// Page-locked host memory that device-to-host copies in a graph write into and host
/// functions read from.
#[derive(Debug)]
pub struct PinnedBuffer {
    pub ptr: *mut u8,
    pub nbytes: usize,
}

// SAFETY: the buffer is plain host memory; who writes it (the copy engine) and who reads it
// (a host function ordered after the copy on the same stream) is decided by stream order,
// not by which thread holds the handle.
unsafe impl Send for PinnedBuffer {}
// SAFETY: as above.
unsafe impl Sync for PinnedBuffer {}

/// `cuMemHostAlloc` flag: the allocation is mapped into the device's address space.
const CU_MEMHOSTALLOC_DEVICEMAP: u32 = 0x02;

impl PinnedBuffer {
    pub fn alloc(nbytes: usize) -> Result<PinnedBuffer> {
        Self::alloc_with(nbytes, 0)
    }

    /// Pinned host memory that kernels write directly (zero-copy), and its device
    /// address: for small records the host reads once their kernel is known complete,
    /// so that no copy needs enqueueing per record.
    pub fn alloc_mapped(nbytes: usize) -> Result<(PinnedBuffer, u64)> {
        let buffer = Self::alloc_with(nbytes, CU_MEMHOSTALLOC_DEVICEMAP)?;
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `buffer.ptr` was allocated with DEVICEMAP in the current context.
        check("cuMemHostGetDevicePointer_v2", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut device, buffer.ptr.cast(), 0)
        })?;
        Ok((buffer, device))
    }

    fn alloc_with(nbytes: usize, flags: u32) -> Result<PinnedBuffer> {
        let _relaxed = RelaxedCapture::enter()?;
        let mut ptr: *mut std::ffi::c_void = std::ptr::null_mut();
        let size = nbytes.max(1);
        // SAFETY: `ptr` is a valid out-pointer.
        check("cuMemHostAlloc", unsafe {
            sys::cuMemHostAlloc(&mut ptr, size, flags)
        })?;
        // SAFETY: fresh allocation of `size` bytes; zeroed so a read before the first copy
        // sees zeros, not garbage.
        unsafe { std::ptr::write_bytes(ptr as *mut u8, 0, size) };
        LIVE_PINNED_BYTES.fetch_add(size as u64, Ordering::Relaxed);
        Ok(PinnedBuffer {
            ptr: ptr as *mut u8,
            nbytes,
        })
    }

    /// The bytes as they are now.
    ///
    /// # Safety
    /// No copy into the buffer may be in flight (the caller orders this after it).
    pub unsafe fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` addresses `nbytes` initialised bytes (zeroed at allocation).
        unsafe { std::slice::from_raw_parts(self.ptr, self.nbytes) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemHostAlloc, freed once.
        let status = unsafe { sys::cuMemFreeHost(self.ptr as *mut std::ffi::c_void) };
        if status == sys::CUresult::CUDA_SUCCESS {
            LIVE_PINNED_BYTES.fetch_sub(self.nbytes.max(1) as u64, Ordering::Relaxed);
        }
    }
}

/// A non-blocking stream of the runtime's own, for its synchronous housekeeping (zeroing,
/// reading slots back). Non-blocking: it never waits on, nor is waited on by, the legacy
/// default stream, so using it cannot disturb a capture on a torch stream.
#[derive(Debug)]
pub struct PrivateStream {
    pub handle: sys::CUstream,
}

// SAFETY: a stream handle may be used from any thread.
unsafe impl Send for PrivateStream {}
// SAFETY: as above.
unsafe impl Sync for PrivateStream {}

impl PrivateStream {
    pub fn new() -> Result<PrivateStream> {
        let _relaxed = RelaxedCapture::enter()?;
        let mut handle: sys::CUstream = std::ptr::null_mut();
        // SAFETY: `handle` is a valid out-pointer; flag 1 is CU_STREAM_NON_BLOCKING.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut handle, 1)
        })?;
        Ok(PrivateStream { handle })
    }

    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: our own live stream.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(self.handle)
        })
    }

    /// Copies `out.len()` bytes from `src` into `out` and waits for it.
    pub fn read(&self, src: CUdeviceptr, out: &mut [u8]) -> Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: `out` is writable for its length; `src` is a device range of at least
        // that length owned by the caller; we wait before `out` is used.
        check("cuMemcpyDtoHAsync_v2", unsafe {
            sys::cuMemcpyDtoHAsync_v2(out.as_mut_ptr().cast(), src, out.len(), self.handle)
        })?;
        self.synchronize()
    }
}

impl Drop for PrivateStream {
    fn drop(&mut self) {
        // SAFETY: destroyed once; pending work completes first (driver semantics).
        unsafe { sys::cuStreamDestroy_v2(self.handle) };
    }
}
