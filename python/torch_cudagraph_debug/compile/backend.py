"""The ``tcgd`` torch.compile backend: Inductor (CUDA Graph Trees when the mode asks for
them) with the probe insertion pass installed, every other option passed through."""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import Any

import torch

from torch_cudagraph_debug.compile.session import load_config, session_for
from torch_cudagraph_debug.errors import ConfigError
from torch_cudagraph_debug.fx_passes.probe_insertion import ChainedPass, graph_kind

# Set by explain(): compile into that session rather than the process's session for the
# config.
_SESSION_OVERRIDE: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "tcgd_session_override", default=None
)

# Options the backend takes for itself; everything else is an Inductor option.
OUR_OPTIONS = ("probes", "run_dir", "run_name", "payload", "mode")


def _kind_aware_inner_compile(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs):
    """Inductor's inner compile, told which kind of graph it compiles so the pass can select
    by graph kind (and name sites by it)."""
    from torch._inductor.compile_fx import compile_fx_inner

    if kwargs.get("is_backward"):
        kind = "backward"
    elif kwargs.get("is_inference"):
        kind = "inference"
    else:
        kind = "forward"
    with graph_kind(kind):
        return compile_fx_inner(gm, example_inputs, **kwargs)


def inductor_patches(mode: str | None, options: dict[str, Any], probe_pass: Any) -> dict[str, Any]:
    """Inductor config for one compilation: the mode's options, the user's options, and
    our pass chained after any custom post-grad pass already configured."""
    import torch._inductor.config as inductor_config

    patches: dict[str, Any] = {}
    if mode is not None and mode != "default":
        patches.update(torch._inductor.list_mode_options(mode))
    patches.update(options)
    existing = patches.get("post_grad_custom_post_pass", inductor_config.post_grad_custom_post_pass)
    patches["post_grad_custom_post_pass"] = (
        probe_pass if existing is None else ChainedPass(existing, probe_pass)
    )
    return patches


def compile_with_probes(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> Any:
    from torch._inductor.compile_fx import compile_fx

    options = dict(options or {})
    if "probes" not in options:
        raise ConfigError(
            "backend 'tcgd' needs options={'probes': <path to a TOML config or a dict>}; "
            "see docs/compile-plugin.md"
        )
    mode = options.pop("mode", mode)
    probes = options.pop("probes")
    run_dir = options.pop("run_dir", None)
    run_name = options.pop("run_name", None)
    payload = options.pop("payload", None)
    session = _SESSION_OVERRIDE.get() or session_for(
        load_config(probes), run_dir=run_dir, name=run_name, payload=payload
    )
    patches = inductor_patches(mode, options, session.insertion_pass)
    compiled = compile_fx(
        gm, example_inputs, inner_compile=_kind_aware_inner_compile, config_patches=patches
    )
    return session.wrap(compiled)
