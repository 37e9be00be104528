//! Tensor dtypes and native summaries over host bytes.
//!
//! [`DType`] names the torch dtypes whose raw bytes can be decoded; [`decode`] turns
//! those bytes into `f64` values (or `(re, im)` pairs) chunk by chunk for other
//! crates to build on; [`summarize`] computes counts, extremes and numerically
//! stable moments of a whole tensor.

mod close;
pub mod decode;
mod dtype;
mod float8;
pub mod json;
mod moments;
#[cfg(feature = "python")]
mod python;
mod summary;

pub use close::CloseRule;
pub use decode::{DecodeError, SummaryError};
pub use dtype::{DType, UnsupportedDtype};
pub use float8::float8_table;
pub use summary::{summarize, ElementCounts, TensorSummary};
