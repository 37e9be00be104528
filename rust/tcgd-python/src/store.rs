//! Python classes over the run store: `RunWriter` and `RunReader`.

use std::path::PathBuf;
use std::sync::Mutex;

use arrow_pyarrow::ToPyArrow;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tcgd_store::{
    CommittedPoint, ObservationInput, PayloadKind, PointInput, RunHeader, Site, Table, Value,
};

use crate::errors::{guard, store_error, typed_error};
use crate::{parse_dtype, to_summary, HostBytes, SummaryArgs};

/// One observation as Python hands it over: a mapping with every key present (None where
/// a value is absent).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct ObservationArgs {
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

#[pyclass(module = "torch_cudagraph_debug._native")]
pub struct RunWriter {
    inner: Mutex<tcgd_store::RunWriter>,
}

fn lock<'a>(
    py: Python<'_>,
    m: &'a Mutex<tcgd_store::RunWriter>,
) -> PyResult<std::sync::MutexGuard<'a, tcgd_store::RunWriter>> {
    m.lock().map_err(|_| {
        typed_error(
            py,
            "TcgdInternalError",
            "a previous commit panicked; this writer cannot be used again".into(),
        )
    })
}

#[pymethods]
impl RunWriter {
    /// Creates a run directory and commits an empty, incomplete run. `header_json` holds
    /// the `RunHeader` fields.
    #[new]
    fn new(py: Python<'_>, path: PathBuf, header_json: &str, producer: &str) -> PyResult<Self> {
        guard(py, || {
            let header: RunHeader = serde_json::from_str(header_json)
                .map_err(|e| typed_error(py, "InvalidInputError", format!("run header: {e}")))?;
            let writer = py
                .detach(|| tcgd_store::RunWriter::create(&path, header, producer))
                .map_err(|e| store_error(py, e))?;
            Ok(RunWriter {
                inner: Mutex::new(writer),
            })
        })
    }

    /// Commits one point durably; returns (point_index, observations,
    /// payload_chunks_written, payloads_deduplicated).
    #[pyo3(signature = (label, metadata_json, replay_index, timestamp_us, observations))]
    fn commit_point(
        &self,
        py: Python<'_>,
        label: String,
        metadata_json: String,
        replay_index: Option<i64>,
        timestamp_us: Option<i64>,
        observations: Vec<ObservationArgs>,
    ) -> PyResult<(u64, u64, u64, u64)> {
        guard(py, || {
            let mut inputs = Vec::with_capacity(observations.len());
            for o in &observations {
                let value = match (o.data, o.summary) {
                    // SAFETY: the recorder keeps every observed host tensor referenced
                    // until this call returns (see `HostBytes::as_slice`).
                    (Some(data), _) => Value::Bytes(unsafe { data.as_slice() }),
                    (None, Some(s)) => Value::Summary(to_summary(s)),
                    (None, None) => {
                        return Err(typed_error(
                            py,
                            "InvalidInputError",
                            format!("observation '{}' has neither bytes nor a summary", o.name),
                        ))
                    }
                };
                inputs.push(ObservationInput {
                    order: o.order,
                    name: o.name.clone(),
                    invocation_index: o.invocation_index,
                    site: Site {
                        site_id: o.site_id.clone(),
                        graph_kind: o.graph_kind.clone(),
                        node_name: o.node_name.clone(),
                        aten_op: o.aten_op.clone(),
                        module_path: o.module_path.clone(),
                        source_location: o.source_location.clone(),
                        compile_id: o.compile_id.clone(),
                        materialized_by_probe: o.materialized_by_probe,
                    },
                    dtype: parse_dtype(py, &o.dtype)?,
                    shape: o.shape.clone(),
                    stride: o.stride.clone(),
                    source_device: o.source_device.clone(),
                    payload: PayloadKind::parse(&o.payload).map_err(|e| store_error(py, e))?,
                    value,
                });
            }
            let point = PointInput {
                label,
                metadata: metadata_json,
                replay_index,
                timestamp_us,
            };
            let mut locked = lock(py, &self.inner)?;
            let writer: &mut tcgd_store::RunWriter = &mut locked;
            let committed: CommittedPoint = py
                .detach(|| writer.commit_point(&point, &inputs))
                .map_err(|e| store_error(py, e))?;
            Ok((
                committed.point_index,
                committed.observations,
                committed.payload_chunks_written,
                committed.payloads_deduplicated,
            ))
        })
    }

    fn has_label(&self, py: Python<'_>, label: &str) -> PyResult<bool> {
        Ok(lock(py, &self.inner)?.has_label(label))
    }

    #[getter]
    fn point_count(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(lock(py, &self.inner)?.point_count())
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(lock(py, &self.inner)?.is_closed())
    }

    #[getter]
    fn path(&self, py: Python<'_>) -> PyResult<PathBuf> {
        Ok(lock(py, &self.inner)?.dir().to_path_buf())
    }

    /// Ends the run, complete or not. Idempotent.
    fn close(&self, py: Python<'_>, complete: bool) -> PyResult<()> {
        guard(py, || {
            let mut locked = lock(py, &self.inner)?;
            let writer: &mut tcgd_store::RunWriter = &mut locked;
            py.detach(|| writer.close(complete))
                .map_err(|e| store_error(py, e))
        })
    }
}

#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct RunReader {
    inner: tcgd_store::RunReader,
}

fn table_named(py: Python<'_>, name: &str) -> PyResult<Table> {
    Table::from_dir_name(name).ok_or_else(|| {
        typed_error(
            py,
            "InvalidInputError",
            format!("no table '{name}'; tables are points, observations, payloads"),
        )
    })
}

#[pymethods]
impl RunReader {
    /// Opens a run after checking its manifest and parts.
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        guard(py, || {
            let inner = py
                .detach(|| tcgd_store::RunReader::open(&path))
                .map_err(|e| store_error(py, e))?;
            Ok(RunReader { inner })
        })
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.inner.dir().to_path_buf()
    }

    fn manifest_json(&self, py: Python<'_>) -> PyResult<String> {
        guard(py, || {
            let bytes = self
                .inner
                .manifest()
                .to_json()
                .map_err(|e| store_error(py, e))?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        })
    }

    /// Every committed row of a table as a `pyarrow.RecordBatch` (through the Arrow C
    /// data interface: no per-row Python objects).
    fn table<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        guard(py, || {
            let table = table_named(py, name)?;
            let batch = py
                .detach(|| self.inner.table(table))
                .map_err(|e| store_error(py, e))?;
            batch.to_pyarrow(py)
        })
    }

    /// The run's one-row table, built from the manifest.
    fn run_table<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        guard(py, || {
            let batch = self.inner.run_table().map_err(|e| store_error(py, e))?;
            batch.to_pyarrow(py)
        })
    }

    /// A payload's bytes, checked against its digest.
    fn payload<'py>(&self, py: Python<'py>, digest: &str) -> PyResult<Bound<'py, PyBytes>> {
        guard(py, || {
            let bytes = py
                .detach(|| self.inner.payload(digest))
                .map_err(|e| store_error(py, e))?;
            Ok(PyBytes::new(py, &bytes))
        })
    }

    /// Checks every file and payload digest; returns (path, problem) pairs.
    fn validate(&self, py: Python<'_>) -> PyResult<Vec<(PathBuf, String)>> {
        guard(py, || {
            let issues = py
                .detach(|| self.inner.validate())
                .map_err(|e| store_error(py, e))?;
            Ok(issues.into_iter().map(|i| (i.path, i.problem)).collect())
        })
    }
}
