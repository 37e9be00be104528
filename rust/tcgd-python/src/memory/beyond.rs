//! What a point stores beyond its snapshot, as Python sees it: pool owners and the
//! `memory_stats()` peaks (typed, frozen), and the memory-viewer export.

use std::path::Path;

use tcgd_memory::owners::{DevicePeaks, OwnerKind, PoolOwner};

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
                peak_reserved_bytes: reserved,
                peak_allocated_bytes: allocated,
                peak_active_bytes: active,
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
    inner: PoolOwner,
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

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("device", self.inner.device)?;
        d.set_item("pool_id", self.inner.pool)?;
        d.set_item("kind", self.inner.kind.as_str())?;
        d.set_item("name", &self.inner.name)?;
        d.set_item("graph_ids", &self.inner.graph_ids)?;
        d.set_item("function_kinds", &self.inner.function_kinds)?;
        d.set_item("compile_ids", &self.inner.compile_ids)?;
        d.set_item("description", self.inner.describe())?;
        Ok(d)
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
    inner: DevicePeaks,
}

#[pymethods]
impl MemoryDevicePeaks {
    #[getter]
    fn device(&self) -> i64 {
        self.inner.device
    }

    #[getter]
    fn peak_reserved_bytes(&self) -> Option<i64> {
        self.inner.peak_reserved_bytes
    }

    #[getter]
    fn peak_allocated_bytes(&self) -> Option<i64> {
        self.inner.peak_allocated_bytes
    }

    #[getter]
    fn peak_active_bytes(&self) -> Option<i64> {
        self.inner.peak_active_bytes
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

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = &self.inner;
        let d = PyDict::new(py);
        d.set_item("device", p.device)?;
        d.set_item("peak_reserved_bytes", p.peak_reserved_bytes)?;
        d.set_item("peak_allocated_bytes", p.peak_allocated_bytes)?;
        d.set_item("peak_active_bytes", p.peak_active_bytes)?;
        d.set_item("num_alloc_retries", p.num_alloc_retries)?;
        d.set_item("num_ooms", p.num_ooms)?;
        d.set_item("since_previous_point", p.since_previous_point)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let p = &self.inner;
        let show = |v: Option<i64>| v.map_or_else(|| "None".to_owned(), |v| v.to_string());
        format!(
            "MemoryDevicePeaks(device={}, peak_reserved_bytes={}, peak_allocated_bytes={}, \
             peak_active_bytes={}, num_alloc_retries={}, num_ooms={}, since_previous_point={})",
            p.device,
            show(p.peak_reserved_bytes),
            show(p.peak_allocated_bytes),
            show(p.peak_active_bytes),
            show(p.num_alloc_retries),
            show(p.num_ooms),
            if p.since_previous_point {
                "True"
            } else {
                "False"
            }
        )
    }
}

pub(super) fn owners_of(state: &RustState) -> Vec<MemoryPoolOwner> {
    state
        .pool_owners
        .iter()
        .map(|o| MemoryPoolOwner { inner: o.clone() })
        .collect()
}

pub(super) fn peaks_of(state: &RustState) -> Vec<MemoryDevicePeaks> {
    state
        .peaks
        .iter()
        .map(|p| MemoryDevicePeaks { inner: *p })
        .collect()
}

pub(super) fn export_viz(path: &Path, state: &RustState, events: &[Event]) -> BindResult<()> {
    Ok(tcgd_memory::viz::write_memory_viz(path, state, events)?)
}
