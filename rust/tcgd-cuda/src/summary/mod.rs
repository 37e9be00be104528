//! On-device summaries and history rings: the host side of `kernels.cu`.
//!
//! Summary kernels captured into a session's graphs write one 112-byte [`DeviceRecord`]
//! per site and replay into the session's [`RecordTable`]: a row per point in flight
//! (point number modulo the rows), a column per site, in pinned host memory mapped into
//! the device: closing a point enqueues no copy, and the harvester reads the row once the
//! point's event completed. A history site
//! owns a device ring of its last `depth` values, filled by a copy kernel that stops once a
//! trigger froze the history. Both kernels take many sites per launch.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

use cudarc::driver::sys::{self, CUcontext, CUdevice_attribute, CUfunction, CUmodule, CUstream};
use tcgd_tensor::{float8_table, DType};

use crate::driver::{check, RelaxedCapture};
use crate::error::{CudaError, Result};
use crate::memory::{DeviceBuffer, PrivateStream};
use crate::nvrtc::compile_ptx;

mod tables;

pub use tables::*;

/// Sites one kernel launch takes at most (the batch travels as a kernel parameter, which
/// has 4 KiB: 64 summary sites take 3.2 KiB). Larger launches let a graph's summaries run
/// as fewer, longer waves: a launch's last wave and final merges are its fixed cost.
pub const MAX_SITES_PER_LAUNCH: usize = 64;
const THREADS: u32 = 256;
/// Bytes a block reads at least: below this, more blocks cost more than they save.
const MIN_BYTES_PER_BLOCK: u64 = 8 << 10;
/// Bytes a block reads at most (with `UNROLL` 4, 32 rounds of loads per thread).
const MAX_BYTES_PER_BLOCK: u64 = 128 << 10;
/// Blocks of `THREADS` an SM holds at once (the summary kernel's 56 registers a thread
/// allow four).
const RESIDENT_BLOCKS_PER_SM: u64 = 4;

/// Dtype codes of `kernels.cu`.
fn device_dtype(dtype: DType) -> Option<u32> {
    Some(match dtype {
        DType::Float64 => 0,
        DType::Float32 => 1,
        DType::Float16 => 2,
        DType::BFloat16 => 3,
        DType::Float8E4M3Fn => 4,
        DType::Float8E4M3Fnuz => 5,
        DType::Float8E5M2 => 6,
        DType::Float8E5M2Fnuz => 7,
        DType::Float8E8M0Fnu => 8,
        DType::Int8 => 9,
        DType::Int16 => 10,
        DType::Int32 => 11,
        DType::Int64 => 12,
        DType::UInt8 => 13,
        DType::UInt16 => 14,
        DType::UInt32 => 15,
        DType::UInt64 => 16,
        DType::Bool => 17,
        DType::Complex32 | DType::Complex64 | DType::Complex128 => return None,
    })
}

/// Whether the summary kernel takes this dtype (every real dtype; complex ones are
/// summarised on the host from a copied value).
pub fn summarizable_on_device(dtype: DType) -> bool {
    device_dtype(dtype).is_some()
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct SummarySiteArg {
    src: u64,
    numel: u64,
    column: u32,
    dtype: u32,
    first_block: u32,
    blocks: u32,
    ring: u64,
    tags: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct SummaryBatchArg {
    replay: u64,
    point: u64,
    frozen_at: u64,
    scratch: u64,
    done: u64,
    table: u64,
    rows: u32,
    columns: u32,
    abs_max: f64,
    trigger: u32,
    nsites: u32,
    depth: u64,
    sites: [SummarySiteArg; MAX_SITES_PER_LAUNCH],
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CopySiteArg {
    src: u64,
    dst: u64,
    tags: u64,
    nbytes: u64,
    first_block: u32,
    blocks: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CopyBatchArg {
    replay: u64,
    point: u64,
    frozen_at: u64,
    depth: u64,
    nsites: u32,
    pad: u32,
    sites: [CopySiteArg; MAX_SITES_PER_LAUNCH],
}

// Every driver and architecture takes 4 KiB of kernel parameters.
const _: () = assert!(std::mem::size_of::<SummaryBatchArg>() <= 4096);
const _: () = assert!(std::mem::size_of::<CopyBatchArg>() <= 4096);

/// Bytes of one block partial (`Partial` in kernels.cu).
const PARTIAL_BYTES: usize = 80;

/// One summary site of a launch: the tensor (device address, element count, dtype), its
/// column in the record table, and the history ring the launch copies it into while it
/// reads it (see [`copies_while_summarising`]), if any.
pub struct SummaryInput<'a> {
    pub src: u64,
    pub numel: u64,
    pub dtype: DType,
    pub column: u32,
    pub ring: Option<&'a HistoryRing>,
}

/// Whether the summary launch can copy a value at `src` into `ring` as it reads it: the
/// kernel stores each 16-byte load where it came from, so every slot of the ring must be
/// as aligned as the value (16 bytes: cuMemAlloc's rings start on 256). Other values get a
/// copy launch of their own, a second read.
pub fn copies_while_summarising(src: u64, ring: &HistoryRing) -> bool {
    src % 16 == 0 && (ring.depth <= 1 || ring.nbytes % 16 == 0)
}

/// The device memory a captured summary launch uses on every replay; lives as long as
/// the graph (kept in the probe's resources).
pub struct SummaryLaunch {
    _scratch: DeviceBuffer,
    _done: DeviceBuffer,
}

/// One history site of a launch.
pub struct CopyInput<'a> {
    pub src: u64,
    pub ring: &'a HistoryRing,
}

/// Dtype codes of the per-dtype summary kernels (`tcgd_summarize_<code>`).
const DTYPE_CODES: u32 = 18;

#[derive(Clone, Copy)]
struct Functions {
    /// Mixed batches.
    summarize: usize,
    /// One kernel per dtype code: a launch runs, and the SMs fetch, only its dtype's code.
    summarize_dtype: [usize; DTYPE_CODES as usize],
    copy_ring: usize,
    sm_count: u32,
}

fn kernel_source() -> String {
    let mut tables = String::new();
    for (name, dtype) in [
        ("F8_E4M3FN", DType::Float8E4M3Fn),
        ("F8_E4M3FNUZ", DType::Float8E4M3Fnuz),
        ("F8_E5M2", DType::Float8E5M2),
        ("F8_E5M2FNUZ", DType::Float8E5M2Fnuz),
        ("F8_E8M0FNU", DType::Float8E8M0Fnu),
    ] {
        let table = float8_table(dtype).expect("a float8 dtype");
        let entries: Vec<String> = table
            .iter()
            .map(|v| format!("0x{:016x}ULL", v.to_bits()))
            .collect();
        tables.push_str(&format!(
            "__device__ const u64 {name}[256] = {{{}}};\n",
            entries.join(",")
        ));
    }
    include_str!("../kernels.cu").replace("// @FLOAT8_TABLES@", &tables)
}

fn attribute(device: i32, attribute: CUdevice_attribute) -> Result<i32> {
    let mut value = 0;
    // SAFETY: `value` is a valid out-pointer; `device` an ordinal the caller checked.
    check("cuDeviceGetAttribute", unsafe {
        sys::cuDeviceGetAttribute(&mut value, attribute, device)
    })?;
    Ok(value)
}

fn functions(ctx: CUcontext, device: i32) -> Result<Functions> {
    static LOADED: OnceLock<Mutex<HashMap<usize, Functions>>> = OnceLock::new();
    static PTX: OnceLock<Mutex<HashMap<u32, Vec<u8>>>> = OnceLock::new();
    let loaded = LOADED.get_or_init(Default::default);
    let mut loaded = loaded.lock().map_err(|_| CudaError::Poisoned)?;
    if let Some(f) = loaded.get(&(ctx as usize)) {
        return Ok(*f);
    }
    let major = attribute(
        device,
        CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
    )?;
    let minor = attribute(
        device,
        CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
    )?;
    let sm_count = attribute(
        device,
        CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    )?
    .max(1) as u32;
    let arch = (major * 10 + minor) as u32;
    let ptx = {
        let cache = PTX.get_or_init(Default::default);
        let mut cache = cache.lock().map_err(|_| CudaError::Poisoned)?;
        match cache.get(&arch) {
            Some(ptx) => ptx.clone(),
            None => {
                let ptx = compile_ptx(
                    &kernel_source(),
                    "tcgd_kernels.cu",
                    arch,
                    &[format!("MAX_SITES={MAX_SITES_PER_LAUNCH}")],
                )?;
                cache.insert(arch, ptx.clone());
                ptx
            }
        }
    };
    // Loading a module during a global-mode capture would invalidate it.
    let _relaxed = RelaxedCapture::enter()?;
    let mut module: CUmodule = std::ptr::null_mut();
    // SAFETY: `ptx` is NUL-terminated PTX text from NVRTC.
    check("cuModuleLoadData", unsafe {
        sys::cuModuleLoadData(&mut module, ptx.as_ptr() as *const c_void)
    })?;
    let get = |name: &[u8]| -> Result<CUfunction> {
        let mut function: CUfunction = std::ptr::null_mut();
        // SAFETY: `module` is loaded; the name is NUL-terminated.
        check("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut function, module, name.as_ptr().cast())
        })?;
        Ok(function)
    };
    let mut summarize_dtype = [0usize; DTYPE_CODES as usize];
    for (code, slot) in summarize_dtype.iter_mut().enumerate() {
        *slot = get(format!("tcgd_summarize_{code}\0").as_bytes())? as usize;
    }
    let functions = Functions {
        summarize: get(b"tcgd_summarize\0")? as usize,
        summarize_dtype,
        copy_ring: get(b"tcgd_copy_ring\0")? as usize,
        sm_count,
    };
    // The module stays loaded for the life of the process: captured graphs refer to it.
    loaded.insert(ctx as usize, functions);
    Ok(functions)
}

/// Compiles and loads the kernels now (they are otherwise built at the first launch,
/// which may be inside a capture).
pub fn prepare(ctx: CUcontext, device: i32) -> Result<()> {
    functions(ctx, device).map(|_| ())
}

/// Blocks a site of `nbytes` gets in a launch of `launch_bytes` in all. A block's fixed
/// costs (its reduction, publishing its partial) are paid once per block, so blocks take
/// as large a share as keeps every SM busy: the launch's bytes over one wave of blocks
/// ([`RESIDENT_BLOCKS_PER_SM`] per SM), between [`MIN_BYTES_PER_BLOCK`] (small values
/// spread over many SMs) and [`MAX_BYTES_PER_BLOCK`] (large launches run in several
/// waves, which evens out blocks that finish late). On an H100, 16 float32 values of
/// 4 MiB went from 8 KiB blocks' 193 us to 126 us, 16 of 64 MiB from 366 us to 360 us.
fn blocks_for(nbytes: u64, launch_bytes: u64, sm_count: u32) -> u32 {
    let wave = u64::from(sm_count) * RESIDENT_BLOCKS_PER_SM;
    let share = (launch_bytes / wave.max(1)).clamp(MIN_BYTES_PER_BLOCK, MAX_BYTES_PER_BLOCK);
    nbytes.div_ceil(share).clamp(1, u64::from(u32::MAX)) as u32
}

fn launch<T>(function: CUfunction, blocks: u32, arg: &mut T, stream: CUstream) -> Result<()> {
    let mut params = [arg as *mut T as *mut c_void];
    // SAFETY: one parameter, a #[repr(C)] struct laid out as the kernel declares it; the
    // driver copies it before returning.
    check("cuLaunchKernel", unsafe {
        sys::cuLaunchKernel(
            function,
            blocks,
            1,
            1,
            THREADS,
            1,
            1,
            0,
            stream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    })
}

/// Enqueues (or, during a capture, records) one summary launch over `sites`.
#[allow(clippy::too_many_arguments)]
pub fn enqueue_summaries(
    ctx: CUcontext,
    device: i32,
    sites: &[SummaryInput<'_>],
    table: &RecordTable,
    replay_counter: u64,
    words: SessionWords,
    trigger: Trigger,
    private: &PrivateStream,
    stream: CUstream,
) -> Result<SummaryLaunch> {
    if sites.is_empty() || sites.len() > MAX_SITES_PER_LAUNCH {
        return Err(CudaError::Invalid(format!(
            "a summary launch takes 1 to {MAX_SITES_PER_LAUNCH} sites, got {}",
            sites.len()
        )));
    }
    if let Some(site) = sites.iter().find(|s| s.column >= table.columns) {
        return Err(CudaError::Invalid(format!(
            "summary column {} is outside the record table ({} columns)",
            site.column, table.columns
        )));
    }
    let rings: Vec<&HistoryRing> = sites.iter().filter_map(|s| s.ring).collect();
    let depth = rings.first().map_or(1, |r| r.depth);
    if rings.iter().any(|r| r.depth != depth) {
        return Err(CudaError::Invalid(
            "history rings of one launch differ in depth".into(),
        ));
    }
    if let Some(site) = sites.iter().find(|s| {
        s.ring.is_some_and(|r| {
            !copies_while_summarising(s.src, r)
                || r.nbytes as u64 != s.numel * s.dtype.itemsize() as u64
        })
    }) {
        return Err(CudaError::Invalid(format!(
            "the value at {:#x} cannot be copied into its history ring while summarised",
            site.src
        )));
    }
    let f = functions(ctx, device)?;
    let sm_count = f.sm_count;
    let mut arg = SummaryBatchArg {
        replay: replay_counter,
        point: words.point,
        frozen_at: words.frozen_at,
        scratch: 0,
        done: 0,
        table: table.device_ptr,
        rows: table.rows,
        columns: table.columns,
        abs_max: trigger.abs_max.unwrap_or(f64::INFINITY),
        trigger: trigger.flags(),
        nsites: sites.len() as u32,
        depth,
        sites: [SummarySiteArg::default(); MAX_SITES_PER_LAUNCH],
    };
    let launch_bytes: u64 = sites
        .iter()
        .map(|s| s.numel * s.dtype.itemsize() as u64)
        .sum();
    let mut total = 0u32;
    for (arg_site, site) in arg.sites.iter_mut().zip(sites) {
        let Some(dtype) = device_dtype(site.dtype) else {
            return Err(CudaError::Invalid(format!(
                "{} values are summarised on the host, not by the device kernel",
                site.dtype
            )));
        };
        let blocks = blocks_for(
            site.numel * site.dtype.itemsize() as u64,
            launch_bytes,
            sm_count,
        );
        *arg_site = SummarySiteArg {
            src: site.src,
            numel: site.numel,
            column: site.column,
            dtype,
            first_block: total,
            blocks,
            ring: site.ring.map_or(0, |r| r.values.ptr),
            tags: site.ring.map_or(0, |r| r.tags.ptr),
        };
        total += blocks;
    }
    let scratch = DeviceBuffer::alloc(total as usize * PARTIAL_BYTES)?;
    let done = DeviceBuffer::alloc(4 * sites.len())?;
    done.zero(private)?;
    arg.scratch = scratch.ptr;
    arg.done = done.ptr;
    let first = arg.sites[0].dtype;
    let uniform = arg.sites[..sites.len()].iter().all(|s| s.dtype == first);
    let kernel = if uniform {
        f.summarize_dtype[first as usize]
    } else {
        f.summarize
    };
    launch(kernel as CUfunction, total, &mut arg, stream)?;
    Ok(SummaryLaunch {
        _scratch: scratch,
        _done: done,
    })
}

/// Enqueues (or records) one copy launch of `sites` into their history rings (all of the
/// same depth).
pub fn enqueue_history_copies(
    ctx: CUcontext,
    device: i32,
    sites: &[CopyInput<'_>],
    replay_counter: u64,
    words: SessionWords,
    stream: CUstream,
) -> Result<()> {
    let depth = sites.first().map_or(1, |s| s.ring.depth);
    if sites.iter().any(|s| s.ring.depth != depth) {
        return Err(CudaError::Invalid(
            "history rings of one launch differ in depth".into(),
        ));
    }
    let copies: Vec<CopySpec> = sites
        .iter()
        .map(|site| CopySpec {
            src: site.src,
            dst: site.ring.values.ptr,
            tags: site.ring.tags.ptr,
            nbytes: site.ring.nbytes as u64,
        })
        .collect();
    let frozen = (words.point, words.frozen_at);
    enqueue_copies(ctx, device, &copies, replay_counter, frozen, depth, stream)
}

/// Enqueues (or records) one launch copying each `(src, dst, nbytes)` into its slot: the
/// batched form of one memcpy node per value, for small values probed together.
pub fn enqueue_slot_copies(
    ctx: CUcontext,
    device: i32,
    copies: &[(u64, u64, u64)],
    replay_counter: u64,
    stream: CUstream,
) -> Result<()> {
    let copies: Vec<CopySpec> = copies
        .iter()
        .map(|&(src, dst, nbytes)| CopySpec {
            src,
            dst,
            tags: 0,
            nbytes,
        })
        .collect();
    // Nothing freezes plain slots: the point word is read but unused.
    let frozen = (replay_counter, 0);
    enqueue_copies(ctx, device, &copies, replay_counter, frozen, 1, stream)
}

/// One value of a copy launch: where from, where to (slot 0 of a ring of `depth`), and
/// the ring's tags (0: none).
struct CopySpec {
    src: u64,
    dst: u64,
    tags: u64,
    nbytes: u64,
}

/// The one copy launch both kinds of copies share; `frozen` is (point word, frozen-at
/// word), the latter 0 when nothing freezes the destination.
fn enqueue_copies(
    ctx: CUcontext,
    device: i32,
    copies: &[CopySpec],
    replay_counter: u64,
    frozen: (u64, u64),
    depth: u64,
    stream: CUstream,
) -> Result<()> {
    if copies.is_empty() || copies.len() > MAX_SITES_PER_LAUNCH {
        return Err(CudaError::Invalid(format!(
            "a copy launch takes 1 to {MAX_SITES_PER_LAUNCH} values, got {}",
            copies.len()
        )));
    }
    let Functions {
        copy_ring,
        sm_count,
        ..
    } = functions(ctx, device)?;
    let mut arg = CopyBatchArg {
        replay: replay_counter,
        point: frozen.0,
        frozen_at: frozen.1,
        depth,
        nsites: copies.len() as u32,
        pad: 0,
        sites: [CopySiteArg::default(); MAX_SITES_PER_LAUNCH],
    };
    let launch_bytes: u64 = copies.iter().map(|c| c.nbytes).sum();
    let mut total = 0u32;
    for (arg_site, copy) in arg.sites.iter_mut().zip(copies) {
        let blocks = blocks_for(copy.nbytes, launch_bytes, sm_count);
        *arg_site = CopySiteArg {
            src: copy.src,
            dst: copy.dst,
            tags: copy.tags,
            nbytes: copy.nbytes,
            first_block: total,
            blocks,
        };
        total += blocks;
    }
    launch(copy_ring as CUfunction, total, &mut arg, stream)
}

#[cfg(test)]
mod tests;
