"""Allocation cohort lifetimes of a recorded run (``run.lifetimes()``): which allocator
blocks were born, released or still held, grouped by device, pool and complete allocation
stack. The replay and the reports are native; this module resolves points and options."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import InvalidInputError, MemoryOwnershipError
from torch_cudagraph_debug.memory_debug._model import from_native
from torch_cudagraph_debug.memory_debug.options import MemoryLifetimeOptions

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

    @property
    def mode(self) -> str:
        """``all``, ``active_at`` or ``born_between`` (``kind``)."""
        return self.kind

    @property
    def start(self) -> str | int | MemoryPoint | None:
        """The anchor point of ``active_at``, the (excluded) start of ``born_between``;
        ``None`` for ``all``. As given: a label, an index or a point."""
        return self.points[0] if self.points else None

    @property
    def end(self) -> str | int | MemoryPoint | None:
        """The (included) end of ``born_between``; ``None`` otherwise."""
        return self.points[1] if len(self.points) > 1 else None


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

    source_kind: str = from_native(doc="``run``: the analysis replayed a recorded run.")
    run_id: str = from_native(doc="The ``run_id`` of the analysed run.")
    name: str = from_native(doc="The name of the analysed run.")
    selection_kind: str = from_native(doc="``all``, ``active_at`` or ``born_between``.")
    start_point: str = from_native(doc="Label of the first analysed point.")
    through_point: str = from_native(doc="Label of the last analysed point.")
    points: tuple[str, ...] = from_native(tuple, doc="Labels of the analysed points.")
    tracked_generations: int = from_native(doc="Allocation generations tracked.")
    tracked_bytes: int = from_native(
        doc="Bytes of the tracked generations, each generation's size counted once."
    )
    attributed_bytes: int = from_native(
        doc="Bytes of the tracked generations that have allocation frames."
    )
    instance_stack_coverage: float = from_native(
        doc="``attributed_bytes / tracked_bytes`` (1.0 when nothing is tracked)."
    )
    warnings: tuple[str, ...] = from_native(tuple)

    def __init__(
        self,
        native: _native.MemoryAllocationLifetimeAnalysis,
        options: MemoryLifetimeOptions | None = None,
        selected: tuple[str, ...] = (),
    ):
        self._native = native
        self.options = options or MemoryLifetimeOptions()
        # Labels of the selection's points (anchor, or start and end), as the run
        # resolved them; the native result keeps only the range it replayed.
        self._selected = selected

    # Reference names of the identity and range.

    @property
    def source_id(self) -> str:
        """``run_id``: which run the cohorts come from."""
        return self.run_id

    @property
    def source_name(self) -> str:
        """``name``: the analysed run's name."""
        return self.name

    @property
    def start(self) -> str:
        """``start_point``: label of the first analysed point (the range start)."""
        return self.start_point

    @property
    def end(self) -> str:
        """``through_point``: label of the last analysed point."""
        return self.through_point

    @property
    def active_at(self) -> str | None:
        """Label of the ``active_at`` anchor (where the analysed range starts); ``None``
        for another selection."""
        return self.start_point if self.selection_kind == "active_at" else None

    @property
    def born_between(self) -> tuple[str, str] | None:
        """Labels ``(start, end)`` of a ``born_between`` selection (births in
        ``(start, end]``); ``None`` for another selection."""
        if self.selection_kind != "born_between" or len(self._selected) != 2:
            return None
        return self._selected[0], self._selected[1]

    # History and coverage.

    @property
    def history(self) -> tuple[dict[str, Any], ...]:
        """Per device: history ``windows`` replayed, ``events`` read, ``complete``."""
        return tuple(
            {"device": d, "windows": w, "events": e, "complete": c}
            for d, w, e, c in self._native.history
        )

    @property
    def history_requested(self) -> bool:
        """Always ``True``: a lifetime analysis is a replay of allocator history."""
        return True

    @property
    def history_available(self) -> bool:
        """Always ``True`` for a result: the analysis raises
        ``MemoryHistoryDisabledError`` (or a sibling) when the history it needs is
        missing, instead of returning."""
        return True

    @property
    def history_complete(self) -> bool:
        """Every device's history covered the analysed range without a gap."""
        return all(c for _, _, _, c in self._native.history)

    @property
    def total_instance_bytes(self) -> int:
        """``tracked_bytes``: each tracked generation's size counted once (not a
        point-in-time peak)."""
        return self.tracked_bytes

    @property
    def attributed_instance_bytes(self) -> int:
        """``attributed_bytes``: the part of ``total_instance_bytes`` whose generations
        have allocation frames."""
        return self.attributed_bytes

    @property
    def display_limit(self) -> int:
        """Cohorts text and HTML show by default (``options.display.limit``)."""
        return self.options.display.limit

    @property
    def display_stack_depth(self) -> int:
        """Frames per stack text and HTML show by default
        (``options.display.stack_depth``)."""
        return self.options.display.stack_depth

    # Cohorts and their flat rows (the lines of the CSV files).

    @property
    def cohorts(self) -> tuple[Any, ...]:
        return self._native.cohorts

    def _per_cohort(self, rows_of: str) -> list[dict[str, Any]]:
        return [
            row.to_row(cohort.cohort_id)
            for cohort in self.cohorts
            for row in getattr(cohort, rows_of)
        ]

    def cohort_rows(self) -> list[dict[str, Any]]:
        """``cohorts.csv`` as dicts, one per cohort in report order."""
        return [cohort.to_row() for cohort in self.cohorts]

    def point_rows(self) -> list[dict[str, Any]]:
        """``cohort_points.csv`` as dicts: each cohort at each analysed point."""
        return self._per_cohort("points")

    def size_rows(self) -> list[dict[str, Any]]:
        """``size_histograms.csv`` as dicts: each cohort's generations by size."""
        return self._per_cohort("size_histogram")

    def size_outcome_rows(self) -> list[dict[str, Any]]:
        """``size_outcomes.csv`` as dicts: each cohort's sizes by terminal state."""
        return self._per_cohort("size_outcomes")

    def birth_rows(self) -> list[dict[str, Any]]:
        """``birth_stacks.csv`` as dicts: births per cohort and interval."""
        return self._per_cohort("births")

    def free_request_rows(self) -> list[dict[str, Any]]:
        """``free_request_stacks.csv`` as dicts."""
        return self._per_cohort("free_requests")

    def free_completion_rows(self) -> list[dict[str, Any]]:
        """``free_completion_stacks.csv`` as dicts."""
        return self._per_cohort("free_completions")

    # Reports.

    def _display(self, limit: int | None, stack_depth: int | None) -> tuple[int, int]:
        _check_display(limit, stack_depth)
        d = self.options.display
        return (
            d.limit if limit is None else limit,
            d.stack_depth if stack_depth is None else stack_depth,
        )

    def to_text(self, *, limit: int | None = None, stack_depth: int | None = None) -> str:
        return self._native.render("text", *self._display(limit, stack_depth))

    def summary_lines(
        self, *, indent: int = 0, limit: int | None = None, stack_depth: int | None = None
    ) -> list[str]:
        """The text report as lines, each prefixed with ``indent`` spaces (for embedding
        in another report)."""
        if isinstance(indent, bool) or not isinstance(indent, int) or indent < 0:
            raise InvalidInputError(f"indent must be a non-negative int, got {indent!r}")
        text = self.to_text(limit=limit, stack_depth=stack_depth)
        return [" " * indent + line for line in text.splitlines()]

    def to_html(self, *, limit: int | None = None, stack_depth: int | None = None) -> str:
        return self._native.render("html", *self._display(limit, stack_depth))

    def to_dict(self) -> dict[str, Any]:
        return self._native.to_dict()

    def write(
        self,
        output_dir: str | os.PathLike[str],
        *,
        limit: int | None = None,
        stack_depth: int | None = None,
        overwrite: bool = False,
    ) -> dict[str, Path]:
        """Writes report.txt/json/html, cohorts.csv, cohort_points.csv,
        size_histograms.csv, size_outcomes.csv and the transition-stack CSVs that have
        rows; a nonempty directory needs ``overwrite=True``. Returns the paths keyed
        ``text``, ``json``, ``html`` and each CSV file's stem (``cohorts``, ...)."""
        shown, depth = self._display(limit, stack_depth)
        return self._native.write(os.fspath(output_dir), shown, depth, overwrite)

    def write_csv_files(self, root: str | os.PathLike[str]) -> dict[str, Path]:
        """Writes the CSV files alone (``cohorts.csv``, ``cohort_points.csv``,
        ``size_histograms.csv``, ``size_outcomes.csv`` and the transition-stack CSVs that
        have rows) into ``root``, created if missing. Earlier copies of these files are
        replaced and every other file is left alone. Returns the paths by stem."""
        return self._native.write_csv_files(os.fspath(root))

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return repr(self._native)


def _resolve(run: MemoryRun, key: Any) -> MemoryPoint:
    if isinstance(key, bool) or not (isinstance(key, str | int) or hasattr(key, "run_id")):
        raise InvalidInputError(
            f"a point is a label, an index or a MemoryPoint, got {type(key).__name__}"
        )
    try:
        return run.point(key)
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
    chosen = [_resolve(run, p) for p in selection.points]
    end = None if through is None else _resolve(run, through).index
    native = _native.memory_lifetimes(run._reader, selection.kind, [p.index for p in chosen], end)
    return MemoryAllocationLifetimeAnalysis(native, options, tuple(p.label for p in chosen))
