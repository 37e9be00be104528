"""The post-grad pass that places probe ops: facts of every candidate node go to the
native selection (config rules), and the selected nodes get ``tcgd::probe_group`` calls,
each right after the last of a group of values that are alive together there, carrying
the sites' identities as a string constant.

Matching (which nodes) is the native config's job; this module only reads facts off the
graph and rewrites it, in the style of Inductor's own small passes.
"""

from __future__ import annotations

import contextlib
import contextvars
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

from torch_cudagraph_debug import _native
from torch_cudagraph_debug._native import TensorSite
from torch_cudagraph_debug._probe_op import (
    NEEDS_MUTABLE_TOKEN,
    PROBE_OPS,
    probe_group_op,
    probe_group_token_op,
)
from torch_cudagraph_debug._torch_bridge import dtype_name
from torch_cudagraph_debug.fx_passes.provenance import EagerKey, eager_counterparts

# Set by the tcgd backend around each graph's compilation (it knows whether Inductor is
# compiling a forward, backward or inference graph); None under a plain torch.compile.
GRAPH_KIND: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "tcgd_graph_kind", default=None
)

# Ops whose outputs Inductor materialises in memory anyway (extern kernels, fallbacks):
# probing them does not change what the compiled graph computes.
_MATERIALIZED_OPS = (
    "aten.mm",
    "aten.addmm",
    "aten.bmm",
    "aten.baddbmm",
    "aten.convolution",
    "aten._scaled_dot_product",
    "aten._flash_attention",
    "aten._efficient_attention",
    "aten._scaled_mm",
    "aten._int_mm",
)


@dataclass
class GraphDecisions:
    """Everything the pass decided for one compiled graph (what ``explain`` shows)."""

    graph_kind: str
    compile_id: str | None
    decisions: list[dict[str, Any]] = field(default_factory=list)
    # Per selected site id: the site its probe records (what the graph's probe op carries).
    sites: dict[str, TensorSite] = field(default_factory=dict)
    # Per selected site id: where the eager model computes the same value (its
    # ``EagerKey``), or why it has no counterpart there (fx_passes/provenance.py).
    counterparts: dict[str, EagerKey | str] = field(default_factory=dict)
    # Per selected site id: the value's shape, when the graph knows it statically.
    shapes: dict[str, tuple[int, ...] | None] = field(default_factory=dict)

    @property
    def selected(self) -> list[dict[str, Any]]:
        return [d for d in self.decisions if d["selected"]]

    @property
    def rejected(self) -> list[dict[str, Any]]:
        return [d for d in self.decisions if not d["selected"]]


def graph_kind_of(graph: torch.fx.Graph) -> str:
    """The kind of graph being compiled: from the backend when it told us, else from the
    graph itself (backward graphs take tangents; a graph compiled with grad disabled is
    an inference graph)."""
    kind = GRAPH_KIND.get()
    if kind is not None:
        return kind
    placeholders = [n.name for n in graph.nodes if n.op == "placeholder"]
    if any(name.startswith("tangents") for name in placeholders):
        return "backward"
    return "forward" if torch.is_grad_enabled() else "inference"


@contextlib.contextmanager
def graph_kind(kind: str) -> Iterator[None]:
    token = GRAPH_KIND.set(kind)
    try:
        yield
    finally:
        GRAPH_KIND.reset(token)


def _compile_id() -> str | None:
    with contextlib.suppress(Exception):
        compile_id = torch._guards.CompileContext.current_compile_id()
        return None if compile_id is None else str(compile_id)
    return None


def _tensor_of(node: torch.fx.Node) -> torch.Tensor | None:
    val = node.meta.get("val")
    return val if isinstance(val, torch.Tensor) else None


def _op_name(node: torch.fx.Node) -> str:
    target = node.target
    if target is operator.getitem and node.args and isinstance(node.args[0], torch.fx.Node):
        return f"{_op_name(node.args[0])}[{node.args[1]}]"
    return (
        str(target)
        if isinstance(target, torch._ops.OpOverload)
        else getattr(target, "__name__", str(target))
    )


def _module_path(node: torch.fx.Node) -> str | None:
    stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack")
    if not stack:
        return None
    innermost = list(stack.values())[-1]
    return innermost[0] if isinstance(innermost, tuple | list) else str(innermost)


def _numel(t: torch.Tensor) -> int | None:
    try:
        return int(t.numel())
    except Exception:  # symbolic sizes: unknown until run time
        return None


def node_facts(node: torch.fx.Node, kind: str) -> dict[str, Any]:
    """What the selection needs to know about one node."""
    t = _tensor_of(node)
    return {
        "graph_kind": kind,
        "node_name": node.name,
        "op": _op_name(node),
        "module_path": _module_path(node),
        "stack_trace": node.meta.get("stack_trace"),
        "dtype": dtype_name(t.dtype) if t is not None else None,
        "numel": _numel(t) if t is not None else None,
        "is_tensor": t is not None and t.layout is torch.strided,
    }


def _candidates(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    return [n for n in graph.nodes if n.op == "call_function" and n.target not in PROBE_OPS]


# Values one probe op takes at most (one summary launch on the device).
GROUP_LIMIT = _native.MAX_SITES_PER_LAUNCH
# Bytes by which a probe group may raise the graph's estimated peak memory (see
# group_sites).
GROUP_EXTENSION = 16 << 20


# Ops whose output shares its input's memory although their schemas do not say so
# (linear on 3-d inputs ends in `_unsafe_view`, a reshape of a contiguous value is a view).
_ALIASING_OPS = ("aten._unsafe_view", "aten.reshape", "aten.alias")


def _aliases_input(node: torch.fx.Node) -> bool:
    target = node.target
    return (
        target is operator.getitem
        or getattr(target, "is_view", False)
        or _op_name(node).startswith(_ALIASING_OPS)
    )


def _last_use(node: torch.fx.Node, position: dict[torch.fx.Node, int]) -> int:
    """Position of the last node that reads `node`'s memory, through views of it."""
    last = position[node]
    stack, seen = [node], {node}
    while stack:
        for user in stack.pop().users:
            if user in seen or user.target in PROBE_OPS:
                continue
            seen.add(user)
            last = max(last, position.get(user, last))
            if _aliases_input(user):
                stack.append(user)
    return last


def _static_shape(node: torch.fx.Node) -> tuple[int, ...] | None:
    t = _tensor_of(node)
    try:
        return None if t is None else tuple(int(d) for d in t.shape)
    except Exception:  # symbolic sizes: known at run time only
        return None


def _nbytes(node: torch.fx.Node) -> int | None:
    t = _tensor_of(node)
    numel = _numel(t) if t is not None else None
    return None if numel is None else numel * t.element_size()


def _live_bytes(
    graph: torch.fx.Graph,
    position: dict[torch.fx.Node, int],
    selected: set[torch.fx.Node],
) -> list[int]:
    """Estimated bytes of values alive at each node of the graph: the values Inductor keeps
    in memory whatever it fuses (extern kernels' inputs and outputs, the graph's outputs)
    and the selected ones (the probe keeps them in memory), each from the node that makes
    it to its last use. Fused intermediates are left out, so the estimate errs low."""
    delta = [0] * (len(position) + 1)
    for node in graph.nodes:
        if node.op != "call_function" or node.target in PROBE_OPS or _aliases_input(node):
            continue
        if node not in selected and not _materialized_anyway(node):
            continue
        size = _nbytes(node)
        if not size:
            continue
        delta[position[node]] += size
        delta[_last_use(node, position) + 1] -= size
    live, running = [], 0
    for change in delta[:-1]:
        running += change
        live.append(running)
    return live


def _fits(
    group: list[torch.fx.Node],
    end: int,
    last_use: dict[torch.fx.Node, int],
    live: list[int],
    ceiling: int,
) -> bool:
    """Whether a probe op placed after position `end` may read every value of `group`:
    the values whose last use comes earlier stay alive until `end`, and the graph's
    estimated memory must stay at most `ceiling` wherever they do."""
    extended = [m for m in group if last_use[m] < end]
    if not extended:
        return True
    sizes = [_nbytes(m) for m in extended]
    if None in sizes:
        return False  # a symbolic size: its memory cannot be bounded here
    first = min(last_use[m] for m in extended) + 1
    extra = [0] * (end - first + 2)
    for m, size in zip(extended, sizes, strict=True):
        extra[last_use[m] + 1 - first] += size
    running = 0
    for offset in range(end - first + 1):
        running += extra[offset]
        if live[first + offset] + running > ceiling:
            return False
    return True


def group_sites(
    graph: torch.fx.Graph, selected: list[torch.fx.Node], extension_budget: int
) -> list[list[torch.fx.Node]]:
    """Groups selected nodes (graph order) so one probe op after a group's last node takes
    them all (one summary launch on the device: fewer, longer launches cost less). A value
    whose last use comes before that point is kept alive until it (the probe op reads it),
    which the group allows only while the graph's estimated memory (`_live_bytes`) stays
    at most its own peak plus `extension_budget` bytes: probing never changes the graph's
    results and raises its estimated peak memory by a bounded amount."""
    position = {n: i for i, n in enumerate(graph.nodes)}
    last_use = {n: _last_use(n, position) for n in selected}
    live = _live_bytes(graph, position, set(selected))
    ceiling = max(live, default=0) + extension_budget
    groups: list[list[torch.fx.Node]] = []
    for node in selected:
        current = groups[-1] if groups else None
        if (
            current is not None
            and len(current) < GROUP_LIMIT
            and _tensor_of(current[0]).device == _tensor_of(node).device
            and _fits(current, position[node], last_use, live, ceiling)
        ):
            current.append(node)
            continue
        groups.append([node])
    return groups


def _token_for(graph: torch.fx.Graph, like: torch.Tensor) -> torch.fx.Node:
    """A one-element constant of the graph module that the token variant of the probe op
    "mutates" (it never writes it), one per device, read through a get_attr node."""
    module = graph.owning_module
    device = like.device
    name = f"_tcgd_probe_token_{device.type}_{device.index or 0}"
    if not hasattr(module, name):
        # A real tensor even when a fake mode is active around the pass (torch 2.6 runs
        # the differential reference's post-grad passes so): the graph runs with it.
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():
            token = torch.zeros(1, device=device)
        module.register_buffer(name, token, persistent=False)
    existing = next((n for n in graph.nodes if n.op == "get_attr" and n.target == name), None)
    if existing is not None:
        return existing
    with graph.inserting_before(next(iter(graph.nodes))):
        node = graph.get_attr(name)
    # Passes after ours propagate fake tensors: the token's value must be one too.
    fake_mode = getattr(like, "fake_mode", None)
    real = getattr(module, name)
    node.meta["val"] = fake_mode.from_tensor(real) if fake_mode is not None else real
    return node


def _materialized_anyway(node: torch.fx.Node) -> bool:
    """Whether Inductor keeps this value in memory without a probe: an extern kernel's
    output or input, or a value the graph returns. Otherwise a probe forces it out of a fused
    kernel, which can change the rounding of what follows (the observer effect)."""
    if _op_name(node).startswith(_MATERIALIZED_OPS):
        return True
    return any(
        user.op == "output"
        or (user.op == "call_function" and _op_name(user).startswith(_MATERIALIZED_OPS))
        for user in node.users
    )


def site_description(node: torch.fx.Node, decision: dict[str, Any], kind: str) -> TensorSite:
    module = decision.get("module_path") or ""
    return TensorSite(
        site_id=f"{kind}/{module or '-'}/{node.name}",
        graph_kind=kind,
        node_name=node.name,
        aten_op=decision["op"],
        module_path=module or None,
        source_location=decision.get("source_location"),
        compile_id=_compile_id(),
        materialized_by_probe=not _materialized_anyway(node),
    )


class ProbeInsertionPass(CustomGraphPass):
    """Inserts ``tcgd::probe_group`` calls covering every node the config selects.

    With ``insert=False`` the pass only decides: ``on_graph`` gets every decision and the
    graph is left as it was (what ``tcgd explain`` runs beside the program it explains).

    ``uuid()`` covers the config text, the package version and this pass's source, so the
    FX graph cache serves a graph only to the same probes (and recompiles when they
    change)."""

    def __init__(
        self,
        config: _native.ProbeConfig,
        probe_key: str,
        on_graph: Callable[[GraphDecisions], None] | None = None,
        *,
        insert: bool = True,
    ):
        self.config = config
        self.probe_key = probe_key
        self.on_graph = on_graph
        self.insert = insert

    def __deepcopy__(self, memo: dict[int, Any]) -> ProbeInsertionPass:
        # Inductor deep-copies its config when it snapshots it; the pass is a handle to
        # the session that records, and a copy must still report to it.
        return self

    def __call__(self, graph: torch.fx.Graph) -> None:
        kind = graph_kind_of(graph)
        candidates = _candidates(graph)
        facts = [node_facts(n, kind) for n in candidates]
        decisions = [d.to_dict() for d in self.config.select(facts)]
        record = GraphDecisions(kind, _compile_id())
        sites: dict[torch.fx.Node, TensorSite] = {}
        for node, decision in zip(candidates, decisions, strict=True):
            if decision["selected"]:
                site = site_description(node, decision, kind)
                decision["site"] = site.to_dict()
                sites[node] = site
                record.sites[site.site_id] = site
            record.decisions.append(decision)
        for node, key in eager_counterparts(graph, list(sites), record.compile_id).items():
            site_id = sites[node].site_id
            record.counterparts[site_id] = key
            record.shapes[site_id] = _static_shape(node)
        if self.insert:
            for group in group_sites(graph, list(sites), GROUP_EXTENSION):
                text = TensorSite.encode_group([sites[n] for n in group])
                args = (list(group), self.probe_key, text)
                with graph.inserting_after(group[-1]):
                    if NEEDS_MUTABLE_TOKEN:
                        token = _token_for(graph, _tensor_of(group[0]))
                        probe = graph.call_function(probe_group_token_op, (token, *args))
                    else:
                        probe = graph.call_function(probe_group_op, args)
                probe.meta["val"] = None
        if self.on_graph is not None:
            self.on_graph(record)

    def uuid(self) -> bytes:
        sources = tuple(sorted(str(p) for p in Path(__file__).parent.glob("*.py")))
        return b"|".join(
            [
                self.config.digest.encode(),
                self.probe_key.encode(),
                b"insert" if self.insert else b"decide",
                _native.__version__.encode(),
                get_hash_for_files(sources),
            ]
        )


class ChainedPass(CustomGraphPass):
    """Runs a pass the user already installed, then ours: never replace theirs."""

    def __init__(self, first: Callable[[torch.fx.Graph], None], second: ProbeInsertionPass):
        self.first = first
        self.second = second

    def __deepcopy__(self, memo: dict[int, Any]) -> ChainedPass:
        return self  # see ProbeInsertionPass.__deepcopy__

    def __call__(self, graph: torch.fx.Graph) -> None:
        self.first(graph)
        self.second(graph)

    def uuid(self) -> Any:
        first = self.first.uuid() if isinstance(self.first, CustomGraphPass) else None
        if first is None:
            return None  # an uncacheable user pass keeps the graph uncacheable
        return repr((first, self.second.uuid())).encode()
