//! Python classes over the run store: `RunWriter` and `RunReader`.

use std::path::PathBuf;
use std::sync::Mutex;

use arrow_pyarrow::ToPyArrow;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::time::Duration;

use tcgd_store::{
    check_point, now_micros, CommitJob, CommitPolicy, CommitQueue, ObservationInput, OnDamage,
    PayloadKind, PointInput, RunHeader, RunKind, RunSelector, Site, Table, Value,
};

use crate::errors::{guard, try_lock, BindResult, BindingError};
use crate::{parse_dtype, to_summary, HostBytes, SummaryArgs};

/// One observation as Python hands it over: a mapping with every key present (None where
/// a value is absent).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct ObservationArgs {
    order: i64,
    name: String,
    invocation_index: i64,
    dtype: String,
    shape: Vec<i64>,
    stride: Vec<i64>,
    source_device: String,
    payload: String,
    /// Host bytes as (address, length); None for a device-computed summary.
    data: Option<HostBytes>,
    /// The object that owns `data` (a private host tensor the recorder never writes
    /// again); kept alive until the point is committed on the writer thread.
    owner: Option<Py<PyAny>>,
    /// A device-computed summary: (numel, finite, nan, posinf, neginf, zero, min, max,
    /// mean, std, l2).
    summary: Option<SummaryArgs>,
    site_id: Option<String>,
    graph_kind: Option<String>,
    node_name: Option<String>,
    aten_op: Option<String>,
    module_path: Option<String>,
    source_location: Option<String>,
    compile_id: Option<String>,
    materialized_by_probe: Option<bool>,
}

/// Python's observations as the store takes them, with the objects that own their bytes
/// (to be dropped after the inputs).
pub(crate) fn observation_inputs(
    observations: Vec<ObservationArgs>,
) -> BindResult<(Vec<ObservationInput<'static>>, Vec<Py<PyAny>>)> {
    let mut inputs: Vec<ObservationInput<'static>> = Vec::with_capacity(observations.len());
    let mut owners: Vec<Py<PyAny>> = Vec::new();
    for o in observations {
        let value = match (o.data, o.summary) {
            (Some(data), _) => {
                let Some(owner) = o.owner else {
                    return Err(BindingError::InvalidInput(format!(
                        "observation '{}' has bytes but no owner",
                        o.name
                    )));
                };
                owners.push(owner);
                // SAFETY: `owner` owns these bytes; the caller keeps it with the inputs
                // and drops the slices first; the recorder never writes a host tensor it
                // handed over (see `HostBytes::as_slice`).
                Value::Bytes(unsafe { data.as_slice() })
            }
            (None, Some(s)) => Value::Summary(to_summary(s)),
            (None, None) => {
                return Err(BindingError::InvalidInput(format!(
                    "observation '{}' has neither bytes nor a summary",
                    o.name
                )))
            }
        };
        inputs.push(ObservationInput {
            order: o.order,
            name: o.name,
            invocation_index: o.invocation_index,
            site: Site {
                site_id: o.site_id,
                graph_kind: o.graph_kind,
                node_name: o.node_name,
                aten_op: o.aten_op,
                module_path: o.module_path,
                source_location: o.source_location,
                compile_id: o.compile_id,
                materialized_by_probe: o.materialized_by_probe,
            },
            dtype: parse_dtype(&o.dtype)?,
            shape: o.shape,
            stride: o.stride,
            source_device: o.source_device,
            payload: PayloadKind::parse(&o.payload)?,
            value,
        });
    }
    Ok((inputs, owners))
}

/// A tensor run's writer. Points are committed on a writer thread: `commit_point` checks
/// the point and hands it over; digests, summaries, Parquet and the fsyncs happen there.
#[pyclass(module = "torch_cudagraph_debug._native")]
pub struct RunWriter {
    pub(crate) inner: std::sync::Arc<Mutex<CommitQueue>>,
}

/// Tensor points waiting for the writer thread at most (each holds its host tensors).
const QUEUE_DEPTH: usize = 2;

#[pymethods]
impl RunWriter {
    /// Claims a run (name and rank) in a job root and commits its first `runs` row. `header_json` holds
    /// the `RunHeader` fields; `overwrite` replaces a run already there.
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
            let policy = commit_policy(commit_interval)?;
            let queue = py.detach(|| {
                tcgd_store::RunWriter::create_with(&path, header, producer, overwrite).and_then(
                    |mut writer| {
                        writer.set_commit_policy(policy)?;
                        writer.set_compact_on_close(compact);
                        CommitQueue::start(writer, QUEUE_DEPTH)
                    },
                )
            })?;
            Ok(RunWriter {
                inner: std::sync::Arc::new(Mutex::new(queue)),
            })
        })
    }

    /// Checks one point and hands it to the writer thread; returns its point index. The
    /// point is durable once `flush` (or `close`) returns; a failed background commit is
    /// raised by the next call.
    #[pyo3(signature = (label, metadata_json, replay_index, timestamp_us, observations))]
    fn commit_point(
        &self,
        py: Python<'_>,
        label: String,
        metadata_json: String,
        replay_index: Option<i64>,
        timestamp_us: Option<i64>,
        observations: Vec<ObservationArgs>,
    ) -> PyResult<u64> {
        guard(py, || {
            let (inputs, owners) = observation_inputs(observations)?;
            let point = PointInput {
                label,
                metadata: metadata_json,
                replay_index,
                // The point's time is when it was handed over, not when it reached disk.
                timestamp_us: Some(timestamp_us.unwrap_or_else(now_micros)),
            };
            check_point(&point, &inputs)?;
            let mut queue = try_lock(&self.inner, "run writer")?;
            let label = point.label.clone();
            let job: CommitJob = Box::new(move |writer: &mut tcgd_store::RunWriter| {
                let committed = writer.commit_point(&point, &inputs).map(|_| ());
                // The borrowed slices go before their owners.
                drop(inputs);
                drop(owners);
                committed
            });
            let queue: &mut CommitQueue = &mut queue;
            py.detach(|| queue.submit(&label, job))
                .map_err(BindingError::from)
        })
    }

    /// Waits until every point handed over is durable.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        guard(py, || {
            let mut locked = try_lock(&self.inner, "run writer")?;
            let queue: &mut CommitQueue = &mut locked;
            py.detach(|| queue.flush()).map_err(BindingError::from)
        })
    }

    fn has_label(&self, label: &str) -> PyResult<bool> {
        Ok(try_lock(&self.inner, "run writer")?.has_label(label))
    }

    #[getter]
    fn point_count(&self) -> PyResult<u64> {
        Ok(try_lock(&self.inner, "run writer")?.point_count())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(try_lock(&self.inner, "run writer")?.is_closed())
    }

    #[getter]
    fn path(&self) -> PyResult<PathBuf> {
        Ok(try_lock(&self.inner, "run writer")?.dir().to_path_buf())
    }

    /// Commits what is queued, then ends the run, complete or not. Idempotent.
    fn close(&self, py: Python<'_>, complete: bool) -> PyResult<()> {
        guard(py, || {
            let mut locked = try_lock(&self.inner, "run writer")?;
            let queue: &mut CommitQueue = &mut locked;
            py.detach(|| queue.close(complete))
                .map_err(BindingError::from)
        })
    }

    /// Removes the run instead of ending it: for a creation that failed as a whole.
    fn discard(&self, py: Python<'_>) -> PyResult<()> {
        guard(py, || {
            let mut locked = try_lock(&self.inner, "run writer")?;
            let queue: &mut CommitQueue = &mut locked;
            py.detach(|| queue.discard()).map_err(BindingError::from)
        })
    }
}

/// When a writer commits its groups: `commit_interval` seconds (default 1.0).
pub fn commit_policy(commit_interval: Option<f64>) -> BindResult<CommitPolicy> {
    let mut policy = CommitPolicy::default();
    if let Some(seconds) = commit_interval {
        if !seconds.is_finite() || !(0.0..=86_400.0).contains(&seconds) {
            return Err(BindingError::InvalidInput(format!(
                "commit_interval must be a number of seconds from 0 to 86400, got {seconds}"
            )));
        }
        policy.interval = Duration::from_secs_f64(seconds);
    }
    Ok(policy)
}

/// A run as Python names it: a job root holding one run, or `(root, name, rank)`.
#[derive(FromPyObject)]
pub enum RunAddress {
    Named(PathBuf, Option<String>, Option<i64>),
    Root(PathBuf),
}

impl RunAddress {
    pub fn root(&self) -> &std::path::Path {
        match self {
            RunAddress::Named(root, ..) | RunAddress::Root(root) => root,
        }
    }

    pub fn selector(&self, kind: RunKind) -> RunSelector {
        match self {
            RunAddress::Named(_, name, rank) => RunSelector {
                name: name.clone(),
                rank: *rank,
                kind: Some(kind),
            },
            RunAddress::Root(_) => RunSelector {
                kind: Some(kind),
                ..RunSelector::default()
            },
        }
    }
}

/// The runs of a job root as a `pyarrow.RecordBatch`: one row per run (identity, status,
/// point count), in name and rank order.
#[pyfunction]
pub fn list_runs<'py>(py: Python<'py>, root: PathBuf) -> PyResult<Bound<'py, PyAny>> {
    guard(py, || {
        let rows = py.detach(|| tcgd_store::list_runs(&root))?;
        Ok(tcgd_store::runs_batch(&rows)?.to_pyarrow(py)?)
    })
}

/// Tidies a job root whose writers are done (`tcgd_store::compact_root`); returns what
/// it did as a dict.
#[pyfunction]
pub fn compact_root<'py>(py: Python<'py>, root: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    guard(py, || {
        let report = py.detach(|| tcgd_store::compact_root(&root))?;
        let out = PyDict::new(py);
        out.set_item("runs_compacted", report.runs_compacted)?;
        out.set_item("runs_in_use", report.runs_in_use)?;
        out.set_item("files_before", report.files_before)?;
        out.set_item("files_after", report.files_after)?;
        out.set_item("uncommitted_removed", report.uncommitted_removed)?;
        out.set_item("orphans_deleted", report.orphans_deleted)?;
        out.set_item("runs_skipped", report.runs_skipped)?;
        Ok(out)
    })
}

/// What a reader left out of a damaged run, as dicts of `Damage`'s fields.
pub fn damage_list<'py>(
    py: Python<'py>,
    damage: &[tcgd_store::Damage],
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    damage
        .iter()
        .map(|d| {
            let item = PyDict::new(py);
            item.set_item("path", &d.path)?;
            item.set_item("table", &d.table)?;
            item.set_item("point_index", d.point_index)?;
            item.set_item("label", &d.label)?;
            item.set_item("problem", &d.problem)?;
            Ok(item)
        })
        .collect()
}

/// `"raise"` or `"skip"`, as Python passes it.
pub fn on_damage(value: &str) -> BindResult<OnDamage> {
    Ok(OnDamage::parse(value)?)
}

/// What a run's manifest says about the run (its part list aside): identity, rank, times,
/// completeness, provenance. Shared by tensor and memory runs.
#[pyclass(module = "torch_cudagraph_debug._native", name = "RunManifest", frozen)]
pub struct PyRunManifest {
    inner: tcgd_store::Manifest,
}

impl PyRunManifest {
    pub(crate) fn of(manifest: &tcgd_store::Manifest) -> PyRunManifest {
        PyRunManifest {
            inner: tcgd_store::Manifest {
                // The parts are the reader's business; a copy of them is not needed here.
                parts: Vec::new(),
                ..manifest.clone()
            },
        }
    }
}

#[pymethods]
impl PyRunManifest {
    #[getter]
    fn run_id(&self) -> &str {
        &self.inner.header.run_id
    }
    #[getter]
    fn name(&self) -> &str {
        &self.inner.header.name
    }
    /// `"tensor"` or `"memory"`.
    #[getter]
    fn kind(&self) -> &'static str {
        match self.inner.header.kind {
            tcgd_store::RunKind::Tensor => "tensor",
            tcgd_store::RunKind::Memory => "memory",
        }
    }
    #[getter]
    fn execution(&self) -> &str {
        &self.inner.header.execution
    }
    #[getter]
    fn rank(&self) -> Option<i64> {
        self.inner.header.rank
    }
    #[getter]
    fn group_id(&self) -> Option<&str> {
        self.inner.header.group_id.as_deref()
    }
    #[getter]
    fn world_size(&self) -> Option<i64> {
        self.inner.header.world_size
    }
    /// RFC 3339, UTC.
    #[getter]
    fn created_at(&self) -> &str {
        &self.inner.created_at
    }
    #[getter]
    fn finished_at(&self) -> Option<&str> {
        self.inner.finished_at.as_deref()
    }
    #[getter]
    fn complete(&self) -> bool {
        self.inner.complete
    }
    #[getter]
    fn format_version(&self) -> u32 {
        self.inner.format_version
    }
    #[getter]
    fn point_count(&self) -> u64 {
        self.inner.point_count
    }
    /// Package, Python, platform, torch and CUDA versions of the recording process.
    #[getter]
    fn provenance<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_object(py, &self.inner.header.provenance)
    }
    /// The application's own metadata for the run.
    #[getter]
    fn run_metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_object(py, &self.inner.header.run_metadata)
    }
    fn __repr__(&self) -> String {
        format!(
            "RunManifest(name={:?}, kind={:?}, rank={:?}, point_count={}, complete={})",
            self.inner.header.name,
            self.kind(),
            self.inner.header.rank,
            self.inner.point_count,
            self.inner.complete
        )
    }
}

/// A JSON object of the manifest as a dict (`null`: an empty one).
fn json_object<'py>(py: Python<'py>, value: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    if value.is_null() {
        return Ok(PyDict::new(py).into_any());
    }
    crate::results::serde_to_py(py, value)
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct RunReader {
    inner: tcgd_store::RunReader,
}

impl RunReader {
    /// The store's reader, for the native functions that take a `RunReader` argument.
    pub(crate) fn store(&self) -> &tcgd_store::RunReader {
        &self.inner
    }
}

fn table_named(name: &str) -> BindResult<Table> {
    Table::from_dir_name(name).ok_or_else(|| {
        BindingError::InvalidInput(format!(
            "no table '{name}'; tables are points, observations, payloads"
        ))
    })
}

#[pymethods]
impl RunReader {
    /// Opens a run after checking its manifest and parts; `on_damage` is `"raise"` or
    /// `"skip"` (`tcgd_store::OnDamage`).
    /// Opens the run of the job root `path` with this `name`, `rank` and `kind`
    /// (`"tensor"` or `"memory"`); each may be left out when one run matches the rest.
    #[new]
    #[pyo3(signature = (path, on_damage = "raise", name = None, rank = None, kind = None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        on_damage: &str,
        name: Option<String>,
        rank: Option<i64>,
        kind: Option<&str>,
    ) -> PyResult<Self> {
        guard(py, || {
            let mode = self::on_damage(on_damage)?;
            let kind = match kind {
                None => None,
                Some("tensor") => Some(RunKind::Tensor),
                Some("memory") => Some(RunKind::Memory),
                Some(other) => {
                    return Err(BindingError::InvalidInput(format!(
                        "kind must be \"tensor\" or \"memory\", got '{other}'"
                    )))
                }
            };
            let selector = RunSelector { name, rank, kind };
            let inner =
                py.detach(|| tcgd_store::RunReader::open_selected(&path, &selector, mode))?;
            Ok(RunReader { inner })
        })
    }

    /// The names of every table a job root can have, in layout order.
    #[staticmethod]
    fn table_names() -> Vec<&'static str> {
        Table::ALL.iter().map(|t| t.dir_name()).collect()
    }

    /// The tables this run's kind writes.
    fn table_names_of_run(&self) -> Vec<&'static str> {
        self.inner
            .manifest()
            .header
            .kind
            .tables()
            .iter()
            .map(|t| t.dir_name())
            .collect()
    }

    /// What opening with `on_damage="skip"` left out (`Damage` fields as dicts).
    fn damage<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        damage_list(py, self.inner.damage())
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.inner.dir().to_path_buf()
    }

    /// The run's manifest as a typed object.
    fn manifest(&self) -> PyRunManifest {
        PyRunManifest::of(self.inner.manifest())
    }

    /// Every committed row of a table as a `pyarrow.RecordBatch` (through the Arrow C
    /// data interface: no per-row Python objects).
    fn table<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        guard(py, || {
            let table = table_named(name)?;
            let batch = py.detach(|| self.inner.table(table))?;
            Ok(batch.to_pyarrow(py)?)
        })
    }

    /// The run's one-row table, built from the manifest.
    fn run_table<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        guard(py, || {
            let batch = self.inner.run_table()?;
            Ok(batch.to_pyarrow(py)?)
        })
    }

    /// A payload's bytes, checked against its digest.
    fn payload<'py>(&self, py: Python<'py>, digest: &str) -> PyResult<Bound<'py, PyBytes>> {
        guard(py, || {
            let bytes = py.detach(|| self.inner.payload(digest))?;
            Ok(PyBytes::new(py, &bytes))
        })
    }

    /// Checks every file and payload digest; returns (path, problem) pairs.
    fn validate(&self, py: Python<'_>) -> PyResult<Vec<(PathBuf, String)>> {
        guard(py, || {
            let issues = py.detach(|| self.inner.validate())?;
            Ok(issues.into_iter().map(|i| (i.path, i.problem)).collect())
        })
    }
}
