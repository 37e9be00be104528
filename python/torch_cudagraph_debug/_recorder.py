"""The lifecycle tensor and memory recorders share: a native writer that commits points on
its own thread, and ``flush`` / ``preview`` / ``finish`` / ``close`` / ``with`` around it.

Points still queued for a writer thread are flushed when the interpreter exits normally:
a script that never calls ``finish()`` keeps every point it recorded (its run stays
``complete=False``)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import threading
import weakref
from typing import Generic, Protocol, TypeVar

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import InvalidInputError, RecorderStateError

# What a recorder's run says wrote it.
PRODUCER = f"torch-cudagraph-debug {_native.__version__}"

R = TypeVar("R")
Self = TypeVar("Self", bound="RunRecorder")  # type: ignore[type-arg]


class _Writer(Protocol):
    def flush(self) -> None: ...
    def close(self, complete: bool) -> None: ...
    def has_label(self, label: str) -> bool: ...


def json_text(what: str, value: object) -> str:
    """``value`` as JSON text; ``InvalidInputError`` naming ``what`` when it has none."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError) as e:
        raise InvalidInputError(f"{what} must be JSON-serialisable: {e}") from None


def run_root(
    name: object,
    run_dir: str | os.PathLike[str] | None,
    bundle_dir: str | os.PathLike[str] | None,
) -> str | os.PathLike[str] | None:
    """Checks a recorder's run name and where the run goes: ``run_dir`` or its alias
    ``bundle_dir``, not two different ones. Returns the root given (None: none)."""
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"name must be a non-empty string, got {name!r}")
    if run_dir is not None and bundle_dir is not None and run_dir != bundle_dir:
        raise InvalidInputError("give run_dir or its alias bundle_dir, not both")
    return run_dir if run_dir is not None else bundle_dir


class RunRecorder(Generic[R]):
    """Subclasses call ``_start(writer)`` once the native writer exists and implement
    ``_load`` (the run at ``self.path``); ``_check_can_finish`` and ``_release`` are
    hooks for what a subclass holds beyond the writer."""

    _writer: _Writer
    path: str
    _result: R | None
    _closed: bool

    def _start(self, writer: _Writer, path: str) -> None:
        self._writer = writer
        self.path = path
        self._result = None
        self._closed = False
        _flush_at_exit(self)

    def _load(self) -> R:
        raise NotImplementedError

    def _check_can_finish(self) -> None:
        """Raises when the recorder is in a state that cannot finish (an open point)."""

    def _release(self) -> None:
        """Releases what the recorder holds besides its writer; runs once, at the end."""

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise RecorderStateError(
                f"{what}() on a recorder that is already finished or closed; create a new "
                f"{type(self).__name__} for a new run"
            )

    def _check_new_label(self, label: object) -> None:
        """A point's label: a non-empty string that no point of the run has yet."""
        if not isinstance(label, str) or not label:
            raise InvalidInputError(f"point label must be a non-empty string, got {label!r}")
        if self._writer.has_label(label):
            raise InvalidInputError(f"point label {label!r} is already used in this run")

    def flush(self) -> None:
        """Waits until every point recorded so far is durable on disk; raises a failed
        background commit. A no-op once the recorder is finished or closed (both flush
        first)."""
        if not self._closed:
            self._drain()
            self._writer.flush()

    def preview(self) -> R:
        """The run as committed so far (``complete=False`` until ``finish``); flushes
        first."""
        if self._result is not None:
            return self._result
        self.flush()
        return self._load()

    def finish(self) -> R:
        """Commits what is queued, marks the run complete and returns it. Idempotent."""
        if self._result is not None:
            return self._result
        self._check_open("finish")
        self._check_can_finish()
        self._end(complete=True)
        self._result = self._load()
        return self._result

    @property
    def result(self) -> R | None:
        """The finished run, or None before ``finish``."""
        return self._result

    def close(self) -> None:
        """Releases the recorder. A run that was not finished stays ``complete=False``."""
        if not self._closed:
            self._end(complete=False)

    def _drain(self) -> None:
        """Hands the writer what the recorder still holds elsewhere (values on the
        device); runs before every flush and before the writer closes."""

    def _end(self, *, complete: bool) -> None:
        self._closed = True
        try:
            try:
                self._drain()
            finally:
                self._writer.close(complete)
        finally:
            self._release()

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.finish()
        else:
            # Keep what was committed; the run says it did not reach its end.
            self.close()
            with contextlib.suppress(Exception):
                self._result = self._load()


_open: weakref.WeakSet[RunRecorder] = weakref.WeakSet()  # type: ignore[type-arg]
_open_lock = threading.Lock()


def _flush_at_exit(recorder: RunRecorder) -> None:  # type: ignore[type-arg]
    with _open_lock:
        _open.add(recorder)


def _flush_all() -> None:
    with _open_lock:
        recorders = list(_open)
    for recorder in recorders:
        # A failed background commit was the recorder's to report; exit goes on.
        with contextlib.suppress(Exception):
            recorder.flush()


atexit.register(_flush_all)
