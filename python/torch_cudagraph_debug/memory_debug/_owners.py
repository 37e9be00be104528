"""Who owns each private pool, and the allocator's peaks, read at point time.

Pool owners come from torch internals that change between releases (the Graph Trees
manager of ``torch._inductor.cudagraph_trees``: its pool handle, its tree of recorded
nodes, the mode and compile id of each function). Everything is read defensively: a
torch whose internals moved gives no owners and one warning, never an error, because a
point must not fail for a name. Nothing here runs on the calls of a compiled model: only
when a point is taken.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from typing import Any

from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.memory_debug._model import MemoryDebugWarning

# The Graph Trees attributes read here are those of torch 2.4 and later.
_MIN_TORCH = (2, 4)
_KIND_ORDER = ("forward", "backward", "inference")

OwnerRow = tuple[int, tuple[int, int], str, str | None, list[int], list[str], list[str]]
PeakRow = tuple[int, int | None, int | None, int | None, int | None, int | None, bool]

_warned: set[str] = set()
# Pools named by the user or by this package's probes: (device, pool id) -> (kind, name).
_named: dict[tuple[int, tuple[int, int]], tuple[str, str]] = {}


def _warn_once(key: str, message: str) -> None:
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(message, MemoryDebugWarning, stacklevel=4)


def _torch_version(version: str | None) -> tuple[int, int] | None:
    if not version:
        return None
    try:
        major, minor = version.split("+")[0].split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def _pool_id(value: Any) -> tuple[int, int]:
    pool = tuple(int(v) for v in value)
    if len(pool) != 2:
        raise ValueError(f"a pool id is two integers, got {value!r}")
    return pool[0], pool[1]


def name_pool(pool: Any, name: str, *, device: int | None = None) -> tuple[int, int]:
    """Names a private pool so reports show its owner: a ``torch.cuda.MemPool``, a
    captured ``torch.cuda.CUDAGraph`` (its ``pool()``), or a pool id ``(a, b)``.
    ``device``: the pool's device (default: the current one). Returns the pool id."""
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"a pool name must be a non-empty string, got {name!r}")
    kind = "mempool"
    if hasattr(pool, "pool") and callable(pool.pool):
        kind, value = "cuda_graph", pool.pool()
    elif hasattr(pool, "id") and not isinstance(pool, tuple | list):
        value = pool.id
    else:
        value = pool
    try:
        pool_id = _pool_id(value)
    except (TypeError, ValueError) as e:
        raise InvalidInputError(
            f"name_pool needs a MemPool, a captured CUDAGraph or a pool id (a, b): {e}"
        ) from None
    if device is None:
        import torch

        device = int(torch.cuda.current_device()) if torch.cuda.is_available() else 0
    _named[(int(device), pool_id)] = (kind, name)
    return pool_id


def forget_pool_names() -> None:
    """Drops every name given with ``name_pool``."""
    _named.clear()


def _containers(trees: Any) -> dict[Any, Any]:
    local = getattr(trees, "local", None)
    found = getattr(local, "tree_manager_containers", None)
    if found is None:
        # Threads other than the one that imported the module find it in torch's TLS.
        import torch

        c = torch._C
        if getattr(c, "_is_key_in_tls", lambda _k: False)("tree_manager_containers"):
            found = c._get_obj_in_tls("tree_manager_containers")
    return dict(found or {})


def _graph_trees_owner(device: int, manager: Any) -> OwnerRow:
    pool = _pool_id(manager.cuda_graphs_thread_pool)
    graph_ids: list[int] = []
    stack = [node for nodes in manager.roots.values() for node in nodes]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        graph_ids.append(int(node.id.id))
        for children in node.children.values():
            stack.extend(children)
    # Every function the manager wraps runs its warmup in the pool too, recorded or not.
    modes = {getattr(m, "name", str(m)).lower() for m in manager.id_to_mode.values() if m}
    kinds = [k for k in _KIND_ORDER if k in modes] + sorted(modes - set(_KIND_ORDER))
    compile_ids: list[str] = []
    for cid in manager.id_to_compile_id.values():
        if cid is not None and str(cid) not in compile_ids:
            compile_ids.append(str(cid))
    return (int(device), pool, "graph_trees", None, sorted(graph_ids), kinds, compile_ids)


def collect_pool_owners(trees: Any, torch_version: str | None) -> list[OwnerRow]:
    """The owners known now: every device's Graph Trees manager (``trees`` is the
    ``torch._inductor.cudagraph_trees`` module, or ``None`` when it was never imported:
    then no compiled model uses Graph Trees), and the pools named with ``name_pool``."""
    owners: list[OwnerRow] = []
    if trees is not None:
        version = _torch_version(torch_version)
        if version is not None and version < _MIN_TORCH:
            _warn_once(
                "version",
                f"torch {torch_version}: Graph Trees pool owners are read from torch "
                f"{_MIN_TORCH[0]}.{_MIN_TORCH[1]} on; private pools are shown unnamed",
            )
        else:
            try:
                for device, container in sorted(_containers(trees).items()):
                    manager = getattr(container, "tree_manager", None)
                    if manager is not None:
                        owners.append(_graph_trees_owner(int(device), manager))
            except Exception as e:  # torch internals moved: name nothing, say so once
                _warn_once(
                    "drift",
                    f"torch {torch_version}: the Graph Trees manager does not have the shape "
                    f"this release reads ({type(e).__name__}: {e}); private pools are shown "
                    "unnamed",
                )
                owners = []
    taken = {(o[0], o[1]) for o in owners}
    for (device, pool), (kind, name) in sorted(_named.items()):
        if (device, pool) not in taken:
            owners.append((device, pool, kind, name, [], [], []))
    return owners


def read_peaks(
    source: Any, devices: Sequence[int], *, reset: bool, since_previous: bool
) -> list[PeakRow] | None:
    """``memory_stats()`` peaks and counters per device; with ``reset`` the peaks are
    reset right after they are read, so the next point's peaks cover exactly the time
    between. ``None`` when the source cannot read them."""
    stats_of = getattr(source, "memory_stats", None)
    if stats_of is None:
        return None
    rows: list[PeakRow] = []
    for device in devices:
        try:
            stats = stats_of(device)
        except Exception as e:  # a reading must not fail the point
            _warn_once("peaks", f"torch.cuda.memory_stats({device}) failed: {e}")
            return None

        def value(key: str, stats: Any = stats) -> int | None:
            v = stats.get(key)
            return int(v) if isinstance(v, int) else None

        rows.append(
            (
                int(device),
                value("reserved_bytes.all.peak"),
                value("allocated_bytes.all.peak"),
                value("active_bytes.all.peak"),
                value("num_alloc_retries"),
                value("num_ooms"),
                bool(since_previous),
            )
        )
        if reset:
            source.reset_peak_memory_stats(device)
    return rows


def graph_trees_module() -> Any:
    """``torch._inductor.cudagraph_trees`` if something imported it (never imported here:
    a process that does not compile with Graph Trees pays nothing)."""
    return sys.modules.get("torch._inductor.cudagraph_trees")
