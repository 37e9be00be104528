"""A run's timeline: per point, every scope, pool, observation and device with its change
since the previous point, optionally with attributed adjacent comparisons and the whole
run's allocation lifetimes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.memory_debug._rendered import Depth, _Rendered
from torch_cudagraph_debug.memory_debug.compare import MemoryPointComparison
from torch_cudagraph_debug.memory_debug.options import MemoryAttributionOptions

# The entries of a timeline (native classes).
MemoryAllocatorScopeTimelineEntry = _native.MemoryAllocatorScopeTimelineEntry
MemoryPoolTimelineEntry = _native.MemoryPoolTimelineEntry
MemoryObservationTimelineEntry = _native.MemoryObservationTimelineEntry
MemoryDeviceTimelineEntry = _native.MemoryDeviceTimelineEntry


class MemoryTimeline(_Rendered):
    """Per point, every scope, device, pool and observation with its change since the
    previous point (``delta=None`` at the first point). A pool or observation that
    disappears stays visible with zero state and a negative delta."""

    def __init__(
        self,
        native: _native.MemoryTimeline,
        points: Sequence[Any] = (),
        point_comparisons: Sequence[MemoryPointComparison] = (),
        attribution: MemoryAttributionOptions | None = None,
    ):
        self._native = native
        self.points = tuple(points)
        self.allocator_scope_entries: tuple[MemoryAllocatorScopeTimelineEntry, ...] = (
            native.allocator_scope_entries
        )
        self.pool_entries: tuple[MemoryPoolTimelineEntry, ...] = native.pool_entries
        self.observation_entries: tuple[MemoryObservationTimelineEntry, ...] = (
            native.observation_entries
        )
        self.device_entries: tuple[MemoryDeviceTimelineEntry, ...] = native.device_entries
        # Attributed adjacent comparisons (stack or event attribution); empty for the
        # default timeline, which reads no allocator-state payloads.
        self.point_comparisons: tuple[MemoryPointComparison, ...] = tuple(point_comparisons)
        self._attributions = [c._attribution for c in self.point_comparisons if c._attribution]
        self._options = attribution
        # The whole run's cohort report, with lifetime attribution (set by the run).
        self.allocation_lifetimes: Any = None

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.to_json()["rows"]

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(w for p in self.points for w in p.warnings)

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
