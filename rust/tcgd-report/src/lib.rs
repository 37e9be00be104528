//! Report files shared by tensor reports (tcgd-compare) and memory reports (tcgd-memory):
//! CSV cells that a spreadsheet cannot execute, and the rules for writing a report
//! directory. One implementation of each, so both kinds of report behave the same.

pub mod csv;
pub mod dir;

pub use dir::{write_report, ReportDirError};
