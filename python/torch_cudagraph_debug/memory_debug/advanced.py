"""Experimental helpers for custom snapshot analysis: normalized snapshots and trace
entries, per-slice statistics, allocation stacks, allocator events, identities and
formatting. They return every matching row, without display limits; slice the results as
needed. Normalization, statistics, stack grouping, coverage, event windows and pool
confidence are computed by the native core, the same code the comparisons use.

``snapshot`` arguments take a ``torch.cuda.memory._snapshot()`` dict, a
``MemoryProbeSnapshot``, a ``MemoryPoint`` or an ``AllocatorSnapshotData``."""

from __future__ import annotations

import copy
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch_cudagraph_debug import _native
from torch_cudagraph_debug._native import (
    AllocationStackCoverage,
    AllocationStackDelta,
    AllocationStackSummary,
    AllocatorEventSummary,
)
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.memory_debug._model import (
    MemoryObservationKey,
    MemoryPoolKey,
    MemoryStats,
    PoolId,
)

__all__ = [
    "ALLOCATION_LIFETIME_ACTIONS",
    "KNOWN_TRACE_ACTIONS",
    "AllocationStackCoverage",
    "AllocationStackDelta",
    "AllocationStackSummary",
    "AllocatorBlock",
    "AllocatorEventSummary",
    "AllocatorSegment",
    "AllocatorSnapshotData",
    "AllocatorTraceEntry",
    "EventWindow",
    "MemoryObservationKey",
    "MemoryPoolKey",
    "MemoryStats",
    "allocation_stack_coverage",
    "compare_allocation_stacks",
    "extract_event_window",
    "format_bytes",
    "format_comparison",
    "format_delta_bytes",
    "mutable_snapshot",
    "normalize_pool_id",
    "normalize_snapshot",
    "normalize_trace_entries",
    "pool_id_label",
    "stack_key_from_frames",
    "stream_label",
    "summarize_allocation_stacks",
    "summarize_allocator_events",
    "summarize_pools",
    "summarize_segments",
    "summarize_snapshot",
]

UNATTRIBUTED = "<unattributed>"


def normalize_pool_id(pool_id: Any) -> tuple[int, int]:
    """A pool id as a ``(int, int)`` tuple (torch reports tuples or lists)."""
    if (
        isinstance(pool_id, tuple | list)
        and len(pool_id) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in pool_id)
    ):
        return int(pool_id[0]), int(pool_id[1])
    raise InvalidInputError(f"a pool id is a pair of integers, got {pool_id!r}")


def pool_id_label(pool_id: Any) -> str:
    """``pool[a,b]``; ``pool[unknown]`` for the ``("unknown",)`` sentinel and
    ``pool[n/a]`` for ``None`` (an event that has no pool, such as ``oom``)."""
    if pool_id is None:
        return "pool[n/a]"
    if tuple(pool_id) == ("unknown",):
        return "pool[unknown]"
    a, b = normalize_pool_id(pool_id)
    return f"pool[{a},{b}]"


def stream_label(stream: int | None) -> str:
    return "stream[n/a]" if stream is None else f"stream 0x{int(stream):x}"


def stack_key_from_frames(frames: Sequence[Mapping[str, Any]]) -> str:
    """The location-only key the native rows report as ``stack_key``:
    ``file:line:function`` per frame, innermost first, joined by `` <- ``."""
    if not frames:
        return UNATTRIBUTED
    return " <- ".join(f"{f['filename']}:{f['line']}:{f['name']}" for f in frames)


def format_bytes(value: int) -> str:
    """``512 B``, ``1.50 KiB``, ``-3.00 MiB``: binary units, two decimals, as every report
    prints them (the native core formats; this is its one implementation)."""
    return _native.format_bytes(int(value))


def format_delta_bytes(value: int) -> str:
    """A change: ``+1.00 MiB``, ``-512 B``, ``+0 B``."""
    return _native.format_change(int(value))


def _optional_int(value: int | None) -> int | None:
    return None if value is None else int(value)


def format_comparison(reference: int | None, candidate: int | None, delta: int | None) -> str:
    """A byte value at two states as the comparison reports print it:
    ``2.00 MiB -> 18.00 MiB (+16.00 MiB)``; a value that is not known is ``n/a``."""
    return _native.format_comparison(
        _optional_int(reference), _optional_int(candidate), _optional_int(delta)
    )


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple) and not hasattr(value, "_fields"):
        return (
            [_thaw(v) for v in value] if isinstance(value, list) else tuple(_thaw(v) for v in value)
        )
    return copy.copy(value)


def mutable_snapshot(source: Any) -> dict[str, Any]:
    """An editable deep copy of a snapshot dict, or of the snapshot a probe snapshot or
    point holds."""
    raw = source.raw_snapshot() if hasattr(source, "raw_snapshot") else source
    if not isinstance(raw, Mapping):
        raise InvalidInputError(
            f"mutable_snapshot takes a snapshot dict, MemoryProbeSnapshot or MemoryPoint, "
            f"got {type(source).__name__}"
        )
    return _thaw(raw)


def _state(snapshot: Any, what: str) -> Any:
    if hasattr(snapshot, "_state"):
        return snapshot._state
    if isinstance(snapshot, Sequence) and not isinstance(snapshot, str | bytes):
        # A segment list: a snapshot without history (an empty trace list, so that the
        # absence of history is not warned about).
        snapshot = {"segments": _segment_dicts(snapshot), "device_traces": []}
    if isinstance(snapshot, Mapping):
        from torch_cudagraph_debug.memory_debug.probe import MemoryProbeSnapshot

        return MemoryProbeSnapshot.from_snapshot(dict(snapshot), name=what)._state
    raise InvalidInputError(
        f"{what} must be a snapshot dict, a segment sequence, a MemoryProbeSnapshot, a "
        f"MemoryPoint or an AllocatorSnapshotData, got {type(snapshot).__name__}"
    )


# ------------------------------------------------------------- normalized snapshots

#: Every action torch's caching allocator writes to its history
#: (``c10::CachingDeviceAllocator::TraceEntry::Action``), as the native replay parses
#: them. ``segment_map`` and ``segment_unmap`` grow and shrink expandable segments;
#: ``snapshot`` is written when a snapshot is taken; ``oom`` carries the device's free
#: bytes instead of an address.
KNOWN_TRACE_ACTIONS: frozenset[str] = frozenset(_native.trace_action_names())

#: The actions of one allocation's tenancy of a block address, in order: ``alloc``,
#: ``free_requested`` (its owner released it), ``free_completed`` (the block is reusable:
#: the streams that used it are done). Lifetime analysis replays these.
ALLOCATION_LIFETIME_ACTIONS: frozenset[str] = frozenset(_native.lifetime_action_names())

Frame = Mapping[str, Any]
"""One stack frame, read-only: ``filename``, ``line``, ``name``, and the FX node fields
(``fx_node_op``, ``fx_node_name``, ``fx_node_target``, ``fx_original_trace``) when torch
gave them; the shape of ``AllocationStackSummary.stack_frames``."""

_FX_FIELDS = ("fx_node_op", "fx_node_name", "fx_node_target", "fx_original_trace")


@dataclass(frozen=True)
class AllocatorBlock:
    """One block of a segment, normalized: ``state`` is ``active_allocated``,
    ``active_awaiting_free`` (torch's ``active_pending_free``) or ``inactive``; an address
    the snapshot left out is the segment's plus the sizes before it
    (``address_inferred``)."""

    address: int | None
    address_inferred: bool
    size: int
    requested_size: int
    state: str
    frames: tuple[Frame, ...] = ()

    @property
    def is_active(self) -> bool:
        return self.state != "inactive"

    def to_dict(self) -> dict[str, Any]:
        """The block in ``_snapshot()``'s shape."""
        out: dict[str, Any] = {} if self.address is None else {"address": self.address}
        out.update(
            size=self.size,
            requested_size=self.requested_size,
            state=self.state,
            frames=[dict(f) for f in self.frames],
        )
        return out


@dataclass(frozen=True)
class AllocatorSegment:
    """One segment with its blocks. ``allocated_size``, ``active_size`` and
    ``requested_size`` are what torch reported (``None`` when it did not); statistics are
    computed from the blocks."""

    device_index: int
    address: int | None
    total_size: int
    allocated_size: int | None
    active_size: int | None
    requested_size: int | None
    stream: int
    pool_id: PoolId
    segment_type: str
    is_expandable: bool
    blocks: tuple[AllocatorBlock, ...] = ()
    frames: tuple[Frame, ...] = ()

    @property
    def key(self) -> MemoryObservationKey:
        return MemoryObservationKey(self.device_index, self.pool_id, self.stream)

    @property
    def pool_key(self) -> MemoryPoolKey:
        return MemoryPoolKey(self.device_index, self.pool_id)

    def to_dict(self) -> dict[str, Any]:
        """The segment in ``_snapshot()``'s shape (the reported sizes only when known)."""
        out: dict[str, Any] = {
            "device": self.device_index,
            "total_size": self.total_size,
            "stream": self.stream,
            "segment_type": self.segment_type,
            "segment_pool_id": self.pool_id,
            "is_expandable": self.is_expandable,
            "frames": [dict(f) for f in self.frames],
            "blocks": [b.to_dict() for b in self.blocks],
        }
        for name in ("address", "allocated_size", "active_size", "requested_size"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


@dataclass(frozen=True)
class AllocatorTraceEntry:
    """One allocator history entry, normalized. ``index`` is its position in its device's
    trace list. ``action`` is one of ``KNOWN_TRACE_ACTIONS`` (another name is kept as
    torch wrote it). An ``oom`` entry has no address: ``size`` is the request that failed
    and ``device_free_bytes`` what CUDA still had free (``None`` for every other action).
    ``pool_id`` is ``None`` unless torch reported it."""

    device_index: int
    index: int
    action: str
    address: int | None
    size: int
    stream: int
    time_us: int | None = None
    pool_id: PoolId | None = None
    user_metadata: str | None = None
    compile_context: str | None = None
    device_free_bytes: int | None = None
    frames: tuple[Frame, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The entry in ``_snapshot()``'s ``device_traces`` shape."""
        out: dict[str, Any] = {"action": self.action}
        out.update(size=self.size, stream=self.stream, frames=[dict(f) for f in self.frames])
        optional = {
            "addr": self.address,
            "device_free": self.device_free_bytes,
            "time_us": self.time_us,
            "user_metadata": self.user_metadata,
            "compile_context": self.compile_context,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        if self.pool_id is not None:
            out["pool_id"] = self.pool_id
        return out


@dataclass(frozen=True)
class AllocatorSnapshotData:
    """A snapshot as the native core normalized it: ``segments`` (each with its blocks,
    in snapshot order) and ``device_traces`` (one tuple of entries per device index, as
    torch lays them out). Passing it to the summaries and stack helpers reuses the
    analysed state."""

    segments: tuple[AllocatorSegment, ...]
    device_traces: tuple[tuple[AllocatorTraceEntry, ...], ...]
    devices: tuple[int, ...]
    warnings: tuple[str, ...] = ()
    _state: Any = field(default=None, repr=False, compare=False)

    @property
    def trace_entries(self) -> tuple[AllocatorTraceEntry, ...]:
        """Every trace entry, device by device, each in trace order."""
        return tuple(e for trace in self.device_traces for e in trace)


def _segment_dicts(segments: Iterable[Any]) -> list[dict[str, Any]]:
    return [s.to_dict() if isinstance(s, AllocatorSegment) else dict(s) for s in segments]


def _stacks(state: Any) -> dict[int | None, tuple[Frame, ...]]:
    frames = {}
    for row in state.table("memory_frames").to_pylist():
        frame = {"filename": row["filename"], "line": row["line"], "name": row["name"]}
        frame.update({k: row[k] for k in _FX_FIELDS if row[k] is not None})
        frames[row["frame_id"]] = types.MappingProxyType(frame)
    stacks: dict[int | None, tuple[Frame, ...]] = {None: ()}
    for row in state.table("memory_stacks").to_pylist():
        stacks[row["stack_id"]] = tuple(frames[i] for i in row["frame_ids"])
    return stacks


def _pool_of(row: Mapping[str, Any]) -> PoolId | None:
    if row["pool_id_0"] is None:
        return None
    return int(row["pool_id_0"]), int(row["pool_id_1"])


def _trace_entries(state: Any, stacks: Mapping[int | None, tuple[Frame, ...]]) -> list[Any]:
    return [
        AllocatorTraceEntry(
            device_index=row["device"],
            index=row["ring_index"],
            action=row["action"],
            address=None if row["action"] == "oom" else row["address"],
            size=row["size"],
            stream=row["stream"],
            time_us=row["time_us"],
            pool_id=_pool_of(row),
            user_metadata=row["user_metadata"],
            compile_context=row["compile_context"],
            device_free_bytes=row["device_free"],
            frames=stacks[row["stack_id"]],
        )
        for row in state.table("memory_events").to_pylist()
    ]


def normalize_snapshot(snapshot: Any) -> AllocatorSnapshotData:
    """The snapshot normalized by the native core (the same ingestion every probe
    snapshot and point goes through): block states with torch's spellings unified,
    missing block addresses inferred, pool ids as tuples, frames shared. ``snapshot``:
    the full ``torch.cuda.memory._snapshot()`` mapping, a sequence of its segments (no
    history), a ``MemoryProbeSnapshot`` or ``MemoryPoint`` (its stored history window),
    or an ``AllocatorSnapshotData`` (returned as it is)."""
    if isinstance(snapshot, AllocatorSnapshotData):
        return snapshot
    state = _state(snapshot, "snapshot")
    stacks = _stacks(state)
    blocks: dict[int, list[AllocatorBlock]] = {}
    for row in state.table("memory_blocks").to_pylist():
        blocks.setdefault(row["segment_index"], []).append(
            AllocatorBlock(
                address=row["address"],
                address_inferred=row["address_inferred"],
                size=row["size"],
                requested_size=row["requested_size"],
                state=row["state"],
                frames=stacks[row["stack_id"]],
            )
        )
    segments = tuple(
        AllocatorSegment(
            device_index=row["device"],
            address=row["address"],
            total_size=row["total_size"],
            allocated_size=row["allocated_size"],
            active_size=row["active_size"],
            requested_size=row["requested_size"],
            stream=row["stream"],
            pool_id=(int(row["pool_id_0"]), int(row["pool_id_1"])),
            segment_type=row["segment_type"],
            is_expandable=row["is_expandable"],
            blocks=tuple(blocks.get(row["segment_index"], ())),
            frames=stacks[row["stack_id"]],
        )
        for row in state.table("memory_segments").to_pylist()
    )
    entries = _trace_entries(state, stacks)
    devices = tuple(state.devices)
    width = max([e.device_index + 1 for e in entries] + [d + 1 for d in devices], default=0)
    traces = tuple(tuple(e for e in entries if e.device_index == d) for d in range(width))
    return AllocatorSnapshotData(segments, traces, devices, tuple(state.warnings), state)


def normalize_trace_entries(snapshot: Any) -> tuple[AllocatorTraceEntry, ...]:
    """The snapshot's allocator history as typed entries, device by device, each device
    in trace order (for a probe snapshot or point: the history window it stored)."""
    if isinstance(snapshot, AllocatorSnapshotData):
        return snapshot.trace_entries
    state = _state(snapshot, "snapshot")
    return tuple(_trace_entries(state, _stacks(state)))


def _observation_stats(state: Any) -> Mapping[MemoryObservationKey, MemoryStats]:
    return types.MappingProxyType(
        {
            MemoryObservationKey(device, tuple(pool), stream): stats  # type: ignore[arg-type]
            for _, device, pool, stream, stats in state.observations()
        }
    )


def summarize_snapshot(snapshot: Any) -> Mapping[MemoryObservationKey, MemoryStats]:
    """Statistics per (device, pool, stream), in report order: the observations a probe
    snapshot or point of the same allocator state has."""
    return _observation_stats(_state(snapshot, "snapshot"))


def summarize_segments(segments: Iterable[Any]) -> Mapping[MemoryObservationKey, MemoryStats]:
    """``summarize_snapshot`` of a segment list (``_snapshot()`` segment dicts or
    ``AllocatorSegment`` objects)."""
    if isinstance(segments, Mapping | str | bytes):
        raise InvalidInputError(
            f"summarize_segments takes a sequence of segments, got {type(segments).__name__}"
        )
    return _observation_stats(_state(_segment_dicts(segments), "segments"))


def summarize_pools(observations: Any) -> Mapping[MemoryPoolKey, MemoryStats]:
    """Per-(device, pool) statistics: the streams of each pool combined as the native
    core combines them (sums; the largest inactive block is the maximum). Takes what
    ``summarize_snapshot`` returns (or ``MemoryObservation`` objects)."""
    items = (
        observations.items()
        if isinstance(observations, Mapping)
        else ((o.key, o.stats) for o in observations)
    )
    pools: dict[MemoryPoolKey, list[MemoryStats]] = {}
    for key, stats in items:
        if not isinstance(key, MemoryObservationKey):
            key = MemoryObservationKey(*key)
        pools.setdefault(key.pool_key, []).append(stats)
    return types.MappingProxyType({k: MemoryStats.combine(v) for k, v in pools.items()})


def _pool(pool: Any) -> dict[str, Any]:
    if pool is None:
        return {}
    if isinstance(pool, MemoryPoolKey):
        return {"device": int(pool.device_index), "pool": normalize_pool_id(pool.pool_id)}
    return {"pool": normalize_pool_id(pool)}


def allocation_stack_coverage(snapshot: Any, *, pool: Any = None) -> AllocationStackCoverage:
    """Attributed active bytes over active bytes (``1.0`` when nothing is active), over
    the whole snapshot or one pool (a pool id, or a ``MemoryPoolKey``)."""
    return _native.allocation_stack_coverage(_state(snapshot, "snapshot"), **_pool(pool))


def summarize_allocation_stacks(
    snapshot: Any,
    *,
    pool: Any = None,
    stream: int | None = None,
    by_stream: bool = False,
) -> tuple[AllocationStackSummary, ...]:
    """Active blocks grouped by device, pool (and stream with ``by_stream``) and complete
    stack, largest first; blocks without frames form the ``<unattributed>`` row."""
    return tuple(
        _native.summarize_allocation_stacks(
            _state(snapshot, "snapshot"), stream=stream, by_stream=by_stream, **_pool(pool)
        )
    )


def compare_allocation_stacks(
    reference: Any,
    candidate: Any,
    *,
    pool: Any = None,
    stream: int | None = None,
    by_stream: bool = False,
    include_unchanged: bool = False,
) -> tuple[AllocationStackDelta, ...]:
    """Per (pool, stack), the change from ``reference`` to ``candidate``; pools pair by
    id. Unchanged rows are dropped unless ``include_unchanged``."""
    return tuple(
        _native.compare_allocation_stacks(
            _state(reference, "reference"),
            _state(candidate, "candidate"),
            stream=stream,
            by_stream=by_stream,
            include_unchanged=include_unchanged,
            **_pool(pool),
        )
    )


@dataclass(frozen=True)
class EventWindow:
    """The trace entries between two boundary markers. ``status`` is ``complete``,
    ``truncated`` (a marker is not in the trace) or ``invalid_order``."""

    entries: tuple[Mapping[str, Any] | AllocatorTraceEntry, ...]
    status: str
    start_label: str
    start_marker: str
    end_marker: str | None

    @property
    def complete(self) -> bool:
        return self.status == "complete"


def _field(entry: Any, name: str) -> Any:
    if isinstance(entry, AllocatorTraceEntry):
        return getattr(entry, name)
    return entry.get(name)


def _entry_dict(entry: Any) -> dict[str, Any]:
    return entry.to_dict() if isinstance(entry, AllocatorTraceEntry) else dict(entry)


def extract_event_window(
    entries: Sequence[Mapping[str, Any] | AllocatorTraceEntry],
    *,
    start_marker: str,
    end_marker: str | None,
    start_label: str,
) -> EventWindow:
    """The entries after the last ``snapshot`` entry carrying ``start_marker`` and
    before the last one carrying ``end_marker``. ``end_marker=None`` reads to the end of
    the trace: right when the end boundary is the snapshot the trace came from, whose own
    marker is never in its trace. A missing marker makes the window ``truncated``."""
    entries = list(entries)
    metadata = [
        _field(e, "user_metadata") if _field(e, "action") == "snapshot" else None for e in entries
    ]
    start, end, status = _native.event_window(metadata, start_marker, end_marker)
    return EventWindow(tuple(entries[start:end]), status, start_label, start_marker, end_marker)


def summarize_allocator_events(
    entries: Sequence[Mapping[str, Any] | AllocatorTraceEntry],
    *,
    reference_segments: Sequence[Mapping[str, Any] | AllocatorSegment],
    candidate_segments: Sequence[Mapping[str, Any] | AllocatorSegment],
    device: int = 0,
) -> tuple[AllocatorEventSummary, ...]:
    """Trace entries of one device grouped by pool, stream, action and complete stack,
    each with absolute bytes, count and pool confidence (``reported``, ``matched``,
    ``ambiguous``, ``unknown``, ``not_applicable`` for ``oom``). Pools of entries that do
    not report one are looked up in the endpoint segments."""
    if isinstance(entries, EventWindow):
        entries = entries.entries
    traces: list[list[Any]] = [[] for _ in range(device)] + [[_entry_dict(e) for e in entries]]
    reference = _state(
        {"segments": _segment_dicts(reference_segments), "device_traces": []}, "reference"
    )
    candidate = _state(
        {"segments": _segment_dicts(candidate_segments), "device_traces": traces}, "candidate"
    )
    return tuple(_native.summarize_state_events(candidate, reference, candidate))
