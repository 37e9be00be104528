"""The memory data model shared by probe snapshots and recorded points: statistics,
observations, pool keys, device readings. Values are computed by the native core; these
classes only give them names."""

from __future__ import annotations

import datetime
import functools
import os
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import pyarrow as pa

from torch_cudagraph_debug import _native

PoolId = tuple[int, int]
"""A pool of one device: ``(0, 0)`` is the default pool, every other id is private."""
StreamId = int
"""A CUDA stream handle as the allocator reports it (process-local)."""
DEFAULT_POOL: PoolId = (0, 0)

AllocatorScope = Literal["all", "default", "private"]
MemoryStatMetric = Literal[
    "reserved_bytes",
    "allocated_bytes",
    "active_bytes",
    "requested_bytes",
    "segment_count",
    "block_count",
    "inactive_block_count",
    "largest_inactive_block_bytes",
    "expandable_segment_count",
    "expandable_reserved_bytes",
    "expandable_inactive_bytes",
    "awaiting_free_bytes",
    "inactive_bytes",
    "internal_fragmentation_bytes",
]
DeviceMemoryMetric = Literal[
    "used_bytes",
    "free_bytes",
    "total_bytes",
    "allocator_reserved_bytes",
    "cuda_allocator_residual_bytes",
]
PhaseMetric = Literal[
    "reserved_bytes",
    "allocated_bytes",
    "active_bytes",
    "awaiting_free_bytes",
    "inactive_bytes",
    "requested_bytes",
    "internal_fragmentation_bytes",
    "expandable_reserved_bytes",
    "expandable_inactive_bytes",
]
MatchKind = Literal[
    "same_probe", "same_run", "default", "mapped", "reference_only", "candidate_only"
]
DeviceMatchKind = Literal[
    "same_probe",
    "same_run",
    "mapped",
    "pool_mapping",
    "same_index",
    "reference_only",
    "candidate_only",
]

# Typed frozen classes of the native core: every field named as the reference names it,
# the derived ``awaiting_free_bytes``/``inactive_bytes``/``internal_fragmentation_bytes``
# computed on access.
MemoryStats = _native.MemoryStats
MemoryStatsDelta = _native.MemoryStatsDelta
DeviceMemorySample = _native.DeviceMemorySample


class MemoryDebugWarning(UserWarning):
    """Something about a snapshot that limits what can be said: a missing optional field,
    a snapshot taken during capture, history that is off or truncated."""


def _pool_name(pool_id: PoolId) -> str:
    return f"pool[{pool_id[0]},{pool_id[1]}]"


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

    @property
    def label(self) -> str:
        """The pool as the reports name it: ``device[0] pool[1,0]``."""
        return f"device[{self.device_index}] {_pool_name(self.pool_id)}"


class MemoryObservationKey(NamedTuple):
    """One ``(device_index, pool_id, stream)`` slice of the allocator."""

    device_index: int
    pool_id: PoolId
    stream: StreamId

    @property
    def pool_key(self) -> MemoryPoolKey:
        return MemoryPoolKey(self.device_index, self.pool_id)

    @property
    def label(self) -> str:
        """The slice as the reports name it: ``device[0] pool[1,0] stream 0x77`` (the
        stream handle in hex)."""
        return f"{self.pool_key.label} stream 0x{self.stream:x}"


@dataclass(frozen=True)
class MemoryObservation:
    """One (device, pool, stream) slice of the allocator at a snapshot or point."""

    order: int
    device_index: int
    pool_id: PoolId
    stream: StreamId
    stats: MemoryStats

    @property
    def key(self) -> MemoryObservationKey:
        return MemoryObservationKey(self.device_index, self.pool_id, self.stream)

    @property
    def pool_key(self) -> MemoryPoolKey:
        return MemoryPoolKey(self.device_index, self.pool_id)

    @property
    def pool_kind(self) -> str:
        return self.pool_key.kind

    def descriptor(self) -> dict[str, Any]:
        """Which slice this is (JSON-ready): ``kind``, ``order`` (its position in the
        snapshot or point), ``device_index``, ``pool_id``, ``stream`` and ``label``; the
        statistics are not part of it."""
        names = ("order", "device_index", "pool_id", "stream")
        return {**descriptor_of(self, "observation", names), "label": self.key.label}


@dataclass(frozen=True)
class DeviceMemoryReading:
    """Everything known about one device next to the allocator (beyond the reference's
    ``DeviceMemorySample``): ``used_bytes`` from ``torch.cuda.mem_get_info`` right after
    the snapshot (device-wide: other processes included; read one after the other, not
    atomically), ``cuda_allocator_residual_bytes = used_bytes - allocator_reserved_bytes``
    (signed), this package's probe slots (part of the residual) and the history window.
    Readings that failed are ``None``."""

    device_index: int
    free_bytes: int | None
    total_bytes: int | None
    used_bytes: int | None
    allocator_reserved_bytes: int
    cuda_allocator_residual_bytes: int | None
    probe_device_bytes: int | None
    probe_pinned_bytes: int | None
    history_status: str
    ring_entries: int
    window_events: int


DeviceMemory = DeviceMemoryReading
"""Deprecated name of :class:`DeviceMemoryReading` (``device_memory`` now maps devices to
``DeviceMemorySample``; the full reading is ``device_readings``)."""


FrozenJSONValue = Any
"""JSON data made recursively immutable: mappings are read-only, lists are tuples."""


def freeze(value: Any) -> FrozenJSONValue:
    """A recursively immutable view of JSON-shaped data (a read-only mapping per dict, a
    tuple per list); scalars are returned as they are."""
    if isinstance(value, Mapping):
        return types.MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: FrozenJSONValue) -> Any:
    """An editable deep copy of frozen JSON data (dicts and lists again)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


class _FromNative:
    """A read-only attribute of a class wrapping a native object (``self._native``): the
    native attribute of the same name, passed through ``convert`` when one is given."""

    def __init__(self, convert: Callable[[Any], Any] | None, doc: str | None):
        self._convert = convert
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = getattr(instance._native, self._name)
        return value if self._convert is None else self._convert(value)

    def __set__(self, instance: Any, value: Any) -> None:
        raise AttributeError(
            f"attribute {self._name!r} of {type(instance).__name__!r} is read-only"
        )


def from_native(convert: Callable[[Any], Any] | None = None, *, doc: str | None = None) -> Any:
    """Declares a read-only attribute read from the wrapped native object, as in
    ``ranks: tuple[int, ...] = from_native(tuple)``: the annotation is its type."""
    return _FromNative(convert, doc)


def descriptor_of(source: Any, kind: str, names: tuple[str, ...]) -> dict[str, Any]:
    """The identity of a snapshot, point or run as JSON-ready data: ``kind``, then each
    named attribute of ``source`` in order (tuples as lists, datetimes in ISO format)."""
    out: dict[str, Any] = {"kind": kind}
    for name in names:
        value = getattr(source, name)
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, datetime.datetime):
            value = value.isoformat()
        out[name] = value
    return out


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
                stats=stats,
            )
            for order, device, pool, stream, stats in self._state.observations()
        )

    @functools.cached_property
    def by_key(self) -> Mapping[MemoryObservationKey, MemoryObservation]:
        return types.MappingProxyType({o.key: o for o in self.observations})

    def observation(
        self, device_index: int, pool_id: PoolId, stream: StreamId
    ) -> MemoryObservation:
        key = MemoryObservationKey(int(device_index), tuple(pool_id), int(stream))  # type: ignore[arg-type]
        try:
            return self.by_key[key]
        except KeyError:
            keys = [tuple(o.key) for o in self.observations]
            raise KeyError(
                f"no observation for device {device_index}, pool {tuple(pool_id)}, stream "
                f"{stream}; present: {keys}"
            ) from None

    @property
    def observation_stats(self) -> Mapping[MemoryObservationKey, MemoryStats]:
        return types.MappingProxyType({o.key: o.stats for o in self.observations})

    @functools.cached_property
    def pool_stats(self) -> Mapping[MemoryPoolKey, MemoryStats]:
        return types.MappingProxyType(
            {
                MemoryPoolKey(device, tuple(pool)): stats  # type: ignore[arg-type]
                for device, pool, stats in self._state.pool_stats()
            }
        )

    @functools.cached_property
    def allocator_scope_stats(self) -> Mapping[AllocatorScope, MemoryStats]:
        """``all``, ``default`` and ``private`` pools, summed over the devices."""
        return types.MappingProxyType(dict(self._state.scope_stats()))

    def device_scope_stats(self, device: int) -> dict[str, MemoryStats]:
        return dict(self._state.scope_stats(device))

    @functools.cached_property
    def device_memory(self) -> Mapping[int, DeviceMemorySample]:
        """Every device whose CUDA Runtime reading succeeded (``free_bytes``,
        ``total_bytes``, derived ``used_bytes``); a device whose query failed is absent."""
        return types.MappingProxyType(dict(self._state.device_samples()))

    @functools.cached_property
    def device_readings(self) -> Mapping[int, DeviceMemoryReading]:
        """Every device of the state with its residual, probe slots and history window
        (readings that failed are ``None``)."""
        out = {}
        for d in self._state.device_memory():
            out[d["device"]] = DeviceMemoryReading(
                device_index=d["device"],
                free_bytes=d["free_bytes"],
                total_bytes=d["total_bytes"],
                used_bytes=d["cuda_used"],
                allocator_reserved_bytes=d["allocator_reserved"],
                cuda_allocator_residual_bytes=d["residual"],
                probe_device_bytes=d["probe_device_bytes"],
                probe_pinned_bytes=d["probe_pinned_bytes"],
                history_status=d["history_status"],
                ring_entries=d["ring_entries"],
                window_events=d["window_events"],
            )
        return types.MappingProxyType(out)

    def _raw(self) -> dict[str, Any]:
        return self._state.raw_snapshot()

    def raw_snapshot(self) -> FrozenJSONValue:
        """The state in torch's ``_snapshot()`` shape, recursively immutable;
        ``device_traces`` holds the history entries this state stored (those new since the
        previous snapshot or point)."""
        return freeze(self._raw())

    def allocator_state(self) -> Mapping[str, FrozenJSONValue]:
        """The point-in-time allocator envelope: ``raw_snapshot()`` without the
        history (``device_traces``), recursively immutable."""
        return freeze({k: v for k, v in self._raw().items() if k != "device_traces"})

    @property
    def allocator_settings(self) -> Mapping[str, FrozenJSONValue]:
        """The snapshot's ``allocator_settings`` (empty when the snapshot had none or was
        rebuilt from stored tables, which do not keep them)."""
        return freeze(self._raw().get("allocator_settings") or {})

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
