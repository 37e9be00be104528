"""Comparisons of memory states: two snapshots or points, two phases, a run's timeline.
The native core pairs, computes and renders; these classes hold the result and write it
out."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import CrossRunError, InvalidInputError
from torch_cudagraph_debug.memory_debug._model import MemoryPoolKey

if TYPE_CHECKING:
    from torch_cudagraph_debug.memory_debug.run import MemoryPhaseRange

Depth = Literal["device", "pool", "stream"]
_FORMATS = {"text": "txt", "json": "json", "csv": "csv", "html": "html"}


@dataclass(frozen=True)
class MemoryDisplayOptions:
    stack_depth: int = 2
    limit: int = 20


@dataclass(frozen=True)
class MemoryAttributionOptions:
    """Which history analyses to attach to a comparison. Stack, event and lifetime
    attribution are not part of this release: a request is recorded in
    ``attribution_status`` as requested but not available, with a warning."""

    stacks: bool = False
    events: bool = False
    lifetimes: bool = False
    display: MemoryDisplayOptions = field(default_factory=MemoryDisplayOptions)


def _attribution_status(
    attribution: MemoryAttributionOptions | None, same_origin: bool
) -> tuple[dict[str, dict[str, bool]], list[str]]:
    options = attribution or MemoryAttributionOptions()
    status, notes = {}, []
    for kind in ("stacks", "events", "lifetimes"):
        requested = bool(getattr(options, kind))
        if requested and kind in ("events", "lifetimes") and not same_origin:
            raise CrossRunError(
                f"{kind} attribution compares allocator history, which only exists inside one "
                "run; compare points of one run, or drop the request for independent runs"
            )
        status[kind] = {"requested": requested, "available": False, "complete": False}
        if requested:
            notes.append(f"{kind} attribution was requested but is not available in this release")
    return status, notes


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

    def _render(self, format: str, include_unchanged: bool, depth: Depth) -> str:
        raise NotImplementedError

    def to_text(self, *, include_unchanged: bool = True, depth: Depth = "stream") -> str:
        return self._render("text", include_unchanged, depth)

    def to_json(self, *, include_unchanged: bool = True, depth: Depth = "stream") -> dict[str, Any]:
        return json.loads(self._render("json", include_unchanged, depth))

    def to_csv(self, *, include_unchanged: bool = True, depth: Depth = "stream") -> str:
        return self._render("csv", include_unchanged, depth)

    def to_html(self, *, include_unchanged: bool = True, depth: Depth = "stream") -> str:
        return self._render("html", include_unchanged, depth)

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
            (f"{name}.{_FORMATS[f]}", self._render(f, include_unchanged, depth)) for f in formats
        ]
        # Every format's file is this report's own: replacing it must not leave a stale
        # file of a format that is not written this time.
        own = [f"{name}.{extension}" for extension in _FORMATS.values()]
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
        attribution_status: dict[str, dict[str, bool]],
        notes: list[str],
    ):
        self._native = native
        self.reference = reference
        self.candidate = candidate
        self.attribution_status = attribution_status
        self._notes = notes

    @property
    def relation(self) -> str:
        """``same_origin`` (one run or probe) or ``cross_run``."""
        return self._native.relation

    @property
    def lifecycle_label(self) -> str:
        return self._native.lifecycle_label

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(self._native.warnings) + tuple(self._notes)

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
    same = reference._state.identity()["origin"] == candidate._state.identity()["origin"]
    status, notes = _attribution_status(attribution, same)
    native = _native.compare_states(
        reference._state, candidate._state, pool_mapping=pools, device_mapping=devices
    )
    return MemoryComparison(native, reference, candidate, status, notes)


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

    def __init__(self, native: _native.MemoryPhaseComparison):
        self._native = native

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
) -> MemoryPhaseComparison:
    """Compares two phases (``run.between(a, b)``), of one run or of two."""
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
    return MemoryPhaseComparison(native)


class MemoryTimeline(_Rendered):
    """Per point, every scope, device and pool with its change since the previous point.
    A pool that disappears stays visible with zero state."""

    def __init__(self, native: _native.MemoryTimeline):
        self._native = native

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
