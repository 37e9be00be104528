"""Recorded memory runs as Python objects: ``MemoryRun`` > ``MemoryPoint``. The data lives
in the job root; these objects are views over what the native reader rebuilt."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

import torch_cudagraph_debug.memory_debug.lifetimes as _lifetimes
from torch_cudagraph_debug import _native
from torch_cudagraph_debug._points import OnDamage, Run
from torch_cudagraph_debug.errors import (
    InvalidInputError,
    MemoryOwnershipError,
)
from torch_cudagraph_debug.memory_debug._model import _StateView, descriptor_of
from torch_cudagraph_debug.memory_debug.compare import MemoryPointComparison, _compare_states
from torch_cudagraph_debug.memory_debug.lifetimes import (
    MemoryAllocationLifetimeAnalysis,
    MemoryLifetimeOptions,
    MemoryLifetimeSelection,
)
from torch_cudagraph_debug.memory_debug.options import MemoryAttributionOptions
from torch_cudagraph_debug.memory_debug.timeline import MemoryTimeline


class MemoryPoint(_StateView):
    """One committed point of a memory run."""

    #: The ``run_id`` of the run this point belongs to.
    run_id: str
    #: Position of the point in its run (0 for the first point).
    index: int
    #: The point's label, unique within its run.
    label: str
    #: When the point was committed (UTC), ``None`` for a point ``record_point`` has
    #: just returned (its row is not read back).
    timestamp: _dt.datetime | None
    #: The caller's ``metadata`` of ``record_point`` (``{}`` when none was given).
    metadata: dict[str, Any]

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
        self.run_id: str = identity["origin"]
        self.run_name: str = identity["name"]

    @property
    def boundary_marker(self) -> str:
        """The allocator metadata marker set while this point's snapshot was taken, where
        its history window ends (``marker``; ``""`` when the torch had no marker API)."""
        return self.marker or ""

    def descriptor(self) -> dict[str, Any]:
        """Which run and point this is (JSON-ready)."""
        names = ("run_id", "run_name", "index", "label", "timestamp", "devices")
        return descriptor_of(self, "run_point", names)

    def _raw(self) -> dict[str, Any]:
        # Rebuilt from the stored tables; the traces are this point's own window.
        return self._reader.raw_snapshot(self.index)

    def export_memory_viz(self, path: str | os.PathLike[str]) -> str:
        """Writes the point as a pickle PyTorch's memory viewer opens
        (``torch.cuda._memory_viz``, pytorch.org/memory_viz): its segments and, as
        ``device_traces``, the history entries it stored. Returns the path."""
        target = os.fspath(path)
        self._reader.export_memory_viz(self.index, target)
        return target

    def __repr__(self) -> str:
        return (
            f"MemoryPoint(index={self.index}, label={self.label!r}, "
            f"observations={len(self.observations)})"
        )


@dataclass(frozen=True)
class MemoryRange:
    """Two points of one run, ``end`` after ``start``: the phase between them
    (``run.between(start, end)``)."""

    run: MemoryRun
    start: MemoryPoint
    end: MemoryPoint

    def compare(
        self, *, attribution: MemoryAttributionOptions | None = None
    ) -> MemoryPointComparison:
        """``run.compare(start, end)``: what changed over the phase."""
        return self.run.compare(self.start, self.end, attribution=attribution)


MemoryPhaseRange = MemoryRange
"""Deprecated name of :class:`MemoryRange`."""


def _point(
    state: _native.MemoryState,
    reader: _native.MemoryRunReader,
    row: _native.RecordedPoint | None,
) -> MemoryPoint:
    """The point of ``state``, with the timestamp and user metadata of its ``points`` row."""
    if row is None:
        return MemoryPoint(state, reader, None, {})
    return MemoryPoint(state, reader, row.timestamp, json.loads(row.metadata or "{}"))


class MemoryRun(Run[MemoryPoint]):
    """A recorded memory run, loaded from its directory. ``run["label"]`` or ``run[i]``
    gives a point."""

    def __init__(self, reader: _native.MemoryRunReader, path: str):
        self._reader = reader
        manifest = reader.manifest()
        self._read_manifest(manifest, path, reader.damage())
        rows = {point.index: point for point in reader.points()}
        self.points: tuple[MemoryPoint, ...] = tuple(
            _point(state, reader, rows.get(state.identity()["index"])) for state in reader.states()
        )
        self._index_points()

    @classmethod
    def load(
        cls,
        bundle_dir: str | os.PathLike[str],
        *,
        cache_snapshots: bool = True,
        name: str | None = None,
        rank: int | None = None,
        on_damage: OnDamage = "raise",
    ) -> MemoryRun:
        """Opens a memory run of the job root ``path`` (chosen by ``name`` and ``rank``
        when the root holds several, as in ``TensorRun.load``); its files are checked
        first.
        ``on_damage`` as in ``TensorRun.load``: with ``"skip"`` the points with a damaged
        part are left out (and, after a damaged part of the run's stack tables, the later
        points too, which may name its stacks), listed in ``damage``.
        ``cache_snapshots`` is accepted for the reference's signature: every point's state
        is read once when the run loads, so there is nothing further to cache."""
        del cache_snapshots
        path = os.fspath(bundle_dir)
        reader = _native.MemoryRunReader(path, on_damage, name, rank)
        return cls(reader, path)

    @property
    def bundle_dir(self) -> Path:
        """The directory this run was loaded from (``path``, the job root that holds
        it), as a ``Path``."""
        return Path(self.path)

    def point(self, ref: str | int | MemoryPoint) -> MemoryPoint:  # type: ignore[override]
        """A point by label, position, or a point of this run (``MemoryOwnershipError`` for
        a point of another run)."""
        if isinstance(ref, MemoryPoint):
            if ref.run_id != self.run_id or not any(
                p is ref or p.index == ref.index for p in self.points
            ):
                raise MemoryOwnershipError(
                    f"point {ref.label!r} belongs to run {ref.run_id!r}, not to run "
                    f"{self.run_id!r} ({self.name!r}); compare points of two runs with "
                    "compare_points()"
                )
            return next(p for p in self.points if p.index == ref.index)
        return self[ref]

    def descriptor(self) -> dict[str, Any]:
        """The run's identity (JSON-ready)."""
        names = ("run_id", "name", "path", "rank", "group_id", "world_size", "complete", "labels")
        return descriptor_of(self, "memory_run", names)

    def between(self, start: str | int | MemoryPoint, end: str | int | MemoryPoint) -> MemoryRange:
        """The phase from point ``start`` to point ``end`` (for ``compare_phases``);
        ``end`` must come after ``start``."""
        a, b = self.point(start), self.point(end)
        if a.index >= b.index:
            raise InvalidInputError(
                f"between({a.label!r}, {b.label!r}): the end must come after the start, and "
                f"'{b.label}' (point {b.index}) does not follow '{a.label}' (point {a.index})"
            )
        return MemoryRange(self, a, b)

    def compare(
        self,
        reference: str | int | MemoryPoint,
        candidate: str | int | MemoryPoint,
        *,
        attribution: MemoryAttributionOptions | None = None,
    ) -> MemoryPointComparison:
        """Compares two points of this run (address lifecycle included)."""
        return _compare_states(
            self.point(reference),
            self.point(candidate),
            None,
            None,
            attribution,
            MemoryPointComparison,
        )

    def timeline(self, *, attribution: MemoryAttributionOptions | None = None) -> MemoryTimeline:
        """Every point with its change since the previous one. With stack or event
        attribution, ``point_comparisons`` holds the attributed comparison of each point
        with its predecessor; with ``lifetimes``, ``allocation_lifetimes`` is the cohort
        report of the whole run (computed once, not per interval)."""
        native = _native.memory_timeline([p._state for p in self.points])
        comparisons: tuple[MemoryPointComparison, ...] = ()
        if attribution is not None and (attribution.stacks or attribution.events):
            per_interval = dataclasses.replace(attribution, lifetimes=False)
            pairs = zip(self.points, self.points[1:], strict=False)
            comparisons = tuple(self.compare(a, b, attribution=per_interval) for a, b in pairs)
        lifetimes = self.lifetimes() if attribution is not None and attribution.lifetimes else None
        return MemoryTimeline(native, self, comparisons, attribution, lifetimes)

    def lifetimes(
        self,
        selection: MemoryLifetimeSelection | None = None,
        *,
        through: str | int | MemoryPoint | None = None,
        options: MemoryLifetimeOptions | None = None,
    ) -> MemoryAllocationLifetimeAnalysis:
        """Allocation cohort lifetimes replayed from the stored allocator history:
        ``selection`` (default ``MemoryLifetimeSelection.all()``) through ``through``
        (default: the last point). Needs complete event history over the range
        (``MemoryHistoryDisabledError`` / ``MemoryHistoryTruncatedError`` /
        ``MemoryHistoryBoundaryError`` otherwise); history that contradicts the states
        raises ``MemoryReconciliationError``."""
        return _lifetimes.lifetimes(self, selection, through, options)

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

    def __repr__(self) -> str:
        return (
            f"MemoryRun(name={self.name!r}, rank={self.rank}, points={len(self.points)}, "
            f"complete={self.complete}, path={self.path!r})"
        )
