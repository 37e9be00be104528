"""What every memory result shares: writing itself out as text, JSON, CSV and HTML, with
its attribution sections, into files or a report directory by the package's rules."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

import torch_cudagraph_debug.memory_debug.attribution as _attribution
from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.memory_debug.options import MemoryAttributionOptions

Depth = Literal["device", "pool", "stream"]
_FORMATS = {"text": "txt", "json": "json", "csv": "csv", "html": "html"}
_DEPTHS = ("device", "pool", "stream")


def _check_depth(depth: str) -> None:
    if depth not in _DEPTHS:
        raise InvalidInputError(f"depth must be 'device', 'pool' or 'stream', got {depth!r}")


class _Rendered:
    """Writing a result out in every format."""

    # Attributions whose sections the report carries, and the options they came with.
    _attributions: tuple[Any, ...] | list[Any] = ()
    _options: MemoryAttributionOptions | None = None

    @property
    def display_limit(self) -> int:
        """Attribution rows (and cohorts) that text and HTML show by default: the
        attribution options' ``display.limit`` (20 without options)."""
        return _attribution.display_of(self._options, None, None)[0]

    @property
    def display_stack_depth(self) -> int:
        """Stack frames per attribution row that text and HTML show by default: the
        attribution options' ``display.stack_depth`` (2 without options)."""
        return _attribution.display_of(self._options, None, None)[1]

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
        # The attribution sections join the report natively (text appended, HTML before
        # </body>, JSON under "attribution"; CSV rows have files of their own).
        out = _native.with_attribution_sections(
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

    def _checked(
        self,
        format: str,
        include_unchanged: bool,
        depth: Depth,
        limit: int | None = None,
        stack_depth: int | None = None,
    ) -> str:
        """``_full`` for the public entry points, which refuse an unknown ``depth`` before
        rendering (or writing) anything."""
        _check_depth(depth)
        return self._full(format, include_unchanged, depth, limit, stack_depth)

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
        return self._checked("text", include_unchanged, depth, limit, stack_depth)

    def to_json(self, *, include_unchanged: bool = True, depth: Depth = "stream") -> str:
        """The report tree as JSON text, as every result's ``to_json()`` is
        (``report_tree()`` gives it parsed; ``to_dict()`` is the reference's structured
        form)."""
        return self._checked("json", include_unchanged, depth)

    def report_tree(
        self, *, include_unchanged: bool = True, depth: Depth = "stream"
    ) -> dict[str, Any]:
        """The report tree (``to_json()``) as a dict: devices, pools and streams with
        both sides' statistics, and the attribution sections."""
        return json.loads(self.to_json(include_unchanged=include_unchanged, depth=depth))

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
        return self._checked("html", include_unchanged, depth, limit, stack_depth)

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
        result's CSV files into ``output_dir``; returns their paths keyed by format
        (``text``, ``json``, ``html``) and each CSV file by its stem (``pools`` for
        ``pools.csv``). The depth is checked before anything is created; a directory that
        already holds anything needs ``overwrite=True`` (:class:`ReportExistsError`
        otherwise), which replaces only this report's files."""
        files = {
            "report.txt": self._checked("text", include_unchanged, depth, limit, stack_depth),
            "report.json": json.dumps(self.to_dict(), indent=2) + "\n",
            "report.html": self._checked("html", include_unchanged, depth, limit, stack_depth),
        }
        files.update(self._csv_files())
        files.update(_attribution.csv_files(self._attributions, include_unchanged))
        own = [*files, *_native.MEMORY_ROW_CSV_FILES, *_attribution.ATTRIBUTION_CSV_FILES]
        return _native.write_report_files(
            os.fspath(output_dir), list(files.items()), sorted(set(own)), overwrite
        )

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
        written = _native.write_report_files(os.fspath(directory), files, own, overwrite)
        return [os.fspath(p) for p in written.values()]

    def __str__(self) -> str:
        return self.to_text()


class MemoryStateReport(_Rendered):
    """One or more snapshots or points, each reported on its own, rendered as one
    document (``tcgd memory summary``)."""

    def __init__(self, points: list[Any]):
        self.points = points

    def _render(self, format: str, include_unchanged: bool, depth: str) -> str:
        return _native.render_memory_summaries(
            [p._state for p in self.points], format, include_unchanged, depth
        )
