"""The torch.compile plugin: probes placed by FX passes on Inductor's post-grad graphs,
chosen by a config file. See ``docs/compile-plugin.md``.

Three ways in:

- ``torch.compile(model, backend="tcgd", options={"probes": "probes.toml", ...})``;
- ``torch_cudagraph_debug.compile.compile(model, probes=..., mode="reduce-overhead")``
  (torch.compile itself refuses ``mode`` together with ``options``);
- ``with torch_cudagraph_debug.compile.probes("probes.toml") as session:`` around a plain
  ``torch.compile`` whose backend your stack already chooses.

``session_of(compiled)`` is the session a model compiled by the first two records into
(``flush``, ``preview``, ``finish``).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.compile import backend as _backend
from torch_cudagraph_debug.compile.backend import session_for_options, tcgd_backend
from torch_cudagraph_debug.compile.session import (
    ProbeSession,
    load_config,
    session_for,
    session_for_compile,
)


def compile(
    model: Callable[..., Any],
    *,
    probes: Any,
    mode: str | None = None,
    run_dir: str | os.PathLike[str] | None = None,
    run_name: str | None = None,
    payload: str | None = None,
    overwrite: bool | None = None,
    options: dict[str, Any] | None = None,
    **compile_kwargs: Any,
) -> Callable[..., Any]:
    """``torch.compile`` with probes, a mode and Inductor options together. The config is
    validated here, before anything compiles. ``overwrite=True`` replaces a run already at
    the run's path (None: the config's ``[run] overwrite``)."""
    load_config(probes)
    if run_name is not None:
        _native.check_run_name(run_name)
    if isinstance(probes, os.PathLike):
        probes = os.fspath(probes)
    all_options = {**(options or {}), "probes": probes}
    for key, value in (
        ("mode", mode),
        ("run_dir", run_dir),
        ("run_name", run_name),
        ("payload", payload),
        ("overwrite", overwrite),
    ):
        if value is not None:
            all_options[key] = value
    # The session exists before the first call, so `session_of` works at once and a run
    # directory that is taken fails here, not inside torch's compile error.
    session_for_options(all_options)
    backend = functools.partial(tcgd_backend, options=all_options)
    compiled = torch.compile(model, backend=backend, **compile_kwargs)
    # session_of() finds the options here without reading Dynamo's wrappers. Set on the
    # wrapper itself: an OptimizedModule forwards attribute writes to the user's module.
    with contextlib.suppress(AttributeError, TypeError):
        object.__setattr__(compiled, "_tcgd_options", all_options)
    return compiled


def session_of(compiled: Callable[..., Any]) -> ProbeSession:
    """The session a model compiled with ``backend="tcgd"`` or ``compile()`` records into
    (a module or a function): ``flush()``, ``preview()``, ``finish()``. Raises
    ``InvalidInputError`` for anything else."""
    return _backend.session_of(compiled)


@contextlib.contextmanager
def probes(
    config: Any,
    *,
    run_dir: str | os.PathLike[str] | None = None,
    run_name: str | None = None,
    payload: str | None = None,
    overwrite: bool | None = None,
) -> Iterator[ProbeSession]:
    """Installs the probe pass for every Inductor compilation inside the block, chained
    after a custom post-grad pass that is already set (never replacing it), and makes
    each call of a model compiled in the block a point. Compilation happens at a compiled
    model's first call: make that call inside the block."""
    session = session_for_compile(
        load_config(config), run_dir=run_dir, name=run_name, payload=payload, overwrite=overwrite
    )
    with installed(session):
        yield session


@contextlib.contextmanager
def installed(session: ProbeSession) -> Iterator[None]:
    """``session``'s pass on every Inductor compilation inside the block, and its points
    delimited by each call of what those compilations return."""
    import torch._inductor.config as inductor_config

    from torch_cudagraph_debug.fx_passes.probe_insertion import ChainedPass

    existing = inductor_config.post_grad_custom_post_pass
    probe_pass = (
        session.insertion_pass
        if existing is None
        else ChainedPass(existing, session.insertion_pass)
    )
    with (
        inductor_config.patch(post_grad_custom_post_pass=probe_pass),
        _backend.delimiting_compiles(session),
    ):
        yield


__all__ = [
    "ProbeSession",
    "compile",
    "load_config",
    "probes",
    "session_for",
    "session_of",
    "tcgd_backend",
]
