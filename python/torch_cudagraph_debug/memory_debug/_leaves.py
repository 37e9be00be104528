"""The row models of comparisons, timelines and phase decompositions. The native core
pairs the rows and computes every statistic and delta (typed ``MemoryStats`` /
``MemoryStatsDelta`` objects); these frozen classes name the rows and turn them into the
reference's JSON and CSV shapes."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from torch_cudagraph_debug.memory_debug._model import (
    DeviceMemorySample,
    MemoryObservationKey,
    MemoryPoolKey,
    MemoryStats,
    MemoryStatsDelta,
)

#: Every CSV file a pool-oriented result can write (a rewrite with ``overwrite=True``
#: replaces them all, so no stale file of an earlier report stays behind).
ALL_CSV_FILES = (
    "allocator_scopes.csv",
    "pools.csv",
    "observations.csv",
    "devices.csv",
    "device_decomposition.csv",
)

_STAT_FIELDS = (
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
)


def _stats_dict(stats: MemoryStats | MemoryStatsDelta | None) -> dict[str, int] | None:
    return None if stats is None else dict(stats.to_dict())


def _flat(prefix: str, stats: MemoryStats | MemoryStatsDelta | None) -> dict[str, Any]:
    values = _stats_dict(stats) or {}
    return {f"{prefix}_{name}": values.get(name) for name in _STAT_FIELDS}


def _pool(key: MemoryPoolKey | None) -> list[int] | None:
    return None if key is None else [int(key.pool_id[0]), int(key.pool_id[1])]


def _pool_label(key: MemoryPoolKey | None) -> str:
    return "" if key is None else f"{key.pool_id[0]},{key.pool_id[1]}"


def _minus(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a - b


def csv_text(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """Rows as CSV with a fixed header (empty cells for ``None``)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in columns})
    return out.getvalue()


def _columns(
    identity: Sequence[str], sides: Iterable[str] = ("reference", "candidate")
) -> list[str]:
    cols = list(identity)
    for side in (*sides, "delta"):
        cols.extend(f"{side}_{name}" for name in _STAT_FIELDS)
    return cols


# ---------------------------------------------------------------------- comparison rows


@dataclass(frozen=True)
class MemoryLifecycleDelta:
    """What the allocator did between two states of one run or probe, read from segment
    and block addresses: segment bytes mapped in and out, bytes that became active, bytes
    that became inactive (allocator-reusable)."""

    new_segment_bytes: int
    removed_segment_bytes: int
    newly_active_bytes: int
    became_inactive_bytes: int

    def to_dict(self) -> dict[str, int]:
        return {
            "new_segment_bytes": self.new_segment_bytes,
            "removed_segment_bytes": self.removed_segment_bytes,
            "newly_active_bytes": self.newly_active_bytes,
            "became_inactive_bytes": self.became_inactive_bytes,
        }


def lifecycle(row: tuple[int, int, int, int] | None) -> MemoryLifecycleDelta | None:
    return None if row is None else MemoryLifecycleDelta(*row)


@dataclass(frozen=True)
class MemoryAllocatorScopeComparison:
    """One scope (``all``, ``default``, ``private``) summed over every device, unmatched
    private pools included."""

    scope: str
    reference: MemoryStats
    candidate: MemoryStats
    delta: MemoryStatsDelta

    @property
    def changed(self) -> bool:
        return self.delta.changed

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "reference": _stats_dict(self.reference),
            "candidate": _stats_dict(self.candidate),
            "delta": _stats_dict(self.delta),
        }

    def csv_row(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            **_flat("reference", self.reference),
            **_flat("candidate", self.candidate),
            **_flat("delta", self.delta),
        }


SCOPE_COLUMNS = _columns(["scope"])


@dataclass(frozen=True)
class MemoryPoolComparison:
    """One pool on each side (``None`` on the side that lacks it) and how it was paired."""

    reference_key: MemoryPoolKey | None
    candidate_key: MemoryPoolKey | None
    pool_kind: str
    match: str
    reference: MemoryStats | None
    candidate: MemoryStats | None
    delta: MemoryStatsDelta
    lifecycle: MemoryLifecycleDelta | None

    @property
    def changed(self) -> bool:
        return self.delta.changed or (self.reference is None) != (self.candidate is None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference_device_index": getattr(self.reference_key, "device_index", None),
            "reference_pool_id": _pool(self.reference_key),
            "candidate_device_index": getattr(self.candidate_key, "device_index", None),
            "candidate_pool_id": _pool(self.candidate_key),
            "pool_kind": self.pool_kind,
            "match": self.match,
            "reference": _stats_dict(self.reference),
            "candidate": _stats_dict(self.candidate),
            "delta": _stats_dict(self.delta),
            "lifecycle": None if self.lifecycle is None else self.lifecycle.to_dict(),
        }

    def csv_row(self) -> dict[str, Any]:
        return {
            "reference_device_index": getattr(self.reference_key, "device_index", None),
            "reference_pool_id": _pool_label(self.reference_key),
            "candidate_device_index": getattr(self.candidate_key, "device_index", None),
            "candidate_pool_id": _pool_label(self.candidate_key),
            "pool_kind": self.pool_kind,
            "match": self.match,
            **_flat("reference", self.reference),
            **_flat("candidate", self.candidate),
            **_flat("delta", self.delta),
        }


POOL_COLUMNS = _columns(
    [
        "reference_device_index",
        "reference_pool_id",
        "candidate_device_index",
        "candidate_pool_id",
        "pool_kind",
        "match",
    ]
)


@dataclass(frozen=True)
class MemoryObservationComparison:
    """One ``(device, pool, stream)`` observation on each side. Streams of independent
    runs never pair, so across runs every row is one-sided."""

    reference_key: MemoryObservationKey | None
    candidate_key: MemoryObservationKey | None
    pool_kind: str
    match: str
    reference: MemoryStats | None
    candidate: MemoryStats | None
    delta: MemoryStatsDelta
    lifecycle: MemoryLifecycleDelta | None

    def to_dict(self) -> dict[str, Any]:
        def key(k: MemoryObservationKey | None) -> dict[str, Any] | None:
            if k is None:
                return None
            return {"device_index": k.device_index, "pool_id": list(k.pool_id), "stream": k.stream}

        return {
            "reference_key": key(self.reference_key),
            "candidate_key": key(self.candidate_key),
            "pool_kind": self.pool_kind,
            "match": self.match,
            "reference": _stats_dict(self.reference),
            "candidate": _stats_dict(self.candidate),
            "delta": _stats_dict(self.delta),
            "lifecycle": None if self.lifecycle is None else self.lifecycle.to_dict(),
        }

    def csv_row(self) -> dict[str, Any]:
        r, c = self.reference_key, self.candidate_key
        return {
            "reference_device_index": None if r is None else r.device_index,
            "reference_pool_id": "" if r is None else f"{r.pool_id[0]},{r.pool_id[1]}",
            "reference_stream": None if r is None else r.stream,
            "candidate_device_index": None if c is None else c.device_index,
            "candidate_pool_id": "" if c is None else f"{c.pool_id[0]},{c.pool_id[1]}",
            "candidate_stream": None if c is None else c.stream,
            "pool_kind": self.pool_kind,
            "match": self.match,
            **_flat("reference", self.reference),
            **_flat("candidate", self.candidate),
            **_flat("delta", self.delta),
        }


OBSERVATION_COLUMNS = _columns(
    [
        "reference_device_index",
        "reference_pool_id",
        "reference_stream",
        "candidate_device_index",
        "candidate_pool_id",
        "candidate_stream",
        "pool_kind",
        "match",
    ]
)


@dataclass(frozen=True)
class MemoryDeviceComparison:
    """One device on each side: its CUDA Runtime sample (``None`` when the query failed
    or the side lacks the device) and its allocator rollup.
    ``cuda_allocator_residual_bytes = used_bytes - allocator_reserved_bytes`` is signed:
    the two readings are consecutive, not atomic, and device-wide used memory includes
    other processes, so neither sign is an ownership verdict."""

    reference_device_index: int | None
    candidate_device_index: int | None
    match: str
    reference_sample: DeviceMemorySample | None
    candidate_sample: DeviceMemorySample | None
    reference_stats: MemoryStats | None
    candidate_stats: MemoryStats | None
    delta: MemoryStatsDelta
    lifecycle: MemoryLifecycleDelta | None = None

    def _sample(self, side: str, name: str) -> int | None:
        sample = self.reference_sample if side == "reference" else self.candidate_sample
        return None if sample is None else getattr(sample, name)

    @property
    def reference_used_bytes(self) -> int | None:
        return self._sample("reference", "used_bytes")

    @property
    def candidate_used_bytes(self) -> int | None:
        return self._sample("candidate", "used_bytes")

    @property
    def delta_used_bytes(self) -> int | None:
        return _minus(self.candidate_used_bytes, self.reference_used_bytes)

    @property
    def reference_free_bytes(self) -> int | None:
        return self._sample("reference", "free_bytes")

    @property
    def candidate_free_bytes(self) -> int | None:
        return self._sample("candidate", "free_bytes")

    @property
    def delta_free_bytes(self) -> int | None:
        return _minus(self.candidate_free_bytes, self.reference_free_bytes)

    @property
    def reference_total_bytes(self) -> int | None:
        return self._sample("reference", "total_bytes")

    @property
    def candidate_total_bytes(self) -> int | None:
        return self._sample("candidate", "total_bytes")

    @property
    def delta_total_bytes(self) -> int | None:
        return _minus(self.candidate_total_bytes, self.reference_total_bytes)

    @property
    def reference_allocator_reserved_bytes(self) -> int | None:
        return None if self.reference_stats is None else self.reference_stats.reserved_bytes

    @property
    def candidate_allocator_reserved_bytes(self) -> int | None:
        return None if self.candidate_stats is None else self.candidate_stats.reserved_bytes

    @property
    def delta_allocator_reserved_bytes(self) -> int:
        return self.delta.reserved_bytes

    @property
    def reference_cuda_allocator_residual_bytes(self) -> int | None:
        return _minus(self.reference_used_bytes, self.reference_allocator_reserved_bytes)

    @property
    def candidate_cuda_allocator_residual_bytes(self) -> int | None:
        return _minus(self.candidate_used_bytes, self.candidate_allocator_reserved_bytes)

    @property
    def delta_cuda_allocator_residual_bytes(self) -> int | None:
        return _minus(
            self.candidate_cuda_allocator_residual_bytes,
            self.reference_cuda_allocator_residual_bytes,
        )

    @property
    def changed(self) -> bool:
        """Whether anything differs; a sample present on one side only counts as a change
        (no device delta is made up for it)."""
        return (
            self.delta.changed
            or (self.reference_sample is None) != (self.candidate_sample is None)
            or (
                self.reference_sample is not None and self.reference_sample != self.candidate_sample
            )
        )

    def _side(self, side: str) -> dict[str, Any]:
        sample = self.reference_sample if side == "reference" else self.candidate_sample
        return {
            "sample": None if sample is None else dict(sample.to_dict()),
            "used_bytes": getattr(self, f"{side}_used_bytes"),
            "free_bytes": getattr(self, f"{side}_free_bytes"),
            "total_bytes": getattr(self, f"{side}_total_bytes"),
            "allocator_reserved_bytes": getattr(self, f"{side}_allocator_reserved_bytes"),
            "cuda_allocator_residual_bytes": getattr(self, f"{side}_cuda_allocator_residual_bytes"),
            "allocator": _stats_dict(
                self.reference_stats if side == "reference" else self.candidate_stats
            ),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference_device_index": self.reference_device_index,
            "candidate_device_index": self.candidate_device_index,
            "match": self.match,
            "changed": self.changed,
            "reference": self._side("reference"),
            "candidate": self._side("candidate"),
            "delta": {
                "used_bytes": self.delta_used_bytes,
                "free_bytes": self.delta_free_bytes,
                "total_bytes": self.delta_total_bytes,
                "allocator_reserved_bytes": self.delta_allocator_reserved_bytes,
                "cuda_allocator_residual_bytes": self.delta_cuda_allocator_residual_bytes,
                "allocator": _stats_dict(self.delta),
            },
            "lifecycle": None if self.lifecycle is None else self.lifecycle.to_dict(),
        }

    def csv_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "reference_device_index": self.reference_device_index,
            "candidate_device_index": self.candidate_device_index,
            "match": self.match,
        }
        for side in ("reference", "candidate", "delta"):
            for name in DEVICE_METRICS:
                row[f"{side}_{name}"] = getattr(self, f"{side}_{name}")
        return row


DEVICE_METRICS = (
    "used_bytes",
    "free_bytes",
    "total_bytes",
    "allocator_reserved_bytes",
    "cuda_allocator_residual_bytes",
)
DEVICE_COLUMNS = [
    "reference_device_index",
    "candidate_device_index",
    "match",
    *(f"{side}_{m}" for side in ("reference", "candidate", "delta") for m in DEVICE_METRICS),
]


# ---------------------------------------------------------------------- timeline entries


@dataclass(frozen=True)
class MemoryAllocatorScopeTimelineEntry:
    """One scope at one point: absolute stats and the change since the previous point
    (``None`` at the first point)."""

    point_index: int
    point_label: str
    scope: str
    stats: MemoryStats
    delta: MemoryStatsDelta | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "point_index": self.point_index,
            "point_label": self.point_label,
            "scope": self.scope,
            "stats": _stats_dict(self.stats),
            "delta": _stats_dict(self.delta),
        }

    def csv_row(self) -> dict[str, Any]:
        return {
            "point_index": self.point_index,
            "point_label": self.point_label,
            "scope": self.scope,
            **_flat("stats", self.stats),
            **_flat("delta", self.delta),
        }


@dataclass(frozen=True)
class MemoryPoolTimelineEntry:
    """One pool at one point. A pool seen at an earlier point stays with zero stats after
    it disappears, so its release shows as a negative delta."""

    point_index: int
    point_label: str
    pool_key: MemoryPoolKey
    pool_kind: str
    stats: MemoryStats
    delta: MemoryStatsDelta | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "point_index": self.point_index,
            "point_label": self.point_label,
            "device_index": self.pool_key.device_index,
            "pool_id": _pool(self.pool_key),
            "pool_kind": self.pool_kind,
            "stats": _stats_dict(self.stats),
            "delta": _stats_dict(self.delta),
        }

    def csv_row(self) -> dict[str, Any]:
        return {
            "point_index": self.point_index,
            "point_label": self.point_label,
            "device_index": self.pool_key.device_index,
            "pool_id": _pool_label(self.pool_key),
            "pool_kind": self.pool_kind,
            **_flat("stats", self.stats),
            **_flat("delta", self.delta),
        }


@dataclass(frozen=True)
class MemoryObservationTimelineEntry:
    """One ``(device, pool, stream)`` observation at one point (kept at zero after it
    disappears, as pools are)."""

    point_index: int
    point_label: str
    key: MemoryObservationKey
    stats: MemoryStats
    delta: MemoryStatsDelta | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "point_index": self.point_index,
            "point_label": self.point_label,
            "device_index": self.key.device_index,
            "pool_id": list(self.key.pool_id),
            "stream": self.key.stream,
            "stats": _stats_dict(self.stats),
            "delta": _stats_dict(self.delta),
        }

    def csv_row(self) -> dict[str, Any]:
        return {
            "point_index": self.point_index,
            "point_label": self.point_label,
            "device_index": self.key.device_index,
            "pool_id": f"{self.key.pool_id[0]},{self.key.pool_id[1]}",
            "stream": self.key.stream,
            **_flat("stats", self.stats),
            **_flat("delta", self.delta),
        }


@dataclass(frozen=True)
class MemoryDeviceTimelineEntry:
    """One device at one point: its sample (``None`` when the query failed), the
    allocator rollup with its previous-point delta, and sample deltas that are ``None``
    together when either point lacks a sample."""

    point_index: int
    point_label: str
    device_index: int
    sample: DeviceMemorySample | None
    stats: MemoryStats
    delta: MemoryStatsDelta | None
    delta_used_bytes: int | None
    delta_free_bytes: int | None
    delta_total_bytes: int | None

    @property
    def cuda_allocator_residual_bytes(self) -> int | None:
        return None if self.sample is None else self.sample.used_bytes - self.stats.reserved_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "point_index": self.point_index,
            "point_label": self.point_label,
            "device_index": self.device_index,
            "sample": None if self.sample is None else dict(self.sample.to_dict()),
            "cuda_allocator_residual_bytes": self.cuda_allocator_residual_bytes,
            "stats": _stats_dict(self.stats),
            "delta": _stats_dict(self.delta),
            "delta_used_bytes": self.delta_used_bytes,
            "delta_free_bytes": self.delta_free_bytes,
            "delta_total_bytes": self.delta_total_bytes,
        }

    def csv_row(self) -> dict[str, Any]:
        sample = self.sample
        return {
            "point_index": self.point_index,
            "point_label": self.point_label,
            "device_index": self.device_index,
            "used_bytes": None if sample is None else sample.used_bytes,
            "free_bytes": None if sample is None else sample.free_bytes,
            "total_bytes": None if sample is None else sample.total_bytes,
            "allocator_reserved_bytes": self.stats.reserved_bytes,
            "cuda_allocator_residual_bytes": self.cuda_allocator_residual_bytes,
            "delta_used_bytes": self.delta_used_bytes,
            "delta_free_bytes": self.delta_free_bytes,
            "delta_total_bytes": self.delta_total_bytes,
            "delta_allocator_reserved_bytes": None
            if self.delta is None
            else self.delta.reserved_bytes,
        }


TIMELINE_SCOPE_COLUMNS = _columns(["point_index", "point_label", "scope"], sides=("stats",))
TIMELINE_POOL_COLUMNS = _columns(
    ["point_index", "point_label", "device_index", "pool_id", "pool_kind"], sides=("stats",)
)
TIMELINE_OBSERVATION_COLUMNS = _columns(
    ["point_index", "point_label", "device_index", "pool_id", "stream"], sides=("stats",)
)
TIMELINE_DEVICE_COLUMNS = [
    "point_index",
    "point_label",
    "device_index",
    "used_bytes",
    "free_bytes",
    "total_bytes",
    "allocator_reserved_bytes",
    "cuda_allocator_residual_bytes",
    "delta_used_bytes",
    "delta_free_bytes",
    "delta_total_bytes",
    "delta_allocator_reserved_bytes",
]


# ---------------------------------------------------------------------- phase decomposition


@dataclass(frozen=True)
class MemoryPhaseComponents:
    """The four terms of one phase equation, ``end_gap = start_gap + candidate_change -
    baseline_change`` (each ``None`` when a reading is missing, such as a device without
    a CUDA Runtime sample)."""

    baseline_change_bytes: int | None
    candidate_change_bytes: int | None
    start_gap_bytes: int | None
    end_gap_bytes: int | None

    @property
    def change_gap_bytes(self) -> int | None:
        """``candidate_change_bytes - baseline_change_bytes``."""
        return _minus(self.candidate_change_bytes, self.baseline_change_bytes)

    @property
    def identity_holds(self) -> bool | None:
        terms = (
            self.baseline_change_bytes,
            self.candidate_change_bytes,
            self.start_gap_bytes,
            self.end_gap_bytes,
        )
        if any(t is None for t in terms):
            return None
        b, c, s, e = terms
        return e == s + c - b  # type: ignore[operator]

    @classmethod
    def of(cls, readings: Sequence[int | None]) -> MemoryPhaseComponents:
        bs, be, cs, ce = readings
        return cls(_minus(be, bs), _minus(ce, cs), _minus(cs, bs), _minus(ce, be))

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline_change_bytes": self.baseline_change_bytes,
            "candidate_change_bytes": self.candidate_change_bytes,
            "start_gap_bytes": self.start_gap_bytes,
            "end_gap_bytes": self.end_gap_bytes,
            "change_gap_bytes": self.change_gap_bytes,
            "identity_holds": self.identity_holds,
        }


@dataclass(frozen=True)
class MemoryAllocatorScopePhaseDecomposition:
    scope: str
    metric: str
    components: MemoryPhaseComponents

    @property
    def identity_holds(self) -> bool | None:
        return self.components.identity_holds

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "metric": self.metric, **self.components.to_dict()}


@dataclass(frozen=True)
class MemoryPoolPhaseDecomposition:
    baseline_pool: MemoryPoolKey | None
    candidate_pool: MemoryPoolKey | None
    metric: str
    components: MemoryPhaseComponents

    @property
    def identity_holds(self) -> bool | None:
        return self.components.identity_holds

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline_device_index": getattr(self.baseline_pool, "device_index", None),
            "baseline_pool_id": _pool(self.baseline_pool),
            "candidate_device_index": getattr(self.candidate_pool, "device_index", None),
            "candidate_pool_id": _pool(self.candidate_pool),
            "metric": self.metric,
            **self.components.to_dict(),
        }


@dataclass(frozen=True)
class MemoryDevicePhaseDecomposition:
    baseline_device_index: int | None
    candidate_device_index: int | None
    metric: str
    components: MemoryPhaseComponents

    @property
    def identity_holds(self) -> bool | None:
        return self.components.identity_holds

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline_device_index": self.baseline_device_index,
            "candidate_device_index": self.candidate_device_index,
            "metric": self.metric,
            **self.components.to_dict(),
        }


PHASE_TERMS = (
    "baseline_change_bytes",
    "candidate_change_bytes",
    "start_gap_bytes",
    "end_gap_bytes",
    "change_gap_bytes",
    "identity_holds",
)
PHASE_SCOPE_COLUMNS = ["scope", "metric", *PHASE_TERMS]
PHASE_POOL_COLUMNS = [
    "baseline_device_index",
    "baseline_pool_id",
    "candidate_device_index",
    "candidate_pool_id",
    "metric",
    *PHASE_TERMS,
]
PHASE_DEVICE_COLUMNS = ["baseline_device_index", "candidate_device_index", "metric", *PHASE_TERMS]


def phase_csv_row(row: Any) -> dict[str, Any]:
    d = row.to_dict()
    for key in ("baseline_pool_id", "candidate_pool_id"):
        if key in d:
            d[key] = "" if d[key] is None else f"{d[key][0]},{d[key][1]}"
    return d
