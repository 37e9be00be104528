"""What the probe pass decided: per compiled graph, each selected site and why, and each
rejected candidate and why."""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
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


def explain(
    config: Any,
    model: Callable[..., Any],
    *example_inputs: Any,
    mode: str | None = None,
    grad: bool = False,
) -> ExplainReport:
    """Compiles ``model`` with ``config``'s probes (FX graph cache off, so the pass runs),
    calls it once on ``example_inputs`` and returns every decision. Recording goes to a
    throwaway run. With ``grad=True`` the call runs with autograd (forward graphs; call
    backward yourself on a session for backward graphs)."""
    from torch_cudagraph_debug.compile import tcgd_backend
    from torch_cudagraph_debug.compile.backend import _SESSION_OVERRIDE
    from torch_cudagraph_debug.compile.session import ProbeSession, load_config

    config = load_config(config)
    session = ProbeSession(config, run_dir=tempfile.mkdtemp(prefix="tcgd-explain-"))
    options = {"probes": "<explain>"} if mode is None else {"probes": "<explain>", "mode": mode}
    backend = functools.partial(tcgd_backend, options=options)
    context = torch.enable_grad() if grad else torch.no_grad()
    token = _SESSION_OVERRIDE.set(session)
    try:
        with torch._inductor.config.patch(fx_graph_cache=False), context:
            torch._dynamo.reset()
            torch.compile(model, backend=backend)(*example_inputs)
    finally:
        _SESSION_OVERRIDE.reset(token)
        session.finish()
    return ExplainReport(tuple(session.decisions))
