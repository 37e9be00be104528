//! What a point stores beyond its snapshot, as Python sees it: pool owners and the
//! `memory_stats()` peaks (typed, frozen), and the memory-viewer export.

use std::path::Path;

use tcgd_memory::owners::{DevicePeaks, OwnerKind, PeakBytes, PoolOwner};

use super::*;

/// `(device, pool_id, kind, name, graph_ids, function_kinds, compile_ids)` as the
/// recorder passes an owner.
pub(super) type OwnerArgs = Vec<(
    i64,
    (i64, i64),
    String,
    Option<String>,
    Vec<i64>,
    Vec<String>,
    Vec<String>,
)>;

/// `(device, peak_reserved, peak_allocated, peak_active, num_alloc_retries, num_ooms,
/// since_previous_point)` per device.
pub(super) type PeakArgs = Vec<(
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    bool,
)>;

pub(super) fn extras(
    owners: Option<OwnerArgs>,
    peaks: Option<PeakArgs>,
) -> BindResult<tcgd_memory::PointExtras> {
    let mut pool_owners = Vec::new();
    for (device, pool, kind, name, graph_ids, function_kinds, compile_ids) in
        owners.unwrap_or_default()
    {
        let kind = OwnerKind::parse(&kind).ok_or_else(|| {
            BindingError::InvalidInput(format!(
                "pool owner kind must be 'graph_trees', 'cuda_graph' or 'mempool', got '{kind}'"
            ))
        })?;
        let mut graph_ids = graph_ids;
        graph_ids.sort_unstable();
        graph_ids.dedup();
        pool_owners.push(PoolOwner {
            device,
            pool,
            kind,
            name,
            graph_ids,
            function_kinds,
            compile_ids,
        });
    }
    let peaks = peaks
        .unwrap_or_default()
        .into_iter()
        .map(
            |(device, reserved, allocated, active, retries, ooms, since)| DevicePeaks {
                device,
                bytes: PeakBytes {
                    peak_reserved_bytes: reserved,
                    peak_allocated_bytes: allocated,
                    peak_active_bytes: active,
                },
                num_alloc_retries: retries,
                num_ooms: ooms,
                since_previous_point: since,
            },
        )
        .collect();
    Ok(tcgd_memory::PointExtras { pool_owners, peaks })
}

/// The owner of one private pool at a point.
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryPoolOwner {
    pub(crate) inner: PoolOwner,
}

impl From<PoolOwner> for MemoryPoolOwner {
    fn from(inner: PoolOwner) -> Self {
        MemoryPoolOwner { inner }
    }
}

#[pymethods]
impl MemoryPoolOwner {
    #[getter]
    fn device(&self) -> i64 {
        self.inner.device
    }
    #[getter]
    fn pool_id(&self) -> (i64, i64) {
        self.inner.pool
    }
    /// `graph_trees`, `cuda_graph` or `mempool`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind.as_str()
    }
    #[getter]
    fn name(&self) -> Option<String> {
        self.inner.name.clone()
    }
    #[getter]
    fn graph_ids(&self) -> Vec<i64> {
        self.inner.graph_ids.clone()
    }
    #[getter]
    fn function_kinds(&self) -> Vec<String> {
        self.inner.function_kinds.clone()
    }
    #[getter]
    fn compile_ids(&self) -> Vec<String> {
        self.inner.compile_ids.clone()
    }
    /// The line reports show next to the pool.
    #[getter]
    fn description(&self) -> String {
        self.inner.describe()
    }
    /// Every attribute by name, in order.
    fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        crate::classes::attrs_dict(
            slf.as_any(),
            &[
                "device",
                "pool_id",
                "kind",
                "name",
                "graph_ids",
                "function_kinds",
                "compile_ids",
                "description",
            ],
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "MemoryPoolOwner(pool[{},{}] {})",
            self.inner.pool.0,
            self.inner.pool.1,
            self.inner.describe()
        )
    }
}

/// `torch.cuda.memory_stats()` peaks and counters of one device at a point.
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryDevicePeaks {
    pub(crate) inner: DevicePeaks,
}

impl From<DevicePeaks> for MemoryDevicePeaks {
    fn from(inner: DevicePeaks) -> Self {
        MemoryDevicePeaks { inner }
    }
}

#[pymethods]
impl MemoryDevicePeaks {
    #[getter]
    fn device(&self) -> i64 {
        self.inner.device
    }
    #[getter]
    fn peak_reserved_bytes(&self) -> Option<i64> {
        self.inner.bytes.peak_reserved_bytes
    }
    #[getter]
    fn peak_allocated_bytes(&self) -> Option<i64> {
        self.inner.bytes.peak_allocated_bytes
    }
    #[getter]
    fn peak_active_bytes(&self) -> Option<i64> {
        self.inner.bytes.peak_active_bytes
    }
    #[getter]
    fn num_alloc_retries(&self) -> Option<i64> {
        self.inner.num_alloc_retries
    }
    #[getter]
    fn num_ooms(&self) -> Option<i64> {
        self.inner.num_ooms
    }
    /// The peaks were reset at the previous point (they cover only the time since).
    #[getter]
    fn since_previous_point(&self) -> bool {
        self.inner.since_previous_point
    }
    /// Every attribute by name, in order.
    fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        crate::classes::attrs_dict(
            slf.as_any(),
            &[
                "device",
                "peak_reserved_bytes",
                "peak_allocated_bytes",
                "peak_active_bytes",
                "num_alloc_retries",
                "num_ooms",
                "since_previous_point",
            ],
        )
    }
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &[
                "device",
                "peak_reserved_bytes",
                "peak_allocated_bytes",
                "peak_active_bytes",
                "num_alloc_retries",
                "num_ooms",
                "since_previous_point",
            ],
        )
    }
}

pub(super) fn owners_of(state: &RustState) -> Vec<MemoryPoolOwner> {
    state
        .pool_owners
        .iter()
        .cloned()
        .map(MemoryPoolOwner::from)
        .collect()
}

pub(super) fn peaks_of(state: &RustState) -> Vec<MemoryDevicePeaks> {
    state
        .peaks
        .iter()
        .copied()
        .map(MemoryDevicePeaks::from)
        .collect()
}

pub(super) fn export_viz(path: &Path, state: &RustState, events: &[Event]) -> BindResult<()> {
    Ok(tcgd_memory::viz::write_memory_viz(path, state, events)?)
}
