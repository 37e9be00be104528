//! The memory state's values as Python objects: `MemoryStats` (absolute),
//! `MemoryStatsDelta` (signed) and `DeviceMemorySample` are declared by tcgd-memory over
//! its own types (`tcgd_memory::python`).

pub(crate) use tcgd_memory::python::{AbsoluteStats, MemoryStatsDelta};
use tcgd_memory::MemoryStats;

use super::*;

/// Python's `MemoryStats` of `stats`.
pub(crate) fn stats_object(py: Python<'_>, stats: MemoryStats) -> PyResult<Py<AbsoluteStats>> {
    Py::new(py, AbsoluteStats::of(stats))
}

/// Python's `MemoryStatsDelta` of the change `delta`.
pub(crate) fn delta_object(py: Python<'_>, delta: MemoryStats) -> PyResult<Py<MemoryStatsDelta>> {
    Py::new(py, MemoryStatsDelta::of(delta))
}
