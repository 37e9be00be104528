"""The torch.compile plugin: probes placed by FX passes on Inductor's post-grad graphs,
chosen by a config file. See ``docs/compile-plugin.md``.

Three ways in:

- ``torch.compile(model, backend="tcgd", options={"probes": "probes.toml", ...})``;
- ``torch_cudagraph_debug.compile.compile(model, probes=..., mode="reduce-overhead")``
  (torch.compile itself refuses ``mode`` together with ``options``);
- ``with torch_cudagraph_debug.compile.probes("probes.toml") as session:`` around a plain
  ``torch.compile`` whose backend your stack already chooses.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch

from torch_cudagraph_debug.compile.session import ProbeSession, load_config, session_for


def tcgd_backend(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
    """The ``backend="tcgd"`` entry point (resolved through ``torch_dynamo_backends``)."""
    from torch_cudagraph_debug.compile.backend import compile_with_probes

    return compile_with_probes(gm, example_inputs, **kwargs)


def compile(
    model: Callable[..., Any],
    *,
    probes: Any,
    mode: str | None = None,
    run_dir: str | os.PathLike[str] | None = None,
    run_name: str | None = None,
    payload: str | None = None,
    options: dict[str, Any] | None = None,
    **compile_kwargs: Any,
) -> Callable[..., Any]:
    """``torch.compile`` with probes, a mode and Inductor options together. The config is
    validated here, before anything compiles."""
    load_config(probes)
    if isinstance(probes, os.PathLike):
        probes = os.fspath(probes)
    all_options = {**(options or {}), "probes": probes}
    for key, value in (("mode", mode), ("run_dir", run_dir), ("run_name", run_name)):
        if value is not None:
            all_options[key] = value
    if payload is not None:
        all_options["payload"] = payload
    backend = functools.partial(tcgd_backend, options=all_options)
    return torch.compile(model, backend=backend, **compile_kwargs)


@contextlib.contextmanager
def probes(
    config: Any,
    *,
    run_dir: str | os.PathLike[str] | None = None,
    run_name: str | None = None,
    payload: str | None = None,
) -> Iterator[ProbeSession]:
    """Installs the probe pass for every Inductor compilation inside the block, chained
    after a custom post-grad pass that is already set (never replacing it). Compilation
    happens at a compiled model's first call: make that call inside the block."""
    import torch._inductor.config as inductor_config

    from torch_cudagraph_debug.fx_passes.probe_insertion import ChainedPass

    session = session_for(load_config(config), run_dir=run_dir, name=run_name, payload=payload)
    existing = inductor_config.post_grad_custom_post_pass
    probe_pass = (
        session.insertion_pass
        if existing is None
        else ChainedPass(existing, session.insertion_pass)
    )
    with inductor_config.patch(post_grad_custom_post_pass=probe_pass):
        yield session


__all__ = ["ProbeSession", "compile", "load_config", "probes", "session_for", "tcgd_backend"]
