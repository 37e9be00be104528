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


def _pool_of(key: Any) -> Any:
    return None if key is None else key.pool_key


def _device_of(key: Any) -> Any:
    return None if key is None else key.device_index


def _sides(reference: Any, candidate: Any) -> set[tuple[str, Any]]:
    """The row identities of one row, each tagged with its side (a one-sided row has
    one)."""
    return {(side, key) for side, key in (("r", reference), ("c", candidate)) if key is not None}


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
        self._reference = reference
        self._candidate = candidate
        self._attribution = attribution
        self._attributions = [attribution] if attribution is not None else []
        self._options = options

    @property
    def reference(self) -> Any:
        """The reference state: a ``MemoryProbeSnapshot`` or a ``MemoryPoint``."""
        return self._reference

    @property
    def candidate(self) -> Any:
        """The candidate state, of the reference's kind."""
        return self._candidate

    # The rows, built natively once per comparison; the native getters make new
    # objects on every call, so each tuple is kept.

    @functools.cached_property
    def allocator_scopes(self) -> tuple[MemoryAllocatorScopeComparison, ...]:
        """The ``all``, ``default`` and ``private`` totals over every device (unmatched
        private pools included), in that order."""
        return self._native.allocator_scopes

    @functools.cached_property
    def pools(self) -> tuple[MemoryPoolComparison, ...]:
        """Every pool of either side, paired or one-sided, in report order (by device,
        then pool)."""
        return self._native.pools

    @functools.cached_property
    def observations(self) -> tuple[MemoryObservationComparison, ...]:
        """Every ``(device, pool, stream)`` slice of either side, in report order; across
        runs streams never pair, so each row there is one-sided."""
        return self._native.observations

    @functools.cached_property
    def device_comparisons(self) -> tuple[MemoryDeviceComparison, ...]:
        """Every device of either side: CUDA Runtime samples, allocator rollup, and the
        signed ``cuda_allocator_residual_bytes``."""
        return self._native.device_comparisons

    @property
    def allocator_scope_comparisons(self) -> tuple[MemoryAllocatorScopeComparison, ...]:
        """The reference's name of ``allocator_scopes``."""
        return self.allocator_scopes

    @property
    def pool_comparisons(self) -> tuple[MemoryPoolComparison, ...]:
        """The reference's name of ``pools``."""
        return self.pools

    @property
    def observation_comparisons(self) -> tuple[MemoryObservationComparison, ...]:
        """The reference's name of ``observations``."""
        return self.observations

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
        if found is None:
            return None
        options = None if self._options is None else self._options.lifetime_options()
        return MemoryAllocationLifetimeAnalysis(found, options)

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
    def allocation_stack_comparisons(self) -> tuple[_native.AllocationStackDelta, ...]:
        """Per compared pool and allocation stack, the change of active bytes, requested
        bytes and block count: the stacks of ``stack_deltas`` that changed, largest
        absolute change first (empty unless stacks were requested)."""
        return tuple(d for d in self.stack_deltas if d.changed)

    @functools.cached_property
    def allocation_stack_observation_comparisons(
        self,
    ) -> tuple[_native.AllocationStackDelta, ...]:
        """``allocation_stack_comparisons`` split by stream: per ``(device, pool,
        stream)`` and stack, the changed ones, largest absolute change first. Streams
        pair only inside one run or probe, so this is empty across runs (and unless
        stacks were requested)."""
        if not self.attribution_status.stacks.requested or self.relation != "same_origin":
            return ()
        return tuple(
            _native.compare_allocation_stacks(
                self._reference._state, self._candidate._state, by_stream=True
            )
        )

    @property
    def event_summaries(self) -> tuple[_native.AllocatorEventSummary, ...]:
        """Allocator events of the interval by device, pool, stream, action and stack
        (empty unless events were requested)."""
        return () if self._attribution is None else tuple(self._attribution.event_summaries)

    @property
    def allocator_events(self) -> tuple[_native.AllocatorEventSummary, ...]:
        """The reference's name of ``event_summaries``."""
        return self.event_summaries

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

    # Flat rows, the lines of the CSV files, in report order. With
    # ``include_unchanged=False`` the selection is the pruned report tree's: a stream row
    # stays when it changed, a pool row when it or a stream under it did, a device row
    # when it or a pool under it did (parents stay as context).

    def _kept(self, include_unchanged: bool) -> tuple[list[Any], list[Any], list[Any]]:
        """The pool, observation and device rows that ``include_unchanged`` keeps."""
        if include_unchanged:
            return list(self.pools), list(self.observations), list(self.device_comparisons)
        observations = [o for o in self.observations if o.changed]
        busy_pools = set().union(
            *(_sides(_pool_of(o.reference_key), _pool_of(o.candidate_key)) for o in observations)
        )
        pools = [
            p
            for p in self.pools
            if p.changed or _sides(p.reference_key, p.candidate_key) & busy_pools
        ]
        busy_devices = set().union(
            *(_sides(_device_of(p.reference_key), _device_of(p.candidate_key)) for p in pools)
        )
        devices = [
            d
            for d in self.device_comparisons
            if d.changed
            or _sides(d.reference_device_index, d.candidate_device_index) & busy_devices
        ]
        return pools, observations, devices

    def allocator_scope_comparison_rows(
        self, *, include_unchanged: bool = True
    ) -> list[dict[str, Any]]:
        """``allocator_scopes.csv`` as dicts: ``scope`` then ``reference_<stat>``,
        ``candidate_<stat>`` and ``delta_<stat>`` (bytes and counts)."""
        rows = self.allocator_scopes
        return [r.to_row() for r in rows if include_unchanged or r.changed]

    def pool_comparison_rows(self, *, include_unchanged: bool = True) -> list[dict[str, Any]]:
        """``pools.csv`` as dicts: both pool keys, ``pool_kind``, ``match`` and each
        side's statistics (``None`` on the side that lacks the pool)."""
        return [r.to_row() for r in self._kept(include_unchanged)[0]]

    def observation_comparison_rows(
        self, *, include_unchanged: bool = True
    ) -> list[dict[str, Any]]:
        """``observations.csv`` as dicts: both ``(device, pool, stream)`` keys,
        ``pool_kind``, ``match`` and each side's statistics."""
        return [r.to_row() for r in self._kept(include_unchanged)[1]]

    def device_comparison_rows(self, *, include_unchanged: bool = True) -> list[dict[str, Any]]:
        """``devices.csv`` as dicts: both device indices, ``match`` and, per side,
        ``used_bytes``, ``free_bytes``, ``total_bytes``, ``allocator_reserved_bytes`` and
        ``cuda_allocator_residual_bytes`` (``None`` where a sample is missing)."""
        return [r.to_row() for r in self._kept(include_unchanged)[2]]

    def allocation_stack_comparison_rows(self) -> list[dict[str, Any]]:
        """Every row of ``allocation_stack_comparisons`` (``scope`` ``pool``), then of
        ``allocation_stack_observation_comparisons`` (``scope`` ``observation``), flat:
        stack as ``stack_frames_json``, sizes and counts per side."""
        return [
            {"scope": scope, **row.to_row()}
            for scope, rows in (
                ("pool", self.allocation_stack_comparisons),
                ("observation", self.allocation_stack_observation_comparisons),
            )
            for row in rows
        ]

    @functools.cached_property
    def _titles(self) -> dict[str, str]:
        """``name@label`` of each endpoint, as the attribution files title them."""
        if self._attribution is None:
            return {}
        found = self._attribution.to_dict()
        return {"reference": found["reference"], "candidate": found["candidate"]}

    def event_rows(self) -> list[dict[str, Any]]:
        """The lines of ``events.csv``: the endpoints' titles (``reference``,
        ``candidate``), then each ``allocator_events`` row flat (stack as
        ``stack_frames_json``)."""
        return [{**self._titles, **e.to_row()} for e in self.allocator_events]

    def event_dicts(self) -> list[dict[str, Any]]:
        """``event_rows()`` with each stack as its list of frames (``stack_frames``)."""
        return [{**self._titles, **e.to_dict()} for e in self.allocator_events]

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
            "display_stack_depth": self.display_stack_depth,
            "display_limit": self.display_limit,
            "reference_stack_coverage": _row_dict(self.reference_stack_coverage),
            "candidate_stack_coverage": _row_dict(self.candidate_stack_coverage),
            "stack_deltas": [r.to_dict() for r in self.stack_deltas],
            "allocation_stack_observation_comparisons": [
                r.to_dict() for r in self.allocation_stack_observation_comparisons
            ],
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
    reference: Any,
    candidate: Any,
    *,
    pool_mapping: Mapping[Any, Any] | None = None,
    device_mapping: Mapping[int, int] | None = None,
    attribution: MemoryAttributionOptions | None = None,
) -> MemoryPointComparison:
    """``compare_snapshots`` for recorded points (of one run or of two)."""
    return _compare_states(
        reference,
        candidate,
        pool_mapping,
        device_mapping,
        attribution,
        MemoryPointComparison,
    )
