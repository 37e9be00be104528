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
use tcgd_memory::model::{DeviceMemory, Event, PoolId, StackTable};
use tcgd_memory::report::{Depth, Format, ReportOptions};
use tcgd_memory::run::{MemoryRunReader as RustReader, MemoryRunWriter as RustWriter, PointMeta};
use tcgd_memory::tree::IntValue;
use tcgd_memory::{
    Field, HistoryCursor, IngestOptions, MemoryError, MemoryState as RustState, PickleSnapshot,
    SnapshotTree, StateIdentity,
};
use tcgd_store::{RunHeader, Table};

use crate::errors::{guard, try_lock, BindResult, BindingError};

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

fn format_of(format: &str) -> BindResult<Format> {
    Format::parse(format).ok_or_else(|| {
        BindingError::InvalidInput(format!(
            "format must be 'text', 'json', 'csv' or 'html', got '{format}'"
        ))
    })
}

// ---------------------------------------------------------------------- MemoryState

/// `(order, device, pool_id, stream, stats)` as Python receives an observation.
type ObservationRow<'py> = (usize, i64, (i64, i64), i64, Bound<'py, PyDict>);
/// `(device, pool_id, stats)` of one pool.
type PoolRow<'py> = (i64, (i64, i64), Bound<'py, PyDict>);

/// One analysed snapshot or point (immutable).
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryState {
    inner: Arc<RustState>,
}

fn identity_dict<'py>(py: Python<'py>, id: &StateIdentity) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("origin", &id.origin)?;
    d.set_item("name", &id.name)?;
    d.set_item("label", &id.label)?;
    d.set_item("index", id.index)?;
    d.set_item("source", &id.source)?;
    d.set_item("source_path", &id.source_path)?;
    d.set_item("marker", &id.marker)?;
    d.set_item("boundary_recorded", id.boundary_recorded)?;
    d.set_item("synchronized", id.synchronized)?;
    d.set_item("during_capture", id.during_capture)?;
    d.set_item("torch_version", &id.torch_version)?;
    Ok(d)
}

fn stats_dict<'py>(py: Python<'py>, s: &tcgd_memory::MemoryStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, value) in s.columns() {
        d.set_item(name, value)?;
    }
    Ok(d)
}

fn frames_list<'py>(
    py: Python<'py>,
    stacks: &StackTable,
    stack: Option<u32>,
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    let Some(frames) = stack.and_then(|s| stacks.stack(s)) else {
        return Ok(list);
    };
    for &f in frames {
        if let Some(frame) = stacks.frame(f) {
            let d = PyDict::new(py);
            d.set_item("filename", &frame.filename)?;
            d.set_item("line", frame.line)?;
            d.set_item("name", &frame.name)?;
            list.append(d)?;
        }
    }
    Ok(list)
}

fn pool_tuple(pool: PoolId) -> (i64, i64) {
    pool
}

/// Rebuilds a dict shaped like `torch.cuda.memory._snapshot()`'s from a state: its
/// segments and blocks, and as `device_traces` the history window the state stored.
fn raw_snapshot<'py>(
    py: Python<'py>,
    state: &RustState,
    events: &[Event],
) -> PyResult<Bound<'py, PyDict>> {
    let stacks = &state.stacks;
    let segments = PyList::empty(py);
    let mut blocks_of: Vec<Vec<usize>> = vec![Vec::new(); state.segments.len()];
    for (i, b) in state.blocks.iter().enumerate() {
        if let Some(list) = blocks_of.get_mut(b.segment as usize) {
            list.push(i);
        }
    }
    for (i, s) in state.segments.iter().enumerate() {
        let d = PyDict::new(py);
        d.set_item("device", s.device)?;
        d.set_item("address", s.address)?;
        d.set_item("total_size", s.total_size)?;
        let blocks = PyList::empty(py);
        let (mut allocated, mut active, mut requested) = (0i64, 0i64, 0i64);
        for &bi in &blocks_of[i] {
            let b = &state.blocks[bi];
            if b.state == tcgd_memory::model::BlockState::ActiveAllocated {
                allocated += b.size;
            }
            if b.state.is_active() {
                active += b.size;
                requested += b.requested_size;
            }
            let bd = PyDict::new(py);
            bd.set_item("address", b.address)?;
            bd.set_item("size", b.size)?;
            bd.set_item("requested_size", b.requested_size)?;
            bd.set_item(
                "state",
                match b.state {
                    // The name torch's _snapshot() itself uses.
                    tcgd_memory::model::BlockState::ActiveAwaitingFree => "active_pending_free",
                    other => other.as_str(),
                },
            )?;
            bd.set_item("frames", frames_list(py, stacks, b.stack)?)?;
            blocks.append(bd)?;
        }
        d.set_item("allocated_size", s.allocated_size.unwrap_or(allocated))?;
        d.set_item("active_size", s.active_size.unwrap_or(active))?;
        d.set_item("requested_size", s.requested_size.unwrap_or(requested))?;
        d.set_item("stream", s.stream)?;
        d.set_item("segment_type", &s.segment_type)?;
        d.set_item("segment_pool_id", pool_tuple(s.pool))?;
        d.set_item("is_expandable", s.is_expandable)?;
        d.set_item("frames", frames_list(py, stacks, s.stack)?)?;
        d.set_item("blocks", blocks)?;
        segments.append(d)?;
    }
    let device_count = state
        .devices
        .iter()
        .copied()
        .chain(events.iter().map(|e| e.device))
        .max()
        .map_or(0, |d| usize::try_from(d + 1).unwrap_or(0));
    let traces: Vec<Bound<'py, PyList>> = (0..device_count).map(|_| PyList::empty(py)).collect();
    for e in events {
        let Some(list) = usize::try_from(e.device).ok().and_then(|d| traces.get(d)) else {
            continue;
        };
        let d = PyDict::new(py);
        d.set_item("action", &e.action)?;
        if e.action == "oom" {
            d.set_item("device_free", e.device_free)?;
        } else {
            d.set_item("addr", e.address)?;
        }
        d.set_item("size", e.size)?;
        d.set_item("stream", e.stream)?;
        d.set_item("time_us", e.time_us)?;
        if let Some(m) = &e.user_metadata {
            d.set_item("user_metadata", m)?;
        }
        if let Some(c) = &e.compile_context {
            d.set_item("compile_context", c)?;
        }
        if let Some(p) = e.pool {
            d.set_item("pool_id", pool_tuple(p))?;
        }
        if e.stack.is_some() {
            d.set_item("frames", frames_list(py, stacks, e.stack)?)?;
        }
        list.append(d)?;
    }
    let out = PyDict::new(py);
    out.set_item("segments", segments)?;
    out.set_item("device_traces", PyList::new(py, traces)?)?;
    Ok(out)
}

#[pymethods]
impl MemoryState {
    /// Who took the state and how: origin, name, label, index, source, marker, ...
    fn identity<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        identity_dict(py, &self.inner.identity)
    }

    #[getter]
    fn devices(&self) -> Vec<i64> {
        self.inner.devices.clone()
    }

    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }

    /// `[(order, device, pool_id, stream, stats dict)]`, in report order.
    fn observations<'py>(&self, py: Python<'py>) -> PyResult<Vec<ObservationRow<'py>>> {
        self.inner
            .observations
            .iter()
            .enumerate()
            .map(|(i, (k, s))| Ok((i, k.device, k.pool, k.stream, stats_dict(py, s)?)))
            .collect()
    }

    /// `[(device, pool_id, stats dict)]`: sums over streams, in report order.
    fn pool_stats<'py>(&self, py: Python<'py>) -> PyResult<Vec<PoolRow<'py>>> {
        self.inner
            .pool_stats()
            .iter()
            .map(|((device, pool), s)| Ok((*device, *pool, stats_dict(py, s)?)))
            .collect()
    }

    /// Sums per scope (`all`, `default`, `private`); `device=None` sums every device.
    #[pyo3(signature = (device=None))]
    fn scope_stats<'py>(
        &self,
        py: Python<'py>,
        device: Option<i64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for scope in tcgd_memory::Scope::ALL {
            d.set_item(
                scope.as_str(),
                stats_dict(py, &self.inner.scope_stats(device, scope))?,
            )?;
        }
        Ok(d)
    }

    /// Device-wide readings and the history window, one dict per device.
    fn device_memory<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let state = &self.inner;
        state
            .devices
            .iter()
            .map(|&device| {
                let m = state.memory(device);
                let d = PyDict::new(py);
                d.set_item("device", device)?;
                d.set_item("free_bytes", m.free_bytes)?;
                d.set_item("total_bytes", m.total_bytes)?;
                d.set_item("cuda_used", m.cuda_used())?;
                d.set_item("allocator_reserved", state.device_stats(device).reserved)?;
                d.set_item("residual", state.residual(device))?;
                d.set_item("probe_device_bytes", m.probe_device_bytes)?;
                d.set_item("probe_pinned_bytes", m.probe_pinned_bytes)?;
                let window = state.windows.iter().find(|w| w.device == device);
                d.set_item(
                    "history_status",
                    window.map_or("disabled", |w| w.status.as_str()),
                )?;
                d.set_item("ring_entries", window.map_or(0, |w| w.ring_entries))?;
                d.set_item("window_events", window.map_or(0, |w| w.events))?;
                Ok(d)
            })
            .collect()
    }

    /// One memory table of this state (`memory_stats`, `memory_segments`,
    /// `memory_blocks`, `memory_events`, `memory_devices`, ...) as a `pyarrow.RecordBatch`.
    fn table<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        guard(py, || {
            let table = Table::from_dir_name(name)
                .filter(|t| Table::MEMORY.contains(t) && *t != Table::Points)
                .ok_or_else(|| BindingError::InvalidInput(format!("no memory table '{name}'")))?;
            let batches = py.detach(|| tcgd_memory::run::state_tables(&self.inner))?;
            let batch = batches
                .into_iter()
                .find(|(t, _)| *t == table)
                .map(|(_, b)| b)
                .ok_or_else(|| BindingError::Internal(format!("table {name} missing")))?;
            Ok(batch.to_pyarrow(py)?)
        })
    }

    /// A dict shaped like `torch.cuda.memory._snapshot()`'s (traces: the stored window).
    fn raw_snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        guard(py, || {
            Ok(raw_snapshot(py, &self.inner, &self.inner.events)?)
        })
    }

    /// The state on its own as a report.
    #[pyo3(signature = (format="text", include_unchanged=true, depth="stream"))]
    fn report(
        &self,
        py: Python<'_>,
        format: &str,
        include_unchanged: bool,
        depth: &str,
    ) -> PyResult<String> {
        guard(py, || {
            let format = format_of(format)?;
            let opts = report_options(include_unchanged, depth)?;
            Ok(py.detach(|| {
                tcgd_memory::report::render_comparison(
                    &tcgd_memory::summary(&self.inner),
                    format,
                    opts,
                )
            }))
        })
    }
}

// ---------------------------------------------------------------------- probe-side ingestion

/// The history cursor and stack table of a MemoryProbe: snapshots of one probe share
/// them, so each snapshot stores only history new since the previous one.
#[pyclass(module = "torch_cudagraph_debug._native")]
pub struct MemoryIngestor {
    inner: Mutex<IngestorState>,
}

struct IngestorState {
    origin: String,
    name: String,
    cursor: HistoryCursor,
    stacks: Arc<StackTable>,
    count: i64,
}

#[pymethods]
impl MemoryIngestor {
    #[new]
    fn new(origin: String, name: String) -> Self {
        MemoryIngestor {
            inner: Mutex::new(IngestorState {
                origin,
                name,
                cursor: HistoryCursor::new(),
                stacks: Arc::new(StackTable::default()),
                count: 0,
            }),
        }
    }

    /// Ingests a live snapshot dict.
    #[pyo3(signature = (snapshot, *, label, marker, devices, device_memory, source, synchronized, during_capture, torch_version))]
    #[allow(clippy::too_many_arguments)]
    fn ingest(
        &self,
        py: Python<'_>,
        snapshot: &Bound<'_, PyAny>,
        label: Option<String>,
        marker: Option<String>,
        devices: Option<Vec<i64>>,
        device_memory: DeviceArgs,
        source: String,
        synchronized: bool,
        during_capture: bool,
        torch_version: Option<String>,
    ) -> PyResult<MemoryState> {
        guard(py, || {
            let mut state = try_lock(&self.inner, "probe")?;
            let tree = PyTree::new(py);
            let opts = IngestOptions {
                devices,
                marker: marker.clone(),
                torch_version: torch_version.clone(),
            };
            let st = &mut *state;
            let stacks = Arc::make_mut(&mut st.stacks);
            let mark = stacks.mark();
            let ingested = match tcgd_memory::ingest(&tree, snapshot, &opts, &st.cursor, stacks) {
                Ok(i) => i,
                Err(e) => {
                    stacks.rollback(mark);
                    return Err(e.into());
                }
            };
            let index = st.count;
            let identity = StateIdentity {
                origin: st.origin.clone(),
                name: st.name.clone(),
                label: label.unwrap_or_else(|| format!("snapshot-{index}")),
                index,
                source,
                source_path: None,
                marker: marker.filter(|_| ingested.boundary_recorded),
                boundary_recorded: ingested.boundary_recorded,
                synchronized,
                during_capture,
                torch_version,
            };
            let cursor = ingested.next_cursor.clone();
            let result = RustState::from_ingested(
                identity,
                ingested,
                self::device_memory(device_memory),
                st.stacks.clone(),
            );
            match result {
                Ok(s) => {
                    st.cursor = cursor;
                    st.count += 1;
                    Ok(MemoryState { inner: Arc::new(s) })
                }
                Err(e) => {
                    Arc::make_mut(&mut st.stacks).rollback(mark);
                    Err(e.into())
                }
            }
        })
    }
}

/// A standalone state from a `_dump_snapshot` pickle file (no run, fresh history).
#[pyfunction]
#[pyo3(signature = (path, *, origin, name, label, device_memory))]
fn memory_state_from_pickle(
    py: Python<'_>,
    path: PathBuf,
    origin: String,
    name: String,
    label: String,
    device_memory: DeviceArgs,
) -> PyResult<MemoryState> {
    guard(py, || {
        let state = py.detach(|| -> Result<RustState, MemoryError> {
            let snap = tcgd_memory::run::read_pickle_file(&path)?;
            let mut stacks = StackTable::default();
            let ingested = tcgd_memory::ingest(
                &snap,
                &snap.root(),
                &IngestOptions::default(),
                &HistoryCursor::new(),
                &mut stacks,
            )?;
            let identity = StateIdentity {
                origin,
                name,
                label,
                index: 0,
                source: "import".to_owned(),
                source_path: Some(path.display().to_string()),
                ..StateIdentity::default()
            };
            RustState::from_ingested(
                identity,
                ingested,
                self::device_memory(device_memory),
                Arc::new(stacks),
            )
        })?;
        Ok(MemoryState {
            inner: Arc::new(state),
        })
    })
}

/// Parses pickle bytes with the data-only reader; returns nothing, raises what a file
/// with these bytes would raise (used by tests and `tcgd memory import` checks).
#[pyfunction]
fn check_snapshot_pickle(py: Python<'_>, data: &[u8]) -> PyResult<()> {
    guard(py, || {
        let owned = data.to_vec();
        py.detach(|| -> Result<(), MemoryError> {
            let tree =
                tcgd_memory::pickle::parse(&owned).map_err(|source| MemoryError::Pickle {
                    path: PathBuf::from("<bytes>"),
                    source,
                })?;
            let snap = PickleSnapshot::new(tree);
            let mut stacks = StackTable::default();
            tcgd_memory::ingest(
                &snap,
                &snap.root(),
                &IngestOptions::default(),
                &HistoryCursor::new(),
                &mut stacks,
            )?;
            Ok(())
        })
        .map_err(BindingError::from)
    })
}

// ---------------------------------------------------------------------- runs

#[pyclass(module = "torch_cudagraph_debug._native")]
pub struct MemoryRunWriter {
    inner: Mutex<RustWriter>,
}

#[pymethods]
impl MemoryRunWriter {
    /// Claims a run (name and rank) in a job root; `overwrite` replaces a run already there.
    #[new]
    #[pyo3(signature = (path, header_json, producer, overwrite = false, commit_interval = None, compact = true))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        header_json: &str,
        producer: &str,
        overwrite: bool,
        commit_interval: Option<f64>,
        compact: bool,
    ) -> PyResult<Self> {
        guard(py, || {
            let header: RunHeader = serde_json::from_str(header_json)
                .map_err(|e| BindingError::InvalidInput(format!("run header: {e}")))?;
            let policy = crate::store::commit_policy(commit_interval)?;
            let writer = py.detach(|| {
                RustWriter::create_with_policy(&path, header, producer, overwrite, policy, compact)
            })?;
            Ok(MemoryRunWriter {
                inner: Mutex::new(writer),
            })
        })
    }

    /// Records one point from a live snapshot dict: reads the state and the new history
    /// in place, then commits durably with the GIL released.
    #[pyo3(signature = (snapshot, *, label, metadata_json, marker, devices, device_memory, source, synchronized, during_capture, torch_version))]
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        py: Python<'_>,
        snapshot: &Bound<'_, PyAny>,
        label: String,
        metadata_json: String,
        marker: Option<String>,
        devices: Option<Vec<i64>>,
        device_memory: DeviceArgs,
        source: String,
        synchronized: bool,
        during_capture: bool,
        torch_version: Option<String>,
    ) -> PyResult<MemoryState> {
        guard(py, || {
            let mut writer = try_lock(&self.inner, "recorder")?;
            let tree = PyTree::new(py);
            let opts = IngestOptions {
                devices,
                marker,
                torch_version: torch_version.clone(),
            };
            let pending = writer.ingest(&tree, snapshot, &opts)?;
            let meta = PointMeta {
                label,
                metadata: metadata_json,
                timestamp_us: None,
                source,
                source_path: None,
                synchronized,
                during_capture,
                torch_version,
            };
            let memory = self::device_memory(device_memory);
            let w: &mut RustWriter = &mut writer;
            let state = py.detach(|| w.commit(pending, meta, memory))?;
            Ok(MemoryState { inner: state })
        })
    }

    /// Imports a `_dump_snapshot` pickle as the next point (read without executing code).
    #[pyo3(signature = (path, *, label, metadata_json, device_memory))]
    fn import_pickle(
        &self,
        py: Python<'_>,
        path: PathBuf,
        label: String,
        metadata_json: String,
        device_memory: DeviceArgs,
    ) -> PyResult<MemoryState> {
        guard(py, || {
            let mut writer = try_lock(&self.inner, "recorder")?;
            let w: &mut RustWriter = &mut writer;
            let memory = self::device_memory(device_memory);
            let state = py.detach(|| -> Result<Arc<RustState>, MemoryError> {
                let snap = tcgd_memory::run::read_pickle_file(&path)?;
                let pending = w.ingest(&snap, &snap.root(), &IngestOptions::default())?;
                w.commit(
                    pending,
                    PointMeta {
                        label,
                        metadata: metadata_json,
                        timestamp_us: None,
                        source: "import".to_owned(),
                        source_path: Some(path.display().to_string()),
                        synchronized: false,
                        during_capture: false,
                        torch_version: None,
                    },
                    memory,
                )
            })?;
            Ok(MemoryState { inner: state })
        })
    }

    fn has_label(&self, label: &str) -> PyResult<bool> {
        Ok(try_lock(&self.inner, "recorder")?.has_label(label))
    }

    #[getter]
    fn point_count(&self) -> PyResult<u64> {
        Ok(try_lock(&self.inner, "recorder")?.point_count())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(try_lock(&self.inner, "recorder")?.is_closed())
    }

    #[getter]
    fn path(&self) -> PyResult<PathBuf> {
        Ok(try_lock(&self.inner, "recorder")?.dir().to_path_buf())
    }

    #[getter]
    fn run_id(&self) -> PyResult<String> {
        Ok(try_lock(&self.inner, "recorder")?.header().run_id.clone())
    }

    /// Waits until every recorded point is durable on disk.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        guard(py, || {
            let mut writer = try_lock(&self.inner, "recorder")?;
            let w: &mut RustWriter = &mut writer;
            py.detach(|| w.flush()).map_err(BindingError::from)
        })
    }

    /// Ends the run, complete or not: commits what is queued first. Idempotent.
    fn close(&self, py: Python<'_>, complete: bool) -> PyResult<()> {
        guard(py, || {
            let mut writer = try_lock(&self.inner, "recorder")?;
            let w: &mut RustWriter = &mut writer;
            py.detach(|| w.close(complete)).map_err(BindingError::from)
        })
    }

    /// Removes the run instead of ending it: for an import that failed as a whole.
    fn discard(&self, py: Python<'_>) -> PyResult<()> {
        guard(py, || {
            let mut writer = try_lock(&self.inner, "recorder")?;
            let w: &mut RustWriter = &mut writer;
            py.detach(|| w.discard()).map_err(BindingError::from)
        })
    }
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryRunReader {
    inner: RustReader,
}

#[pymethods]
impl MemoryRunReader {
    /// Opens a memory run; `on_damage` is `"raise"` or `"skip"` (`tcgd_store::OnDamage`).
    #[new]
    #[pyo3(signature = (path, on_damage = "raise", name = None, rank = None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        on_damage: &str,
        name: Option<String>,
        rank: Option<i64>,
    ) -> PyResult<Self> {
        guard(py, || {
            let mode = crate::store::on_damage(on_damage)?;
            let selector = tcgd_store::RunSelector {
                name,
                rank,
                kind: Some(tcgd_store::RunKind::Memory),
            };
            let inner = py.detach(|| RustReader::open_selected(&path, &selector, mode))?;
            Ok(MemoryRunReader { inner })
        })
    }

    /// What opening with `on_damage="skip"` left out (`Damage` fields as dicts).
    fn damage<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        crate::store::damage_list(py, self.inner.store().damage())
    }

    fn manifest_json(&self, py: Python<'_>) -> PyResult<String> {
        guard(py, || {
            let bytes = self.inner.manifest().to_json()?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        })
    }

    /// Every point's state, in commit order.
    fn states(&self) -> Vec<MemoryState> {
        self.inner
            .states()
            .iter()
            .map(|s| MemoryState { inner: s.clone() })
            .collect()
    }

    /// Every committed row of one of the run's tables as a `pyarrow.RecordBatch`.
    fn table<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        guard(py, || {
            let table = Table::from_dir_name(name)
                .filter(|t| Table::MEMORY.contains(t))
                .ok_or_else(|| BindingError::InvalidInput(format!("no memory table '{name}'")))?;
            let batch = py.detach(|| self.inner.store().table(table))?;
            Ok(batch.to_pyarrow(py)?)
        })
    }

    /// A point's state with the snapshot dict rebuilt (traces: the point's window).
    fn raw_snapshot<'py>(&self, py: Python<'py>, point_index: i64) -> PyResult<Bound<'py, PyDict>> {
        guard(py, || {
            let state = self
                .inner
                .states()
                .iter()
                .find(|s| s.identity.index == point_index)
                .ok_or_else(|| BindingError::InvalidInput(format!("no point {point_index}")))?
                .clone();
            let events = py.detach(|| self.inner.events(point_index))?;
            Ok(raw_snapshot(py, &state, &events)?)
        })
    }

    /// Checks every file digest; returns (path, problem) pairs.
    fn validate(&self, py: Python<'_>) -> PyResult<Vec<(PathBuf, String)>> {
        guard(py, || {
            let issues = py.detach(|| self.inner.store().validate())?;
            Ok(issues.into_iter().map(|i| (i.path, i.problem)).collect())
        })
    }
}

// ---------------------------------------------------------------------- analyses

/// A rendered-on-demand comparison of two states.
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryComparison {
    inner: tcgd_memory::Comparison,
}

#[pymethods]
impl MemoryComparison {
    #[pyo3(signature = (format="text", include_unchanged=true, depth="stream"))]
    fn render(
        &self,
        py: Python<'_>,
        format: &str,
        include_unchanged: bool,
        depth: &str,
    ) -> PyResult<String> {
        guard(py, || {
            let format = format_of(format)?;
            let opts = report_options(include_unchanged, depth)?;
            Ok(py.detach(|| tcgd_memory::report::render_comparison(&self.inner, format, opts)))
        })
    }

    #[getter]
    fn relation(&self) -> &'static str {
        self.inner.relation.as_str()
    }

    #[getter]
    fn lifecycle_label(&self) -> &'static str {
        self.inner.lifecycle.as_str()
    }

    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }

    #[getter]
    fn suggested_pool_mapping(&self) -> PoolMappingArgs {
        self.inner.suggested_pool_mapping.clone()
    }
}

#[pyfunction]
#[pyo3(signature = (reference, candidate, *, pool_mapping, device_mapping))]
fn compare_states(
    py: Python<'_>,
    reference: &MemoryState,
    candidate: &MemoryState,
    pool_mapping: PoolMappingArgs,
    device_mapping: Vec<(i64, i64)>,
) -> PyResult<MemoryComparison> {
    guard(py, || {
        let opts = options(pool_mapping, device_mapping);
        let inner =
            py.detach(|| tcgd_memory::compare(&reference.inner, &candidate.inner, &opts))?;
        Ok(MemoryComparison { inner })
    })
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryPhaseComparison {
    inner: tcgd_memory::PhaseComparison,
}

#[pymethods]
impl MemoryPhaseComparison {
    #[pyo3(signature = (format="text", include_unchanged=true))]
    fn render(&self, py: Python<'_>, format: &str, include_unchanged: bool) -> PyResult<String> {
        guard(py, || {
            let format = format_of(format)?;
            let opts = ReportOptions {
                include_unchanged,
                depth: Depth::Stream,
            };
            Ok(py.detach(|| tcgd_memory::report::render_phases(&self.inner, format, opts)))
        })
    }

    #[getter]
    fn identity_failures(&self) -> usize {
        self.inner.identity_failures().len()
    }

    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }
}

#[pyfunction]
#[pyo3(signature = (baseline_start, baseline_end, candidate_start, candidate_end, *, pool_mapping, device_mapping))]
fn compare_phases(
    py: Python<'_>,
    baseline_start: &MemoryState,
    baseline_end: &MemoryState,
    candidate_start: &MemoryState,
    candidate_end: &MemoryState,
    pool_mapping: PoolMappingArgs,
    device_mapping: Vec<(i64, i64)>,
) -> PyResult<MemoryPhaseComparison> {
    guard(py, || {
        let opts = options(pool_mapping, device_mapping);
        let inner = py.detach(|| {
            tcgd_memory::compare_phases(
                (&baseline_start.inner, &baseline_end.inner),
                (&candidate_start.inner, &candidate_end.inner),
                &opts,
            )
        })?;
        Ok(MemoryPhaseComparison { inner })
    })
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryTimeline {
    inner: tcgd_memory::Timeline,
}

#[pymethods]
impl MemoryTimeline {
    #[pyo3(signature = (format="text", include_unchanged=true))]
    fn render(&self, py: Python<'_>, format: &str, include_unchanged: bool) -> PyResult<String> {
        guard(py, || {
            let format = format_of(format)?;
            let opts = ReportOptions {
                include_unchanged,
                depth: Depth::Stream,
            };
            Ok(py.detach(|| tcgd_memory::report::render_timeline(&self.inner, format, opts)))
        })
    }
}

#[pyfunction]
fn memory_timeline(
    py: Python<'_>,
    states: Vec<PyRef<'_, MemoryState>>,
) -> PyResult<MemoryTimeline> {
    guard(py, || {
        let owned: Vec<Arc<RustState>> = states.iter().map(|s| s.inner.clone()).collect();
        let inner = py.detach(|| {
            let refs: Vec<&RustState> = owned.iter().map(|s| s.as_ref()).collect();
            tcgd_memory::timeline(&refs)
        })?;
        Ok(MemoryTimeline { inner })
    })
}

/// Several states, each reported on its own, as one document (`tcgd memory summary`).
#[pyfunction]
#[pyo3(signature = (states, format="text", include_unchanged=true, depth="stream"))]
fn render_memory_summaries(
    py: Python<'_>,
    states: Vec<PyRef<'_, MemoryState>>,
    format: &str,
    include_unchanged: bool,
    depth: &str,
) -> PyResult<String> {
    guard(py, || {
        let format = format_of(format)?;
        let opts = report_options(include_unchanged, depth)?;
        let owned: Vec<Arc<RustState>> = states.iter().map(|s| s.inner.clone()).collect();
        Ok(py.detach(|| {
            let refs: Vec<&RustState> = owned.iter().map(|s| s.as_ref()).collect();
            tcgd_memory::report::render_summaries(&refs, format, opts)
        }))
    })
}

/// Writes `(file name, content)` pairs into a report directory by the rules every report
/// follows: a directory holding anything needs `overwrite`, which removes only `own`.
#[pyfunction]
fn write_report_files(
    py: Python<'_>,
    directory: PathBuf,
    files: Vec<(String, String)>,
    own: Vec<String>,
    overwrite: bool,
) -> PyResult<Vec<PathBuf>> {
    guard(py, || {
        py.detach(|| tcgd_report::write_report(&directory, &files, &own, overwrite))
            .map_err(BindingError::from)
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MemoryState>()?;
    m.add_class::<MemoryIngestor>()?;
    m.add_class::<MemoryRunWriter>()?;
    m.add_class::<MemoryRunReader>()?;
    m.add_class::<MemoryComparison>()?;
    m.add_class::<MemoryPhaseComparison>()?;
    m.add_class::<MemoryTimeline>()?;
    m.add_function(wrap_pyfunction!(memory_state_from_pickle, m)?)?;
    m.add_function(wrap_pyfunction!(check_snapshot_pickle, m)?)?;
    m.add_function(wrap_pyfunction!(compare_states, m)?)?;
    m.add_function(wrap_pyfunction!(compare_phases, m)?)?;
    m.add_function(wrap_pyfunction!(memory_timeline, m)?)?;
    m.add_function(wrap_pyfunction!(render_memory_summaries, m)?)?;
    m.add_function(wrap_pyfunction!(write_report_files, m)?)?;
    Ok(())
}
