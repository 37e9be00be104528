"""Comparisons of memory states: two snapshots or points, two phases, a run's timeline.
The native core pairs, computes and renders; these classes hold the result and write it
out."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.memory_debug import attribution as _attribution
from torch_cudagraph_debug.memory_debug._model import MemoryPoolKey

if TYPE_CHECKING:
    from torch_cudagraph_debug.memory_debug.run import MemoryPhaseRange

Depth = Literal["device", "pool", "stream"]
_FORMATS = {"text": "txt", "json": "json", "csv": "csv", "html": "html"}


@dataclass(frozen=True)
class MemoryDisplayOptions:
    """How many attribution rows text and HTML show (``limit``) and how many frames of
    each stack (``stack_depth``). JSON, CSV and the result objects keep every row."""

    stack_depth: int = 2
    limit: int = 20

    def __post_init__(self) -> None:
        for name in ("stack_depth", "limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"{name} must be an integer >= 1, got {value!r}")


@dataclass(frozen=True)
class MemoryAttributionOptions:
    """Which history analyses to attach to a comparison: ``stacks`` (live blocks by
    allocation stack; works across runs, matched pools only), ``events`` (allocator events
    of the interval; one run or probe, complete history), ``lifetimes`` (recorded as
    requested but not available until that analysis exists)."""

    stacks: bool = False
    events: bool = False
    lifetimes: bool = False
    display: MemoryDisplayOptions = field(default_factory=MemoryDisplayOptions)

    def __post_init__(self) -> None:
        for name in ("stacks", "events", "lifetimes"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInputError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if not isinstance(self.display, MemoryDisplayOptions):
            raise InvalidInputError(
                f"display must be a MemoryDisplayOptions, got {type(self.display).__name__}"
            )


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
        return _attribution.with_sections(
            self._render(format, include_unchanged, depth),
            format,
            self._attributions,
            include_unchanged,
            shown,
            frames,
        )

    def to_text(
        self,
        *,
        include_unchanged: bool = True,
        depth: Depth = "stream",
        limit: int | None = None,
        stack_depth: int | None = None,
    ) -> str:
        return self._full("text", include_unchanged, depth, limit, stack_depth)

    def to_json(self, *, include_unchanged: bool = True, depth: Depth = "stream") -> dict[str, Any]:
        return json.loads(self._full("json", include_unchanged, depth))

    def to_csv(self, *, include_unchanged: bool = True, depth: Depth = "stream") -> str:
        return self._render("csv", include_unchanged, depth)

    def to_html(
        self,
        *,
        include_unchanged: bool = True,
        depth: Depth = "stream",
        limit: int | None = None,
        stack_depth: int | None = None,
    ) -> str:
        return self._full("html", include_unchanged, depth, limit, stack_depth)

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


class MemoryComparison(_Rendered):
    """Two states side by side: the report tree device -> CUDA used -> residual +
    allocator -> pools -> streams, with the address lifecycle where it means something
    (``exact``, ``approximate``, or ``unavailable`` across independent runs)."""

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

    @property
    def attribution_status(self) -> _native.MemoryAttributionStatus:
        """Requested / available / complete, per stacks, events and lifetimes."""
        if self._attribution is None:
            return _attribution.UNREQUESTED_STATUS
        return self._attribution.attribution_status

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

    def __repr__(self) -> str:
        return (
            f"MemoryComparison({self.relation}, lifecycle={self.lifecycle_label}, "
            f"warnings={len(self.warnings)})"
        )


def compare_snapshots(
    reference: Any,
    candidate: Any,
    *,
    pool_mapping: Mapping[Any, Any] | None = None,
    device_mapping: Mapping[int, int] | None = None,
    attribution: MemoryAttributionOptions | None = None,
) -> MemoryComparison:
    """Compares two probe snapshots or points, of one origin or of independent runs.

    Default pools pair automatically; private pools of independent runs pair only through
    ``pool_mapping`` (``{MemoryPoolKey: MemoryPoolKey}``); devices pair by index unless
    ``device_mapping`` says otherwise; streams of independent runs never pair."""
    for what, value in (("reference", reference), ("candidate", candidate)):
        if not hasattr(value, "_state"):
            raise InvalidInputError(
                f"{what} must be a MemoryProbeSnapshot or MemoryPoint, got {type(value).__name__}"
            )
    pools, devices = _mappings(reference, candidate, pool_mapping, device_mapping)
    native = _native.compare_states(
        reference._state, candidate._state, pool_mapping=pools, device_mapping=devices
    )
    found = _attribution.attribute(reference, candidate, native, attribution)
    return MemoryComparison(native, reference, candidate, found, attribution)


def compare_points(
    reference_point: Any,
    candidate_point: Any,
    *,
    pool_mapping: Mapping[Any, Any] | None = None,
    device_mapping: Mapping[int, int] | None = None,
    attribution: MemoryAttributionOptions | None = None,
) -> MemoryComparison:
    """``compare_snapshots`` for recorded points (of one run or of two)."""
    return compare_snapshots(
        reference_point,
        candidate_point,
        pool_mapping=pool_mapping,
        device_mapping=device_mapping,
        attribution=attribution,
    )


class MemoryPhaseComparison(_Rendered):
    """Baseline change, candidate change, start gap and end gap per scope, device and
    pool; every row checks ``end_gap = start_gap + candidate_change - baseline_change``."""

    def __init__(
        self,
        native: _native.MemoryPhaseComparison,
        legs: dict[str, MemoryComparison] | None = None,
        options: MemoryAttributionOptions | None = None,
    ):
        self._native = native
        legs = legs or {}
        # The four legs exist when attribution was requested: events on the two same-run
        # changes only, stacks on all four.
        self.baseline_change: MemoryComparison | None = legs.get("baseline_change")
        self.candidate_change: MemoryComparison | None = legs.get("candidate_change")
        self.start_gap: MemoryComparison | None = legs.get("start_gap")
        self.end_gap: MemoryComparison | None = legs.get("end_gap")
        self._attributions = [leg._attribution for leg in legs.values() if leg._attribution]
        self._options = options

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


def compare_phases(
    baseline_range: MemoryPhaseRange,
    candidate_range: MemoryPhaseRange,
    *,
    pool_mapping: Mapping[Any, Any] | None = None,
    device_mapping: Mapping[int, int] | None = None,
    attribution: MemoryAttributionOptions | None = None,
) -> MemoryPhaseComparison:
    """Compares two phases (``run.between(a, b)``), of one run or of two. With
    ``attribution``, the two changes carry it (events included) and the start and end
    gaps carry stack attribution only."""
    pools, devices = _mappings(
        baseline_range.start, candidate_range.start, pool_mapping, device_mapping
    )
    native = _native.compare_phases(
        baseline_range.start._state,
        baseline_range.end._state,
        candidate_range.start._state,
        candidate_range.end._state,
        pool_mapping=pools,
        device_mapping=devices,
    )
    if attribution is None or not (attribution.stacks or attribution.events):
        return MemoryPhaseComparison(native, options=attribution)
    legs = {
        "baseline_change": compare_snapshots(
            baseline_range.start, baseline_range.end, attribution=attribution
        ),
        "candidate_change": compare_snapshots(
            candidate_range.start, candidate_range.end, attribution=attribution
        ),
    }
    gap_options = dataclasses.replace(attribution, events=False, lifetimes=False)
    for name, ref, cand in (
        ("start_gap", baseline_range.start, candidate_range.start),
        ("end_gap", baseline_range.end, candidate_range.end),
    ):
        legs[name] = compare_snapshots(
            ref,
            cand,
            pool_mapping=pool_mapping,
            device_mapping=device_mapping,
            attribution=gap_options if gap_options.stacks else None,
        )
    return MemoryPhaseComparison(native, legs, attribution)


class MemoryTimeline(_Rendered):
    """Per point, every scope, device and pool with its change since the previous point.
    A pool that disappears stays visible with zero state."""

    def __init__(
        self,
        native: _native.MemoryTimeline,
        point_comparisons: tuple[MemoryComparison, ...] = (),
        options: MemoryAttributionOptions | None = None,
    ):
        self._native = native
        # Attributed adjacent comparisons; empty for the default manifest-only timeline.
        self.point_comparisons = point_comparisons
        self._attributions = [c._attribution for c in point_comparisons if c._attribution]
        self._options = options

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.to_json()["rows"]

    def _render(self, format: str, include_unchanged: bool, depth: Depth) -> str:
        return self._native.render(format, include_unchanged)


class MemoryStateReport(_Rendered):
    """One or more snapshots or points, each reported on its own, rendered as one
    document (``tcgd memory summary``)."""

    def __init__(self, points: list[Any]):
        self.points = points

    def _render(self, format: str, include_unchanged: bool, depth: str) -> str:
        return _native.render_memory_summaries(
            [p._state for p in self.points], format, include_unchanged, depth
        )
