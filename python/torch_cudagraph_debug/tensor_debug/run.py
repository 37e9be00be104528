"""Recorded tensor runs as Python objects: ``TensorRun`` > ``TensorPoint`` >
``TensorObservation``. The data lives in the job root; these objects are views
built from the tables the native reader returns."""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import torch

from torch_cudagraph_debug import _native
from torch_cudagraph_debug._points import OnDamage, Run
from torch_cudagraph_debug._torch_bridge import (
    dtype_from_name,
    tensor_from_bytes,
)
from torch_cudagraph_debug.errors import (
    InvalidInputError,
    TensorOwnershipError,
)
from torch_cudagraph_debug.tensor_debug.compare import TensorComparison, compare_points
from torch_cudagraph_debug.tensor_debug.observations import (
    ObservationSet,
    TensorObservation,
    TensorObservationKey,
    TensorPoint,
    TensorSite,
    TensorSummary,
)

# The point data is defined in ``observations``; these names stay importable from here.
__all__ = [
    "AnomalyKind",
    "ObservationSet",
    "TensorObservation",
    "TensorObservationKey",
    "TensorPoint",
    "TensorRun",
    "TensorSite",
    "TensorSummary",
]

#: What ``TensorRun.first_anomaly`` looks for.
AnomalyKind = Literal["nan", "inf", "nonfinite", "abs_max"]


class TensorRun(Run[TensorPoint]):
    """A recorded run, loaded from its directory. ``run["label"]`` or ``run[i]`` gives a
    point; ``to_arrow()`` / ``to_pandas()`` give every observation as one table."""

    def __init__(self, reader: _native.RunReader, *, cache_tensors: bool = False):
        self._reader = reader
        self._cache_tensors = bool(cache_tensors)
        manifest = reader.manifest()
        if manifest.kind != "tensor":
            raise InvalidInputError(f"'{reader.path}' is a {manifest.kind} run, not a tensor run")
        self._read_manifest(manifest, str(reader.path), reader.damage())
        self.points: tuple[TensorPoint, ...] = self._build_points()
        self._index_points()

    @classmethod
    def load(
        cls,
        bundle_dir: str | os.PathLike[str],
        *,
        name: str | None = None,
        rank: int | None = None,
        on_damage: OnDamage = "raise",
        cache_tensors: bool = False,
    ) -> TensorRun:
        """Opens a tensor run of the job root ``bundle_dir`` (the reference design's name
        for the directory a run is stored in): the one there, or the one named
        ``name`` (of rank ``rank``) when the root holds several (eager and compiled, or
        several ranks); an ambiguous or missing choice is a ``RunNotFoundError`` listing
        the runs the root holds. The run's files are checked first.

        ``on_damage="raise"``: a damaged part (missing, truncated, or not the bytes that
        were committed) is a ``CorruptRunError`` naming the file. ``"skip"``: every file's
        digest is checked, the points with a damaged part are left out, and ``damage``
        lists what was left out (observations whose payload was stored in a damaged part
        keep their summaries; their ``tensor()`` raises). A damaged table log is an error
        either way.

        ``cache_tensors=False`` (default): every ``tensor()`` call reads and checks the
        payload again, so a large run costs no memory until asked. ``True``: the first
        read of each observation is kept and later calls return a copy of it."""
        if not isinstance(cache_tensors, bool):
            raise InvalidInputError(f"cache_tensors must be a bool, got {cache_tensors!r}")
        reader = _native.RunReader(os.fspath(bundle_dir), on_damage, name, rank, "tensor")
        return cls(reader, cache_tensors=cache_tensors)

    def _build_points(self) -> tuple[TensorPoint, ...]:
        # The store reads the rows into typed points (one mapping of columns to fields,
        # shared with the comparison engine); these are their Python views.
        return tuple(
            TensorPoint(
                index=point.index,
                label=point.label,
                timestamp=point.timestamp,
                metadata=json.loads(point.metadata),
                replay_index=point.replay_index,
                observations=tuple(
                    TensorObservation.recorded(o, self._payload_loader(o))
                    for o in point.observations
                ),
                run_id=self.run_id,
            )
            for point in self._reader.tensor_points()
        )

    def _payload_loader(
        self, observation: _native.RecordedObservation
    ) -> Callable[[], torch.Tensor] | None:
        if observation.payload != "full" or observation.digest is None:
            return None
        reader, digest = self._reader, observation.digest
        dtype, shape = dtype_from_name(observation.dtype), tuple(observation.shape)

        def load() -> torch.Tensor:
            return tensor_from_bytes(reader.payload(digest), dtype, shape)

        if not self._cache_tensors:
            return load
        cached = functools.cache(load)
        # A copy each time: a caller writing into the tensor must not change the cache.
        return lambda: cached().clone()

    # ------------------------------------------------------------ reference fields
    @property
    def bundle_dir(self) -> Path:
        """The job root the run was loaded from (``path``, as a ``Path``)."""
        return Path(self.path)

    @property
    def default_payload(self) -> str:
        """The payload the recorder used when ``observe`` gave none: ``"full"`` or
        ``"summary"`` (``"full"`` for runs recorded before it was stored)."""
        return str(self.provenance.get("default_payload", "full"))

    def descriptor(self) -> dict[str, Any]:
        """The run without its points' contents, as JSON-ready data: identity
        (``run_id``, ``name``, ``execution``, ``rank``, ``group_id``, ``world_size``),
        state (``created_at`` and ``finished_at`` in ISO 8601, ``complete``),
        ``default_payload``, ``bundle_dir`` (the job root), its point ``labels`` in order,
        ``provenance`` and ``run_metadata``."""
        return {
            "run_id": self.run_id,
            "name": self.name,
            "execution": self.execution,
            "rank": self.rank,
            "group_id": self.group_id,
            "world_size": self.world_size,
            "created_at": _iso(self.created_at),
            "finished_at": _iso(self.finished_at),
            "complete": self.complete,
            "default_payload": self.default_payload,
            "bundle_dir": self.path,
            "labels": list(self.labels),
            "provenance": self.provenance,
            "run_metadata": self.run_metadata,
        }

    def point(self, ref: str | int | TensorPoint) -> TensorPoint:  # type: ignore[override]
        """The point with this label or position, or this very point when given one of
        this run's points; a point of another run raises ``TensorOwnershipError``."""
        if isinstance(ref, TensorPoint):
            # Points are found by label: a run loaded with on_damage="skip" may lack some
            # positions.
            own = self._by_label.get(ref.label)
            if ref.run_id != self.run_id or own is None or own.index != ref.index:
                raise TensorOwnershipError(
                    f"point {ref.label!r} belongs to another run (run id {ref.run_id}), "
                    f"not to run {self.name!r} (run id {self.run_id}); look it up in its "
                    "own run, or compare the two with compare_points()"
                )
            return own
        return self[ref]

    def compare(
        self,
        reference: str | int | TensorPoint,
        candidate: str | int | TensorPoint,
        *,
        options: Any = None,
    ) -> TensorComparison:
        """Compares two points of this run (by label, position, or the points
        themselves); the result of ``compare_points``."""
        return compare_points(self.point(reference), self.point(candidate), options=options)

    def first_anomaly(
        self,
        kind: AnomalyKind = "nonfinite",
        *,
        threshold: float | None = None,
        site: str | None = None,
    ) -> _native.FirstAnomaly | None:
        """The first observation, in execution order, whose values are anomalous, or
        ``None`` when there is none.

        ``kind``: ``"nan"`` (a NaN), ``"inf"`` (+inf or -inf), ``"nonfinite"`` (either),
        ``"abs_max"`` (a finite magnitude, max(|min|, |max|), over ``threshold``, or an
        infinity). ``site`` keeps only observations whose name, module path, node name or
        site id matches it (a glob such as ``"layers.*"``, or an exact name).

        Execution order is the replay index of the point (the point index when the point
        has none), then the point index, then the observation's order in its point. Only
        the summary columns are read, so summary-only runs answer the same. The result
        holds the first site's point, replay, name, site columns, counts and finite
        extremes, ``scanned`` (observations visited), and ``sites``: every site that hit at
        that replay, in order. A wrong ``kind``, or ``abs_max`` without a threshold, raises
        ``InvalidInputError`` naming the allowed values."""
        return _native.first_anomaly(self._reader, kind, threshold, site)

    def to_arrow(self) -> pa.Table:
        """Every observation of the run (one row each, summary columns included, payload
        bytes excluded), zero-copy from the native reader."""
        return pa.Table.from_batches([self._reader.table("observations")])

    def points_table(self) -> pa.Table:
        return pa.Table.from_batches([self._reader.table("points")])

    def validate(self) -> list[tuple[str, str]]:
        """Checks every file digest and payload digest; returns ``(path, problem)`` pairs,
        empty when the run is intact (for a run loaded with ``on_damage="skip"``, what was
        left out comes first)."""
        return self._reader.validate()

    def __repr__(self) -> str:
        return (
            f"TensorRun(name={self.name!r}, execution={self.execution!r}, rank={self.rank}, "
            f"points={len(self.points)}, complete={self.complete}, path={self.path!r})"
        )


def _iso(moment: _dt.datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()
