"""Comparisons of memory states: two snapshots or points, two phases, a run's timeline.
The native core pairs, computes and renders; these classes hold the result and write it
out."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch_cudagraph_debug.memory_debug.attribution as _attribution
from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.memory_debug._model import MemoryPoolKey
from torch_cudagraph_debug.memory_debug.lifetimes import MemoryAllocationLifetimeAnalysis
from torch_cudagraph_debug.memory_debug.options import (
    MemoryAttributionOptions,
)

if TYPE_CHECKING:
    from torch_cudagraph_debug.memory_debug.run import MemoryRange

# The rows of comparisons, timelines and phase decompositions: frozen native classes,
# built (paired, computed, serialised) by the native core.
MemoryLifecycleDelta = _native.MemoryLifecycleDelta
MemoryAllocatorScopeComparison = _native.MemoryAllocatorScopeComparison
MemoryPoolComparison = _native.MemoryPoolComparison
MemoryObservationComparison = _native.MemoryObservationComparison
MemoryDeviceComparison = _native.MemoryDeviceComparison
MemoryAllocatorScopeTimelineEntry = _native.MemoryAllocatorScopeTimelineEntry
MemoryPoolTimelineEntry = _native.MemoryPoolTimelineEntry
MemoryObservationTimelineEntry = _native.MemoryObservationTimelineEntry
MemoryDeviceTimelineEntry = _native.MemoryDeviceTimelineEntry
MemoryPhaseComponents = _native.MemoryPhaseComponents
MemoryAllocatorScopePhaseDecomposition = _native.MemoryAllocatorScopePhaseDecomposition
MemoryPoolPhaseDecomposition = _native.MemoryPoolPhaseDecomposition
MemoryDevicePhaseDecomposition = _native.MemoryDevicePhaseDecomposition

Depth = Literal["device", "pool", "stream"]
_FORMATS = {"text": "txt", "json": "json", "csv": "csv", "html": "html"}
_DEPTHS = ("device", "pool", "stream")


def _check_depth(depth: str) -> None:
    if depth not in _DEPTHS:
        raise InvalidInputError(f"depth must be 'device', 'pool' or 'stream', got {depth!r}")


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


class _Rendered:
    """Writing a result out in every format."""

    # Attributions whose sections the report carries, and the options they came with.
    _attributions: tuple[Any, ...] | list[Any] = ()
    _options: MemoryAttributionOptions | None = None

    def _render(self, format: str, include_unchanged: bool, depth: Depth) -> str:
        raise NotImplementedError

    def _full(
        self,
        format: str,
        include_unchanged: bool,
        depth: Depth,
        limit: int | None = None,
        stack_depth: int | None = None,
    ) -> str:
        shown, frames = _attribution.display_of(self._options, limit, stack_depth)
        out = _attribution.with_sections(
            self._render(format, include_unchanged, depth),
            format,
            self._attributions,
            include_unchanged,
            shown,
            frames,
        )
        # Lifetime attribution: the cohort report follows as a text section (JSON has it
        # in to_dict(); its own files come from allocation_lifetimes.write()).
        lifetimes = getattr(self, "allocation_lifetimes", None)
        if lifetimes is not None and format == "text":
            out += "\n" + lifetimes.to_text(limit=shown, stack_depth=frames)
        return out

    def _csv_files(self) -> dict[str, str]:
        """The reference's CSV file set of this result (``name -> content``)."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """The complete result: nested ``reference``/``candidate``/``delta`` states with
        ``*_bytes`` keys (never pruned nor limited)."""
        raise NotImplementedError

    def to_text(
        self,
        include_unchanged: bool = True,
        limit: int | None = None,
        stack_depth: int | None = None,
        *,
        depth: Depth = "stream",
    ) -> str:
        """The report tree as text, with the attribution sections; ``limit`` and
        ``stack_depth`` bound their rows here (and in HTML) only."""
        _check_depth(depth)
        return self._full("text", include_unchanged, depth, limit, stack_depth)

    def to_json(self, *, include_unchanged: bool = True, depth: Depth = "stream") -> dict[str, Any]:
        """The report tree as the native JSON document (``to_dict()`` is the reference's
        structured form)."""
        _check_depth(depth)
        return json.loads(self._full("json", include_unchanged, depth))

    def to_csv(self, *, include_unchanged: bool = True, depth: Depth = "stream") -> str:
        _check_depth(depth)
        return self._render("csv", include_unchanged, depth)

    def to_html(
        self,
        include_unchanged: bool = True,
        limit: int | None = None,
        stack_depth: int | None = None,
        *,
        depth: Depth = "stream",
    ) -> str:
        _check_depth(depth)
        return self._full("html", include_unchanged, depth, limit, stack_depth)

    def write(
        self,
        output_dir: str | os.PathLike[str],
        include_unchanged: bool = True,
        limit: int | None = None,
        stack_depth: int | None = None,
        overwrite: bool = False,
        *,
        depth: Depth = "stream",
    ) -> dict[str, Path]:
        """Writes ``report.txt``, ``report.json`` (``to_dict()``), ``report.html`` and this
        result's CSV files into ``output_dir``; returns ``{file name: path}``. The depth
        is checked before anything is created; a directory that already holds anything
        needs ``overwrite=True`` (:class:`ReportExistsError` otherwise), which replaces
        only this report's files."""
        _check_depth(depth)
        files = {
            "report.txt": self._full("text", include_unchanged, depth, limit, stack_depth),
            "report.json": json.dumps(self.to_dict(), indent=2) + "\n",
            "report.html": self._full("html", include_unchanged, depth, limit, stack_depth),
        }
        files.update(self._csv_files())
        files.update(_attribution.csv_files(self._attributions, include_unchanged))
        own = [*files, *_native.MEMORY_ROW_CSV_FILES, *_attribution.ATTRIBUTION_CSV_FILES]
        paths = _native.write_report_files(
            os.fspath(output_dir), list(files.items()), sorted(set(own)), overwrite
        )
        return {Path(p).name: Path(p) for p in paths}

    def save(
        self,
        directory: str | os.PathLike[str],
        *,
        name: str = "memory-report",
        formats: tuple[str, ...] = ("text", "json", "csv", "html"),
        include_unchanged: bool = True,
        depth: Depth = "stream",
        overwrite: bool = False,
    ) -> list[str]:
        """Writes ``<name>.txt/.json/.csv/.html`` (those of ``formats``) into
        ``directory``, created if missing; returns the paths written. A directory that
        already holds anything needs ``overwrite=True`` (otherwise
        :class:`ReportExistsError`), which replaces only this report's files: the same
        rules as a tensor comparison's ``write()``."""
        unknown = [f for f in formats if f not in _FORMATS]
        if unknown:
            raise InvalidInputError(f"unknown report formats {unknown}; use {list(_FORMATS)}")
        files = [
            (f"{name}.{_FORMATS[f]}", self._full(f, include_unchanged, depth)) for f in formats
        ]
        if "csv" in formats:
            files += _attribution.csv_files(self._attributions, include_unchanged)
        # Every format's file is this report's own: replacing it must not leave a stale
        # file of a format that is not written this time.
        own = [f"{name}.{extension}" for extension in _FORMATS.values()]
        own += list(_attribution.ATTRIBUTION_CSV_FILES)
        return [
            os.fspath(p)
            for p in _native.write_report_files(os.fspath(directory), files, own, overwrite)
        ]

    def __str__(self) -> str:
        return self.to_text()


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
    def relation(self) -> str:
        """``same_origin`` (one run or probe) or ``cross_run``."""
        return self._native.relation

    @property
    def lifecycle_label(self) -> str:
        return self._native.lifecycle_label

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
            "allocator_scopes": [r.to_dict() for r in self.allocator_scopes],
            "pools": [r.to_dict() for r in self.pools],
            "observations": [r.to_dict() for r in self.observations],
            "device_comparisons": [r.to_dict() for r in self.device_comparisons],
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


def _gap(
    reference: Any,
    candidate: Any,
    pool_mapping: Mapping[Any, Any] | None,
    device_mapping: Mapping[int, int] | None,
    attribution: MemoryAttributionOptions | None = None,
) -> MemoryPointComparison:
    """The comparison of two phase endpoints. A phase's mappings name pools and devices of
    any endpoint, so each gap keeps the pairs whose two ends exist at its own points."""
    pools, devices = _mappings(reference, candidate, pool_mapping, device_mapping)
    present = (
        {(k.device_index, tuple(k.pool_id)) for k in reference.pool_stats},
        {(k.device_index, tuple(k.pool_id)) for k in candidate.pool_stats},
    )
    kept_pools = {r: c for r, c in pools if r in present[0] and c in present[1]}
    kept_devices = {r: c for r, c in devices if r in reference.devices and c in candidate.devices}
    return _compare_states(
        reference, candidate, kept_pools, kept_devices, attribution, MemoryPointComparison
    )


class MemoryPhaseComparison(_Rendered):
    """Baseline change, candidate change, start gap and end gap per scope, device and
    pool; every row checks ``end_gap = start_gap + candidate_change - baseline_change``.

    ``baseline_change`` / ``candidate_change`` / ``start_gap`` / ``end_gap`` are the four
    ordinary comparisons the equation is made of; ``allocator_scope_decomposition``,
    ``pool_decomposition`` and ``device_decomposition`` hold one row per phase metric."""

    def __init__(
        self,
        native: _native.MemoryPhaseComparison,
        baseline: MemoryRange | None = None,
        candidate: MemoryRange | None = None,
        pool_mapping: Mapping[Any, Any] | None = None,
        device_mapping: Mapping[int, int] | None = None,
        attribution: MemoryAttributionOptions | None = None,
    ):
        self._native = native
        self.baseline = baseline
        self.candidate = candidate
        self._options = attribution
        self.allocator_scope_decomposition: tuple[MemoryAllocatorScopePhaseDecomposition, ...] = (
            native.allocator_scope_decomposition
        )
        self.pool_decomposition: tuple[MemoryPoolPhaseDecomposition, ...] = (
            native.pool_decomposition
        )
        self.device_decomposition: tuple[MemoryDevicePhaseDecomposition, ...] = (
            native.device_decomposition
        )
        if baseline is not None and candidate is not None:
            # With attribution the two changes carry it (events included: they are inside
            # one run) and the gaps carry stack attribution only.
            wanted = attribution is not None and (
                attribution.stacks or attribution.events or attribution.lifetimes
            )
            change = attribution if wanted else None
            gap = (
                dataclasses.replace(attribution, events=False, lifetimes=False) if wanted else None
            )
            gap = gap if gap is not None and gap.stacks else None
            self.baseline_change: MemoryPointComparison | None = baseline.compare(
                attribution=change
            )
            self.candidate_change: MemoryPointComparison | None = candidate.compare(
                attribution=change
            )
            self.start_gap: MemoryPointComparison | None = _gap(
                baseline.start, candidate.start, pool_mapping, device_mapping, gap
            )
            self.end_gap: MemoryPointComparison | None = _gap(
                baseline.end, candidate.end, pool_mapping, device_mapping, gap
            )
            legs = (self.baseline_change, self.candidate_change, self.start_gap, self.end_gap)
            self._attributions = [leg._attribution for leg in legs if leg._attribution]
        else:
            self.baseline_change = self.candidate_change = None
            self.start_gap = self.end_gap = None

    @property
    def identity_failures(self) -> int:
        """Rows whose identity does not hold (0 unless something is wrong)."""
        return self._native.identity_failures

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(self._native.warnings)

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.to_json()["rows"]

    def _render(self, format: str, include_unchanged: bool, depth: Depth) -> str:
        return self._native.render(format, include_unchanged)

    def to_dict(self) -> dict[str, Any]:
        legs = ("baseline_change", "candidate_change", "start_gap", "end_gap")
        return {
            "kind": "MemoryPhaseComparison",
            **{
                leg: None if getattr(self, leg) is None else getattr(self, leg).to_dict()
                for leg in legs
            },
            "allocator_scope_decomposition": [
                r.to_dict() for r in self.allocator_scope_decomposition
            ],
            "pool_decomposition": [r.to_dict() for r in self.pool_decomposition],
            "device_decomposition": [r.to_dict() for r in self.device_decomposition],
            "warnings": list(self.warnings),
        }

    def _csv_files(self) -> dict[str, str]:
        files = dict(self._native.csv_files())
        if self.end_gap is not None:
            files.update(self.end_gap._native.end_gap_csv_files())
        return files


def compare_phases(
    baseline: MemoryRange,
    candidate: MemoryRange,
    *,
    pool_mapping: Mapping[Any, Any] | None = None,
    device_mapping: Mapping[int, int] | None = None,
    attribution: MemoryAttributionOptions | None = None,
) -> MemoryPhaseComparison:
    """Compares two phases (``run.between(a, b)``), of one run or of two."""
    pools, devices = _mappings(baseline.start, candidate.start, pool_mapping, device_mapping)
    native = _native.compare_phases(
        baseline.start._state,
        baseline.end._state,
        candidate.start._state,
        candidate.end._state,
        pool_mapping=pools,
        device_mapping=devices,
    )
    return MemoryPhaseComparison(
        native, baseline, candidate, pool_mapping, device_mapping, attribution
    )


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
            "allocator_scope_entries": [e.to_dict() for e in self.allocator_scope_entries],
            "pool_entries": [e.to_dict() for e in self.pool_entries],
            "observation_entries": [e.to_dict() for e in self.observation_entries],
            "device_entries": [e.to_dict() for e in self.device_entries],
            "warnings": list(self.warnings),
        }

    def _csv_files(self) -> dict[str, str]:
        return dict(self._native.csv_files())


class MemoryStateReport(_Rendered):
    """One or more snapshots or points, each reported on its own, rendered as one
    document (``tcgd memory summary``)."""

    def __init__(self, points: list[Any]):
        self.points = points

    def _render(self, format: str, include_unchanged: bool, depth: str) -> str:
        return _native.render_memory_summaries(
            [p._state for p in self.points], format, include_unchanged, depth
        )
