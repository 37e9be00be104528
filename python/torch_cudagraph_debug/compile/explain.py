"""What the probe pass decided: per compiled graph, each selected site and why, and each
rejected candidate and why.

Explain keeps nothing it records: ``explain()`` compiles the model into a session that
writes summaries only (never payload bytes), into a temporary run removed when it returns;
``deciding()`` (what ``tcgd explain`` runs a program under) records nothing at all, so the
program's own probe sessions record as they would without it."""

from __future__ import annotations

import contextlib
import functools
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from torch_cudagraph_debug.fx_passes.probe_insertion import GraphDecisions


@dataclass(frozen=True)
class ExplainReport:
    graphs: tuple[GraphDecisions, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "graphs": [
                {
                    "graph_kind": g.graph_kind,
                    "compile_id": g.compile_id,
                    "selected": g.selected,
                    "rejected": g.rejected,
                }
                for g in self.graphs
            ]
        }

    def to_text(self, *, show_rejected: bool = True) -> str:
        if not self.graphs:
            return (
                "no graph was compiled with Inductor under this config: the probe pass "
                "decided nothing"
            )
        lines = []
        for g in self.graphs:
            lines.append(
                f"graph {g.graph_kind} (compile id {g.compile_id}): "
                f"{len(g.selected)} selected, {len(g.rejected)} rejected"
            )
            for d in g.selected:
                site = d["site"]
                effect = "  [materialized by probe]" if site["materialized_by_probe"] else ""
                lines.append(
                    f"  + {d['node_name']:<24} {d['op']:<36} {site['module_path'] or '-':<20} "
                    f"{site['source_location'] or '-'}  ({d['reason']}){effect}"
                )
            if show_rejected:
                for d in g.rejected:
                    lines.append(f"  - {d['node_name']:<24} {d['op']:<36} {d['reason']}")
        if any(d["site"]["materialized_by_probe"] for g in self.graphs for d in g.selected):
            lines.append(
                "materialized by probe: the value lives inside a fused kernel without the probe; "
                "observing it stores it to memory, which can change the rounding of what "
                "follows (e.g. a multiply-add no longer contracted into one FMA)."
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()


@contextlib.contextmanager
def throwaway_session(config: Any) -> Iterator[Any]:
    """A session that records summaries only into a temporary run, which is removed when
    the block ends; compiles inside the block use no compile cache, so the pass runs on
    every graph (and its decisions are seen)."""
    from torch_cudagraph_debug.compile.backend import no_compile_caches
    from torch_cudagraph_debug.compile.session import ProbeSession, load_config

    config = load_config(config)
    root = tempfile.mkdtemp(prefix="tcgd-explain-")
    try:
        session = ProbeSession(config, run_dir=f"{root}/run", payload="summary")
        try:
            with no_compile_caches():
                yield session
        finally:
            session.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def deciding(config: Any) -> Iterator[list[GraphDecisions]]:
    """Every Inductor compilation inside the block runs ``config``'s selection on its
    post-grad graphs (after a custom pass already installed, and before the pass of a
    ``backend="tcgd"`` compilation) and appends what it decided to the list the block gets.
    The graphs are left as they were: no probe is inserted and nothing is recorded, so a
    program that records with probes of its own (``tcgd_compile.compile``, ``explain()``,
    differential runs) records exactly what it records without this block. Compile caches
    are off inside the block, so every graph is compiled and decided."""
    import torch._inductor.compile_fx as compile_fx_module
    import torch._inductor.config as inductor_config

    import torch_cudagraph_debug.compile._progress as _progress
    from torch_cudagraph_debug.compile.backend import no_compile_caches
    from torch_cudagraph_debug.compile.session import load_config
    from torch_cudagraph_debug.fx_passes.probe_insertion import ChainedPass, ProbeInsertionPass

    decisions: list[GraphDecisions] = []

    def on_graph(graph: GraphDecisions) -> None:
        decisions.append(graph)
        _progress.decided(graph.graph_kind, graph.compile_id, len(graph.selected))

    decide = ProbeInsertionPass(load_config(config), "<explain>", on_graph, insert=False)
    existing = inductor_config.post_grad_custom_post_pass
    chained = decide if existing is None else ChainedPass(existing, decide)
    original = compile_fx_module.compile_fx

    # Dynamo's `inductor` backend looks compile_fx up at every compilation (see
    # backend.delimiting_compiles): wrapped here only to say when a compilation starts.
    @functools.wraps(original)
    def compile_fx(*args: Any, **kwargs: Any) -> Any:
        with _progress.compiling():
            return original(*args, **kwargs)

    compile_fx_module.compile_fx = compile_fx
    try:
        with no_compile_caches(), inductor_config.patch(post_grad_custom_post_pass=chained):
            yield decisions
    finally:
        if compile_fx_module.compile_fx is compile_fx:
            compile_fx_module.compile_fx = original


def explain(
    config: Any,
    model: Callable[..., Any],
    *example_inputs: Any,
    mode: str | None = None,
    grad: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ExplainReport:
    """Compiles ``model`` with ``config``'s probes (compile caches off, so the pass runs),
    calls it once on ``example_inputs`` and returns every decision. Nothing recorded is
    kept (see the module docstring). With ``grad=True`` the call runs with autograd
    (forward graphs; call backward yourself on a session for backward graphs).
    ``progress`` receives a line when compiling starts and per decided graph."""
    import torch_cudagraph_debug.compile._progress as _progress
    from torch_cudagraph_debug.compile.backend import _SESSION_OVERRIDE, tcgd_backend

    options = {"probes": "<explain>"} if mode is None else {"probes": "<explain>", "mode": mode}
    backend = functools.partial(tcgd_backend, options=options)
    context = torch.enable_grad() if grad else torch.no_grad()
    with _progress.reporting_to(progress), throwaway_session(config) as session:
        token = _SESSION_OVERRIDE.set(session)
        try:
            with context:
                torch._dynamo.reset()
                torch.compile(model, backend=backend)(*example_inputs)
        finally:
            _SESSION_OVERRIDE.reset(token)
    return ExplainReport(tuple(session.decisions))
