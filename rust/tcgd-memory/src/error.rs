//! Typed errors of memory debugging. Messages reach users unchanged (Python exceptions,
//! CLI output): each names the field, file or point at fault and says what to do.

use std::path::PathBuf;

use tcgd_store::StoreError;

use crate::pickle::PickleError;

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(
        "allocator snapshot has no required field '{field}'{torch}; this torch's \
         torch.cuda.memory._snapshot() format is not supported, please report it with the \
         torch version"
    )]
    MissingField { field: String, torch: TorchVersion },

    #[error(
        "allocator snapshot field '{field}' is {found}, expected {expected}{torch}; this \
         torch's snapshot format is not supported, please report it with the torch version"
    )]
    WrongType {
        field: String,
        expected: &'static str,
        found: String,
        torch: TorchVersion,
    },

    #[error("allocator snapshot field '{field}' is inconsistent: {reason}{torch}")]
    Inconsistent {
        field: String,
        reason: String,
        torch: TorchVersion,
    },

    /// A sum or difference of values read from a snapshot that does not fit in 64 bits:
    /// no allocator holds that much, so the snapshot is damaged or made up.
    #[error(
        "allocator snapshot field '{field}' cannot be used: {what} does not fit in a signed \
         64-bit integer{torch}; the snapshot is damaged or was not written by torch's \
         allocator"
    )]
    Overflow {
        field: String,
        what: String,
        torch: TorchVersion,
    },

    #[error("'{}': {source}", path.display())]
    Pickle {
        path: PathBuf,
        #[source]
        source: PickleError,
    },

    #[error("cannot read '{}': {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{0}")]
    InvalidInput(String),

    #[error("{0}")]
    CrossRun(String),

    /// A point or snapshot used with a run or probe that did not record it.
    #[error("{0}")]
    Ownership(String),

    /// An analysis needs allocator history where there is none (recording off, or live
    /// blocks without frames).
    #[error("{0}")]
    HistoryDisabled(String),

    /// A point's boundary marker could not be recorded, so its window cannot be cut.
    #[error("{0}")]
    HistoryBoundary(String),

    /// A window's start marker is not in the history (overwritten, or recording began
    /// late).
    #[error("{0}")]
    HistoryTruncated(String),

    /// Complete history contradicts the allocator state, or boundaries are out of order.
    #[error("{0}")]
    Reconciliation(String),

    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The torch version a snapshot came from, when known, as a message suffix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TorchVersion(pub Option<String>);

impl std::fmt::Display for TorchVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(v) => write!(f, " (torch {v})"),
            None => Ok(()),
        }
    }
}

pub type Result<T, E = MemoryError> = std::result::Result<T, E>;

impl MemoryError {
    pub fn invalid(message: impl Into<String>) -> MemoryError {
        MemoryError::InvalidInput(message.into())
    }
}
