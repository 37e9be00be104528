"""Where the eager model computes the value a post-grad node computes.

A post-grad node keeps its history in its metadata: ``from_node`` leads back to the node of
the graph Dynamo traced (the torch-level call in the user's code), and ``original_aten``
names the ATen op the tracer saw before decompositions. Run eagerly, that Dynamo node
dispatches the same ATen ops in the same order, so ``(compile id, Dynamo node, ATen op,
occurrence)`` names one value in both executions. Nodes a graph pass created after
tracing have no such history, and the inner nodes of a decomposition compute values eager
never materialises: those have no eager counterpart, and say why.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class EagerKey:
    """One value of an eager execution: the ``occurrence``-th output of ATen op ``op``
    (``aten.addmm.default``, ``aten.var_mean.correction[0]`` for a tuple element) while
    Dynamo node ``node`` of graph ``compile_id`` runs."""

    compile_id: str | None
    node: str
    op: str
    occurrence: int


def normalized_op(op: str) -> str:
    """An op name with in-place and out-of-place forms made one: eager dispatches
    ``aten.add_.Tensor`` where the functionalized graph has ``aten.add.Tensor``."""
    parts = op.split(".")
    if len(parts) >= 2 and parts[1].endswith("_") and not parts[1].startswith("_"):
        parts[1] = parts[1][:-1]
    return ".".join(parts)


def _traced_root(node: torch.fx.Node) -> str | None:
    """The name of the Dynamo graph node ``node`` descends from."""
    sources = node.meta.get("from_node")
    name = None
    while sources:
        source = sources[-1]
        name = source.name
        sources = source.from_node
    return name


def _traced_op(node: torch.fx.Node) -> str | None:
    if node.target is operator.getitem and node.args:
        parent = node.args[0]
        if isinstance(parent, torch.fx.Node):
            op = _traced_op(parent)
            return None if op is None else f"{op}[{node.args[1]}]"
    original = node.meta.get("original_aten")
    return None if original is None else normalized_op(str(original))


def eager_counterparts(
    graph: torch.fx.Graph, nodes: list[torch.fx.Node], compile_id: str | None
) -> dict[torch.fx.Node, EagerKey | str]:
    """For each of ``nodes``, its eager counterpart, or the reason it has none."""
    groups: dict[tuple[str, str], list[torch.fx.Node]] = defaultdict(list)
    for n in graph.nodes:
        if n.op != "call_function":
            continue
        root, op = _traced_root(n), _traced_op(n)
        if root is not None and op is not None:
            groups[(root, op)].append(n)
    # A group is every node one traced op became; its outputs are the nodes read from
    # outside it. One eager op call produces one output, so the k-th output of a group
    # is the op's k-th call within the Dynamo node.
    outputs: dict[tuple[str, str], list[torch.fx.Node]] = {}
    for key, members in groups.items():
        inside = set(members)
        outputs[key] = [
            m for m in members if any(u not in inside or u.op == "output" for u in m.users)
        ]
    result: dict[torch.fx.Node, EagerKey | str] = {}
    for node in nodes:
        root, op = _traced_root(node), _traced_op(node)
        if root is None:
            result[node] = "created by a graph pass after tracing: no eager counterpart"
            continue
        if op is None:
            result[node] = "no ATen op recorded for it at tracing: no eager counterpart"
            continue
        produced = outputs.get((root, op), [])
        if node not in produced:
            result[node] = f"inside the decomposition of {op}: eager never materialises it"
            continue
        result[node] = EagerKey(compile_id, root, op, produced.index(node))
    return result
