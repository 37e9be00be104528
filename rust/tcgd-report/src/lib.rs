//! Report files shared by tensor reports (tcgd-compare) and memory reports (tcgd-memory):
//! tables as Arrow record batches written as CSV that a spreadsheet cannot execute
//! ([`table`], [`csv`]), one HTML shell and escaping ([`html`]), the rules for writing
//! a report directory ([`dir`]), and reports assembled block by block ([`document`]). One implementation of each, so both kinds of report
//! behave the same.

pub mod csv;
pub mod dir;
pub mod document;
pub mod html;
#[cfg(feature = "python")]
pub mod python;
pub mod svg;
pub mod table;

pub use dir::{write_report, ReportDirError};
pub use document::{Block, Document, Series};
pub use table::{Cell, Table};
