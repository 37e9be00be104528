//! A snapshot or point made ready for analysis: the ingested rows, who took them, the
//! device-wide memory sampled next to them, and the statistics per observation.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::error::{MemoryError, Result, TorchVersion};
use crate::ingest::Ingested;
use crate::model::{Block, DeviceMemory, Event, HistoryWindow, PoolId, Segment, StackTable};
use crate::stats::{observation_stats, MemoryStats, ObservationKey, Scope};

/// Who took a state, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StateIdentity {
    /// The run id, or the probe's id: states of one origin come from one process and one
    /// allocator history, so their addresses can be matched.
    pub origin: String,
    /// The run's or probe's name.
    pub name: String,
    pub label: String,
    pub index: i64,
    /// `live` (taken by a probe or recorder), `import` (a pickle file), `dict` (a snapshot
    /// dict handed over directly).
    pub source: String,
    pub source_path: Option<String>,
    pub marker: Option<String>,
    pub boundary_recorded: bool,
    pub synchronized: bool,
    pub during_capture: bool,
    pub torch_version: Option<String>,
}

impl StateIdentity {
    /// `name@label`, as reports title a state.
    pub fn title(&self) -> String {
        format!("{}@{}", self.name, self.label)
    }
}

#[derive(Debug, Clone)]
pub struct MemoryState {
    pub identity: StateIdentity,
    /// Devices the state covers, ascending.
    pub devices: Vec<i64>,
    pub device_memory: BTreeMap<i64, DeviceMemory>,
    pub segments: Vec<Segment>,
    pub blocks: Vec<Block>,
    pub events: Vec<Event>,
    pub windows: Vec<HistoryWindow>,
    pub warnings: Vec<String>,
    pub stacks: Arc<StackTable>,
    /// One entry per (device, pool, stream), in report order.
    pub observations: Vec<(ObservationKey, MemoryStats)>,
}

impl MemoryState {
    /// Builds a state and checks the allocator's invariants on every observation.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        identity: StateIdentity,
        devices: Vec<i64>,
        device_memory: Vec<DeviceMemory>,
        segments: Vec<Segment>,
        blocks: Vec<Block>,
        events: Vec<Event>,
        windows: Vec<HistoryWindow>,
        warnings: Vec<String>,
        stacks: Arc<StackTable>,
    ) -> Result<MemoryState> {
        let observations = observation_stats(&segments, &blocks);
        for (key, stats) in &observations {
            if let Some(problem) = stats.violations().first() {
                return Err(MemoryError::Inconsistent {
                    field: format!(
                        "segments of device {} pool {:?} stream {}",
                        key.device, key.pool, key.stream
                    ),
                    reason: problem.clone(),
                    torch: TorchVersion(identity.torch_version.clone()),
                });
            }
        }
        let mut all_devices: Vec<i64> = devices;
        all_devices.extend(observations.iter().map(|(k, _)| k.device));
        all_devices.extend(device_memory.iter().map(|d| d.device));
        all_devices.sort_unstable();
        all_devices.dedup();
        let device_memory = all_devices
            .iter()
            .map(|&device| {
                let found = device_memory.iter().find(|d| d.device == device);
                (
                    device,
                    found.copied().unwrap_or(DeviceMemory {
                        device,
                        ..DeviceMemory::default()
                    }),
                )
            })
            .collect();
        Ok(MemoryState {
            identity,
            devices: all_devices,
            device_memory,
            segments,
            blocks,
            events,
            windows,
            warnings,
            stacks,
            observations,
        })
    }

    /// A state from an ingested snapshot.
    pub fn from_ingested(
        identity: StateIdentity,
        ingested: Ingested,
        device_memory: Vec<DeviceMemory>,
        stacks: Arc<StackTable>,
    ) -> Result<MemoryState> {
        MemoryState::new(
            identity,
            ingested.devices,
            device_memory,
            ingested.segments,
            ingested.blocks,
            ingested.events,
            ingested.windows,
            ingested.warnings,
            stacks,
        )
    }

    pub fn stats(&self, key: &ObservationKey) -> Option<&MemoryStats> {
        self.observations
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, s)| s)
    }

    /// Sums per (device, pool), in report order.
    pub fn pool_stats(&self) -> Vec<((i64, PoolId), MemoryStats)> {
        let mut out: Vec<((i64, PoolId), MemoryStats)> = Vec::new();
        for (key, stats) in &self.observations {
            match out.last_mut() {
                Some((k, s)) if *k == (key.device, key.pool) => s.add(stats),
                _ => out.push(((key.device, key.pool), *stats)),
            }
        }
        out
    }

    /// Allocator totals of one device (every pool and stream).
    pub fn device_stats(&self, device: i64) -> MemoryStats {
        MemoryStats::sum(
            self.observations
                .iter()
                .filter(|(k, _)| k.device == device)
                .map(|(_, s)| s),
        )
    }

    /// Sums per scope; `device = None` sums over every device of the state.
    pub fn scope_stats(&self, device: Option<i64>, scope: Scope) -> MemoryStats {
        MemoryStats::sum(
            self.observations
                .iter()
                .filter(|(k, _)| device.is_none_or(|d| d == k.device) && scope.contains(k.pool))
                .map(|(_, s)| s),
        )
    }

    pub fn memory(&self, device: i64) -> DeviceMemory {
        self.device_memory
            .get(&device)
            .copied()
            .unwrap_or(DeviceMemory {
                device,
                ..DeviceMemory::default()
            })
    }

    /// CUDA used minus what the allocator reserved: context, other processes, NCCL, raw
    /// cudaMalloc, and this package's probe slots. Signed: the two are read one after the
    /// other, not atomically.
    pub fn residual(&self, device: i64) -> Option<i64> {
        Some(self.memory(device).cuda_used()? - self.device_stats(device).reserved)
    }

    /// Whether every segment and block address is known, so lifecycle can match ranges.
    pub fn addresses_complete(&self) -> bool {
        self.segments.iter().all(|s| s.address.is_some())
            && self.blocks.iter().all(|b| b.address.is_some())
    }
}
