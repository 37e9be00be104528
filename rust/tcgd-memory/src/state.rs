//! A snapshot or point made ready for analysis: the ingested rows, who took them, the
//! device-wide memory sampled next to them, and the statistics per observation.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::error::{MemoryError, Result, TorchVersion};
use crate::ingest::Ingested;
use crate::model::{Block, DeviceMemory, Event, HistoryWindow, PoolId, Segment, StackTable};
use crate::owners::{DevicePeaks, PoolOwner};
use crate::stats::{observation_stats, MemoryStats, ObservationKey, Scope, SumOverflow};

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
    #[serde(flatten)]
    pub taken: SnapshotSource,
    pub marker: Option<String>,
    pub boundary_recorded: bool,
}

/// How a snapshot was taken: by what, from where, and in which conditions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SnapshotSource {
    /// `live` (taken by a probe or recorder), `import` (a pickle file), `dict` (a snapshot
    /// dict handed over directly).
    pub source: String,
    pub source_path: Option<String>,
    pub synchronized: bool,
    pub during_capture: bool,
    pub torch_version: Option<String>,
}

impl SnapshotSource {
    /// A `_dump_snapshot` pickle file read from `path`.
    pub fn import(path: &std::path::Path) -> SnapshotSource {
        SnapshotSource {
            source: "import".to_owned(),
            source_path: Some(path.display().to_string()),
            ..SnapshotSource::default()
        }
    }
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
    /// Who owned each private pool at the point, when the recorder could tell.
    pub pool_owners: Vec<PoolOwner>,
    /// `torch.cuda.memory_stats()` peaks and counters per device, when they were read.
    pub peaks: Vec<DevicePeaks>,
    /// One entry per (device, pool, stream), in report order.
    pub observations: Vec<(ObservationKey, MemoryStats)>,
    /// Sums per (device, pool), in report order.
    pools: Vec<((i64, PoolId), MemoryStats)>,
    /// Sums per scope, per device (`Some`) and over every device (`None`).
    scopes: BTreeMap<(Option<i64>, Scope), MemoryStats>,
}

/// What went wrong with one value of a state, before it is named in an error.
struct Refusal {
    field: String,
    overflow: bool,
    reason: String,
}

impl Refusal {
    fn negative(field: String, value: i64) -> Refusal {
        Refusal {
            field,
            overflow: false,
            reason: format!("negative size {value}"),
        }
    }

    fn overflow(field: String, what: String) -> Refusal {
        Refusal {
            field,
            overflow: true,
            reason: what,
        }
    }
}

/// The rows' own checks, for states made from stored parts as well as fresh snapshots
/// (ingestion refuses the same things with the snapshot's field paths): sizes are not
/// negative, no range ends past `i64::MAX`, and a segment's blocks fit in it. After this,
/// any sum of sizes over one state's segments or blocks fits in 64 bits once their
/// grand total does, because every term is `>= 0`.
fn check_rows(
    segments: &[Segment],
    blocks: &[Block],
    device_memory: &[DeviceMemory],
) -> std::result::Result<(), Refusal> {
    for (i, s) in segments.iter().enumerate() {
        let path = |f: &str| format!("segments[{i}].{f}");
        not_negative(
            [
                ("total_size", Some(s.total_size)),
                ("address", s.address),
                ("allocated_size", s.allocated_size),
                ("active_size", s.active_size),
                ("requested_size", s.requested_size),
            ],
            path,
        )?;
        end_fits(s.address, ("segment's", "total_size", s.total_size), path)?;
    }
    let mut covered = vec![0i64; segments.len()];
    for (j, b) in blocks.iter().enumerate() {
        let path = |f: &str| format!("blocks[{j}].{f}");
        not_negative(
            [
                ("size", Some(b.size)),
                ("requested_size", Some(b.requested_size)),
                ("address", b.address),
            ],
            path,
        )?;
        end_fits(b.address, ("block's", "size", b.size), path)?;
        let (Some(total), Some(segment)) = (
            covered.get_mut(b.segment as usize),
            segments.get(b.segment as usize),
        ) else {
            continue;
        };
        *total = match total.checked_add(b.size) {
            Some(t) if t <= segment.total_size => t,
            _ => {
                return Err(Refusal {
                    field: format!("segments[{}].blocks", b.segment),
                    overflow: false,
                    reason: format!(
                        "blocks add up to more than the segment's total_size {}",
                        segment.total_size
                    ),
                })
            }
        };
    }
    for d in device_memory {
        not_negative(
            [
                ("free_bytes", d.free_bytes),
                ("total_bytes", d.total_bytes),
                ("probe_device_bytes", d.probe_device_bytes),
                ("probe_pinned_bytes", d.probe_pinned_bytes),
            ],
            |name| format!("device_memory[{}].{name}", d.device),
        )?;
    }
    Ok(())
}

/// Refuses the first negative of `values`, named by `path(name)`.
fn not_negative<const N: usize>(
    values: [(&str, Option<i64>); N],
    path: impl Fn(&str) -> String,
) -> std::result::Result<(), Refusal> {
    match values.into_iter().find(|(_, v)| v.is_some_and(|v| v < 0)) {
        Some((name, Some(v))) => Err(Refusal::negative(path(name), v)),
        _ => Ok(()),
    }
}

/// Refuses a range whose end, `address + size`, does not fit; `(what, size name, size)`.
fn end_fits(
    address: Option<i64>,
    (what, size_name, size): (&str, &str, i64),
    path: impl Fn(&str) -> String,
) -> std::result::Result<(), Refusal> {
    match address {
        Some(a) if a.checked_add(size).is_none() => Err(Refusal::overflow(
            path("address"),
            format!("the {what} end, address {a} + {size_name} {size}"),
        )),
        _ => Ok(()),
    }
}

/// Sums per (device, pool) in report order, and per scope and device.
type Sums = (
    Vec<((i64, PoolId), MemoryStats)>,
    BTreeMap<(Option<i64>, Scope), MemoryStats>,
);

fn sums(
    observations: &[(ObservationKey, MemoryStats)],
    devices: &[i64],
) -> std::result::Result<Sums, Refusal> {
    let overflow = |what: String, e: SumOverflow| {
        Refusal::overflow(
            format!("{what}: {}", e.metric),
            format!("the sum of {}", e.metric),
        )
    };
    let mut pools: Vec<((i64, PoolId), MemoryStats)> = Vec::new();
    for (key, stats) in observations {
        match pools.last_mut() {
            Some((k, s)) if *k == (key.device, key.pool) => {
                *s = s.checked_add(stats).map_err(|e| {
                    overflow(
                        format!("segments of device {} pool {:?}", key.device, key.pool),
                        e,
                    )
                })?;
            }
            _ => pools.push(((key.device, key.pool), *stats)),
        }
    }
    let mut scopes = BTreeMap::new();
    let everywhere = std::iter::once(None).chain(devices.iter().copied().map(Some));
    for device in everywhere {
        for scope in Scope::ALL {
            let total = MemoryStats::try_sum(
                observations
                    .iter()
                    .filter(|(k, _)| device.is_none_or(|d| d == k.device) && scope.contains(k.pool))
                    .map(|(_, s)| s),
            )
            .map_err(|e| {
                let place =
                    device.map_or_else(|| "every device".to_owned(), |d| format!("device {d}"));
                overflow(format!("segments of {place}, {} pools", scope.as_str()), e)
            })?;
            scopes.insert((device, scope), total);
        }
    }
    Ok((pools, scopes))
}

impl MemoryState {
    /// Builds a state: checks its rows (no negative size, no range past `i64::MAX`),
    /// computes every sum of its statistics with checked arithmetic, and checks the
    /// allocator's invariants on every observation. Every failure is a [`MemoryError`]
    /// naming the field.
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
        let torch = TorchVersion(identity.taken.torch_version.clone());
        let refused = |r: Refusal| {
            if r.overflow {
                MemoryError::Overflow {
                    field: r.field,
                    what: r.reason,
                    torch: torch.clone(),
                }
            } else {
                MemoryError::Inconsistent {
                    field: r.field,
                    reason: r.reason,
                    torch: torch.clone(),
                }
            }
        };
        check_rows(&segments, &blocks, &device_memory).map_err(refused)?;
        let observations =
            observation_stats(&segments, &blocks).map_err(|(key, e)| MemoryError::Overflow {
                field: format!(
                    "segments of device {} pool {:?} stream {}: {}",
                    key.device, key.pool, key.stream, e.metric
                ),
                what: format!("the sum of {}", e.metric),
                torch: torch.clone(),
            })?;
        for (key, stats) in &observations {
            if let Some(problem) = stats.violations().first() {
                return Err(MemoryError::Inconsistent {
                    field: format!(
                        "segments of device {} pool {:?} stream {}",
                        key.device, key.pool, key.stream
                    ),
                    reason: problem.clone(),
                    torch: torch.clone(),
                });
            }
        }
        let mut all_devices: Vec<i64> = devices;
        all_devices.extend(observations.iter().map(|(k, _)| k.device));
        all_devices.extend(device_memory.iter().map(|d| d.device));
        all_devices.sort_unstable();
        all_devices.dedup();
        let (pools, scopes) = sums(&observations, &all_devices).map_err(refused)?;
        let device_memory: BTreeMap<i64, DeviceMemory> = all_devices
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
        let state = MemoryState {
            identity,
            devices: all_devices,
            device_memory,
            segments,
            blocks,
            events,
            windows,
            warnings,
            stacks,
            pool_owners: Vec::new(),
            peaks: Vec::new(),
            observations,
            pools,
            scopes,
        };
        // The signed readings derived from CUDA's numbers must fit too; checked once here
        // so that readers of the state get them without an error path.
        for &device in &state.devices {
            let memory = state.memory(device);
            let reserved = state.device_stats(device).reserved_bytes;
            // `a - b`, or the overflow of `what` named by the field `f`.
            let difference = |a: i64, b: i64, f: &str, what: String| {
                a.checked_sub(b).ok_or_else(|| MemoryError::Overflow {
                    field: format!("device_memory[{device}].{f}"),
                    what,
                    torch: torch.clone(),
                })
            };
            if let (Some(total), Some(free)) = (memory.total_bytes, memory.free_bytes) {
                let what = format!("CUDA used, total {total} - free {free}");
                let used = difference(total, free, "free_bytes", what)?;
                let what = format!("the residual, CUDA used {used} - reserved {reserved}");
                let residual = difference(used, reserved, "total_bytes", what)?;
                if let Some(probe) = memory.probe_device_bytes {
                    let what = format!("the residual {residual} - probe slots {probe}");
                    difference(residual, probe, "probe_device_bytes", what)?;
                }
            }
        }
        Ok(state)
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
    pub fn pool_stats(&self) -> &[((i64, PoolId), MemoryStats)] {
        &self.pools
    }

    /// The sums of one pool of one device (zero when the state does not have it).
    pub fn pool(&self, device: i64, pool: PoolId) -> MemoryStats {
        self.pools
            .iter()
            .find(|(k, _)| *k == (device, pool))
            .map(|(_, s)| *s)
            .unwrap_or_default()
    }

    /// Allocator totals of one device (every pool and stream).
    pub fn device_stats(&self, device: i64) -> MemoryStats {
        self.scope_stats(Some(device), Scope::All)
    }

    /// Sums per scope; `device = None` sums over every device of the state. (Computed
    /// and checked when the state was made.)
    pub fn scope_stats(&self, device: Option<i64>, scope: Scope) -> MemoryStats {
        self.scopes
            .get(&(device, scope))
            .copied()
            .unwrap_or_default()
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
        // Fits: checked when the state was made.
        self.memory(device)
            .cuda_used()?
            .checked_sub(self.device_stats(device).reserved_bytes)
    }

    /// The residual without this package's probe slots (the residual itself when the
    /// slots are unknown).
    pub fn residual_other(&self, device: i64) -> Option<i64> {
        let residual = self.residual(device)?;
        match self.memory(device).probe_device_bytes {
            // Fits: checked when the state was made.
            Some(probe) => residual.checked_sub(probe),
            None => Some(residual),
        }
    }

    /// The owner of one pool of one device, when known.
    pub fn pool_owner(&self, device: i64, pool: PoolId) -> Option<&PoolOwner> {
        self.pool_owners
            .iter()
            .find(|o| o.device == device && o.pool == pool)
    }

    /// The pool owners with their one-line description, for JSON reports.
    pub fn pool_owners_json(&self) -> Vec<serde_json::Value> {
        self.pool_owners
            .iter()
            .map(|o| {
                let mut v = serde_json::to_value(o).unwrap_or_default();
                if let serde_json::Value::Object(map) = &mut v {
                    map.insert("description".into(), o.describe().into());
                }
                v
            })
            .collect()
    }

    /// The `memory_stats()` reading of one device, when taken.
    pub fn device_peaks(&self, device: i64) -> Option<&DevicePeaks> {
        self.peaks.iter().find(|p| p.device == device)
    }

    /// Whether every segment and block address is known, so lifecycle can match ranges.
    pub fn addresses_complete(&self) -> bool {
        self.segments.iter().all(|s| s.address.is_some())
            && self.blocks.iter().all(|b| b.address.is_some())
    }
}
