"""A run's timeline: per point, every scope, pool, observation and device with its change
since the previous point, optionally with attributed adjacent comparisons and the whole
run's allocation lifetimes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch_cudagraph_debug.memory_debug.attribution as _attribution
from torch_cudagraph_debug import _native
from torch_cudagraph_debug.memory_debug._model import from_native
from torch_cudagraph_debug.memory_debug._rendered import Depth, _Rendered
from torch_cudagraph_debug.memory_debug.compare import MemoryPointComparison
from torch_cudagraph_debug.memory_debug.options import MemoryAttributionOptions

if TYPE_CHECKING:
    from torch_cudagraph_debug.memory_debug.lifetimes import MemoryAllocationLifetimeAnalysis
    from torch_cudagraph_debug.memory_debug.run import MemoryRun

# The entries of a timeline (native classes).
MemoryAllocatorScopeTimelineEntry = _native.MemoryAllocatorScopeTimelineEntry
MemoryPoolTimelineEntry = _native.MemoryPoolTimelineEntry
MemoryObservationTimelineEntry = _native.MemoryObservationTimelineEntry
MemoryDeviceTimelineEntry = _native.MemoryDeviceTimelineEntry


def _moved(delta: Any) -> bool:
    """Whether an entry changed since the previous point: any metric of its delta is
    nonzero, or it has no delta (the first point, where nothing is known unchanged)."""
    return delta is None or any(v != 0 for v in delta.to_dict().values())


def _device_moved(entry: Any) -> bool:
    samples = (entry.delta_used_bytes, entry.delta_free_bytes, entry.delta_total_bytes)
    return _moved(entry.delta) or any(v not in (None, 0) for v in samples)


def _rows(entries: Iterable[Any], keep: Any = None) -> list[dict[str, Any]]:
    return [e.to_row() for e in entries if keep is None or keep(e)]


class MemoryTimeline(_Rendered):
    """Per point, every scope, device, pool and observation with its change since the
    previous point (``delta=None`` at the first point). A pool or observation that
    disappears stays visible with zero state and a negative delta."""

    allocator_scope_entries: tuple[MemoryAllocatorScopeTimelineEntry, ...] = from_native(
        doc="Per point, the ``all``, ``default`` and ``private`` totals over the devices."
    )
    pool_entries: tuple[MemoryPoolTimelineEntry, ...] = from_native(
        doc="Per point, every pool seen so far (kept at zero once it disappears)."
    )
    observation_entries: tuple[MemoryObservationTimelineEntry, ...] = from_native(
        doc="Per point, every (device, pool, stream) slice seen so far."
    )
    device_entries: tuple[MemoryDeviceTimelineEntry, ...] = from_native(
        doc="Per point, every device: its CUDA Runtime sample and allocator rollup."
    )
    #: The run the timeline was made of.
    run: MemoryRun
    #: Attributed comparisons of each point with its predecessor (stack or event
    #: attribution); empty for the default timeline, which reads no allocator-state
    #: payloads.
    point_comparisons: tuple[MemoryPointComparison, ...]
    #: With lifetime attribution, the cohort report of the whole run (computed once,
    #: not per interval); ``None`` otherwise.
    allocation_lifetimes: MemoryAllocationLifetimeAnalysis | None

    def __init__(
        self,
        native: _native.MemoryTimeline,
        run: MemoryRun,
        point_comparisons: Iterable[MemoryPointComparison] = (),
        attribution: MemoryAttributionOptions | None = None,
        allocation_lifetimes: MemoryAllocationLifetimeAnalysis | None = None,
    ):
        self._native = native
        self.run = run
        self.points = tuple(run.points)
        self.point_comparisons = tuple(point_comparisons)
        self._attributions = [c._attribution for c in self.point_comparisons if c._attribution]
        self._options = attribution
        self.allocation_lifetimes = allocation_lifetimes

    @property
    def display_limit(self) -> int:
        """Attribution rows (and cohorts) per interval that text and HTML show by default
        (``attribution.display.limit``)."""
        return _attribution.display_of(self._options, None, None)[0]

    @property
    def display_stack_depth(self) -> int:
        """Stack frames per attribution row that text and HTML show by default
        (``attribution.display.stack_depth``)."""
        return _attribution.display_of(self._options, None, None)[1]

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.report_tree()["rows"]

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(w for p in self.points for w in p.warnings)

    # Flat rows, the lines of the CSV files. With ``include_unchanged=False`` a row is
    # kept when it changed since the previous point or, for a pool or a device, when a
    # row under it did (the parent stays as context, as in the text tree); rows of the
    # first point are always kept, since nothing is known about them to be unchanged.

    def allocator_scope_rows(self, *, include_unchanged: bool = True) -> list[dict[str, Any]]:
        """``allocator_scopes.csv`` as dicts: per point, scope, ``stats_*`` and
        ``delta_*`` columns."""
        keep = None if include_unchanged else (lambda e: _moved(e.delta))
        return _rows(self.allocator_scope_entries, keep)

    def observation_rows(self, *, include_unchanged: bool = True) -> list[dict[str, Any]]:
        """``observations.csv`` as dicts."""
        keep = None if include_unchanged else (lambda e: _moved(e.delta))
        return _rows(self.observation_entries, keep)

    def _moved_pools(self) -> set[tuple[int, int, tuple[int, int]]]:
        """``(point, device, pool)`` of every pool that changed or holds a changed
        observation."""
        moved = {
            (e.point_index, e.key[0], tuple(e.key[1]))
            for e in self.observation_entries
            if _moved(e.delta)
        }
        moved.update(
            (e.point_index, e.pool_key[0], tuple(e.pool_key[1]))
            for e in self.pool_entries
            if _moved(e.delta)
        )
        return moved

    def pool_rows(self, *, include_unchanged: bool = True) -> list[dict[str, Any]]:
        """``pools.csv`` as dicts."""
        if include_unchanged:
            return _rows(self.pool_entries)
        moved = self._moved_pools()
        return _rows(
            self.pool_entries,
            lambda e: (e.point_index, e.pool_key[0], tuple(e.pool_key[1])) in moved,
        )

    def device_rows(self, *, include_unchanged: bool = True) -> list[dict[str, Any]]:
        """``devices.csv`` as dicts: the sample, allocator reserved bytes, the residual
        and their changes since the previous point."""
        if include_unchanged:
            return _rows(self.device_entries)
        moved = {(point, device) for point, device, _ in self._moved_pools()}
        return _rows(
            self.device_entries,
            lambda e: _device_moved(e) or (e.point_index, e.device_index) in moved,
        )

    def _render(self, format: str, include_unchanged: bool, depth: Depth) -> str:
        return self._native.render(format, include_unchanged)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "MemoryTimeline",
            "points": [p.descriptor() for p in self.points],
            **self._native.rows_dict(),
            "warnings": list(self.warnings),
        }

    def _csv_files(self) -> dict[str, str]:
        return dict(self._native.csv_files())
