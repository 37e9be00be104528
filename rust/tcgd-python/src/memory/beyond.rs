//! What a point stores beyond its snapshot, as Python sees it: pool owners and the
//! `memory_stats()` peaks (typed, frozen), and the memory-viewer export.

use std::path::Path;

use tcgd_memory::owners::{DevicePeaks, OwnerKind, PeakBytes, PoolOwner};

use crate::classes::frozen_class;

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

frozen_class! {
    /// The owner of one private pool at a point.
    #[pyclass]
    pub struct MemoryPoolOwner(PoolOwner);
    |o, py| {
        device: i64 => o.device;
        pool_id: (i64, i64) => o.pool;
        /// `graph_trees`, `cuda_graph` or `mempool`.
        kind: &'static str => o.kind.as_str();
        name: Option<String> => o.name.clone();
        graph_ids: Vec<i64> => o.graph_ids.clone();
        function_kinds: Vec<String> => o.function_kinds.clone();
        compile_ids: Vec<String> => o.compile_ids.clone();
        /// The line reports show next to the pool.
        description: String => o.describe();
    }
    to_dict(Python);
    {
        fn __repr__(&self) -> String {
            format!(
                "MemoryPoolOwner(pool[{},{}] {})",
                self.inner.pool.0,
                self.inner.pool.1,
                self.inner.describe()
            )
        }
    }
}

frozen_class! {
    /// `torch.cuda.memory_stats()` peaks and counters of one device at a point.
    #[pyclass]
    pub struct MemoryDevicePeaks(DevicePeaks);
    |p, py| {
        device: i64 => p.device;
        peak_reserved_bytes: Option<i64> => p.bytes.peak_reserved_bytes;
        peak_allocated_bytes: Option<i64> => p.bytes.peak_allocated_bytes;
        peak_active_bytes: Option<i64> => p.bytes.peak_active_bytes;
        num_alloc_retries: Option<i64> => p.num_alloc_retries;
        num_ooms: Option<i64> => p.num_ooms;
        /// The peaks were reset at the previous point (they cover only the time since).
        since_previous_point: bool => p.since_previous_point;
    }
    to_dict(Python);
    repr(all);
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
