//! Rust errors become the typed exceptions of `torch_cudagraph_debug.errors`.
//!
//! The exception classes are defined in Python (so they can also derive from the builtin
//! `ValueError`, `TypeError`, ... that users already catch); Rust refers to each one by
//! type through `import_exception!`, so a misspelt class is a compile error rather than a
//! silent `RuntimeError`. [`BindingError`] is the one error type of the binding layer:
//! every crate error converts into it (one `match` per crate error decides the class) and
//! it converts into `PyErr`, so call sites use `?`. Panics are caught at the boundary and
//! become `TcgdInternalError`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;
use tcgd_compare::CompareError;
use tcgd_config::ConfigError;
use tcgd_cuda::CudaError;
use tcgd_memory::pickle::PickleError;
use tcgd_memory::MemoryError;
use tcgd_report::ReportDirError;
use tcgd_store::StoreError;
use tcgd_tensor::UnsupportedDtype;

/// Declares the Python classes the native core raises, by type, and [`check_classes`],
/// which the module's init runs once.
macro_rules! python_classes {
    ($($name:ident),+ $(,)?) => {
        /// A module of their own keeps them apart from the Rust error types of the same
        /// name (`ConfigError`).
        mod class {
            $(pyo3::import_exception!(torch_cudagraph_debug.errors, $name);)+
        }

        /// Makes sure every class exists before any is raised. An imported exception
        /// type is resolved lazily, when the error reaches Python, and a failure there
        /// would be a panic outside any guard; checked here, a broken install fails
        /// the import of this module instead, naming the missing class.
        pub fn check_classes(py: Python<'_>) -> PyResult<()> {
            let module = py.import("torch_cudagraph_debug.errors")?;
            $(
                module
                    .getattr(stringify!($name))?
                    .cast_into::<pyo3::types::PyType>()
                    .map_err(PyErr::from)?;
            )+
            Ok(())
        }
    };
}

// Each is imported from `torch_cudagraph_debug.errors` (shipped in the same wheel) the
// first time it is needed; the package imports that module before this one.
python_classes!(
    TcgdInternalError,
    InvalidInputError,
    UnsupportedDtypeError,
    RecorderStateError,
    ProbeClosedError,
    SecondCaptureError,
    CaptureInvalidatedError,
    CudaUnavailableError,
    CudaDriverError,
    ConfigError,
    StorageIOError,
    RunNotFoundError,
    RunExistsError,
    CorruptRunError,
    DigestMismatchError,
    PayloadMissingError,
    UnsupportedFormatError,
    UnsafePathError,
    ReportExistsError,
    SnapshotFormatError,
    UnsafePickleError,
    CrossRunError,
    MemoryOwnershipError,
    MemoryHistoryDisabledError,
    MemoryHistoryBoundaryError,
    MemoryHistoryTruncatedError,
    MemoryReconciliationError,
);

/// An error of the binding layer: the Python class it becomes, and its message. A
/// `Python` error (raised by a callback or a conversion) passes through unchanged.
#[derive(Debug)]
pub enum BindingError {
    /// `TcgdInternalError`
    Internal(String),
    /// `InvalidInputError`
    InvalidInput(String),
    /// `UnsupportedDtypeError`
    UnsupportedDtype(String),
    /// `RecorderStateError`
    RecorderState(String),
    /// `ProbeClosedError`
    ProbeClosed(String),
    /// `SecondCaptureError`
    SecondCapture(String),
    /// `CaptureInvalidatedError`
    CaptureInvalidated(String),
    /// `CudaUnavailableError`
    CudaUnavailable(String),
    /// `CudaDriverError`
    CudaDriver(String),
    /// `ConfigError`
    Config(String),
    /// `StorageIOError`
    StorageIo(String),
    /// `RunNotFoundError`
    RunNotFound(String),
    /// `RunExistsError`
    RunExists(String),
    /// `CorruptRunError`
    CorruptRun(String),
    /// `DigestMismatchError`
    DigestMismatch(String),
    /// `PayloadMissingError`
    PayloadMissing(String),
    /// `UnsupportedFormatError`
    UnsupportedFormat(String),
    /// `UnsafePathError`
    UnsafePath(String),
    /// `ReportExistsError`
    ReportExists(String),
    /// `SnapshotFormatError`
    SnapshotFormat(String),
    /// `UnsafePickleError`
    UnsafePickle(String),
    /// `CrossRunError`
    CrossRun(String),
    /// `MemoryOwnershipError`
    MemoryOwnership(String),
    /// `MemoryHistoryDisabledError`
    HistoryDisabled(String),
    /// `MemoryHistoryBoundaryError`
    HistoryBoundary(String),
    /// `MemoryHistoryTruncatedError`
    HistoryTruncated(String),
    /// `MemoryReconciliationError`
    Reconciliation(String),
    /// `InvalidInputError` for a comparison option, with `option` (the option's name) and
    /// `reason` set on the exception so that the CLI can name its flag instead.
    InvalidOption { option: String, reason: String },
    /// A Python exception, raised as it is.
    Python(PyErr),
}

/// What the closures under [`guard`] and the helpers of the binding layer return.
pub type BindResult<T> = Result<T, BindingError>;

impl From<BindingError> for PyErr {
    fn from(error: BindingError) -> PyErr {
        match error {
            BindingError::Internal(m) => class::TcgdInternalError::new_err(m),
            BindingError::InvalidInput(m) => class::InvalidInputError::new_err(m),
            BindingError::UnsupportedDtype(m) => class::UnsupportedDtypeError::new_err(m),
            BindingError::RecorderState(m) => class::RecorderStateError::new_err(m),
            BindingError::ProbeClosed(m) => class::ProbeClosedError::new_err(m),
            BindingError::SecondCapture(m) => class::SecondCaptureError::new_err(m),
            BindingError::CaptureInvalidated(m) => class::CaptureInvalidatedError::new_err(m),
            BindingError::CudaUnavailable(m) => class::CudaUnavailableError::new_err(m),
            BindingError::CudaDriver(m) => class::CudaDriverError::new_err(m),
            BindingError::Config(m) => class::ConfigError::new_err(m),
            BindingError::StorageIo(m) => class::StorageIOError::new_err(m),
            BindingError::RunNotFound(m) => class::RunNotFoundError::new_err(m),
            BindingError::RunExists(m) => class::RunExistsError::new_err(m),
            BindingError::CorruptRun(m) => class::CorruptRunError::new_err(m),
            BindingError::DigestMismatch(m) => class::DigestMismatchError::new_err(m),
            BindingError::PayloadMissing(m) => class::PayloadMissingError::new_err(m),
            BindingError::UnsupportedFormat(m) => class::UnsupportedFormatError::new_err(m),
            BindingError::UnsafePath(m) => class::UnsafePathError::new_err(m),
            BindingError::ReportExists(m) => class::ReportExistsError::new_err(m),
            BindingError::SnapshotFormat(m) => class::SnapshotFormatError::new_err(m),
            BindingError::UnsafePickle(m) => class::UnsafePickleError::new_err(m),
            BindingError::CrossRun(m) => class::CrossRunError::new_err(m),
            BindingError::MemoryOwnership(m) => class::MemoryOwnershipError::new_err(m),
            BindingError::HistoryDisabled(m) => class::MemoryHistoryDisabledError::new_err(m),
            BindingError::HistoryBoundary(m) => class::MemoryHistoryBoundaryError::new_err(m),
            BindingError::HistoryTruncated(m) => class::MemoryHistoryTruncatedError::new_err(m),
            BindingError::Reconciliation(m) => class::MemoryReconciliationError::new_err(m),
            BindingError::InvalidOption { option, reason } => invalid_option(option, reason),
            BindingError::Python(e) => e,
        }
    }
}

fn invalid_option(option: String, reason: String) -> PyErr {
    let error =
        class::InvalidInputError::new_err(format!("TensorComparisonOptions.{option} {reason}"));
    Python::attach(|py| {
        let value = error.value(py);
        // Setting attributes on a fresh exception instance cannot fail short of memory
        // exhaustion; the message above says everything in any case.
        let _ = value.setattr("option", option);
        let _ = value.setattr("reason", reason);
    });
    error
}

impl From<PyErr> for BindingError {
    fn from(error: PyErr) -> Self {
        BindingError::Python(error)
    }
}

impl From<StoreError> for BindingError {
    fn from(error: StoreError) -> Self {
        let message = error.to_string();
        match error {
            StoreError::Io { .. }
            | StoreError::BackgroundCommit { .. }
            | StoreError::Delta { .. } => BindingError::StorageIo(message),
            StoreError::NotARun { .. } | StoreError::RunSelection { .. } => {
                BindingError::RunNotFound(message)
            }
            StoreError::VersionOneRun { .. } | StoreError::NotOurs { .. } => {
                BindingError::UnsupportedFormat(message)
            }
            StoreError::InvalidManifest { .. }
            | StoreError::CorruptPart { .. }
            | StoreError::CorruptLog { .. } => BindingError::CorruptRun(message),
            StoreError::NewerFormat { .. } => BindingError::UnsupportedFormat(message),
            StoreError::UnsafePath { .. } => BindingError::UnsafePath(message),
            StoreError::DigestMismatch { .. } => BindingError::DigestMismatch(message),
            StoreError::PayloadMissing { .. } => BindingError::PayloadMissing(message),
            StoreError::InvalidInput { .. } | StoreError::Summary(_) => {
                BindingError::InvalidInput(message)
            }
            StoreError::RunFinished { .. } => BindingError::RecorderState(message),
            StoreError::RunExists { .. }
            | StoreError::RunInUse { .. }
            | StoreError::NotReplaceable { .. } => BindingError::RunExists(message),
            StoreError::Dtype(_) => BindingError::UnsupportedDtype(message),
        }
    }
}

impl From<UnsupportedDtype> for BindingError {
    fn from(error: UnsupportedDtype) -> Self {
        StoreError::Dtype(error).into()
    }
}

/// Report directories behave the same for every report; so do their errors.
impl From<ReportDirError> for BindingError {
    fn from(error: ReportDirError) -> Self {
        let message = error.to_string();
        match error {
            ReportDirError::Exists { .. } => BindingError::ReportExists(message),
            ReportDirError::NotADirectory { .. } | ReportDirError::NotAFile { .. } => {
                BindingError::InvalidInput(message)
            }
            ReportDirError::Io { .. } => BindingError::StorageIo(message),
        }
    }
}

impl From<CompareError> for BindingError {
    fn from(error: CompareError) -> Self {
        let message = error.to_string();
        match error {
            CompareError::Store(e) => e.into(),
            CompareError::Report(e) => e.into(),
            CompareError::InvalidOption { .. } | CompareError::InvalidInput(_) => {
                BindingError::InvalidInput(message)
            }
            CompareError::Payload { .. } => BindingError::CorruptRun(message),
            CompareError::External(_) | CompareError::Interrupted => {
                BindingError::Internal(message)
            }
            CompareError::Io { .. } => BindingError::StorageIo(message),
        }
    }
}

impl From<MemoryError> for BindingError {
    fn from(error: MemoryError) -> Self {
        let message = error.to_string();
        match error {
            MemoryError::Store(e) => e.into(),
            MemoryError::MissingField { .. }
            | MemoryError::WrongType { .. }
            | MemoryError::Inconsistent { .. }
            | MemoryError::Overflow { .. } => BindingError::SnapshotFormat(message),
            MemoryError::Pickle {
                source: PickleError::Unsafe { .. },
                ..
            } => BindingError::UnsafePickle(message),
            MemoryError::Pickle { .. } => BindingError::SnapshotFormat(message),
            MemoryError::Io { .. } => BindingError::StorageIo(message),
            MemoryError::InvalidInput(_) => BindingError::InvalidInput(message),
            MemoryError::CrossRun(_) => BindingError::CrossRun(message),
            MemoryError::Ownership(_) => BindingError::MemoryOwnership(message),
            MemoryError::HistoryDisabled(_) => BindingError::HistoryDisabled(message),
            MemoryError::HistoryBoundary(_) => BindingError::HistoryBoundary(message),
            MemoryError::HistoryTruncated(_) => BindingError::HistoryTruncated(message),
            MemoryError::Reconciliation(_) => BindingError::Reconciliation(message),
        }
    }
}

impl From<ConfigError> for BindingError {
    fn from(error: ConfigError) -> Self {
        // Every config error is the user's file or data; the message names file, line, key.
        BindingError::Config(error.to_string())
    }
}

impl From<CudaError> for BindingError {
    fn from(error: CudaError) -> Self {
        let message = error.to_string();
        match error {
            CudaError::NoDriver { .. } | CudaError::NoCompiler { .. } => {
                BindingError::CudaUnavailable(message)
            }
            CudaError::Compile { .. } => BindingError::Internal(message),
            CudaError::Driver { .. } => BindingError::CudaDriver(message),
            CudaError::SecondCapture { .. } => BindingError::SecondCapture(message),
            CudaError::CaptureInvalidated => BindingError::CaptureInvalidated(message),
            CudaError::Closed => BindingError::ProbeClosed(message),
            CudaError::Invalid(_) => BindingError::InvalidInput(message),
            CudaError::NoSuchSlot { .. } | CudaError::Poisoned => BindingError::Internal(message),
        }
    }
}

/// Runs `f`, turning a panic into a typed Python exception instead of unwinding into the
/// interpreter. The GIL token says the caller holds the GIL, as raising needs.
pub fn guard<T>(_py: Python<'_>, f: impl FnOnce() -> BindResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result.map_err(PyErr::from),
        Err(payload) => {
            let detail = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            Err(BindingError::Internal(format!(
                "internal error in the native core: {detail}; please report it"
            ))
            .into())
        }
    }
}

/// Locks without waiting: a recorder or probe belongs to one thread, and waiting for a
/// lock while holding the GIL could deadlock against a thread that needs the GIL.
pub fn try_lock<'a, T: ?Sized>(m: &'a Mutex<T>, what: &str) -> BindResult<MutexGuard<'a, T>> {
    match m.try_lock() {
        Ok(g) => Ok(g),
        Err(std::sync::TryLockError::WouldBlock) => Err(BindingError::RecorderState(format!(
            "this {what} is in use by another thread; use one {what} per thread"
        ))),
        Err(std::sync::TryLockError::Poisoned(_)) => Err(BindingError::Internal(format!(
            "a previous call on this {what} panicked; it cannot be used again"
        ))),
    }
}
