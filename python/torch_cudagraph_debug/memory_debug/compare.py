"""Comparisons of two memory states: two probe snapshots or two points, of one origin or
of independent runs. The native core pairs the states, builds the rows and renders the
report; these classes hold the result with its attribution."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import torch_cudagraph_debug.memory_debug.attribution as _attribution
from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.memory_debug._model import MemoryPoolKey, from_native
from torch_cudagraph_debug.memory_debug._rendered import Depth, _Rendered
from torch_cudagraph_debug.memory_debug.lifetimes import MemoryAllocationLifetimeAnalysis
from torch_cudagraph_debug.memory_debug.options import MemoryAttributionOptions

# The rows of a comparison: frozen native classes, built (paired, computed, serialised) by
# the native core.
MemoryLifecycleDelta = _native.MemoryLifecycleDelta
MemoryAllocatorScopeComparison = _native.MemoryAllocatorScopeComparison
MemoryPoolComparison = _native.MemoryPoolComparison
MemoryObservationComparison = _native.MemoryObservationComparison
MemoryDeviceComparison = _native.MemoryDeviceComparison


def _pool_key(value: Any, devices: tuple[int, ...], what: str) -> tuple[int, tuple[int, int]]:
    """A pool named by ``MemoryPoolKey``, ``(device, (a, b))``, or a bare ``(a, b)`` when
    the state covers one device."""
    if isinstance(value, MemoryPoolKey):
        return int(value.device_index), (int(value.pool_id[0]), int(value.pool_id[1]))
    if isinstance(value, tuple | list) and len(value) == 2:
        first, second = value
        if isinstance(second, tuple | list) and len(second) == 2:
            return int(first), (int(second[0]), int(second[1]))
        if isinstance(first, int) and isinstance(second, int):
            if len(devices) != 1:
                raise InvalidInputError(
                    f"{what} pool {tuple(value)} does not say its device and the state covers "
                    f"devices {list(devices)}; use MemoryPoolKey(device, pool_id)"
                )
            return devices[0], (first, second)
    raise InvalidInputError(
        f"{what} pool {value!r} is not a MemoryPoolKey, (device, pool_id) or pool_id"
    )


def _mappings(
    reference: Any,
    candidate: Any,
    pool_mapping: Mapping[Any, Any] | None,
    device_mapping: Mapping[int, int] | None,
) -> tuple[list[Any], list[tuple[int, int]]]:
    pools = [
        (_pool_key(r, reference.devices, "reference"), _pool_key(c, candidate.devices, "candidate"))
        for r, c in (pool_mapping or {}).items()
    ]
    devices = [(int(r), int(c)) for r, c in (device_mapping or {}).items()]
    return pools, devices


def _status_dict(status: Any) -> dict[str, dict[str, bool]]:
    return {
        kind: {
            "requested": getattr(status, kind).requested,
            "available": getattr(status, kind).available,
            "complete": getattr(status, kind).complete,
        }
        for kind in ("stacks", "events", "lifetimes")
    }


def _row_dict(row: Any) -> Any:
    return None if row is None else row.to_dict()


class MemoryComparison(_Rendered):
    """Two states side by side: the report tree device -> CUDA used -> residual +
    allocator -> pools -> streams, with the address lifecycle where it means something
    (``exact``, ``approximate``, or ``unavailable`` across independent runs).

    The shared base of :class:`MemorySnapshotComparison` and
    :class:`MemoryPointComparison`; as a name of its own it is deprecated."""

    relation: str = from_native(doc="``same_origin`` (one run or probe) or ``cross_run``.")
    lifecycle_label: str = from_native()

    def __init__(
        self,
        native: _native.MemoryComparison,
        reference: Any,
        candidate: Any,
        attribution: Any = None,
        options: MemoryAttributionOptions | None = None,
    ):
        self._native = native
        self.reference = reference
        self.candidate = candidate
        self._attribution = attribution
        self._attributions = [attribution] if attribution is not None else []
        self._options = options
        self.allocator_scopes: tuple[MemoryAllocatorScopeComparison, ...] = native.allocator_scopes
        self.pools: tuple[MemoryPoolComparison, ...] = native.pools
        self.observations: tuple[MemoryObservationComparison, ...] = native.observations
        self.device_comparisons: tuple[MemoryDeviceComparison, ...] = native.device_comparisons

    @property
    def attribution_status(self) -> _native.MemoryAttributionStatus:
        """Requested / available / complete, per stacks, events and lifetimes."""
        if self._attribution is None:
            return _attribution.UNREQUESTED_STATUS
        return self._attribution.attribution_status

    @functools.cached_property
    def allocation_lifetimes(self) -> MemoryAllocationLifetimeAnalysis | None:
        """With lifetime attribution on two points of one run: the cohort report of the
        range between them (generations live at the earlier point and those born up to the
        later one), computed natively from the run's history; ``None`` otherwise, or when
        the history does not cover the range (the lifetimes status and a warning say
        why)."""
        found = None if self._attribution is None else self._attribution.allocation_lifetimes
        return None if found is None else MemoryAllocationLifetimeAnalysis(found)

    @property
    def reference_stack_coverage(self) -> _native.AllocationStackCoverage | None:
        return None if self._attribution is None else self._attribution.reference_stack_coverage

    @property
    def candidate_stack_coverage(self) -> _native.AllocationStackCoverage | None:
        return None if self._attribution is None else self._attribution.candidate_stack_coverage

    @property
    def stack_deltas(self) -> tuple[_native.AllocationStackDelta, ...]:
        """Every stack of every compared pool, unchanged ones included, largest change
        first (empty unless stacks were requested)."""
        return () if self._attribution is None else tuple(self._attribution.stack_deltas)

    @property
    def event_summaries(self) -> tuple[_native.AllocatorEventSummary, ...]:
        """Allocator events of the interval by device, pool, stream, action and stack
        (empty unless events were requested)."""
        return () if self._attribution is None else tuple(self._attribution.event_summaries)

    @property
    def lifecycle_confidence(self) -> str:
        """``exact`` (every address known), ``approximate`` (matched by sizes: equal-size
        churn can cancel) or ``unavailable`` (independent states)."""
        return self._native.lifecycle_label

    @property
    def lifecycle_available(self) -> bool:
        return self.lifecycle_confidence != "unavailable"

    @property
    def warnings(self) -> tuple[str, ...]:
        notes = () if self._attribution is None else tuple(self._attribution.warnings)
        return tuple(self._native.warnings) + notes

    @property
    def suggested_pool_mapping(self) -> dict[MemoryPoolKey, MemoryPoolKey]:
        """Private pools paired by capture order (ascending ids per device). Never applied:
        pass it as ``pool_mapping`` if it is right."""
        return {
            MemoryPoolKey(rd, tuple(rp)): MemoryPoolKey(cd, tuple(cp))  # type: ignore[arg-type]
            for (rd, rp), (cd, cp) in self._native.suggested_pool_mapping
        }

    def _render(self, format: str, include_unchanged: bool, depth: Depth) -> str:
        return self._native.render(format, include_unchanged, depth)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": type(self).__name__,
            "reference": self.reference.descriptor(),
            "candidate": self.candidate.descriptor(),
            "relation": self.relation,
            "lifecycle_available": self.lifecycle_available,
            "lifecycle_confidence": self.lifecycle_confidence,
            "attribution_status": _status_dict(self.attribution_status),
            "reference_stack_coverage": _row_dict(self.reference_stack_coverage),
            "candidate_stack_coverage": _row_dict(self.candidate_stack_coverage),
            "stack_deltas": [r.to_dict() for r in self.stack_deltas],
            "event_summaries": [r.to_dict() for r in self.event_summaries],
            **self._native.rows_dict(),
            "allocation_lifetimes": _row_dict(self.allocation_lifetimes),
            "warnings": list(self.warnings),
        }

    def _csv_files(self) -> dict[str, str]:
        return dict(self._native.csv_files())

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.relation}, lifecycle={self.lifecycle_label}, "
            f"pools={len(self.pools)}, warnings={len(self.warnings)})"
        )


class MemorySnapshotComparison(MemoryComparison):
    """Two probe snapshots (of one probe or of two) compared."""


class MemoryPointComparison(MemoryComparison):
    """Two recorded points (of one run or of two) compared."""


def _compare_states(
    reference: Any,
    candidate: Any,
    pool_mapping: Mapping[Any, Any] | None,
    device_mapping: Mapping[int, int] | None,
    attribution: MemoryAttributionOptions | None,
    result: type[MemoryComparison],
) -> Any:
    for what, value in (("reference", reference), ("candidate", candidate)):
        if not hasattr(value, "_state"):
            raise InvalidInputError(
                f"{what} must be a MemoryProbeSnapshot or MemoryPoint, got {type(value).__name__}"
            )
    pools, devices = _mappings(reference, candidate, pool_mapping, device_mapping)
    native = _native.compare_states(
        reference._state,
        candidate._state,
        pool_mapping=pools,
        device_mapping=devices,
        origin="run" if hasattr(reference, "run_id") else "probe",
    )
    found = _attribution.attribute(reference, candidate, native, attribution)
    return result(native, reference, candidate, found, attribution)


def compare_snapshots(
    reference: Any,
    candidate: Any,
    *,
    pool_mapping: Mapping[Any, Any] | None = None,
    device_mapping: Mapping[int, int] | None = None,
    attribution: MemoryAttributionOptions | None = None,
) -> MemorySnapshotComparison:
    """Compares two probe snapshots or points, of one origin or of independent runs.

    Default pools pair automatically; private pools of independent runs pair only through
    ``pool_mapping`` (``{MemoryPoolKey: MemoryPoolKey}``); devices pair by index unless
    ``device_mapping`` says otherwise; streams of independent runs never pair. Points give
    a :class:`MemoryPointComparison`."""
    both_points = hasattr(reference, "run_id") and hasattr(candidate, "run_id")
    return _compare_states(
        reference,
        candidate,
        pool_mapping,
        device_mapping,
        attribution,
        MemoryPointComparison if both_points else MemorySnapshotComparison,
    )


def compare_points(
    reference_point: Any,
    candidate_point: Any,
    *,
    pool_mapping: Mapping[Any, Any] | None = None,
    device_mapping: Mapping[int, int] | None = None,
    attribution: MemoryAttributionOptions | None = None,
) -> MemoryPointComparison:
    """``compare_snapshots`` for recorded points (of one run or of two)."""
    return _compare_states(
        reference_point,
        candidate_point,
        pool_mapping,
        device_mapping,
        attribution,
        MemoryPointComparison,
    )
