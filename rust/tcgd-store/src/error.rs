//! Typed errors of the store. Every variant names the file or value at fault and says
//! what to do, because these messages reach users unchanged (as Python exceptions or CLI
//! output).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("I/O error on '{path}': {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// `missing`: the path does not exist at all (a typo, most often), which the message
    /// says rather than pointing at a table inside it.
    #[error(
        "'{path}' is not a job root of torch-cudagraph-debug: {}; give the directory a \
         recorder wrote to (its run_dir)",
        if *missing { "it does not exist" } else { "it has no runs table (runs/_delta_log)" }
    )]
    NotARun { path: PathBuf, missing: bool },

    #[error(
        "'{path}' is a run of storage version 1 (it has a run.json manifest); this version \
         reads and writes version 2 job roots only: record the run again, or read it with \
         torch-cudagraph-debug 0.1.x"
    )]
    VersionOneRun { path: PathBuf },

    #[error("cannot choose a run in job root '{root}': {reason}")]
    RunSelection { root: PathBuf, reason: String },

    #[error("'{path}' is not a table of torch-cudagraph-debug: {reason}")]
    NotOurs { path: PathBuf, reason: String },

    #[error("Delta table '{table}': {reason}")]
    Delta { table: PathBuf, reason: String },

    #[error("manifest '{path}' is invalid: {reason}")]
    InvalidManifest { path: PathBuf, reason: String },

    #[error(
        "'{path}' was written with format_version {found}, newer than this reader understands \
         ({supported}); upgrade torch-cudagraph-debug to read it"
    )]
    NewerFormat {
        path: PathBuf,
        found: u32,
        supported: u32,
    },

    #[error(
        "the table log '{manifest}' names data file '{part}', which is not a regular file \
         at rank=<r>/<name> inside its table; the log or the table was damaged or crafted, \
         refusing to read it"
    )]
    UnsafePath { manifest: PathBuf, part: String },

    // The run cannot be loaded as a whole, so the advice names what works on it.
    #[error(
        "part '{path}' is damaged ({reason}); load the run with on_damage=\"skip\" to read \
         its intact points, or run `tcgd validate` on it to list every damaged file"
    )]
    CorruptPart { path: PathBuf, reason: String },

    // A log is not skipped as a data file is: without it nothing of the table is known to
    // be intact, so the message does not suggest on_damage="skip".
    #[error(
        "the Delta log '{log}' cannot be read ({reason}); no run with rows in its table can be \
         loaded from it, not even with on_damage=\"skip\" (which leaves out damaged data \
         files, not a damaged log): restore the log from a copy of the job root"
    )]
    CorruptLog { log: PathBuf, reason: String },

    #[error(
        "payload {digest} read from '{path}' does not match its digest (got {actual}); the \
         file was modified or damaged after it was written"
    )]
    DigestMismatch {
        digest: String,
        actual: String,
        path: PathBuf,
    },

    #[error("payload {digest} is not stored in run '{run}'")]
    PayloadMissing { digest: String, run: PathBuf },

    #[error("invalid value for {field}: {reason}")]
    InvalidInput { field: String, reason: String },

    #[error("run '{path}' is already finished; start a new run to record more points")]
    RunFinished { path: PathBuf },

    #[error(
        "{path} already exists; choose another name or directory, or replace the run with \
         overwrite=True (--overwrite on the command line)"
    )]
    RunExists { path: PathBuf },

    #[error(
        "{path} is being written by another recorder ({holder}); wait until it has \
         finished, or choose another name or directory"
    )]
    RunInUse { path: PathBuf, holder: String },

    #[error("cannot replace the run in '{path}': {reason}")]
    NotReplaceable { path: PathBuf, reason: String },

    #[error(
        "run '{run}': committing point '{label}' in the background failed ({reason}); points \
         recorded after it were not committed, and the run takes no more points"
    )]
    BackgroundCommit {
        run: PathBuf,
        label: String,
        reason: String,
    },

    #[error(transparent)]
    Dtype(#[from] tcgd_tensor::UnsupportedDtype),

    #[error(transparent)]
    Summary(#[from] tcgd_tensor::SummaryError),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

impl StoreError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.into();
        move |source| StoreError::Io { path, source }
    }

    pub(crate) fn corrupt(path: impl Into<PathBuf>) -> impl FnOnce(String) -> StoreError {
        let path = path.into();
        move |reason| StoreError::CorruptPart { path, reason }
    }

    pub(crate) fn invalid(field: &str, reason: impl Into<String>) -> StoreError {
        StoreError::InvalidInput {
            field: field.to_owned(),
            reason: reason.into(),
        }
    }
}
