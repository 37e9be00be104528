//! A tensor run's points and observations as the store reads them
//! ([`tcgd_store::RunReader::tensor_points`]), handed to Python field for field: the Python
//! package's `TensorPoint` and `TensorObservation` are built from these, under the same
//! attribute names, and never from table rows.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;
use tcgd_store::{ObservationMeta, RecordedPoint};

/// One recorded value without its bytes: its place in the point, its layout (`dtype` by
/// torch's name), `nbytes` of its contiguous values, its `payload` kind (`"full"` or
/// `"summary"`), `digest` (`blake3:<hex>`, `None` when no bytes were seen), `summary`, and
/// `site` (`None` for a hand-placed probe).
#[pyclass(
    name = "RecordedObservation",
    module = "torch_cudagraph_debug._native",
    frozen,
    get_all,
    skip_from_py_object
)]
pub struct PyRecordedObservation {
    order: i64,
    name: String,
    invocation_index: i64,
    shape: Vec<i64>,
    stride: Vec<i64>,
    dtype: &'static str,
    source_device: String,
    nbytes: u64,
    payload: &'static str,
    digest: Option<String>,
    summary: Option<Py<tcgd_tensor::TensorSummary>>,
    site: Option<Py<tcgd_store::Site>>,
}

impl PyRecordedObservation {
    fn of(py: Python<'_>, meta: ObservationMeta) -> PyResult<Self> {
        let nbytes = meta.nbytes().unwrap_or(0);
        let d = meta.descriptor;
        Ok(PyRecordedObservation {
            order: d.order,
            name: d.name,
            invocation_index: d.invocation_index,
            shape: d.shape,
            stride: d.stride,
            dtype: d.dtype.torch_name(),
            source_device: d.source_device,
            nbytes,
            payload: d.payload.as_str(),
            digest: meta.digest,
            summary: meta.summary.map(|s| Py::new(py, s)).transpose()?,
            site: meta.site.map(|s| Py::new(py, s)).transpose()?,
        })
    }
}

/// One recorded point: `index`, `label`, `timestamp` (an aware UTC `datetime`), the user's
/// `metadata` as its JSON text, the `replay_index` of the graph replay it read (`None` for
/// an eager point) and its `observations` in order.
#[pyclass(
    name = "RecordedPoint",
    module = "torch_cudagraph_debug._native",
    frozen,
    get_all,
    skip_from_py_object
)]
pub struct PyRecordedPoint {
    index: i64,
    label: String,
    timestamp: Py<PyAny>,
    metadata: String,
    replay_index: Option<i64>,
    observations: Py<PyTuple>,
}

/// `datetime(1970, 1, 1, tzinfo=timezone.utc)` and `timedelta`: the limited API has no
/// datetime constructors, so timestamps are built as the epoch plus microseconds (exact,
/// unlike a float of seconds).
static EPOCH: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

fn utc_datetime(py: Python<'_>, micros: i64) -> PyResult<Py<PyAny>> {
    let (epoch, timedelta) = EPOCH.get_or_try_init(py, || -> PyResult<_> {
        let datetime = py.import("datetime")?;
        let utc = datetime.getattr("timezone")?.getattr("utc")?;
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("tzinfo", utc)?;
        let epoch = datetime
            .getattr("datetime")?
            .call((1970, 1, 1), Some(&kwargs))?;
        Ok((epoch.unbind(), datetime.getattr("timedelta")?.unbind()))
    })?;
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("microseconds", micros)?;
    let delta = timedelta.bind(py).call((), Some(&kwargs))?;
    Ok(epoch.bind(py).add(delta)?.unbind())
}

impl PyRecordedPoint {
    fn of(py: Python<'_>, point: RecordedPoint) -> PyResult<Self> {
        let observations = point
            .observations
            .into_iter()
            .map(|o| PyRecordedObservation::of(py, o))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyRecordedPoint {
            index: point.index,
            label: point.label,
            timestamp: utc_datetime(py, point.timestamp_micros)?,
            metadata: point.metadata,
            replay_index: point.replay_index,
            observations: PyTuple::new(py, observations)?.unbind(),
        })
    }
}

#[pymethods]
impl PyRecordedPoint {
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let count = slf.get().observations.bind(slf.py()).len();
        crate::classes::attrs_repr_with(
            slf.as_any(),
            &["index", "label"],
            &[("observations", count.to_string())],
        )
    }
}

#[pymethods]
impl PyRecordedObservation {
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &[
                "order",
                "name",
                "invocation_index",
                "dtype",
                "shape",
                "payload",
            ],
        )
    }
}

/// The store's points as Python objects.
pub(crate) fn recorded_points(
    py: Python<'_>,
    points: Vec<RecordedPoint>,
) -> PyResult<Vec<PyRecordedPoint>> {
    points
        .into_iter()
        .map(|p| PyRecordedPoint::of(py, p))
        .collect()
}
