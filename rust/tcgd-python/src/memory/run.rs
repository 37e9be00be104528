//! Memory runs: the writer a `MemoryRecorder` commits points through, and the reader.

use std::path::Path;

use crate::store::{commit_policy, with_locked, RunLifecycle, RunWriterBase};

use super::*;
use tcgd_memory::state::SnapshotSource;

#[pyclass(module = "torch_cudagraph_debug._native", extends = RunWriterBase)]
pub struct MemoryRunWriter {
    inner: Arc<Mutex<RustWriter>>,
}

impl RunLifecycle for RustWriter {
    fn has_label(&self, label: &str) -> bool {
        RustWriter::has_label(self, label)
    }
    fn point_count(&self) -> u64 {
        RustWriter::point_count(self)
    }
    fn is_closed(&self) -> bool {
        RustWriter::is_closed(self)
    }
    fn dir(&self) -> &Path {
        RustWriter::dir(self)
    }
    fn flush(&mut self) -> BindResult<()> {
        Ok(RustWriter::flush(self)?)
    }
    fn close(&mut self, complete: bool) -> BindResult<()> {
        Ok(RustWriter::close(self, complete)?)
    }
    fn discard(&mut self) -> BindResult<()> {
        Ok(RustWriter::discard(self)?)
    }
}

impl MemoryRunWriter {
    fn open(
        path: &std::path::Path,
        header: tcgd_store::RunHeader,
        producer: &str,
        overwrite: bool,
        policy: tcgd_store::CommitPolicy,
        compact: bool,
    ) -> BindResult<Self> {
        let writer =
            RustWriter::create_with_policy(path, header, producer, overwrite, policy, compact)?;
        Ok(MemoryRunWriter {
            inner: Arc::new(Mutex::new(writer)),
        })
    }
}

#[pymethods]
impl MemoryRunWriter {
    /// Claims a memory run (name and rank) in a job root, created with `header`;
    /// `overwrite` replaces a run already there.
    #[new]
    #[pyo3(signature = (path, header, producer, overwrite = false, commit_interval = None, compact = true))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        header: tcgd_store::RunHeader,
        producer: &str,
        overwrite: bool,
        commit_interval: Option<f64>,
        compact: bool,
    ) -> PyResult<PyClassInitializer<Self>> {
        guard(py, || {
            let policy = commit_policy(commit_interval)?;
            let writer =
                py.detach(|| Self::open(&path, header, producer, overwrite, policy, compact))?;
            let base = RunWriterBase::over(writer.inner.clone(), "recorder");
            Ok(PyClassInitializer::from(base).add_subclass(writer))
        })
    }

    /// Records one point from a live snapshot dict: reads the state and the new history
    /// in place, then commits durably with the GIL released.
    #[pyo3(signature = (snapshot, *, label, metadata_json, marker, devices, device_memory, source, synchronized, during_capture, torch_version, pool_owners = None, peaks = None))]
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
        pool_owners: Option<OwnerArgs>,
        peaks: Option<PeakArgs>,
    ) -> PyResult<MemoryState> {
        guard(py, || {
            let extras = extras(pool_owners, peaks)?;
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
                taken: SnapshotSource {
                    source,
                    source_path: None,
                    synchronized,
                    during_capture,
                    torch_version,
                },
            };
            let memory = self::device_memory(device_memory);
            let w: &mut RustWriter = &mut writer;
            let state = py.detach(|| w.commit_with(pending, meta, memory, extras))?;
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
            let memory = self::device_memory(device_memory);
            let inner = with_locked(py, &self.inner, "recorder", |w| {
                let snap = tcgd_memory::run::read_pickle_file(&path)?;
                let pending = w.ingest(&snap, &snap.root(), &IngestOptions::default())?;
                w.commit(
                    pending,
                    PointMeta {
                        label,
                        metadata: metadata_json,
                        timestamp_us: None,
                        taken: SnapshotSource::import(&path),
                    },
                    memory,
                )
            })?;
            Ok(MemoryState { inner })
        })
    }

    #[getter]
    fn run_id(&self) -> PyResult<String> {
        Ok(try_lock(&self.inner, "recorder")?.header().run_id.clone())
    }
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryRunReader {
    pub(super) inner: RustReader,
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

    /// The run's manifest as a typed object.
    fn manifest(&self, py: Python<'_>) -> PyResult<Py<crate::store::PyRunManifest>> {
        crate::store::PyRunManifest::of(py, self.inner.manifest())
    }

    /// Every point's state, in commit order.
    fn states(&self) -> Vec<MemoryState> {
        self.inner
            .states()
            .iter()
            .map(|s| MemoryState { inner: s.clone() })
            .collect()
    }

    /// The run's rows of `points` in index order (`RecordedPoint`s without observations):
    /// each point's timestamp and user metadata beside its state.
    fn points(&self, py: Python<'_>) -> PyResult<Vec<crate::recorded::PyRecordedPoint>> {
        guard(py, || {
            let points = py.detach(|| self.inner.store().points())?;
            Ok(crate::recorded::recorded_points(py, points)?)
        })
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
            let state = self.point(point_index)?;
            let events = py.detach(|| self.inner.events(point_index))?;
            Ok(raw_snapshot(py, state, &events)?)
        })
    }

    /// Writes one point as a pickle PyTorch's memory viewer opens: its segments, and as
    /// `device_traces` the history window the point stored.
    fn export_memory_viz(&self, py: Python<'_>, point_index: i64, path: PathBuf) -> PyResult<()> {
        guard(py, || {
            let state = self.point(point_index)?;
            py.detach(|| -> BindResult<()> {
                let events = self.inner.events(point_index)?;
                export_viz(&path, state, &events)
            })
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

impl MemoryRunReader {
    /// The state of point `point_index`.
    fn point(&self, point_index: i64) -> BindResult<&RustState> {
        self.inner
            .states()
            .iter()
            .find(|s| s.identity.index == point_index)
            .map(|s| &**s)
            .ok_or_else(|| BindingError::InvalidInput(format!("no point {point_index}")))
    }
}
