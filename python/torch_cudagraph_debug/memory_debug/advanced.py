"""Experimental helpers for custom snapshot analysis: allocation stacks, allocator
events, identities and formatting. They return every matching row, without display
limits; slice the results as needed. Stack grouping, coverage, event windows and pool
confidence are computed by the native core, the same code the comparisons use.

``snapshot`` arguments take a ``torch.cuda.memory._snapshot()`` dict, a
``MemoryProbeSnapshot`` or a ``MemoryPoint``."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch_cudagraph_debug import _native
from torch_cudagraph_debug._native import (
    AllocationStackCoverage,
    AllocationStackDelta,
    AllocationStackSummary,
    AllocatorEventSummary,
)
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.memory_debug._model import MemoryPoolKey

__all__ = [
    "AllocationStackCoverage",
    "AllocationStackDelta",
    "AllocationStackSummary",
    "AllocatorEventSummary",
    "EventWindow",
    "allocation_stack_coverage",
    "compare_allocation_stacks",
    "extract_event_window",
    "format_bytes",
    "format_delta_bytes",
    "mutable_snapshot",
    "normalize_pool_id",
    "pool_id_label",
    "stack_key_from_frames",
    "stream_label",
    "summarize_allocation_stacks",
    "summarize_allocator_events",
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
    return f"+{format_bytes(value)}" if int(value) >= 0 else format_bytes(value)


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
    if isinstance(snapshot, Mapping):
        from torch_cudagraph_debug.memory_debug.probe import MemoryProbeSnapshot

        return MemoryProbeSnapshot.from_snapshot(dict(snapshot), name=what)._state
    raise InvalidInputError(
        f"{what} must be a snapshot dict, MemoryProbeSnapshot or MemoryPoint, "
        f"got {type(snapshot).__name__}"
    )


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

    entries: tuple[Mapping[str, Any], ...]
    status: str
    start_label: str
    start_marker: str
    end_marker: str | None

    @property
    def complete(self) -> bool:
        return self.status == "complete"


def extract_event_window(
    entries: Sequence[Mapping[str, Any]],
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
    metadata = [e.get("user_metadata") if e.get("action") == "snapshot" else None for e in entries]
    start, end, status = _native.event_window(metadata, start_marker, end_marker)
    return EventWindow(tuple(entries[start:end]), status, start_label, start_marker, end_marker)


def summarize_allocator_events(
    entries: Sequence[Mapping[str, Any]],
    *,
    reference_segments: Sequence[Mapping[str, Any]],
    candidate_segments: Sequence[Mapping[str, Any]],
    device: int = 0,
) -> tuple[AllocatorEventSummary, ...]:
    """Trace entries of one device grouped by pool, stream, action and complete stack,
    each with absolute bytes, count and pool confidence (``reported``, ``matched``,
    ``ambiguous``, ``unknown``, ``not_applicable`` for ``oom``). Pools of entries that do
    not report one are looked up in the endpoint segments."""
    if isinstance(entries, EventWindow):
        entries = entries.entries
    traces: list[list[Any]] = [[] for _ in range(device)] + [[dict(e) for e in entries]]
    reference = _state({"segments": list(reference_segments), "device_traces": []}, "reference")
    candidate = _state({"segments": list(candidate_segments), "device_traces": traces}, "candidate")
    return tuple(_native.summarize_state_events(candidate, reference, candidate))
