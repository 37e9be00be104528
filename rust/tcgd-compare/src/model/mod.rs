//! The inputs and results of a comparison, as plain data. Results serialise to the JSON
//! report as they are: the JSON is the complete record, the other reports are views of it.

/// Name written into every JSON report, so a program can recognise one.
pub const REPORT_SCHEMA: &str = "torch-cudagraph-debug/comparison";
/// Version of the JSON report layout; bumped when a field changes meaning or goes away.
pub const REPORT_VERSION: u32 = 1;

mod comparison;
mod inputs;
mod observations;
mod values;

pub use comparison::*;
pub use inputs::*;
pub use observations::*;
pub use values::*;
