//! `torch_cudagraph_debug._native`: the Rust core as seen from Python.
//!
//! Thin on purpose: argument conversion, GIL release around heavy work, and error
//! mapping. Logic lives in the crates below.

mod errors;
mod store;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tcgd_tensor::{summarize as summarize_bytes, DType, TensorSummary};

use errors::{dtype_error, guard, typed_error};

/// Borrows a Python buffer's bytes. Only C-contiguous byte buffers are accepted, so the
/// slice covers exactly the buffer's memory.
pub(crate) fn buffer_bytes<'a>(py: Python<'a>, buffer: &'a PyBuffer<u8>) -> PyResult<&'a [u8]> {
    if !buffer.is_c_contiguous() {
        return Err(typed_error(
            py,
            "InvalidInputError",
            "tensor bytes must be a C-contiguous buffer".into(),
        ));
    }
    if buffer.len_bytes() == 0 {
        return Ok(&[]);
    }
    // SAFETY: the buffer is C-contiguous with `len_bytes` bytes at `buf_ptr`, and the
    // exporter keeps that memory alive and unmoved while `buffer` (borrowed for 'a) is
    // held. Callers pass private host copies that no other thread writes to.
    Ok(unsafe { std::slice::from_raw_parts(buffer.buf_ptr() as *const u8, buffer.len_bytes()) })
}

pub(crate) fn parse_dtype(py: Python<'_>, name: &str) -> PyResult<DType> {
    DType::from_torch_name(name).map_err(|e| dtype_error(py, e))
}

pub(crate) fn summary_to_dict<'py>(
    py: Python<'py>,
    s: &TensorSummary,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("numel", s.numel)?;
    d.set_item("finite", s.finite)?;
    d.set_item("nan", s.nan)?;
    d.set_item("posinf", s.pos_inf)?;
    d.set_item("neginf", s.neg_inf)?;
    d.set_item("zero", s.zero)?;
    d.set_item("min", s.min)?;
    d.set_item("max", s.max)?;
    d.set_item("mean", s.mean)?;
    d.set_item("std", s.std)?;
    d.set_item("l2", s.l2)?;
    Ok(d)
}

/// Summary of a tensor's host bytes (contiguous, little-endian) as a dict.
#[pyfunction]
fn summarize<'py>(
    py: Python<'py>,
    dtype: &str,
    data: PyBuffer<u8>,
) -> PyResult<Bound<'py, PyDict>> {
    guard(py, || {
        let dtype = parse_dtype(py, dtype)?;
        let bytes = buffer_bytes(py, &data)?;
        let summary = py
            .detach(|| summarize_bytes(dtype, bytes))
            .map_err(|e| errors::store_error(py, e.into()))?;
        summary_to_dict(py, &summary)
    })
}

/// Content digest of bytes, as stored in runs (`blake3:<hex>`).
#[pyfunction]
fn content_digest(py: Python<'_>, data: PyBuffer<u8>) -> PyResult<String> {
    guard(py, || {
        let bytes = buffer_bytes(py, &data)?;
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
fn check_dtype(py: Python<'_>, name: &str) -> PyResult<()> {
    parse_dtype(py, name).map(|_| ())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("FORMAT_VERSION", tcgd_store::FORMAT_VERSION)?;
    m.add_function(wrap_pyfunction!(summarize, m)?)?;
    m.add_function(wrap_pyfunction!(content_digest, m)?)?;
    m.add_function(wrap_pyfunction!(supported_dtypes, m)?)?;
    m.add_function(wrap_pyfunction!(check_dtype, m)?)?;
    m.add_class::<store::RunWriter>()?;
    m.add_class::<store::RunReader>()?;
    Ok(())
}
