"""The eager side of a differential run: the user's model as it runs without
``torch.compile``, with the values of the compiled model's sites taken where eager
computes them.

Dynamo traces the model into graphs of torch-level calls; run eagerly, those calls are
exactly the model's own (same ops, same kernels, no decomposition, no graph pass). Each
graph runs under an FX interpreter, and while a Dynamo node that a compiled site descends
from executes, a dispatch mode sees the ATen ops it dispatches and copies out the ones the
plan names (``fx_passes/provenance.py`` says how a site finds its eager op). The model's
outputs come from a plain ``model(*batch)`` call.
"""

from __future__ import annotations

import contextlib
import copy
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torch_cudagraph_debug._native import TensorSite as Site
from torch_cudagraph_debug.fx_passes.probe_insertion import GraphDecisions
from torch_cudagraph_debug.fx_passes.provenance import EagerKey, normalized_op

# What the eager side takes from one Dynamo node: (op, occurrence) -> site, shape.
NodePlan = dict[tuple[str, int], tuple[Site, tuple[int, ...] | None]]


@dataclass
class EagerPlan:
    """Which eager values stand for which compiled sites, built from the compiled run's
    decisions; and, once the eager side ran, what it could not take."""

    by_node: dict[tuple[str | None, str], NodePlan] = field(default_factory=dict)
    # Site id -> why the site has no eager counterpart (from the graph, or found at run
    # time: a shape that differs).
    unaligned: dict[str, str] = field(default_factory=dict)
    sites: dict[str, Site] = field(default_factory=dict)

    @classmethod
    def from_decisions(cls, decisions: Sequence[GraphDecisions]) -> EagerPlan:
        plan = cls()
        for graph in decisions:
            for site_id, site in graph.sites.items():
                plan.sites[site_id] = site
                key = graph.counterparts.get(site_id, "the probe pass recorded no provenance")
                if isinstance(key, EagerKey):
                    node_plan = plan.by_node.setdefault((key.compile_id, key.node), {})
                    node_plan[(key.op, key.occurrence)] = (site, graph.shapes.get(site_id))
                else:
                    plan.unaligned[site_id] = key
        return plan

    @property
    def aligned(self) -> list[str]:
        """Site ids an eager value stands for."""
        return [
            site.site_id
            for node_plan in self.by_node.values()
            for site, _ in node_plan.values()
            if site.site_id not in self.unaligned
        ]


Take = Callable[[Site, torch.Tensor], None]


class _TakeOpValues(TorchDispatchMode):
    """Copies out the outputs of the ATen ops a plan names while one node runs."""

    def __init__(self, plan: NodePlan, take: Callable[[Site, tuple[int, ...] | None, Any], None]):
        super().__init__()
        self.plan = plan
        self.take = take
        self.calls: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        op = normalized_op(str(func))
        occurrence = self.calls[op]
        self.calls[op] += 1
        wanted = self.plan.get((op, occurrence))
        if wanted is not None:
            self.take(wanted[0], wanted[1], out)
        if isinstance(out, tuple | list):
            for i, item in enumerate(out):
                wanted = self.plan.get((f"{op}[{i}]", occurrence))
                if wanted is not None:
                    self.take(wanted[0], wanted[1], item)
        return out


class _Interpreter(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule, plans: dict[str, NodePlan], take: Any):
        super().__init__(gm)
        self.plans = plans
        self.take = take

    def run_node(self, n: torch.fx.Node) -> Any:
        plan = self.plans.get(n.name)
        if plan is None:
            return super().run_node(n)
        with _TakeOpValues(plan, self.take):
            return super().run_node(n)


def _compile_id() -> str | None:
    with contextlib.suppress(Exception):
        compile_id = torch._guards.CompileContext.current_compile_id()
        return None if compile_id is None else str(compile_id)
    return None


def eager_backend(plan: EagerPlan, take: Take) -> Callable[..., Any]:
    """A torch.compile backend that runs each Dynamo graph eagerly and hands ``take`` the
    value of every planned site (``take(site, value)``)."""

    def take_checked(site: Site, shape: tuple[int, ...] | None, value: Any) -> None:
        site_id = site.site_id
        if not isinstance(value, torch.Tensor):
            plan.unaligned[site_id] = "its eager op returned no tensor"
            return
        if shape is not None and tuple(value.shape) != shape:
            plan.unaligned[site_id] = (
                f"eager computes shape {list(value.shape)} there, the compiled site {list(shape)}"
            )
            return
        take(site, value)

    def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        compile_id = _compile_id()
        plans: dict[str, NodePlan] = defaultdict(dict)
        for (graph_id, node), node_plan in plan.by_node.items():
            if graph_id == compile_id:
                plans[node].update(node_plan)
        interpreter = _Interpreter(gm, dict(plans), take_checked)

        def run(*args: Any) -> Any:
            return interpreter.run(*args)

        return run

    return backend


def to_float64(model: Callable[..., Any]) -> Callable[..., Any]:
    """A float64 copy of ``model`` (a module's floating parameters and buffers); the
    user's model is left as it is."""
    double = copy.deepcopy(model)
    return double.to(torch.float64) if isinstance(double, torch.nn.Module) else double


def as_float64(value: Any) -> Any:
    """A floating tensor as a float64 copy; anything else as it is."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.detach().to(torch.float64)
    return value


def output_tensors(outputs: Any) -> list[torch.Tensor]:
    """The tensors of a model's outputs (any nesting of tuples, lists and dicts; a
    transformers ``ModelOutput`` too), in a fixed order."""
    if hasattr(outputs, "to_tuple") and callable(outputs.to_tuple):
        outputs = outputs.to_tuple()
    leaves = torch.utils._pytree.tree_leaves(outputs)
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def output_site(index: int) -> Site:
    """The site the ``index``-th output tensor of the model is recorded as."""
    return Site(
        site_id=f"output/{index}",
        graph_kind="output",
        node_name=f"output[{index}]",
        aten_op=None,
        module_path=None,
        source_location=None,
        compile_id=None,
        materialized_by_probe=False,
    )
