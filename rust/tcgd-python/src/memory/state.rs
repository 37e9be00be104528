//! Allocator states: read from the snapshot dict in place (or a pickle), ingested point by
//! point, and their Python views.

use tcgd_memory::pickle_write::Value;
use tcgd_memory::state::SnapshotSource;
use tcgd_memory::viz::SnapshotShape;

use super::*;

/// One analysed snapshot or point (immutable).
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryState {
    pub(super) inner: Arc<RustState>,
}

/// A rebuilt snapshot value as Python objects (dicts keep their keys' order).
fn value_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    let items = |items: &[Value]| -> PyResult<Vec<Bound<'py, PyAny>>> {
        items.iter().map(|v| value_to_py(py, v)).collect()
    };
    Ok(match value {
        Value::None => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::List(list) => PyList::new(py, items(list)?)?.into_any(),
        Value::Tuple(tuple) => PyTuple::new(py, items(tuple)?)?.into_any(),
        Value::Dict(entries) => {
            let d = PyDict::new(py);
            for (k, v) in entries {
                d.set_item(k, value_to_py(py, v)?)?;
            }
            d.into_any()
        }
    })
}

/// Rebuilds a dict shaped like `torch.cuda.memory._snapshot()`'s from a state: its
/// segments and blocks, and as `device_traces` the history window the state stored.
pub(super) fn raw_snapshot<'py>(
    py: Python<'py>,
    state: &RustState,
    events: &[Event],
) -> PyResult<Bound<'py, PyDict>> {
    let value = tcgd_memory::viz::snapshot_value(state, events, SnapshotShape::Stored);
    Ok(value_to_py(py, &value)?.cast_into::<PyDict>()?)
}

#[pymethods]
impl MemoryState {
    /// Who took the state and how: origin, name, label, index, source, marker, ...
    fn identity<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::results::serde_to_py(py, &self.inner.identity)
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
    fn observations(&self, py: Python<'_>) -> PyResult<Vec<ObservationRow>> {
        self.inner
            .observations
            .iter()
            .enumerate()
            .map(|(i, (k, s))| Ok((i, k.device, k.pool, k.stream, stats_object(py, *s)?)))
            .collect()
    }

    /// `[(device, pool_id, stats)]`: sums over streams, in report order.
    fn pool_stats(&self, py: Python<'_>) -> PyResult<Vec<PoolRow>> {
        self.inner
            .pool_stats()
            .iter()
            .map(|((device, pool), s)| Ok((*device, *pool, stats_object(py, *s)?)))
            .collect()
    }

    /// `[(device, sample)]` for every device whose CUDA Runtime reading succeeded.
    fn device_samples(&self) -> Vec<(i64, tcgd_memory::rows::DeviceSample)> {
        self.inner
            .devices
            .iter()
            .filter_map(|&d| tcgd_memory::rows::DeviceSample::of(&self.inner, d).map(|s| (d, s)))
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
                stats_object(py, self.inner.scope_stats(device, scope))?,
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
                d.set_item(
                    "allocator_reserved",
                    state.device_stats(device).reserved_bytes,
                )?;
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

    /// Who owned each private pool at the point (empty when not recorded).
    #[getter]
    fn pool_owners(&self) -> Vec<MemoryPoolOwner> {
        owners_of(&self.inner)
    }

    /// `torch.cuda.memory_stats()` peaks per device (empty when not read).
    #[getter]
    fn peaks(&self) -> Vec<MemoryDevicePeaks> {
        peaks_of(&self.inner)
    }

    /// Writes the state as a pickle PyTorch's memory viewer opens (segments, and as
    /// `device_traces` the history this state holds).
    fn export_memory_viz(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        guard(py, || {
            py.detach(|| export_viz(&path, &self.inner, &self.inner.events))
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
        render_report(py, format, include_unchanged, depth, |f, o| {
            tcgd_memory::report::render_comparison(&tcgd_memory::summary(&self.inner), f, o)
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
                marker: marker.filter(|_| ingested.boundary_recorded),
                boundary_recorded: ingested.boundary_recorded,
                taken: SnapshotSource {
                    source,
                    source_path: None,
                    synchronized,
                    during_capture,
                    torch_version,
                },
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

/// A pickled snapshot read on its own: no history before it, a stack table of its own.
fn ingest_alone(snap: &PickleSnapshot) -> Result<(tcgd_memory::Ingested, StackTable), MemoryError> {
    let mut stacks = StackTable::default();
    let ingested = tcgd_memory::ingest(
        snap,
        &snap.root(),
        &IngestOptions::default(),
        &HistoryCursor::new(),
        &mut stacks,
    )?;
    Ok((ingested, stacks))
}

/// A standalone state from a `_dump_snapshot` pickle file (no run, fresh history).
#[pyfunction]
#[pyo3(signature = (path, *, origin, name, label, device_memory))]
pub(crate) fn memory_state_from_pickle(
    py: Python<'_>,
    path: PathBuf,
    origin: String,
    name: String,
    label: String,
    device_memory: DeviceArgs,
) -> PyResult<MemoryState> {
    guard(py, || {
        let state = py.detach(|| -> Result<RustState, MemoryError> {
            let (ingested, stacks) = ingest_alone(&tcgd_memory::run::read_pickle_file(&path)?)?;
            let identity = StateIdentity {
                origin,
                name,
                label,
                index: 0,
                taken: SnapshotSource::import(&path),
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

/// Reads the files of an import as `MemoryRunWriter.import_pickle` will, writing nothing;
/// raises what the import of the first file that cannot be imported would raise
/// (`tcgd_memory::run::check_pickle_import`).
#[pyfunction]
pub(crate) fn check_snapshot_import(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    device_memory: Vec<DeviceArgs>,
) -> PyResult<()> {
    guard(py, || {
        if paths.len() != device_memory.len() {
            return Err(BindingError::InvalidInput(format!(
                "{} files but {} device readings",
                paths.len(),
                device_memory.len()
            )));
        }
        let files: Vec<(PathBuf, Vec<tcgd_memory::DeviceMemory>)> = paths
            .into_iter()
            .zip(device_memory.into_iter().map(self::device_memory))
            .collect();
        py.detach(|| tcgd_memory::run::check_pickle_import(&files))
            .map_err(BindingError::from)
    })
}
