//! Rust errors become the typed exceptions of `torch_cudagraph_debug.errors`.
//!
//! The exception classes are defined in Python (so they can also derive from the builtin
//! `ValueError`, `TypeError`, ... that users already catch); this module only decides which
//! class each error is. Panics are caught at the boundary and become `TcgdInternalError`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::types::PyType;
use tcgd_store::StoreError;

const ERRORS_MODULE: &str = "torch_cudagraph_debug.errors";

pub fn typed_error(py: Python<'_>, class: &str, message: String) -> PyErr {
    let class = py
        .import(ERRORS_MODULE)
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
    match class {
        Ok(class) => PyErr::from_type(class, message),
        // The errors module is part of the same wheel; if it cannot be imported the
        // install is broken, and the message still reaches the user.
        Err(_) => pyo3::exceptions::PyRuntimeError::new_err(message),
    }
}

fn class_of(error: &StoreError) -> &'static str {
    match error {
        StoreError::Io { .. } | StoreError::BackgroundCommit { .. } => "StorageIOError",
        StoreError::NotARun { .. } => "RunNotFoundError",
        StoreError::InvalidManifest { .. } | StoreError::CorruptPart { .. } => "CorruptRunError",
        StoreError::NewerFormat { .. } => "UnsupportedFormatError",
        StoreError::UnsafePath { .. } => "UnsafePathError",
        StoreError::DigestMismatch { .. } => "DigestMismatchError",
        StoreError::PayloadMissing { .. } => "PayloadMissingError",
        StoreError::InvalidInput { .. } | StoreError::Summary(_) => "InvalidInputError",
        StoreError::RunFinished { .. } => "RecorderStateError",
        StoreError::RunExists { .. }
        | StoreError::RunInUse { .. }
        | StoreError::NotReplaceable { .. } => "RunExistsError",
        StoreError::Dtype(_) => "UnsupportedDtypeError",
    }
}

pub fn store_error(py: Python<'_>, error: StoreError) -> PyErr {
    typed_error(py, class_of(&error), error.to_string())
}

/// Report directories behave the same for every report; so do their errors.
pub fn report_dir_error(py: Python<'_>, error: tcgd_report::ReportDirError) -> PyErr {
    use tcgd_report::ReportDirError;
    let class = match &error {
        ReportDirError::Exists { .. } => "ReportExistsError",
        ReportDirError::NotADirectory { .. } | ReportDirError::NotAFile { .. } => {
            "InvalidInputError"
        }
        ReportDirError::Io { .. } => "StorageIOError",
    };
    typed_error(py, class, error.to_string())
}

pub fn dtype_error(py: Python<'_>, error: tcgd_tensor::UnsupportedDtype) -> PyErr {
    store_error(py, StoreError::Dtype(error))
}

/// Runs `f`, turning a panic into a typed Python exception instead of unwinding into the
/// interpreter.
pub fn guard<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let detail = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            Err(typed_error(
                py,
                "TcgdInternalError",
                format!("internal error in the native core: {detail}; please report it"),
            ))
        }
    }
}

fn busy(py: Python<'_>, what: &str) -> PyErr {
    typed_error(
        py,
        "RecorderStateError",
        format!("this {what} is in use by another thread; use one {what} per thread"),
    )
}

/// Locks without waiting: a recorder or probe belongs to one thread, and waiting for a
/// lock while holding the GIL could deadlock against a thread that needs the GIL.
pub fn try_lock<'a, T>(py: Python<'_>, m: &'a Mutex<T>, what: &str) -> PyResult<MutexGuard<'a, T>> {
    match m.try_lock() {
        Ok(g) => Ok(g),
        Err(std::sync::TryLockError::WouldBlock) => Err(busy(py, what)),
        Err(std::sync::TryLockError::Poisoned(_)) => Err(typed_error(
            py,
            "TcgdInternalError",
            format!("a previous call on this {what} panicked; it cannot be used again"),
        )),
    }
}
