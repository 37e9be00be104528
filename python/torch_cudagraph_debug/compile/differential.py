"""Differential runs: the same sites recorded by an eager reference and by the compiled
model, aligned site by site, and the first site where they diverge.

The reference goes through Inductor's whole front half (pre-grad passes, AOT autograd
with Inductor's decompositions, joint-graph passes, partitioning, post-grad passes with
our probe pass) and then runs the post-grad graphs eagerly with ATen kernels instead of
generating code. Its graphs are the compiled graphs, node for node, so every site has the
same name in both runs without the user naming anything.

Because both sides compile with the same config, compile caches cannot tell them apart:
the reference compiles with every cache off, so it is never served a compiled artifact.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

import torch_cudagraph_debug.compile._progress as _progress
from torch_cudagraph_debug.compile.backend import (
    _SESSION_OVERRIDE,
    inductor_patches,
    no_compile_caches,
)
from torch_cudagraph_debug.compile.session import ProbeSession, load_config
from torch_cudagraph_debug.fx_passes.probe_insertion import graph_kind
from torch_cudagraph_debug.tensor_debug.run import TensorRun


def _eager_post_grad_inner(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any):
    """Inductor's inner compile without code generation: the post-grad passes (ours among
    them) run as Inductor runs them, then the graph executes eagerly."""
    from torch._functorch.aot_autograd import make_boxed_func
    from torch._inductor.compile_fx import _recursive_post_grad_passes, fake_tensor_prop
    from torch._inductor.fx_passes.post_grad import view_to_reshape
    from torch._inductor.virtualized import V

    is_inference = bool(kwargs.get("is_inference"))
    kind = "backward" if kwargs.get("is_backward") else "inference" if is_inference else "forward"
    view_to_reshape(gm)
    with torch.no_grad():
        fake_mode = fake_tensor_prop(gm, example_inputs)
    with V.set_fake_mode(fake_mode), graph_kind(kind):
        _recursive_post_grad_passes(gm, is_inference=is_inference)
    gm.recompile()
    return make_boxed_func(gm.forward)


def reference_backend(session: ProbeSession) -> Callable[..., Any]:
    """A torch.compile backend recording ``session``'s sites with eager ATen kernels."""

    def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        from torch._inductor.compile_fx import compile_fx

        patches = inductor_patches(None, {}, session.insertion_pass)
        with _progress.compiling(), no_compile_caches():
            compiled = compile_fx(
                gm, example_inputs, inner_compile=_eager_post_grad_inner, config_patches=patches
            )
        return session.wrap(compiled)

    return backend


@dataclass(frozen=True)
class DifferentialResult:
    """The reference and compiled runs and their comparison (a run comparison: every
    report the comparison engine offers, plus the first diverging site)."""

    reference: TensorRun
    compiled: TensorRun
    comparison: Any

    @property
    def first_divergence(self) -> Any:
        """The first diverging site in execution order (of the earliest point that
        diverges): a ``ComparisonIssue`` whose ``observation`` names the site, or None."""
        return self.comparison.first_issue

    def to_text(self) -> str:
        return self.comparison.to_text()


def differential(
    model: Callable[..., Any],
    batches: Iterable[Sequence[Any]],
    *,
    probes: Any,
    run_dir: str | os.PathLike[str],
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    comparison_options: Any = None,
    extra_inductor_options: dict[str, Any] | None = None,
    overwrite: bool | None = None,
    progress: Callable[[str], None] | None = None,
) -> DifferentialResult:
    """Runs ``model`` on every batch twice, through the eager reference and through the
    compiled model (same config, so the same sites), recording into
    ``run_dir/reference`` and ``run_dir/compiled``, and compares the two runs site by
    site, point by point. Inference only (runs under ``torch.no_grad()``).

    ``overwrite=True`` replaces the two runs of an earlier differential run in
    ``run_dir`` (None: the config's ``[run] overwrite``). ``progress`` receives a line
    per stage (compiling, each call of each side, comparing)."""
    from torch_cudagraph_debug.compile.backend import tcgd_backend
    from torch_cudagraph_debug.tensor_debug.compare import compare_runs

    config = load_config(probes)
    run_dir = os.fspath(run_dir)
    batches = [tuple(b) for b in batches]
    with _progress.reporting_to(progress):
        # One session at a time: both record under the same key (the config's), which
        # the compiled graphs of each carry.
        reference = ProbeSession(
            config, run_dir=os.path.join(run_dir, "reference"), overwrite=overwrite
        )
        torch._dynamo.reset()
        ref_model = torch.compile(model, backend=reference_backend(reference))
        _run_batches("reference", ref_model, batches)
        reference_run = reference.finish()

        compiled = ProbeSession(
            config, run_dir=os.path.join(run_dir, "compiled"), overwrite=overwrite
        )
        torch._dynamo.reset()
        backend_options = {"probes": "<differential>", **(options or {})}
        if mode is not None:
            backend_options["mode"] = mode
        backend = functools.partial(
            tcgd_backend, options={**backend_options, **(extra_inductor_options or {})}
        )
        token = _SESSION_OVERRIDE.set(compiled)
        try:
            _run_batches("compiled", torch.compile(model, backend=backend), batches)
        finally:
            _SESSION_OVERRIDE.reset(token)
        compiled_run = compiled.finish()
        torch._dynamo.reset()
        _progress.report("comparing the reference and compiled runs")
        comparison = compare_runs(reference_run, compiled_run, options=comparison_options)
    return DifferentialResult(reference_run, compiled_run, comparison)


def _run_batches(side: str, model: Callable[..., Any], batches: list[tuple[Any, ...]]) -> None:
    with torch.no_grad():
        for i, batch in enumerate(batches):
            _progress.report(f"{side}: call {i + 1}/{len(batches)}")
            model(*batch)
