//! The rows of comparisons, timelines and phase decompositions as frozen Python classes
//! over [`tcgd_memory::rows`], which builds them: a getter reads one value of the row and
//! gives it its Python type (`MemoryStats`, `MemoryPoolKey`, ...); `to_dict()` is the
//! row's serde form, the one `report.json` holds.

use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use pyo3::IntoPyObjectExt;
use tcgd_memory::rows::comparison::{DeviceMetric as M, DeviceSide as S};
use tcgd_memory::rows::{self as rows, ObservationRef, PoolRef};

use super::*;

/// One of the facade's named tuples (`MemoryPoolKey`, `MemoryObservationKey`), imported
/// once into `class`, made from `fields`; `None` for a missing key.
fn model_tuple<'py>(
    py: Python<'py>,
    class: &PyOnceLock<Py<PyType>>,
    name: &str,
    fields: Option<impl pyo3::call::PyCallArgs<'py>>,
) -> PyResult<Py<PyAny>> {
    let Some(fields) = fields else {
        return Ok(py.None());
    };
    let class = class.import(py, "torch_cudagraph_debug.memory_debug._model", name)?;
    Ok(class.call1(fields)?.unbind())
}

fn pool_key(py: Python<'_>, key: Option<PoolRef>) -> PyResult<Py<PyAny>> {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let fields = key.map(|k| (k.device_index, k.pool_id));
    model_tuple(py, &CLASS, "MemoryPoolKey", fields)
}

fn observation_key(py: Python<'_>, key: Option<ObservationRef>) -> PyResult<Py<PyAny>> {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let fields = key.map(|k| (k.device_index, k.pool_id, k.stream));
    model_tuple(py, &CLASS, "MemoryObservationKey", fields)
}

fn stats(py: Python<'_>, s: Option<&tcgd_memory::MemoryStats>) -> PyResult<Py<PyAny>> {
    s.map(|s| PyMemoryStats::of(*s)).into_py_any(py)
}

fn delta(py: Python<'_>, s: Option<&tcgd_memory::MemoryStats>) -> PyResult<Py<PyAny>> {
    s.map(|s| PyMemoryStatsDelta::of(*s)).into_py_any(py)
}

fn lifecycle(py: Python<'_>, l: Option<tcgd_memory::Lifecycle>) -> PyResult<Py<PyAny>> {
    l.map(|row| MemoryLifecycleDelta { row }).into_py_any(py)
}

fn sample(py: Python<'_>, s: Option<rows::DeviceSample>) -> PyResult<Py<PyAny>> {
    s.map(PyDeviceMemorySample::of).into_py_any(py)
}

/// A frozen class over one row type: `name => expression` getters (the row and the
/// interpreter are named by `|r, py|`; each expression gives a `PyResult` of a Python
/// object), `to_dict()` and a `repr` naming the class.
macro_rules! row_class {
    ($class:ident($row:ty) |$r:ident, $py:ident| { $($getter:ident => $value:expr;)* }) => {
        #[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
        #[derive(Clone)]
        pub struct $class {
            pub(crate) row: $row,
        }

        impl From<$row> for $class {
            fn from(row: $row) -> Self {
                $class { row }
            }
        }

        #[pymethods]
        impl $class {
            $(
                #[getter]
                fn $getter(&self, $py: Python<'_>) -> PyResult<Py<PyAny>> {
                    let $r = &self.row;
                    $value
                }
            )*

            /// The row as `report.json` holds it.
            fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                crate::results::serde_to_py(py, &self.row)
            }

            fn __repr__(&self) -> String {
                format!("{}({})", stringify!($class), self.row.repr_fields())
            }
        }
    };
}

/// What a row shows in its `repr`.
trait ReprFields {
    fn repr_fields(&self) -> String;
}

fn any<'py>(py: Python<'py>, value: impl IntoPyObject<'py>) -> PyResult<Py<PyAny>> {
    value.into_py_any(py)
}

// ---------------------------------------------------------------------- comparison rows

row_class!(MemoryLifecycleDelta(tcgd_memory::Lifecycle) |r, py| {
    new_segment_bytes => any(py, r.new_segment_bytes);
    removed_segment_bytes => any(py, r.removed_segment_bytes);
    newly_active_bytes => any(py, r.newly_active_bytes);
    became_inactive_bytes => any(py, r.became_inactive_bytes);
});

impl ReprFields for tcgd_memory::Lifecycle {
    fn repr_fields(&self) -> String {
        format!(
            "new_segment_bytes={}, removed_segment_bytes={}, newly_active_bytes={}, \
             became_inactive_bytes={}",
            self.new_segment_bytes,
            self.removed_segment_bytes,
            self.newly_active_bytes,
            self.became_inactive_bytes
        )
    }
}

row_class!(MemoryAllocatorScopeComparison(rows::ScopeComparison) |r, py| {
    scope => any(py, r.scope.as_str());
    reference => stats(py, Some(&r.reference));
    candidate => stats(py, Some(&r.candidate));
    delta => delta(py, Some(&r.delta));
    changed => any(py, r.delta != tcgd_memory::MemoryStats::default());
});

impl ReprFields for rows::ScopeComparison {
    fn repr_fields(&self) -> String {
        format!(
            "scope={:?}, delta_reserved_bytes={}",
            self.scope.as_str(),
            self.delta.reserved
        )
    }
}

/// The getters pool and observation rows share, around their own key getters.
macro_rules! slot_class {
    ($class:ident($key:ty, $key_fn:ident)) => {
        row_class!($class(rows::SlotComparison<$key>) |r, py| {
            reference_key => $key_fn(py, r.keys.reference);
            candidate_key => $key_fn(py, r.keys.candidate);
            pool_kind => any(py, r.pool_kind.as_str());
            r#match => any(py, r.match_kind.as_str());
            reference => stats(py, r.stats.reference.as_ref());
            candidate => stats(py, r.stats.candidate.as_ref());
            delta => delta(py, Some(&r.delta));
            lifecycle => lifecycle(py, r.lifecycle);
            changed => any(py, r.changed());
        });
    };
}

slot_class!(MemoryPoolComparison(PoolRef, pool_key));
slot_class!(MemoryObservationComparison(ObservationRef, observation_key));

impl<K: std::fmt::Debug> ReprFields for rows::SlotComparison<K> {
    fn repr_fields(&self) -> String {
        format!(
            "reference_key={:?}, candidate_key={:?}, match={:?}, delta_reserved_bytes={}",
            self.keys.reference,
            self.keys.candidate,
            self.match_kind.as_str(),
            self.delta.reserved
        )
    }
}

row_class!(MemoryDeviceComparison(rows::DeviceComparison) |r, py| {
    reference_device_index => any(py, r.device_index.reference);
    candidate_device_index => any(py, r.device_index.candidate);
    r#match => any(py, r.match_kind.as_str());
    reference_sample => sample(py, r.sample.reference);
    candidate_sample => sample(py, r.sample.candidate);
    reference_stats => stats(py, r.stats.reference.as_ref());
    candidate_stats => stats(py, r.stats.candidate.as_ref());
    delta => delta(py, Some(&r.delta));
    lifecycle => lifecycle(py, r.lifecycle);
    changed => any(py, r.changed());
    reference_used_bytes => any(py, r.metric(S::Reference, M::Used));
    candidate_used_bytes => any(py, r.metric(S::Candidate, M::Used));
    delta_used_bytes => any(py, r.metric(S::Delta, M::Used));
    reference_free_bytes => any(py, r.metric(S::Reference, M::Free));
    candidate_free_bytes => any(py, r.metric(S::Candidate, M::Free));
    delta_free_bytes => any(py, r.metric(S::Delta, M::Free));
    reference_total_bytes => any(py, r.metric(S::Reference, M::Total));
    candidate_total_bytes => any(py, r.metric(S::Candidate, M::Total));
    delta_total_bytes => any(py, r.metric(S::Delta, M::Total));
    reference_allocator_reserved_bytes => any(py, r.metric(S::Reference, M::AllocatorReserved));
    candidate_allocator_reserved_bytes => any(py, r.metric(S::Candidate, M::AllocatorReserved));
    delta_allocator_reserved_bytes => any(py, r.metric(S::Delta, M::AllocatorReserved));
    reference_cuda_allocator_residual_bytes =>
        any(py, r.metric(S::Reference, M::CudaAllocatorResidual));
    candidate_cuda_allocator_residual_bytes =>
        any(py, r.metric(S::Candidate, M::CudaAllocatorResidual));
    delta_cuda_allocator_residual_bytes => any(py, r.metric(S::Delta, M::CudaAllocatorResidual));
});

impl ReprFields for rows::DeviceComparison {
    fn repr_fields(&self) -> String {
        format!(
            "reference_device_index={:?}, candidate_device_index={:?}, match={:?}",
            self.device_index.reference,
            self.device_index.candidate,
            self.match_kind.as_str()
        )
    }
}

// ---------------------------------------------------------------------- timeline entries

impl<T: std::fmt::Debug> ReprFields for rows::timeline::TimelineEntry<T> {
    fn repr_fields(&self) -> String {
        format!(
            "point_label={:?}, {:?}, reserved_bytes={}",
            self.point.point_label, self.subject, self.stats.reserved
        )
    }
}

row_class!(MemoryAllocatorScopeTimelineEntry(rows::ScopeTimelineEntry) |r, py| {
    point_index => any(py, r.point.point_index);
    point_label => any(py, r.point.point_label.as_str());
    scope => any(py, r.subject.as_str());
    stats => stats(py, Some(&r.stats));
    delta => delta(py, r.delta.as_ref());
});

row_class!(MemoryPoolTimelineEntry(rows::PoolTimelineEntry) |r, py| {
    point_index => any(py, r.point.point_index);
    point_label => any(py, r.point.point_label.as_str());
    pool_key => pool_key(py, Some(r.subject));
    pool_kind => any(py, tcgd_memory::PoolKind::of(r.subject.pool_id).as_str());
    stats => stats(py, Some(&r.stats));
    delta => delta(py, r.delta.as_ref());
});

row_class!(MemoryObservationTimelineEntry(rows::ObservationTimelineEntry) |r, py| {
    point_index => any(py, r.point.point_index);
    point_label => any(py, r.point.point_label.as_str());
    key => observation_key(py, Some(r.subject));
    stats => stats(py, Some(&r.stats));
    delta => delta(py, r.delta.as_ref());
});

row_class!(MemoryDeviceTimelineEntry(rows::DeviceTimelineEntry) |r, py| {
    point_index => any(py, r.point.point_index);
    point_label => any(py, r.point.point_label.as_str());
    device_index => any(py, r.device_index);
    sample => sample(py, r.sample);
    stats => stats(py, Some(&r.stats));
    delta => delta(py, r.delta.as_ref());
    delta_used_bytes => any(py, r.delta_used_bytes());
    delta_free_bytes => any(py, r.delta_free_bytes());
    delta_total_bytes => any(py, r.delta_total_bytes());
    cuda_allocator_residual_bytes => any(py, r.cuda_allocator_residual_bytes());
});

impl ReprFields for rows::DeviceTimelineEntry {
    fn repr_fields(&self) -> String {
        format!(
            "point_label={:?}, device_index={}, reserved_bytes={}",
            self.point.point_label, self.device_index, self.stats.reserved
        )
    }
}

// ---------------------------------------------------------------------- phase rows

row_class!(MemoryPhaseComponents(rows::PhaseComponents) |r, py| {
    baseline_change_bytes => any(py, r.0.baseline_change());
    candidate_change_bytes => any(py, r.0.candidate_change());
    start_gap_bytes => any(py, r.0.start_gap());
    end_gap_bytes => any(py, r.0.end_gap());
    change_gap_bytes => any(py, r.0.change_gap());
    identity_holds => any(py, r.0.identity_holds());
});

impl ReprFields for rows::PhaseComponents {
    fn repr_fields(&self) -> String {
        format!(
            "end_gap_bytes={:?}, change_gap_bytes={:?}, identity_holds={:?}",
            self.0.end_gap(),
            self.0.change_gap(),
            self.0.identity_holds()
        )
    }
}

impl ReprFields for rows::PhaseDecomposition {
    fn repr_fields(&self) -> String {
        format!(
            "metric={:?}, {}",
            self.metric(),
            self.components().repr_fields()
        )
    }
}

/// The getters every phase row has, after its own identity getters.
macro_rules! phase_class {
    ($class:ident |$r:ident, $py:ident| { $($getter:ident => $value:expr;)* }) => {
        row_class!($class(rows::PhaseDecomposition) |$r, $py| {
            $($getter => $value;)*
            metric => any($py, $r.metric());
            components => any($py, MemoryPhaseComponents::from($r.components()));
            identity_holds => any($py, $r.0.values.identity_holds());
        });
    };
}

phase_class!(MemoryAllocatorScopePhaseDecomposition |r, py| {
    scope => any(py, r.0.scope.map(|s| s.as_str()));
});
phase_class!(MemoryPoolPhaseDecomposition |r, py| {
    baseline_pool => pool_key(py, r.baseline_pool());
    candidate_pool => pool_key(py, r.candidate_pool());
});
phase_class!(MemoryDevicePhaseDecomposition |r, py| {
    baseline_device_index => any(py, r.0.baseline_device);
    candidate_device_index => any(py, r.0.candidate_device);
});

/// Rows as a tuple of their Python class, made once with the result that holds them.
pub(super) fn row_tuple<C, R>(py: Python<'_>, items: &[R]) -> PyResult<Py<PyTuple>>
where
    R: Clone,
    C: From<R> + pyo3::PyClass + Into<pyo3::PyClassInitializer<C>>,
{
    let objects = items
        .iter()
        .map(|r| Bound::new(py, C::from(r.clone())))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyTuple::new(py, objects)?.unbind())
}
