"""The package's modules import each other without cycles: every import of a module of the
package (at the top of a file or inside a function; ``TYPE_CHECKING`` blocks aside) is an
edge, and ``from pkg import name`` is an edge to ``pkg`` unless ``name`` is a module of
it. A submodule's own parent packages are not edges (Python imports them first anyway)."""

from __future__ import annotations

import ast
from pathlib import Path

import torch_cudagraph_debug

ROOT = Path(torch_cudagraph_debug.__file__).parent
PACKAGE = "torch_cudagraph_debug"


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            skipped.update(id(n) for n in ast.walk(node))
    return skipped


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        skipped = _type_checking_nodes(tree)
        found: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
                submodules = [f"{node.module}.{a.name}" for a in node.names]
                found.update(m for m in submodules if m in modules)
                if any(m not in modules for m in submodules):
                    found.add(node.module or "")
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith(PACKAGE))
        edges[name] = {
            m for m in found if m in modules and m != name and not name.startswith(m + ".")
        }
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def test_the_package_has_no_import_cycles() -> None:
    modules = _modules()
    assert len(modules) > 40  # the whole package was found
    cycle = _cycle(_edges(modules))
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
