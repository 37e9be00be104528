"""The memory data model shared by probe snapshots and recorded points: statistics,
observations, pool keys, device readings. Values are computed by the native core; these
classes only give them names."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa

from torch_cudagraph_debug import _native

PoolId = tuple[int, int]
DEFAULT_POOL: PoolId = (0, 0)


class MemoryDebugWarning(UserWarning):
    """Something about a snapshot that limits what can be said: a missing optional field,
    a snapshot taken during capture, history that is off or truncated."""


@dataclass(frozen=True)
class MemoryStats:
    """What the caching allocator holds in one slice of its state (bytes or counts).

    ``reserved`` is the sum of segment sizes; ``allocated`` the blocks owned by live
    tensors; ``active`` adds blocks freed by their owner but still awaiting a stream-safe
    free; ``requested`` the unrounded sizes of active blocks."""

    reserved: int
    allocated: int
    active: int
    requested: int
    segment_count: int
    block_count: int
    inactive_block_count: int
    largest_inactive_block: int
    expandable_segment_count: int
    expandable_reserved: int
    expandable_inactive: int

    @property
    def awaiting_free(self) -> int:
        return self.active - self.allocated

    @property
    def inactive(self) -> int:
        """Reserved but not active. Reusable only inside its own pool: a private pool's
        inactive bytes are not free memory for anything else."""
        return self.reserved - self.active

    @property
    def internal_fragmentation(self) -> int:
        return self.active - self.requested

    @classmethod
    def from_native(cls, values: Mapping[str, int]) -> MemoryStats:
        return cls(**{f.name: int(values[f.name]) for f in dataclasses.fields(cls)})


class MemoryPoolKey(NamedTuple):
    """A pool of one device. ``(0, 0)`` is the default pool; every other id is private
    (a CUDA graph's pool or a ``torch.cuda.MemPool``)."""

    device_index: int
    pool_id: PoolId

    @property
    def is_default(self) -> bool:
        return tuple(self.pool_id) == DEFAULT_POOL

    @property
    def kind(self) -> str:
        return "default" if self.is_default else "private"


@dataclass(frozen=True)
class MemoryObservation:
    """One (device, pool, stream) slice of the allocator at a snapshot or point."""

    order: int
    device_index: int
    pool_id: PoolId
    stream: int
    stats: MemoryStats

    @property
    def key(self) -> tuple[int, PoolId, int]:
        return (self.device_index, self.pool_id, self.stream)

    @property
    def pool_key(self) -> MemoryPoolKey:
        return MemoryPoolKey(self.device_index, self.pool_id)

    @property
    def pool_kind(self) -> str:
        return self.pool_key.kind


@dataclass(frozen=True)
class DeviceMemory:
    """Device-wide memory next to the allocator's. ``cuda_used`` comes from
    ``torch.cuda.mem_get_info`` right after the snapshot (device-wide: other processes
    included; read one after the other, not atomically); ``residual = cuda_used -
    allocator_reserved`` (signed). ``probe_device_bytes`` are this package's own probe
    slots, part of the residual."""

    device_index: int
    free_bytes: int | None
    total_bytes: int | None
    cuda_used: int | None
    allocator_reserved: int
    residual: int | None
    probe_device_bytes: int | None
    probe_pinned_bytes: int | None
    history_status: str
    ring_entries: int
    window_events: int


class _StateView:
    """Accessors shared by ``MemoryProbeSnapshot`` and ``MemoryPoint``."""

    _state: _native.MemoryState

    @functools.cached_property
    def observations(self) -> tuple[MemoryObservation, ...]:
        return tuple(
            MemoryObservation(
                order=order,
                device_index=device,
                pool_id=tuple(pool),  # type: ignore[arg-type]
                stream=stream,
                stats=MemoryStats.from_native(stats),
            )
            for order, device, pool, stream, stats in self._state.observations()
        )

    @property
    def by_key(self) -> dict[tuple[int, PoolId, int], MemoryObservation]:
        return {o.key: o for o in self.observations}

    def observation(self, device: int, pool: PoolId, stream: int) -> MemoryObservation:
        try:
            return self.by_key[(device, tuple(pool), stream)]  # type: ignore[index]
        except KeyError:
            keys = [o.key for o in self.observations]
            raise KeyError(
                f"no observation for device {device}, pool {tuple(pool)}, stream {stream}; "
                f"present: {keys}"
            ) from None

    @property
    def observation_stats(self) -> dict[tuple[int, PoolId, int], MemoryStats]:
        return {o.key: o.stats for o in self.observations}

    @functools.cached_property
    def pool_stats(self) -> dict[MemoryPoolKey, MemoryStats]:
        return {
            MemoryPoolKey(device, tuple(pool)): MemoryStats.from_native(stats)  # type: ignore[arg-type]
            for device, pool, stats in self._state.pool_stats()
        }

    @functools.cached_property
    def allocator_scope_stats(self) -> dict[str, MemoryStats]:
        """``all``, ``default`` and ``private`` pools, summed over the devices."""
        return {k: MemoryStats.from_native(v) for k, v in self._state.scope_stats().items()}

    def device_scope_stats(self, device: int) -> dict[str, MemoryStats]:
        return {k: MemoryStats.from_native(v) for k, v in self._state.scope_stats(device).items()}

    @functools.cached_property
    def device_memory(self) -> dict[int, DeviceMemory]:
        out = {}
        for d in self._state.device_memory():
            out[d["device"]] = DeviceMemory(
                device_index=d["device"],
                free_bytes=d["free_bytes"],
                total_bytes=d["total_bytes"],
                cuda_used=d["cuda_used"],
                allocator_reserved=d["allocator_reserved"],
                residual=d["residual"],
                probe_device_bytes=d["probe_device_bytes"],
                probe_pinned_bytes=d["probe_pinned_bytes"],
                history_status=d["history_status"],
                ring_entries=d["ring_entries"],
                window_events=d["window_events"],
            )
        return out

    @property
    def devices(self) -> tuple[int, ...]:
        return tuple(self._state.devices)

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(self._state.warnings)

    @property
    def boundary_recorded(self) -> bool:
        """Whether this state's marker entry was found in the allocator history, so that
        history can be cut exactly at it."""
        return bool(self._state.identity()["boundary_recorded"])

    def table(self, name: str) -> pa.Table:
        """One memory table of this state (``memory_stats``, ``memory_segments``,
        ``memory_blocks``, ``memory_events``, ``memory_devices``, ...)."""
        return pa.Table.from_batches([self._state.table(name)])

    def to_text(self, *, depth: str = "stream") -> str:
        """The state on its own: device -> CUDA used -> residual + allocator -> pools ->
        streams."""
        return self._state.report("text", True, depth)

    def report(self, format: str = "text", *, depth: str = "stream") -> str:
        return self._state.report(format, True, depth)

    def _identity(self) -> dict[str, Any]:
        return self._state.identity()

    @property
    def pool_owners(self) -> tuple[_native.MemoryPoolOwner, ...]:
        """Who owned each private pool when the state was taken (Graph Trees managers,
        pools named with ``name_pool``); empty when not recorded."""
        return tuple(self._state.pool_owners)

    @property
    def peaks(self) -> dict[int, _native.MemoryDevicePeaks]:
        """``torch.cuda.memory_stats()`` peaks and counters per device."""
        return {p.device: p for p in self._state.peaks}

    def export_memory_viz(self, path: str | os.PathLike[str]) -> str:
        """Writes the state as a pickle PyTorch's memory viewer opens (segments, and the
        history the state holds as ``device_traces``). Returns the path."""
        target = os.fspath(path)
        self._state.export_memory_viz(target)
        return target
