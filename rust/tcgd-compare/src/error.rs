//! Errors of the comparison engine. Messages reach users unchanged (Python exceptions, CLI
//! output), so each names the thing at fault and what to do.

use std::path::PathBuf;

use tcgd_report::ReportDirError;
use tcgd_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Reading a run failed; the store's message names the file.
    #[error(transparent)]
    Store(#[from] StoreError),

    #[error("invalid comparison option {option}: {reason}")]
    InvalidOption { option: String, reason: String },

    /// Inputs that cannot be compared as given (an unknown point label, a malformed
    /// observation, ...).
    #[error("{0}")]
    InvalidInput(String),

    /// Payload bytes that do not fit the observation they belong to.
    #[error(
        "payload of observation '{name}' (invocation {invocation}) on the {side} side: \
         {reason}"
    )]
    Payload {
        side: &'static str,
        name: String,
        invocation: i64,
        reason: String,
    },

    /// A payload provider outside this crate (the Python layer) failed; it keeps the
    /// original error to re-raise.
    #[error("{0}")]
    External(String),

    /// The progress callback asked to stop (Ctrl-C in the CLI).
    #[error("comparison interrupted")]
    Interrupted,

    /// Writing a report directory failed (not empty without overwrite, in the way, I/O).
    #[error(transparent)]
    Report(#[from] ReportDirError),

    #[error("I/O error on '{path}': {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = CompareError> = std::result::Result<T, E>;
