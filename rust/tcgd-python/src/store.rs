//! Python classes over the run store: `RunWriter` and `RunReader`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arrow_pyarrow::ToPyArrow;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::time::Duration;

use tcgd_store::{
    check_point, now_micros, CommitJob, CommitPolicy, CommitQueue, ObservationInput, OnDamage,
    PayloadKind, PointInput, RunHeader, RunKind, RunSelector, SiteFacts, Table, Value,
};

use crate::args::{Joined, ObservationArgs};
use crate::errors::{guard, try_lock, BindResult, BindingError};
use crate::results::serde_to_py;
use crate::HostBytes;

/// A recorded observation's value: host bytes, or a summary computed on the device.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct HostValueArgs {
    /// Host bytes as (address, length); None for a device-computed summary.
    data: Option<HostBytes>,
    /// The object that owns `data` (a private host tensor the recorder never writes
    /// again); kept alive until the point is committed on the writer thread.
    owner: Option<Py<PyAny>>,
    /// A summary computed where the value was (a `TensorValueSummary`).
    summary: Option<tcgd_tensor::TensorSummary>,
}

/// One value of `commit_site_values`: (site index, order, invocation index, value, owner).
type SiteValueArgs = (usize, i64, i64, SiteValue, Option<Py<PyAny>>);

/// A registered site's value in a point: its host bytes, or its summary taken where the
/// value was (then no bytes cross).
pub(crate) enum SiteValue {
    Bytes(HostBytes),
    Summary(tcgd_tensor::TensorSummary),
}

/// A type check, then one extraction: the derived form would try the variants in turn,
/// making and dropping an exception for each value of the other kind.
impl<'a, 'py> FromPyObject<'a, 'py> for SiteValue {
    type Error = PyErr;

    // What the stub says the argument takes (the derived form wrote it from the variants).
    const INPUT_TYPE: pyo3::inspect::PyStaticExpr = pyo3::inspect::PyStaticExpr::BinOp {
        left: &HostBytes::INPUT_TYPE,
        op: pyo3::inspect::PyStaticOperator::BitOr,
        right: &<tcgd_tensor::TensorSummary as pyo3::PyTypeInfo>::TYPE_HINT,
    };

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        match obj.cast::<tcgd_tensor::TensorSummary>() {
            Ok(summary) => Ok(SiteValue::Summary(*summary.get())),
            Err(_) => Ok(SiteValue::Bytes(obj.extract()?)),
        }
    }
}

/// Python's observations as the store takes them, with the objects that own their bytes
/// (to be dropped after the inputs).
pub(crate) fn observation_inputs(
    observations: Vec<ObservationArgs<HostValueArgs>>,
) -> BindResult<(Vec<ObservationInput<'static>>, Vec<Py<PyAny>>)> {
    let mut inputs: Vec<ObservationInput<'static>> = Vec::with_capacity(observations.len());
    let mut owners: Vec<Py<PyAny>> = Vec::new();
    for Joined(descriptor, Joined(v, site)) in observations {
        let value = match (v.data, v.summary) {
            (Some(data), _) => {
                let Some(owner) = v.owner else {
                    return Err(BindingError::InvalidInput(format!(
                        "observation '{}' has bytes but no owner",
                        descriptor.name()
                    )));
                };
                owners.push(owner);
                // SAFETY: `owner` owns these bytes; the caller keeps it with the inputs
                // and drops the slices first; the recorder never writes a host tensor it
                // handed over (see `HostBytes::as_slice`).
                Value::Bytes(unsafe { data.as_slice() })
            }
            (None, Some(s)) => Value::Summary(s),
            (None, None) => {
                return Err(BindingError::InvalidInput(format!(
                    "observation '{}' has neither bytes nor a summary",
                    descriptor.name()
                )))
            }
        };
        inputs.push(ObservationInput::new(
            descriptor.check()?,
            site.into(),
            value,
        ));
    }
    Ok((inputs, owners))
}

/// Runs `work` on the writer behind `lock`, taking the lock and working with the GIL
/// released: how every call of a writer class reaches it. The lock is not the caller's
/// alone: a device recorder's harvester thread submits the points it reads back through
/// it, and holds it while a submission waits for room in the queue, so a caller waits for
/// it (never while holding the GIL, which that thread never needs) instead of taking a busy
/// lock for a second Python thread. `what` names the writer in errors.
pub(crate) fn with_locked<W: ?Sized + Send, T: Send, E: Into<BindingError> + Send>(
    py: Python<'_>,
    lock: &Mutex<W>,
    what: &str,
    work: impl FnOnce(&mut W) -> Result<T, E> + Send,
) -> BindResult<T> {
    py.detach(|| {
        let mut locked = lock.lock().map_err(|_| {
            BindingError::Internal(format!(
                "the {what} failed earlier while another thread used it; open the run again"
            ))
        })?;
        work(&mut locked).map_err(Into::into)
    })
}

/// What every run writer does besides committing points, whatever kind of run it writes:
/// the methods of `_RunWriterBase`, the base class of both writer classes.
pub(crate) trait RunLifecycle: Send {
    fn has_label(&self, label: &str) -> bool;
    fn point_count(&self) -> u64;
    fn is_closed(&self) -> bool;
    fn dir(&self) -> &std::path::Path;
    /// Waits until every point handed over is durable.
    fn flush(&mut self) -> BindResult<()>;
    /// Commits what is queued, then ends the run, complete or not.
    fn close(&mut self, complete: bool) -> BindResult<()>;
    /// Removes the run instead of ending it.
    fn discard(&mut self) -> BindResult<()>;
}

impl RunLifecycle for CommitQueue {
    fn has_label(&self, label: &str) -> bool {
        CommitQueue::has_label(self, label)
    }
    fn point_count(&self) -> u64 {
        CommitQueue::point_count(self)
    }
    fn is_closed(&self) -> bool {
        CommitQueue::is_closed(self)
    }
    fn dir(&self) -> &std::path::Path {
        CommitQueue::dir(self)
    }
    fn flush(&mut self) -> BindResult<()> {
        Ok(CommitQueue::flush(self)?)
    }
    fn close(&mut self, complete: bool) -> BindResult<()> {
        Ok(CommitQueue::close(self, complete)?)
    }
    fn discard(&mut self) -> BindResult<()> {
        Ok(CommitQueue::discard(self)?)
    }
}

/// The methods the tensor and memory run writers share, over the writer's lifecycle (a
/// lock around the store's writer, shared with the subclass that commits its points).
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "_RunWriterBase",
    subclass,
    frozen
)]
pub struct RunWriterBase {
    lifecycle: Arc<Mutex<dyn RunLifecycle>>,
    /// What errors call the writer ("run writer", "recorder").
    what: &'static str,
}

impl RunWriterBase {
    /// The base part of a writer class's instance, over the subclass's own writer.
    pub(crate) fn over(lifecycle: Arc<Mutex<dyn RunLifecycle>>, what: &'static str) -> Self {
        RunWriterBase { lifecycle, what }
    }

    /// One fact about the writer, read under its lock ([`with_locked`]).
    fn read<T: Send>(
        &self,
        py: Python<'_>,
        fact: impl FnOnce(&dyn RunLifecycle) -> T + Send,
    ) -> PyResult<T> {
        guard(py, || {
            with_locked(py, &self.lifecycle, self.what, |w| {
                Ok::<_, BindingError>(fact(w))
            })
        })
    }
}

#[pymethods]
impl RunWriterBase {
    fn has_label(&self, py: Python<'_>, label: &str) -> PyResult<bool> {
        self.read(py, |w| w.has_label(label))
    }

    #[getter]
    fn point_count(&self, py: Python<'_>) -> PyResult<u64> {
        self.read(py, |w| w.point_count())
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        self.read(py, |w| w.is_closed())
    }

    #[getter]
    fn path(&self, py: Python<'_>) -> PyResult<PathBuf> {
        self.read(py, |w| w.dir().to_path_buf())
    }

    /// Waits until every point handed over is durable.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        guard(py, || {
            with_locked(py, &self.lifecycle, self.what, |w| w.flush())
        })
    }

    /// Commits what is queued, then ends the run, complete or not. Idempotent.
    fn close(&self, py: Python<'_>, complete: bool) -> PyResult<()> {
        guard(py, || {
            with_locked(py, &self.lifecycle, self.what, |w| w.close(complete))
        })
    }

    /// Removes the run instead of ending it: for a creation (or an import) that failed as
    /// a whole.
    fn discard(&self, py: Python<'_>) -> PyResult<()> {
        guard(py, || {
            with_locked(py, &self.lifecycle, self.what, |w| w.discard())
        })
    }
}

/// A tensor run's writer. Points are committed on a writer thread: `commit_point` checks
/// the point and hands it over; digests, summaries, Parquet and the fsyncs happen there.
#[pyclass(module = "torch_cudagraph_debug._native", extends = RunWriterBase)]
pub struct RunWriter {
    pub(crate) inner: std::sync::Arc<Mutex<CommitQueue>>,
    /// The sites `register_site` declared, by index: shared by every point that
    /// `commit_site_values` commits.
    sites: Mutex<Vec<std::sync::Arc<SiteFacts>>>,
}

/// Tensor points waiting for the writer thread at most, and the host bytes they may hold
/// between them: points of summaries hold none and queue deep, so the writer's group
/// commits (Parquet files and fsyncs, tens of milliseconds) never hold a model's calls up;
/// points of full values hold their host tensors and wait once 256 MiB are queued.
const QUEUE_DEPTH: usize = 1024;
const QUEUE_HELD_BYTES: usize = 256 << 20;

impl RunWriter {
    /// Creates the run (committing its first `runs` row) and starts its writer thread.
    fn open(
        path: &std::path::Path,
        header: RunHeader,
        producer: &str,
        overwrite: bool,
        policy: CommitPolicy,
        compact: bool,
    ) -> BindResult<Self> {
        let mut writer = tcgd_store::RunWriter::create_with(path, header, producer, overwrite)?;
        writer.set_commit_policy(policy)?;
        writer.set_compact_on_close(compact);
        Ok(RunWriter {
            inner: std::sync::Arc::new(Mutex::new(CommitQueue::start(
                writer,
                QUEUE_DEPTH,
                QUEUE_HELD_BYTES,
            )?)),
            sites: Mutex::new(Vec::new()),
        })
    }
}

#[pymethods]
impl RunWriter {
    /// Claims a run (name and rank) in a job root, created with `header`; `overwrite`
    /// replaces a run already there.
    #[new]
    #[pyo3(signature = (path, header, producer, overwrite = false, commit_interval = None, compact = true))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        header: RunHeader,
        producer: &str,
        overwrite: bool,
        commit_interval: Option<f64>,
        compact: bool,
    ) -> PyResult<PyClassInitializer<Self>> {
        guard(py, || {
            let policy = commit_policy(commit_interval)?;
            let writer =
                py.detach(|| Self::open(&path, header, producer, overwrite, policy, compact))?;
            let base = RunWriterBase::over(writer.inner.clone(), "run writer");
            Ok(PyClassInitializer::from(base).add_subclass(writer))
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
        observations: Vec<ObservationArgs<HostValueArgs>>,
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
            submit_point(py, &self.inner, point, inputs, owners)
        })
    }

    /// Declares what stays the same about a value from point to point (its name, dtype,
    /// layout, device and site) and returns the index `commit_site_values` refers to it
    /// by: a producer that observes the same values at every point hands their facts over
    /// once, and the writer keeps one copy of them for all the points' rows.
    #[pyo3(signature = (name, dtype, shape, stride, source_device, site = None))]
    fn register_site(
        &self,
        name: String,
        dtype: &str,
        shape: Vec<i64>,
        stride: Vec<i64>,
        source_device: String,
        site: Option<tcgd_store::Site>,
    ) -> PyResult<usize> {
        let facts = SiteFacts {
            name,
            dtype: crate::parse_dtype(dtype)?,
            shape,
            stride,
            source_device,
            site: site.unwrap_or_default(),
        };
        let mut sites = try_lock(&self.sites, "run writer")?;
        sites.push(std::sync::Arc::new(facts));
        Ok(sites.len() - 1)
    }

    /// Checks one point of registered sites' host values and hands it to the writer
    /// thread, as `commit_point` does; returns its point index. Each value is `(site index,
    /// order, invocation index, (address, length), owner)`, its bytes laid out as the site
    /// declared (contiguous), `owner` the private host tensor that holds them until the
    /// point is on disk; or `(site index, order, invocation index, summary, None)` for a
    /// value summarised where it was (a `TensorValueSummary`, summary payloads only).
    /// `payload` (`"full"` or `"summary"`) applies to every value.
    #[pyo3(signature = (label, metadata_json, payload, values))]
    fn commit_site_values(
        &self,
        py: Python<'_>,
        label: String,
        metadata_json: String,
        payload: &str,
        values: Vec<SiteValueArgs>,
    ) -> PyResult<u64> {
        guard(py, || {
            let payload = PayloadKind::parse(payload)?;
            let sites = try_lock(&self.sites, "run writer")?;
            let mut inputs: Vec<ObservationInput<'static>> = Vec::with_capacity(values.len());
            let mut owners: Vec<Py<PyAny>> = Vec::with_capacity(values.len());
            for (site, order, invocation_index, data, owner) in values {
                let facts = sites.get(site).cloned().ok_or_else(|| {
                    BindingError::InvalidInput(format!(
                        "no site {site}: register_site declared {}",
                        sites.len()
                    ))
                })?;
                let value = match (data, owner) {
                    (SiteValue::Summary(summary), _) if payload == PayloadKind::Summary => {
                        Value::Summary(summary)
                    }
                    (SiteValue::Summary(_), _) => {
                        return Err(BindingError::InvalidInput(
                            "a full payload needs the value's bytes, not its summary".to_owned(),
                        ))
                    }
                    (SiteValue::Bytes(data), Some(owner)) => {
                        owners.push(owner);
                        // SAFETY: `owner` owns these bytes and is kept with the inputs,
                        // which are dropped first; the recorder never writes a host tensor
                        // it handed over (see `HostBytes::as_slice`).
                        Value::Bytes(unsafe { data.as_slice() })
                    }
                    (SiteValue::Bytes(_), None) => {
                        return Err(BindingError::InvalidInput(
                            "host bytes need the tensor that owns them".to_owned(),
                        ))
                    }
                };
                inputs.push(ObservationInput {
                    facts,
                    order,
                    invocation_index,
                    payload,
                    value,
                });
            }
            drop(sites);
            let point = PointInput {
                label,
                metadata: metadata_json,
                replay_index: None,
                timestamp_us: Some(now_micros()),
            };
            submit_point(py, &self.inner, point, inputs, owners)
        })
    }
}

/// Checks a point and hands it to the writer thread behind `queue`; returns its index.
/// `owners` hold the bytes `inputs` borrow, until the point is committed.
fn submit_point(
    py: Python<'_>,
    queue: &Mutex<CommitQueue>,
    point: PointInput,
    inputs: Vec<ObservationInput<'static>>,
    owners: Vec<Py<PyAny>>,
) -> BindResult<u64> {
    check_point(&point, &inputs)?;
    let label = point.label.clone();
    let held = inputs.iter().map(|input| input.value.held_bytes()).sum();
    let job: CommitJob = Box::new(move |writer: &mut tcgd_store::RunWriter| {
        let committed = writer.commit_point(&point, &inputs).map(|_| ());
        // The borrowed slices go before their owners.
        drop(inputs);
        drop(owners);
        committed
    });
    with_locked(py, queue, "run writer", |queue| {
        queue.submit(&label, held, job)
    })
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
pub fn compact_root<'py>(py: Python<'py>, root: PathBuf) -> PyResult<Bound<'py, PyAny>> {
    guard(py, || {
        let report = py.detach(|| tcgd_store::compact_root(&root))?;
        Ok(serde_to_py(py, &report)?)
    })
}

/// Sets the Delta log retention of every table of a job root
/// (`tcgd_store::set_log_retention`); returns how many tables changed.
#[pyfunction]
pub fn set_log_retention(py: Python<'_>, root: PathBuf, retention: String) -> PyResult<u64> {
    guard(py, || {
        Ok(py.detach(|| tcgd_store::set_log_retention(&root, &retention))?)
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

/// What a run's manifest says about the run (its part list aside): the header it was
/// created with (the `RunHeader` it is: identity, rank, provenance, metadata) and what the
/// writer added since (times, completeness, point count). Shared by tensor and memory runs.
#[pyclass(
    name = "RunManifest",
    module = "torch_cudagraph_debug._native",
    extends = RunHeader,
    frozen,
    get_all
)]
pub struct PyRunManifest {
    /// RFC 3339, UTC.
    created_at: String,
    finished_at: Option<String>,
    complete: bool,
    format_version: u32,
    point_count: u64,
}

#[pymethods]
impl PyRunManifest {
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &["name", "kind", "rank", "point_count", "complete"],
        )
    }
}

impl PyRunManifest {
    pub(crate) fn of(py: Python<'_>, manifest: &tcgd_store::Manifest) -> PyResult<Py<Self>> {
        let own = PyRunManifest {
            created_at: manifest.created_at.clone(),
            finished_at: manifest.finished_at.clone(),
            complete: manifest.complete,
            format_version: manifest.format_version,
            point_count: manifest.point_count,
        };
        Py::new(
            py,
            PyClassInitializer::from(manifest.header.clone()).add_subclass(own),
        )
    }
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
    /// Opens the run of the job root `path` with this `name`, `rank` and `kind`
    /// (`"tensor"` or `"memory"`; each may be left out when one run matches the rest),
    /// after checking its manifest and parts; `on_damage` is `"raise"` or `"skip"`
    /// (`tcgd_store::OnDamage`).
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
    fn manifest(&self, py: Python<'_>) -> PyResult<Py<PyRunManifest>> {
        PyRunManifest::of(py, self.inner.manifest())
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

    /// The run's points in index order, each with its observations in order
    /// (`RecordedPoint`, `RecordedObservation`): the store's one reading of the `points`
    /// and `observations` rows.
    fn tensor_points(&self, py: Python<'_>) -> PyResult<Vec<crate::recorded::PyRecordedPoint>> {
        guard(py, || {
            let points = py.detach(|| self.inner.tensor_points())?;
            Ok(crate::recorded::recorded_points(py, points)?)
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
