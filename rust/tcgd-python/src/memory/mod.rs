//! Python bindings of tcgd-memory: snapshot ingestion straight from the dict
//! `torch.cuda.memory._snapshot()` returns, memory runs, comparisons and reports.
//!
//! The snapshot dict is read in place (no `pickle.dumps`, no copy into Rust values): a
//! point walks the state and only the history entries new since the previous point, so
//! its cost does not grow with the ring. Work that needs no Python objects (Parquet
//! writing, reading runs, comparing, rendering) runs with the GIL released.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arrow_pyarrow::ToPyArrow;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};
use tcgd_memory::compare::CompareOptions;
use tcgd_memory::model::{DeviceMemory, Event, StackTable};
use tcgd_memory::report::{Depth, Format, ReportOptions};
use tcgd_memory::run::{MemoryRunReader as RustReader, MemoryRunWriter as RustWriter, PointMeta};
use tcgd_memory::tree::IntValue;
use tcgd_memory::{
    Field, HistoryCursor, IngestOptions, MemoryError, MemoryState as RustState, PickleSnapshot,
    SnapshotTree, StateIdentity,
};
use tcgd_store::Table;

use crate::errors::{guard, try_lock, BindResult, BindingError};

mod analysis;
pub(crate) mod attribution;
mod facade;
pub(crate) mod lifetimes;
mod rows;
mod run;
mod state;
pub(crate) use analysis::*;
pub(crate) use facade::*;
mod beyond;
pub(crate) use beyond::*;
pub(crate) mod group;
pub(crate) use rows::*;
pub(crate) use run::*;
pub(crate) use state::*;

// ---------------------------------------------------------------------- errors

// ---------------------------------------------------------------------- the dict as a tree

/// A snapshot dict read in place. Keys are interned once per ingestion.
struct PyTree<'py> {
    keys: Vec<Bound<'py, PyString>>,
}

impl<'py> PyTree<'py> {
    fn new(py: Python<'py>) -> PyTree<'py> {
        PyTree {
            keys: Field::ALL
                .iter()
                .map(|f| PyString::intern(py, f.key()))
                .collect(),
        }
    }
}

impl<'py> SnapshotTree for PyTree<'py> {
    type Node = Bound<'py, PyAny>;

    fn get(&self, node: &Self::Node, field: Field) -> Result<Option<Self::Node>, ()> {
        let dict = node.cast::<PyDict>().map_err(|_| ())?;
        dict.get_item(&self.keys[field.index()]).map_err(|_| ())
    }

    fn seq_len(&self, node: &Self::Node) -> Option<usize> {
        if let Ok(list) = node.cast::<PyList>() {
            Some(list.len())
        } else if let Ok(tuple) = node.cast::<PyTuple>() {
            Some(tuple.len())
        } else {
            None
        }
    }

    fn seq_item(&self, node: &Self::Node, index: usize) -> Option<Self::Node> {
        if let Ok(list) = node.cast::<PyList>() {
            list.get_item(index).ok()
        } else if let Ok(tuple) = node.cast::<PyTuple>() {
            tuple.get_item(index).ok()
        } else {
            None
        }
    }

    fn int(&self, node: &Self::Node) -> IntValue {
        if node.cast::<PyInt>().is_err() {
            return IntValue::NotAnInt;
        }
        match node.extract::<i64>() {
            Ok(v) => IntValue::Int(v),
            Err(_) => IntValue::OutOfRange,
        }
    }

    fn boolean(&self, node: &Self::Node) -> Option<bool> {
        if let Ok(b) = node.cast::<PyBool>() {
            return Some(b.is_true());
        }
        match self.int(node) {
            IntValue::Int(0) => Some(false),
            IntValue::Int(1) => Some(true),
            _ => None,
        }
    }

    fn with_str<R>(&self, node: &Self::Node, f: impl FnOnce(&str) -> R) -> Option<R> {
        let s = node.cast::<PyString>().ok()?;
        s.to_str().ok().map(f)
    }

    fn is_none(&self, node: &Self::Node) -> bool {
        node.is_none()
    }

    fn identity(&self, node: &Self::Node) -> usize {
        node.as_ptr() as usize
    }

    fn type_name(&self, node: &Self::Node) -> String {
        node.get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "object".to_owned())
    }
}

// ---------------------------------------------------------------------- arguments

/// Device readings as Python passes them: `{device: (free, total, probe_device,
/// probe_pinned)}`, any value None when unknown.
type DeviceArgs = Vec<(i64, Option<i64>, Option<i64>, Option<i64>, Option<i64>)>;

fn device_memory(args: DeviceArgs) -> Vec<DeviceMemory> {
    args.into_iter()
        .map(|(device, free, total, probe, pinned)| DeviceMemory {
            device,
            free_bytes: free,
            total_bytes: total,
            probe_device_bytes: probe,
            probe_pinned_bytes: pinned,
        })
        .collect()
}

/// `((ref_device, (a, b)), (cand_device, (c, d)))` pairs.
type PoolMappingArgs = Vec<((i64, (i64, i64)), (i64, (i64, i64)))>;

fn options(pool_mapping: PoolMappingArgs, device_mapping: Vec<(i64, i64)>) -> CompareOptions {
    CompareOptions {
        pool_mapping,
        device_mapping,
    }
}

fn report_options(include_unchanged: bool, depth: &str) -> BindResult<ReportOptions> {
    let depth = Depth::parse(depth).ok_or_else(|| {
        BindingError::InvalidInput(format!(
            "depth must be 'device', 'pool' or 'stream', got '{depth}'"
        ))
    })?;
    Ok(ReportOptions {
        include_unchanged,
        depth,
    })
}

/// A report rendered with the GIL released, once its format and options are checked.
fn render_report(
    py: Python<'_>,
    format: &str,
    include_unchanged: bool,
    depth: &str,
    render: impl FnOnce(Format, ReportOptions) -> String + Send,
) -> PyResult<String> {
    guard(py, || {
        let format = format_of(format)?;
        let options = report_options(include_unchanged, depth)?;
        Ok(py.detach(|| render(format, options)))
    })
}

fn format_of(format: &str) -> BindResult<Format> {
    Format::parse(format).ok_or_else(|| {
        BindingError::InvalidInput(format!(
            "format must be 'text', 'json', 'csv' or 'html', got '{format}'"
        ))
    })
}

// ---------------------------------------------------------------------- MemoryState

/// `(order, device, pool_id, stream, stats)` as Python receives an observation.
type ObservationRow = (usize, i64, (i64, i64), i64, Py<AbsoluteStats>);
/// `(device, pool_id, stats)` of one pool.
type PoolRow = (i64, (i64, i64), Py<AbsoluteStats>);
