//! `DeviceRecorder`: a compile session's points recorded on the device and harvested into
//! its run writer by a thread of the core, with no Python and no device synchronisation
//! per call (see tcgd-cuda's harvest.rs).

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use serde_json::{Map, Value as Json};
use tcgd_cuda::{HarvestedData, HarvestedPoint, PointKind, RecorderSettings, Trigger};
use tcgd_store::{
    now_micros, CommitJob, CommitQueue, ObservationInput, PayloadKind, PointInput, SiteFacts, Value,
};

use crate::args::{Joined, ObservationArgs, SiteArgs};
use crate::errors::{guard, BindResult, BindingError};
use crate::parse_dtype;
use crate::probe::ProbeRuntime;
use crate::store::{observation_inputs, HostValueArgs, RunWriter};

/// Observations the host took itself for a point (eager values), carried with the point
/// to the harvester so that every point is committed in order by one path.
struct HostObservations {
    inputs: Vec<ObservationInput<'static>>,
    /// Own the bytes `inputs` borrow; dropped after them.
    _owners: Vec<Py<PyAny>>,
}

/// What the run needs to know about a registered site, kept for the harvester: its order,
/// and its facts, built once and handed to the writer by reference with every point (the
/// writer keeps them once per block of rows, not once per row).
#[derive(Clone)]
struct RegisteredSite {
    order: i64,
    facts: Arc<SiteFacts>,
}

/// The registered sites; each point takes the current list by reference count
/// (registration, at capture time, copies it only while a point still holds it).
type Facts = Arc<Mutex<Arc<Vec<RegisteredSite>>>>;

/// One probed value as Python hands it over: a mapping with every key present, these
/// and the site's ([`SiteArgs`]).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct ProbedValueArgs {
    src: u64,
    dtype: String,
    shape: Vec<i64>,
    stride: Vec<i64>,
    source_device: String,
    name: String,
    order: i64,
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct DeviceRecorder {
    inner: Mutex<tcgd_cuda::DeviceRecorder>,
    /// The run's commit queue, where a point's label is taken when the point ends.
    queue: Arc<Mutex<CommitQueue>>,
    facts: Facts,
    /// What each graph is, by capture index ("inference#0"): the metadata's keys.
    graphs: Arc<Mutex<Vec<String>>>,
}

fn lock<T>(m: &Mutex<T>) -> BindResult<std::sync::MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| BindingError::Internal("device recorder lock poisoned".into()))
}

/// The point's metadata: the caller's, plus which graphs replayed and what was lost.
fn point_metadata(point: &HarvestedPoint, graphs: &[String]) -> String {
    let mut map = match serde_json::from_str::<Json>(&point.metadata) {
        Ok(Json::Object(m)) => m,
        _ => Map::new(),
    };
    if let PointKind::Flight {
        trigger_label,
        reason,
    } = &point.kind
    {
        map.insert(
            "flight_recorder".into(),
            serde_json::json!({"trigger_point": trigger_label, "reason": reason, "point": point.number}),
        );
    } else if !point.replays.is_empty() {
        let replays: Map<String, Json> = point
            .replays
            .iter()
            .map(|(capture, first, last)| {
                let name = graphs
                    .get(*capture)
                    .cloned()
                    .unwrap_or_else(|| format!("graph#{capture}"));
                (name, serde_json::json!(last - first + 1))
            })
            .collect();
        map.insert("graph_replays".into(), Json::Object(replays));
    }
    Json::Object(map).to_string()
}

/// Builds the commit job of one harvested point (runs on the writer thread); with its
/// label and the host bytes it holds.
fn commit_job(
    mut point: HarvestedPoint,
    facts: Arc<Vec<RegisteredSite>>,
    graphs: &[String],
) -> (String, usize, CommitJob) {
    let label = point.label.clone();
    let metadata = point_metadata(&point, graphs);
    let replay = point.replays.iter().map(|r| r.2).max().map(|r| r as i64);
    let timestamp = now_micros();
    let host = point
        .attachment
        .take()
        .and_then(|a| a.downcast::<HostObservations>().ok());
    let held = point
        .values
        .iter()
        .map(|v| match &v.data {
            HarvestedData::Bytes { bytes, .. } => bytes.len(),
            HarvestedData::Summary(_) => 0,
        })
        .chain(
            host.iter()
                .flat_map(|h| h.inputs.iter().map(|i| i.value.held_bytes())),
        )
        .sum();
    let job: CommitJob = Box::new(move |writer: &mut tcgd_store::RunWriter| {
        // Device values and the host's, in site order (then replay / invocation); orders
        // and invocation indices are numbered afresh over the merged list.
        let mut keyed: Vec<((i64, u64), ObservationInput<'_>)> = Vec::new();
        for v in &point.values {
            let Some(f) = facts.get(v.site) else { continue };
            let (payload, value) = match &v.data {
                HarvestedData::Summary(r) => (PayloadKind::Summary, Value::Summary(r.to_summary())),
                HarvestedData::Bytes { bytes, full: true } => {
                    (PayloadKind::Full, Value::Bytes(bytes))
                }
                HarvestedData::Bytes { bytes, full: false } => {
                    (PayloadKind::Summary, Value::Bytes(bytes))
                }
            };
            keyed.push((
                (f.order, v.replay),
                ObservationInput {
                    facts: Arc::clone(&f.facts),
                    order: 0,
                    invocation_index: 0,
                    payload,
                    value,
                },
            ));
        }
        if let Some(host) = &host {
            for input in &host.inputs {
                keyed.push(((input.order, input.invocation_index as u64), input.clone()));
            }
        }
        keyed.sort_by_key(|(key, _)| *key);
        let mut seen: std::collections::HashMap<&str, i64> = Default::default();
        let invocations: Vec<i64> = keyed
            .iter()
            .map(|(_, input)| {
                let count = seen.entry(input.facts.name.as_str()).or_insert(0);
                *count += 1;
                *count - 1
            })
            .collect();
        drop(seen);
        let inputs: Vec<ObservationInput<'_>> = keyed
            .into_iter()
            .zip(invocations)
            .enumerate()
            .map(|(order, ((_, mut input), invocation))| {
                input.order = order as i64;
                input.invocation_index = invocation;
                input
            })
            .collect();
        let input = PointInput {
            label: point.label.clone(),
            metadata,
            replay_index: replay,
            timestamp_us: Some(timestamp),
        };
        let committed = writer.commit_point(&input, &inputs).map(|_| ());
        // The borrowed slices go before their owners.
        drop(inputs);
        drop(host);
        committed
    });
    (label, held, job)
}

fn sink(
    queue: Arc<Mutex<CommitQueue>>,
    facts: Facts,
    graphs: Arc<Mutex<Vec<String>>>,
) -> tcgd_cuda::Sink {
    Box::new(move |point: HarvestedPoint| {
        let facts = Arc::clone(&*facts.lock().map_err(|_| "site facts poisoned".to_owned())?);
        let graphs = graphs
            .lock()
            .map_err(|_| "graph names poisoned".to_owned())?
            .clone();
        let (label, held, job) = commit_job(point, facts, &graphs);
        let mut queue = queue.lock().map_err(|_| "run writer poisoned".to_owned())?;
        queue
            .submit(&label, held, job)
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
}

impl DeviceRecorder {
    /// Ends the current point with no host values (the per-call path of a replayed graph,
    /// from the point clock): an event and a memset on `stream`, nothing waited for.
    pub(crate) fn close_point_now(
        &self,
        py: Python<'_>,
        label: String,
        metadata_json: String,
        stream: usize,
    ) -> BindResult<u32> {
        self.close_labelled(py, label, |r, label| {
            r.close_point(label, metadata_json, stream, None, None)
        })
    }

    /// Ends a point by `close`, its label taken in the run first: a label already used
    /// is refused now, not once the device has run the point (when the harvester hands it
    /// over); the label is given back when the point could not end.
    fn close_labelled(
        &self,
        py: Python<'_>,
        label: String,
        close: impl FnOnce(&mut tcgd_cuda::DeviceRecorder, String) -> tcgd_cuda::Result<u32> + Send,
    ) -> BindResult<u32> {
        lock(&self.queue)?.reserve(&label)?;
        let taken = label.clone();
        let closed = self.with_recorder(py, |r| close(r, taken));
        if closed.is_err() {
            lock(&self.queue)?.release(&label);
        }
        closed
    }

    /// Runs `work` on the core's recorder with the GIL released, taking the lock only
    /// then: a thread waiting for the lock never holds the GIL its holder needs to return
    /// (a `flush()` from one thread while another thread's calls close points).
    fn with_recorder<T: Send>(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&mut tcgd_cuda::DeviceRecorder) -> tcgd_cuda::Result<T> + Send,
    ) -> BindResult<T> {
        py.detach(|| {
            let mut locked = lock(&self.inner)?;
            Ok(work(&mut locked)?)
        })
    }
}

#[pymethods]
impl DeviceRecorder {
    #[new]
    #[pyo3(signature = (device, writer, points_in_flight = 64, history = 0, trigger_nonfinite = true, trigger_abs_max = None))]
    fn new(
        py: Python<'_>,
        device: i32,
        writer: &RunWriter,
        points_in_flight: u32,
        history: u64,
        trigger_nonfinite: bool,
        trigger_abs_max: Option<f64>,
    ) -> PyResult<Self> {
        guard(py, || {
            if points_in_flight < 4 {
                return Err(BindingError::InvalidInput(format!(
                    "points_in_flight must be at least 4, got {points_in_flight}"
                )));
            }
            let facts: Facts = Arc::default();
            let graphs: Arc<Mutex<Vec<String>>> = Arc::default();
            let settings = RecorderSettings {
                points_in_flight,
                history,
                trigger: Trigger {
                    nonfinite: trigger_nonfinite,
                    abs_max: trigger_abs_max,
                },
            };
            let recorder = tcgd_cuda::DeviceRecorder::start(
                device,
                settings,
                sink(
                    Arc::clone(&writer.inner),
                    Arc::clone(&facts),
                    Arc::clone(&graphs),
                ),
            )?;
            Ok(DeviceRecorder {
                inner: Mutex::new(recorder),
                queue: Arc::clone(&writer.inner),
                facts,
                graphs,
            })
        })
    }

    /// A new graph of the session, probed through `runtime`; returns its index for
    /// `register_sites`.
    #[pyo3(signature = (runtime, kind = "graph"))]
    fn add_capture(&self, py: Python<'_>, runtime: &ProbeRuntime, kind: &str) -> PyResult<usize> {
        guard(py, || {
            let runtime = runtime.lock()?;
            let index = lock(&self.inner)?.add_capture(&runtime)?;
            let mut graphs = lock(&self.graphs)?;
            graphs.resize(index, String::new());
            graphs.push(format!("{kind}#{index}"));
            Ok(index)
        })
    }

    /// Registers probed values (alive together: one probe op's inputs) inside a capture
    /// and records their kernels on `stream`, batched: summaries (and the history), and
    /// copies into slots for values brought to the host whole every `sample_every`
    /// points (0: never; 1: every point, no summary kernel), kept in the run when
    /// `sample_full`.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (runtime, capture, sites, stream, sample_every = 0, sample_full = true))]
    fn register_sites(
        &self,
        py: Python<'_>,
        runtime: &ProbeRuntime,
        capture: usize,
        sites: Vec<Joined<ProbedValueArgs, SiteArgs>>,
        stream: usize,
        sample_every: u32,
        sample_full: bool,
    ) -> PyResult<Vec<usize>> {
        let sampling = if sample_every == 0 {
            tcgd_cuda::Sampling::Never
        } else {
            tcgd_cuda::Sampling::Every {
                points: sample_every,
                full: sample_full,
            }
        };
        guard(py, || {
            let mut values = Vec::with_capacity(sites.len());
            let mut new_facts = Vec::with_capacity(sites.len());
            for Joined(a, site) in sites {
                let dtype = parse_dtype(&a.dtype)?;
                let numel = a.shape.iter().try_fold(1u64, |acc, &d| {
                    u64::try_from(d).ok().and_then(|d| acc.checked_mul(d))
                });
                let Some(numel) = numel else {
                    return Err(BindingError::InvalidInput(format!(
                        "bad shape {:?}",
                        a.shape
                    )));
                };
                values.push(tcgd_cuda::SiteValue {
                    src: a.src,
                    numel,
                    dtype,
                });
                new_facts.push(RegisteredSite {
                    order: a.order,
                    facts: Arc::new(SiteFacts {
                        name: a.name,
                        dtype,
                        shape: a.shape,
                        stride: a.stride,
                        source_device: a.source_device,
                        site: site.into(),
                    }),
                });
            }
            let runtime = runtime.lock()?;
            let recorder = lock(&self.inner)?;
            let indices = recorder.register_sites(&runtime, capture, &values, sampling, stream)?;
            let mut facts = lock(&self.facts)?;
            if indices.first().is_some_and(|&i| i != facts.len()) {
                return Err(BindingError::Internal("site registry out of step".into()));
            }
            Arc::make_mut(&mut facts).extend(new_facts);
            Ok(indices)
        })
    }

    /// Ends the current point: its values are harvested once the device has run what
    /// `stream` was given; `dump` (a reason) also lands the history in the run.
    #[pyo3(signature = (label, metadata_json, stream, dump = None, host_observations = Vec::new()))]
    fn close_point(
        &self,
        py: Python<'_>,
        label: String,
        metadata_json: String,
        stream: usize,
        dump: Option<String>,
        host_observations: Vec<ObservationArgs<HostValueArgs>>,
    ) -> PyResult<u32> {
        guard(py, || {
            let attachment: Option<tcgd_cuda::Attachment> = if host_observations.is_empty() {
                None
            } else {
                let (inputs, owners) = observation_inputs(host_observations)?;
                Some(Box::new(HostObservations {
                    inputs,
                    _owners: owners,
                }))
            };
            self.close_labelled(py, label, |r, label| {
                r.close_point(label, metadata_json, stream, dump, attachment)
            })
        })
    }

    /// Waits until every closed point is handed to the run writer.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        guard(py, || self.with_recorder(py, |r| r.flush()))
    }

    /// Lets a frozen history record again (the next trigger lands a new one).
    fn rearm(&self, py: Python<'_>) -> PyResult<()> {
        guard(py, || self.with_recorder(py, |r| r.rearm()))
    }

    /// (points harvested, history dumps)
    #[getter]
    fn counts(&self) -> PyResult<(u64, u64)> {
        Ok(lock(&self.inner)?.counts())
    }

    /// (points closed, seconds the host spent closing them): the recorder's own share of
    /// a replayed call's host time.
    #[getter]
    fn close_time(&self) -> PyResult<(u64, f64)> {
        let (closes, spent) = lock(&self.inner)?.close_time();
        Ok((closes, spent.as_secs_f64()))
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        guard(py, || self.with_recorder(py, |r| r.close()))
    }
}

/// Adds a folder to look for NVRTC in (torch's `nvidia/*/lib`).
#[pyfunction]
pub fn add_nvrtc_search_dir(path: std::path::PathBuf) {
    tcgd_cuda::add_nvrtc_search_dir(path);
}
