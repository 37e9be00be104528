"""Recorded memory runs as Python objects: ``MemoryRun`` > ``MemoryPoint``. The data lives
in the job root; these objects are views over what the native reader rebuilt."""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from torch_cudagraph_debug import _native
from torch_cudagraph_debug._points import OnDamage, Run
from torch_cudagraph_debug.errors import FeatureUnavailableError, InvalidInputError
from torch_cudagraph_debug.memory_debug._model import _StateView
from torch_cudagraph_debug.memory_debug.compare import (
    MemoryAttributionOptions,
    MemoryComparison,
    MemoryTimeline,
    compare_snapshots,
)


class MemoryPoint(_StateView):
    """One committed point of a memory run."""

    def __init__(
        self,
        state: _native.MemoryState,
        reader: _native.MemoryRunReader,
        timestamp: _dt.datetime | None,
        metadata: dict[str, Any],
    ):
        self._state = state
        self._reader = reader
        identity = state.identity()
        self.index: int = identity["index"]
        self.label: str = identity["label"]
        self.source: str = identity["source"]
        self.source_path: str | None = identity["source_path"]
        self.marker: str | None = identity["marker"]
        self.synchronized: bool = identity["synchronized"]
        self.during_capture: bool = identity["during_capture"]
        self.timestamp = timestamp
        self.metadata = metadata

    def raw_snapshot(self) -> dict[str, Any]:
        """The point as a dict in torch's ``_snapshot()`` shape, rebuilt from the stored
        tables; ``device_traces`` holds the history entries this point stored (those new
        since the previous point)."""
        return self._reader.raw_snapshot(self.index)

    def __repr__(self) -> str:
        return (
            f"MemoryPoint(index={self.index}, label={self.label!r}, "
            f"observations={len(self.observations)})"
        )


@dataclass(frozen=True)
class MemoryPhaseRange:
    """Two points of one run: the phase between them (``run.between(a, b)``)."""

    start: MemoryPoint
    end: MemoryPoint


class MemoryRun(Run[MemoryPoint]):
    """A recorded memory run, loaded from its directory. ``run["label"]`` or ``run[i]``
    gives a point."""

    def __init__(self, reader: _native.MemoryRunReader, path: str):
        self._reader = reader
        manifest = json.loads(reader.manifest_json())
        self._read_manifest(manifest, path, reader.damage())
        points_table = reader.table("points").to_pylist()
        extra = {row["point_index"]: row for row in points_table}
        self.points: tuple[MemoryPoint, ...] = tuple(
            MemoryPoint(
                state,
                reader,
                extra.get(state.identity()["index"], {}).get("timestamp"),
                json.loads(extra.get(state.identity()["index"], {}).get("metadata") or "{}"),
            )
            for state in reader.states()
        )
        self._index_points()

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        rank: int | None = None,
        on_damage: OnDamage = "raise",
    ) -> MemoryRun:
        """Opens a memory run of the job root ``path`` (chosen by ``name`` and ``rank``
        when the root holds several, as in ``TensorRun.load``); its files are checked
        first.
        ``on_damage`` as in ``TensorRun.load``: with ``"skip"`` the points with a damaged
        part are left out (and, after a damaged part of the run's stack tables, the later
        points too, which may name its stacks), listed in ``damage``."""
        reader = _native.MemoryRunReader(os.fspath(path), on_damage, name, rank)
        return cls(reader, os.fspath(path))

    def between(self, start: str | int, end: str | int) -> MemoryPhaseRange:
        """The phase from point ``start`` to point ``end`` (for ``compare_phases``)."""
        a, b = self[start], self[end]
        if a.index > b.index:
            raise InvalidInputError(
                f"between({start!r}, {end!r}): '{a.label}' comes after '{b.label}'"
            )
        return MemoryPhaseRange(a, b)

    def compare(
        self,
        reference: str | int,
        candidate: str | int,
        attribution: MemoryAttributionOptions | None = None,
    ) -> MemoryComparison:
        """Compares two points of this run (address lifecycle included)."""
        return compare_snapshots(self[reference], self[candidate], attribution=attribution)

    def timeline(self, attribution: MemoryAttributionOptions | None = None) -> MemoryTimeline:
        """Every point with its change since the previous one. With stack or event
        attribution, ``point_comparisons`` holds the attributed comparison of each point
        with its predecessor."""
        if attribution is not None and attribution.lifetimes:
            raise FeatureUnavailableError("lifetime attribution is not available in this release")
        native = _native.memory_timeline([p._state for p in self.points])
        if attribution is None or not (attribution.stacks or attribution.events):
            return MemoryTimeline(native)
        pairs = zip(self.points, self.points[1:], strict=False)
        comparisons = tuple(compare_snapshots(a, b, attribution=attribution) for a, b in pairs)
        return MemoryTimeline(native, comparisons, attribution)

    def lifetimes(self, selection: Any = None, through: Any = None, options: Any = None) -> Any:
        """Allocation lifetimes from the stored history: not available in this release
        (the history each point stored is in ``table("memory_events")``)."""
        raise FeatureUnavailableError(
            "lifetimes() is not available in this release; the allocator history is stored "
            "in the run's memory_events table"
        )

    def validate_payloads(self) -> list[tuple[str, str]]:
        """Checks every stored file against its digest; ``(path, problem)`` pairs, empty
        when the run is intact."""
        return [(os.fspath(p), problem) for p, problem in self._reader.validate()]

    def table(self, name: str) -> pa.Table:
        """Every committed row of one table (``memory_stats``, ``memory_events``, ...)."""
        return pa.Table.from_batches([self._reader.table(name)])

    def to_arrow(self) -> pa.Table:
        """The ``memory_stats`` table: one row per (point, device, pool, stream)."""
        return self.table("memory_stats")

    def to_pandas(self) -> Any:
        return self.to_arrow().to_pandas()

    def __repr__(self) -> str:
        return (
            f"MemoryRun(name={self.name!r}, rank={self.rank}, points={len(self.points)}, "
            f"complete={self.complete}, path={self.path!r})"
        )
