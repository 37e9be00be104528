"""Progress lines for long compile-plugin work (Inductor compiles take tens of seconds on
a CPU): ``explain`` and ``differential`` say what they are doing while a caller-given
sink is installed; with none, nothing is printed."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

Sink = Callable[[str], None]

_SINK: contextvars.ContextVar[Sink | None] = contextvars.ContextVar("tcgd_progress", default=None)


def report(message: str) -> None:
    """Sends one progress line to the installed sink, if any."""
    sink = _SINK.get()
    if sink is not None:
        sink(message)


@contextlib.contextmanager
def reporting_to(sink: Sink | None) -> Iterator[None]:
    """Installs ``sink`` for the block (None: no progress)."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


# Set while a compilation that was announced runs: the backend and the wrapper of
# Inductor's entry point may both see one compilation start, and it is said once.
_COMPILING: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "tcgd_progress_compiling", default=False
)


@contextlib.contextmanager
def compiling() -> Iterator[None]:
    """Around Inductor's work on a graph Dynamo captured: says that it starts (once, however
    many of our wrappers it passes through)."""
    if _COMPILING.get():
        yield
        return
    compile_id = None
    with contextlib.suppress(Exception):
        import torch

        compile_id = torch._guards.CompileContext.current_compile_id()
    where = "" if compile_id is None else f" (compile id {compile_id})"
    report(f"compiling a graph with Inductor{where}; this can take a while")
    token = _COMPILING.set(True)
    try:
        yield
    finally:
        _COMPILING.reset(token)


def decided(graph_kind: str, compile_id: str | None, selected: int) -> None:
    """Said when the probe pass has decided a graph's sites."""
    report(
        f"probe pass: {graph_kind} graph (compile id {compile_id}): "
        f"{selected} site{'s' if selected != 1 else ''} selected"
    )
