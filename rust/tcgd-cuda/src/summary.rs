//! On-device summaries and history rings: the host side of `kernels.cu`.
//!
//! Summary kernels captured into a session's graphs write one 112-byte [`DeviceRecord`]
//! per site and replay into the session's [`RecordTable`]: a row per point in flight
//! (point number modulo the rows), a column per site. When a point closes, the host copies
//! its row to pinned memory on the model's stream, one copy for every site. A history site
//! owns a device ring of its last `depth` values, filled by a copy kernel that stops once a
//! trigger froze the history. Both kernels take many sites per launch.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

use cudarc::driver::sys::{self, CUcontext, CUdevice_attribute, CUfunction, CUmodule, CUstream};
use tcgd_tensor::{float8_table, DType, TensorSummary};

use crate::driver::{check, RelaxedCapture};
use crate::error::{CudaError, Result};
use crate::memory::{DeviceBuffer, PinnedBuffer, PrivateStream};
use crate::nvrtc::compile_ptx;

/// Sites one kernel launch takes at most (the batch travels as a kernel parameter).
pub const MAX_SITES_PER_LAUNCH: usize = 16;
const THREADS: u32 = 256;
/// Bytes a summary block reads at least: below this, more blocks cost more than they save.
const BYTES_PER_BLOCK: u64 = 8 << 10;

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

/// One summary as the kernel writes it (`Record` in kernels.cu).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DeviceRecord {
    pub numel: u64,
    pub nan: u64,
    pub pos_inf: u64,
    pub neg_inf: u64,
    pub zero: u64,
    pub finite: u64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub m2: f64,
    pub ssq: f64,
    /// The session's point number when the replay ran.
    pub point: u64,
    /// Bit 0: this summary fired the trigger.
    pub flags: u64,
    /// The replay that wrote the record (the graph's own counter, from 1).
    pub replay: u64,
}

impl DeviceRecord {
    pub fn triggered(&self) -> bool {
        self.flags & 1 != 0
    }

    /// The summary in the store's terms (population std, L2 over finite values).
    pub fn to_summary(&self) -> TensorSummary {
        let any = self.finite > 0;
        TensorSummary {
            numel: self.numel,
            finite: self.finite,
            nan: self.nan,
            pos_inf: self.pos_inf,
            neg_inf: self.neg_inf,
            zero: self.zero,
            min: any.then_some(self.min),
            max: any.then_some(self.max),
            mean: any.then_some(self.mean),
            std: any.then(|| (self.m2 / self.finite as f64).max(0.0).sqrt()),
            l2: self.ssq.max(0.0).sqrt(),
        }
    }
}

/// The session's summary records: `rows` points in flight times `columns` sites, on the
/// device, mirrored in pinned host memory row by row as points close.
pub struct RecordTable {
    device: DeviceBuffer,
    host: PinnedBuffer,
    pub rows: u32,
    pub columns: u32,
}

const RECORD_BYTES: usize = std::mem::size_of::<DeviceRecord>();

impl RecordTable {
    pub fn new(rows: u32, columns: u32, stream: &PrivateStream) -> Result<RecordTable> {
        let bytes = rows as usize * columns as usize * RECORD_BYTES;
        let device = DeviceBuffer::alloc(bytes)?;
        // Zero: every record starts tagged with replay 0, "never written".
        device.zero(stream)?;
        Ok(RecordTable {
            device,
            host: PinnedBuffer::alloc(bytes)?,
            rows,
            columns,
        })
    }

    fn row_offset(&self, point: u32) -> usize {
        (point % self.rows) as usize * self.columns as usize * RECORD_BYTES
    }

    /// Enqueues on `stream` the copy of point `point`'s row (its first `used` columns)
    /// to the host mirror.
    pub fn enqueue_row_copy(&self, point: u32, used: u32, stream: CUstream) -> Result<()> {
        if used == 0 {
            return Ok(());
        }
        let offset = self.row_offset(point);
        // SAFETY: both buffers hold `rows * columns` records; the row's first `used`
        // columns lie inside them. The copy is ordered after the point's replays.
        check("cuMemcpyDtoHAsync_v2", unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                self.host.ptr.add(offset).cast(),
                self.device.ptr + offset as u64,
                used as usize * RECORD_BYTES,
                stream,
            )
        })
    }

    /// The record of `column` in point `point`'s row of the host mirror.
    ///
    /// # Safety
    /// The row's copy must have completed (the point's event), and no later copy of the
    /// same row (a point `rows` later) may be in flight.
    pub unsafe fn read(&self, point: u32, column: u32) -> DeviceRecord {
        let offset = self.row_offset(point) + column as usize * RECORD_BYTES;
        // SAFETY: in bounds (see above); records are plain old data, read unaligned-safe.
        unsafe { std::ptr::read_unaligned(self.host.ptr.add(offset) as *const DeviceRecord) }
    }
}

/// A history site's device ring: `depth` slots of the value, and (replay, point) per slot.
pub struct HistoryRing {
    values: DeviceBuffer,
    tags: DeviceBuffer,
    pub nbytes: usize,
    pub depth: u64,
}

/// A history ring read back: the values by slot and what each slot holds.
pub struct HistoryContents {
    pub values: Vec<u8>,
    /// (replay, point) per slot; replay 0 marks a slot never written.
    pub tags: Vec<(u64, u64)>,
}

impl HistoryRing {
    pub fn new(nbytes: usize, depth: u64, stream: &PrivateStream) -> Result<HistoryRing> {
        let depth = depth.max(1);
        let tags = DeviceBuffer::alloc(16 * depth as usize)?;
        tags.zero(stream)?;
        Ok(HistoryRing {
            values: DeviceBuffer::alloc(nbytes * depth as usize)?,
            tags,
            nbytes,
            depth,
        })
    }

    /// Copies the ring to the host (the caller makes sure no replay writes it: frozen, or
    /// synchronised).
    pub fn read(&self, stream: &PrivateStream) -> Result<HistoryContents> {
        let mut values = vec![0u8; self.nbytes * self.depth as usize];
        stream.read(self.values.ptr, &mut values)?;
        let mut raw = vec![0u8; 16 * self.depth as usize];
        stream.read(self.tags.ptr, &mut raw)?;
        let tags = raw
            .chunks_exact(16)
            .map(|c| {
                let replay = u64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
                let point = u64::from_le_bytes(c[8..].try_into().expect("8 bytes"));
                (replay, point)
            })
            .collect();
        Ok(HistoryContents { values, tags })
    }

    /// The value a slot holds.
    pub fn slot_value<'a>(&self, contents: &'a HistoryContents, slot: usize) -> &'a [u8] {
        &contents.values[slot * self.nbytes..(slot + 1) * self.nbytes]
    }
}

/// What triggers a flight-recorder dump, checked by the summary kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Trigger {
    pub nonfinite: bool,
    pub abs_max: Option<f64>,
}

impl Trigger {
    fn flags(&self) -> u32 {
        (self.nonfinite as u32) | ((self.abs_max.is_some() as u32) << 1)
    }
}

/// The device words every kernel of a session reads: the point number the host advances
/// per call, and the point the history froze at.
#[derive(Debug, Clone, Copy)]
pub struct SessionWords {
    pub point: u64,
    pub frozen_at: u64,
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

/// Bytes of one block partial (`Partial` in kernels.cu).
const PARTIAL_BYTES: usize = 80;

/// One summary site of a launch: the tensor (device address, element count, dtype) and
/// its column in the record table.
pub struct SummaryInput {
    pub src: u64,
    pub numel: u64,
    pub dtype: DType,
    pub column: u32,
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
    include_str!("kernels.cu").replace("// @FLOAT8_TABLES@", &tables)
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

fn blocks_for(nbytes: u64, sm_count: u32) -> u32 {
    let wanted = nbytes.div_ceil(BYTES_PER_BLOCK).max(1);
    wanted.min(2 * sm_count as u64) as u32
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
    sites: &[SummaryInput],
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
    let f = functions(ctx, device)?;
    let sm_count = f.sm_count;
    let mut arg = SummaryBatchArg {
        replay: replay_counter,
        point: words.point,
        frozen_at: words.frozen_at,
        scratch: 0,
        done: 0,
        table: table.device.ptr,
        rows: table.rows,
        columns: table.columns,
        abs_max: trigger.abs_max.unwrap_or(f64::INFINITY),
        trigger: trigger.flags(),
        nsites: sites.len() as u32,
        sites: [SummarySiteArg::default(); MAX_SITES_PER_LAUNCH],
    };
    let mut total = 0u32;
    for (arg_site, site) in arg.sites.iter_mut().zip(sites) {
        let Some(dtype) = device_dtype(site.dtype) else {
            return Err(CudaError::Invalid(format!(
                "{} values are summarised on the host, not by the device kernel",
                site.dtype
            )));
        };
        let blocks = blocks_for(site.numel * site.dtype.itemsize() as u64, sm_count);
        *arg_site = SummarySiteArg {
            src: site.src,
            numel: site.numel,
            column: site.column,
            dtype,
            first_block: total,
            blocks,
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
    let mut total = 0u32;
    for (arg_site, copy) in arg.sites.iter_mut().zip(copies) {
        let blocks = blocks_for(copy.nbytes, sm_count);
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
mod tests {
    use super::*;

    #[test]
    fn structs_match_the_kernel_layout() {
        assert_eq!(std::mem::size_of::<DeviceRecord>(), 112);
        assert_eq!(std::mem::size_of::<SummarySiteArg>(), 32);
        assert_eq!(
            std::mem::size_of::<SummaryBatchArg>(),
            72 + 32 * MAX_SITES_PER_LAUNCH
        );
        assert_eq!(std::mem::size_of::<CopySiteArg>(), 40);
        assert_eq!(
            std::mem::size_of::<CopyBatchArg>(),
            40 + 40 * MAX_SITES_PER_LAUNCH
        );
    }

    #[test]
    fn the_kernel_source_carries_exact_float8_tables() {
        let source = kernel_source();
        assert!(!source.contains("@FLOAT8_TABLES@"));
        // e4m3fn 0x7e is 448.0 (the largest finite value).
        assert!(source.contains(&format!("0x{:016x}ULL", 448.0f64.to_bits())));
    }

    #[test]
    fn the_kernels_compile_for_hopper_when_nvrtc_is_here() {
        crate::nvrtc::tests::register_venv_nvrtc();
        let defines = [format!("MAX_SITES={MAX_SITES_PER_LAUNCH}")];
        match compile_ptx(&kernel_source(), "tcgd_kernels.cu", 90, &defines) {
            Ok(ptx) => {
                let text = String::from_utf8_lossy(&ptx);
                assert!(text.contains(".entry tcgd_summarize"));
                assert!(text.contains(".entry tcgd_copy_ring"));
            }
            Err(CudaError::NoCompiler { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_record_becomes_the_stores_summary() {
        let record = DeviceRecord {
            numel: 4,
            nan: 1,
            finite: 3,
            min: 1.0,
            max: 3.0,
            mean: 2.0,
            m2: 2.0,
            ssq: 14.0,
            ..DeviceRecord::default()
        };
        let s = record.to_summary();
        assert_eq!(s.mean, Some(2.0));
        assert!((s.std.unwrap() - (2.0f64 / 3.0).sqrt()).abs() < 1e-15);
        assert!((s.l2 - 14f64.sqrt()).abs() < 1e-15);
        assert_eq!(s.nan, 1);
    }
}
