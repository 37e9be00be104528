"""Points recorded but still queued for a recorder's writer thread are flushed when the
interpreter exits normally: a script that never calls ``finish()`` keeps every point it
recorded (its run stays ``complete=False``), as it would if points were written inline."""

from __future__ import annotations

import atexit
import contextlib
import threading
import weakref
from typing import Protocol


class _Flushable(Protocol):
    def flush(self) -> None: ...


_open: weakref.WeakSet[_Flushable] = weakref.WeakSet()
_lock = threading.Lock()


def flush_at_exit(recorder: _Flushable) -> None:
    """Flushes ``recorder`` at interpreter exit unless it is gone by then."""
    with _lock:
        _open.add(recorder)


def _flush_all() -> None:
    with _lock:
        recorders = list(_open)
    for recorder in recorders:
        # A failed background commit was the recorder's to report; exit goes on.
        with contextlib.suppress(Exception):
            recorder.flush()


atexit.register(_flush_all)
