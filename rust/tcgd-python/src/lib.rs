//! `torch_cudagraph_debug._native`: the Rust core as seen from Python.
//!
//! Thin on purpose: argument conversion, GIL release around heavy work, and error
//! mapping. Logic lives in the crates below.

/// Adds classes and functions to the module `m`: the body of a `register(m)`.
macro_rules! add_to_module {
    ($m:expr, [$($class:ty),* $(,)?], [$($function:path),* $(,)?] $(,)?) => {{
        $($m.add_class::<$class>()?;)*
        $($m.add_function(pyo3::wrap_pyfunction!($function, $m)?)?;)*
        Ok(())
    }};
}

mod anomaly;
mod args;
mod classes;
mod compare;
mod config;
mod diagnosis;
mod errors;
mod memory;
mod probe;
mod recorded;
mod recording;
mod results;
mod store;

use pyo3::prelude::*;
use tcgd_tensor::{summarize as summarize_bytes, DType, TensorSummary};

use errors::{guard, BindResult};

/// Host memory handed over as plain facts: the address and length of a contiguous CPU
/// tensor's bytes. (The buffer protocol is not in the limited API of Python 3.10, which
/// this abi3 wheel targets.)
#[derive(Debug, Clone, Copy, FromPyObject)]
pub(crate) struct HostBytes(usize, usize);

impl HostBytes {
    /// # Safety
    /// `ptr` must address `len` readable bytes that stay alive, unmoved and unwritten for
    /// the lifetime the caller picks. Only this package's Python layer creates `HostBytes`:
    /// it passes a private, contiguous CPU tensor and keeps it referenced for the call.
    pub(crate) unsafe fn as_slice<'a>(self) -> &'a [u8] {
        let HostBytes(ptr, len) = self;
        if len == 0 {
            return &[];
        }
        // SAFETY: guaranteed by the caller, as documented above.
        unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }
    }
}

/// A summary as Python hands it over: (numel, finite, nan, posinf, neginf, zero, min,
/// max, mean, std, l2).
pub(crate) type SummaryArgs = (
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    f64,
);

pub(crate) fn to_summary(s: SummaryArgs) -> TensorSummary {
    TensorSummary {
        numel: s.0,
        finite: s.1,
        nan: s.2,
        pos_inf: s.3,
        neg_inf: s.4,
        zero: s.5,
        min: s.6,
        max: s.7,
        mean: s.8,
        std: s.9,
        l2: s.10,
    }
}

pub(crate) fn parse_dtype(name: &str) -> BindResult<DType> {
    Ok(DType::from_torch_name(name)?)
}

/// Summary of a tensor's host bytes (contiguous, little-endian), `data` being
/// `(address, length)`: the same `TensorValueSummary` the comparisons report.
#[pyfunction]
fn summarize(py: Python<'_>, dtype: &str, data: HostBytes) -> PyResult<results::PyValueSummary> {
    guard(py, || {
        let dtype = parse_dtype(dtype)?;
        // SAFETY: `data` comes from `_torch_bridge.host_bytes`, which keeps the tensor
        // alive in the calling frame for the duration of this call.
        let bytes = unsafe { data.as_slice() };
        let summary = py
            .detach(|| summarize_bytes(dtype, bytes))
            .map_err(tcgd_store::StoreError::from)?;
        Ok(results::PyValueSummary::from(summary))
    })
}

/// Content digest of bytes, as stored in runs (`blake3:<hex>`).
#[pyfunction]
fn content_digest(py: Python<'_>, data: HostBytes) -> PyResult<String> {
    guard(py, || {
        // SAFETY: as in `summarize`.
        let bytes = unsafe { data.as_slice() };
        Ok(py.detach(|| tcgd_store::content_digest(bytes)))
    })
}

/// Canonical names of the dtypes that can be recorded.
#[pyfunction]
fn supported_dtypes() -> Vec<&'static str> {
    DType::ALL.iter().map(|d| d.torch_name()).collect()
}

/// Checks a dtype name; raises `UnsupportedDtypeError` for one that cannot be recorded.
#[pyfunction]
fn check_dtype(name: &str) -> BindResult<()> {
    parse_dtype(name).map(|_| ())
}

/// A byte count in binary units ("1.50 MiB", "512 B"): the one formatting every report
/// and CLI line uses, so sizes read the same everywhere.
#[pyfunction]
fn format_bytes(n: i64) -> String {
    tcgd_memory::report::format_bytes(n)
}

/// A signed byte change ("+1.00 MiB", "-512 B", "+0 B"), as reports print it.
#[pyfunction]
fn format_change(n: i64) -> String {
    tcgd_memory::report::format_change(n)
}

/// A byte value at two states and its change ("2.00 MiB -> 18.00 MiB (+16.00 MiB)"),
/// `None` as "n/a", as comparison reports print it.
#[pyfunction]
fn format_comparison(reference: Option<i64>, candidate: Option<i64>, delta: Option<i64>) -> String {
    tcgd_memory::report::format_comparison(reference, candidate, delta)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::check_classes(m.py())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("FORMAT_VERSION", tcgd_store::FORMAT_VERSION)?;
    config::register(m)?;
    compare::register(m)?;
    diagnosis::register(m)?;
    results::register(m)?;
    anomaly::register(m)?;
    memory::register(m)?;
    recorded::register(m)?;
    // The allocator's trace actions, named once by the replay that parses them.
    let known: Vec<&str> = tcgd_memory::lifetimes::Action::known_names().collect();
    m.add(
        "KNOWN_TRACE_ACTIONS",
        pyo3::types::PyTuple::new(m.py(), known)?,
    )?;
    let lifetime: Vec<&str> = tcgd_memory::lifetimes::Action::lifetime_names().collect();
    m.add(
        "ALLOCATION_LIFETIME_ACTIONS",
        pyo3::types::PyTuple::new(m.py(), lifetime)?,
    )?;
    add_to_module!(
        m,
        [
            store::RunWriter,
            store::RunReader,
            store::PyRunManifest,
            probe::ProbeRuntime,
            recording::DeviceRecorder,
        ],
        [
            summarize,
            content_digest,
            supported_dtypes,
            check_dtype,
            format_bytes,
            format_change,
            format_comparison,
            store::list_runs,
            store::compact_root,
            store::set_log_retention,
            recording::add_nvrtc_search_dir,
            probe::cuda_available,
            probe::release_deferred,
            probe::probe_memory,
            probe::capture_id,
        ],
    )
}
