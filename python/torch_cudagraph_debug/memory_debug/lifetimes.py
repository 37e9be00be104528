"""Allocation cohort lifetimes of a recorded run (``run.lifetimes()``): which allocator
blocks were born, released or still held, grouped by device, pool and complete allocation
stack. The replay and the reports are native; this module resolves points and options."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import InvalidInputError, MemoryOwnershipError
from torch_cudagraph_debug.memory_debug.options import MemoryDisplayOptions

if TYPE_CHECKING:
    from torch_cudagraph_debug.memory_debug.run import MemoryPoint, MemoryRun


@dataclass(frozen=True)
class MemoryLifetimeSelection:
    """Which generations to keep: ``all()``, ``active_at(point)`` (not reusable by the
    allocator at that point) or ``born_between(start, end)`` (allocated in ``(start,
    end]``)."""

    kind: str
    points: tuple[Any, ...] = ()

    @classmethod
    def all(cls) -> MemoryLifetimeSelection:
        return cls("all")

    @classmethod
    def active_at(cls, point: str | int | MemoryPoint) -> MemoryLifetimeSelection:
        return cls("active_at", (point,))

    @classmethod
    def born_between(
        cls, start: str | int | MemoryPoint, end: str | int | MemoryPoint
    ) -> MemoryLifetimeSelection:
        return cls("born_between", (start, end))


def _lifetime_display() -> MemoryDisplayOptions:
    return MemoryDisplayOptions(stack_depth=4)


@dataclass(frozen=True)
class MemoryLifetimeOptions:
    """Display options of a lifetime report: ``limit`` cohorts and ``stack_depth`` frames
    in text and HTML (JSON, CSV and ``cohorts`` keep everything)."""

    display: MemoryDisplayOptions = field(default_factory=_lifetime_display)


def _check_display(limit: Any, stack_depth: Any) -> None:
    for name, value in (("limit", limit), ("stack_depth", stack_depth)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidInputError(f"{name} must be a non-negative int, got {value!r}")
        if value is not None and value < 0:
            raise InvalidInputError(f"{name} must be a non-negative int, got {value!r}")


class MemoryAllocationLifetimeAnalysis:
    """The cohorts of one analysed range, with their per-point states, sizes,
    transitions, peaks and terminal totals. ``cohorts`` holds every cohort in report
    order; ``to_text`` / ``to_html`` show ``options.display.limit`` of them."""

    def __init__(
        self,
        native: _native.MemoryAllocationLifetimeAnalysis,
        options: MemoryLifetimeOptions | None = None,
    ):
        self._native = native
        self.options = options or MemoryLifetimeOptions()
        self.source_kind: str = native.source_kind
        self.run_id: str = native.run_id
        self.name: str = native.name
        self.selection_kind: str = native.selection_kind
        self.start_point: str = native.start_point
        self.through_point: str = native.through_point
        self.points: tuple[str, ...] = tuple(native.points)
        self.tracked_generations: int = native.tracked_generations
        self.tracked_bytes: int = native.tracked_bytes
        self.attributed_bytes: int = native.attributed_bytes
        self.instance_stack_coverage: float = native.instance_stack_coverage
        self.warnings: tuple[str, ...] = tuple(native.warnings)

    @property
    def cohorts(self) -> tuple[Any, ...]:
        return self._native.cohorts

    @property
    def history(self) -> tuple[dict[str, Any], ...]:
        return tuple(
            {"device": d, "windows": w, "events": e, "complete": c}
            for d, w, e, c in self._native.history
        )

    def _display(self, limit: int | None, stack_depth: int | None) -> tuple[int, int]:
        _check_display(limit, stack_depth)
        d = self.options.display
        return (
            d.limit if limit is None else limit,
            d.stack_depth if stack_depth is None else stack_depth,
        )

    def to_text(self, *, limit: int | None = None, stack_depth: int | None = None) -> str:
        return self._native.render("text", *self._display(limit, stack_depth))

    def to_html(self, *, limit: int | None = None, stack_depth: int | None = None) -> str:
        return self._native.render("html", *self._display(limit, stack_depth))

    def to_dict(self) -> dict[str, Any]:
        return json.loads(self._native.render("json"))

    def write(
        self,
        output_dir: str | os.PathLike[str],
        *,
        limit: int | None = None,
        stack_depth: int | None = None,
        overwrite: bool = False,
    ) -> list[str]:
        """Writes report.txt/json/html, cohorts.csv, cohort_points.csv,
        size_histograms.csv, size_outcomes.csv and the transition-stack CSVs that have
        rows; a nonempty directory needs ``overwrite=True``."""
        shown, depth = self._display(limit, stack_depth)
        return [
            os.fspath(p) for p in self._native.write(os.fspath(output_dir), shown, depth, overwrite)
        ]

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return repr(self._native)


def _point_index(run: MemoryRun, key: Any) -> int:
    if isinstance(key, bool) or not (isinstance(key, str | int) or hasattr(key, "run_id")):
        raise InvalidInputError(
            f"a point is a label, an index or a MemoryPoint, got {type(key).__name__}"
        )
    try:
        return run.point(key).index
    except MemoryOwnershipError as error:
        raise MemoryOwnershipError(f"{error}; lifetimes replay one run's own history") from None


def lifetimes(
    run: MemoryRun,
    selection: MemoryLifetimeSelection | None,
    through: Any,
    options: MemoryLifetimeOptions | None,
) -> MemoryAllocationLifetimeAnalysis:
    selection = selection if selection is not None else MemoryLifetimeSelection.all()
    if not isinstance(selection, MemoryLifetimeSelection):
        raise InvalidInputError(
            f"selection must be a MemoryLifetimeSelection, got {type(selection).__name__}"
        )
    if options is not None and not isinstance(options, MemoryLifetimeOptions):
        raise InvalidInputError(
            f"options must be a MemoryLifetimeOptions, got {type(options).__name__}"
        )
    if options is not None:
        _check_display(options.display.limit, options.display.stack_depth)
    indexes = [_point_index(run, p) for p in selection.points]
    end = None if through is None else _point_index(run, through)
    native = _native.memory_lifetimes(run._reader, selection.kind, indexes, end)
    return MemoryAllocationLifetimeAnalysis(native, options)
