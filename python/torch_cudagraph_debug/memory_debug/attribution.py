"""Glue between comparisons and the native attribution: which history windows an
interval needs, the attribution of one comparison, and the report sections built from
it. The analyses themselves (stack grouping, coverage, event windows and pools) are in
the native core."""

from __future__ import annotations

from typing import Any

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.memory_debug.options import (
    MemoryAttributionOptions,
    MemoryDisplayOptions,
)

_NOT_REQUESTED = _native.MemoryEvidenceStatus(False, False, False)
UNREQUESTED_STATUS = _native.MemoryAttributionStatus(_NOT_REQUESTED, _NOT_REQUESTED, _NOT_REQUESTED)


def _interval(reference: Any, candidate: Any) -> dict[str, Any]:
    """Where the history windows between two states of one origin are: the run's reader
    for recorded points, the probe's retained snapshots for probe snapshots."""
    reader = getattr(candidate, "_reader", None)
    if reader is not None:
        # A point returned by record_point reads the run as committed so far.
        if not isinstance(reader, _native.MemoryRunReader):
            reader = reader.native_reader()
        return {"reader": reader}
    history = getattr(candidate, "_history", None)
    if history is not None:
        start, end = reference.index, candidate.index
        return {"interval": [s for s in history if start < s.identity()["index"] <= end]}
    return {}


def attribute(
    reference: Any,
    candidate: Any,
    native_comparison: Any,
    options: MemoryAttributionOptions | None,
    *,
    events: bool = True,
) -> Any | None:
    """The native attribution of one comparison, or ``None`` when nothing is requested.
    ``events=False`` drops an event request (the cross-run legs of a phase comparison).
    Lifetimes need a run's reader: two points of one run get the cohort report of their
    range."""
    if options is None or not (options.stacks or options.events or options.lifetimes):
        return None
    want_events = bool(options.events and events)
    return _native.memory_attribution(
        reference._state,
        candidate._state,
        native_comparison,
        stacks=bool(options.stacks),
        events=want_events,
        lifetimes=bool(options.lifetimes),
        **(_interval(reference, candidate) if want_events or options.lifetimes else {}),
    )


def display_of(
    options: MemoryAttributionOptions | None, limit: int | None, stack_depth: int | None
) -> tuple[int, int]:
    """Text/HTML display limits: explicit arguments win over the options' display."""
    display = options.display if options is not None else MemoryDisplayOptions()
    chosen = MemoryDisplayOptions(
        stack_depth=display.stack_depth if stack_depth is None else stack_depth,
        limit=display.limit if limit is None else limit,
    )
    return chosen.limit, chosen.stack_depth


def csv_files(items: list[Any], include_unchanged: bool) -> list[tuple[str, str]]:
    """``allocation_stack_comparisons.csv`` when stacks were attributed and
    ``events.csv`` when events were, every row kept."""
    if not items:
        return []
    out = []
    if any(a.attribution_status.stacks.requested for a in items):
        name = "allocation_stack_comparisons.csv"
        out.append((name, _native.attribution_csv(items, name, include_unchanged)))
    if any(a.attribution_status.events.requested for a in items):
        out.append(("events.csv", _native.attribution_csv(items, "events.csv")))
    return out


ATTRIBUTION_CSV_FILES = ("allocation_stack_comparisons.csv", "events.csv")
