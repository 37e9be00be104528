"""Modules use each other without cycles, in the Python package and inside each Rust crate.

Python: every import of a module of the package (at the top of a file or inside a
function; ``TYPE_CHECKING`` blocks aside) is an edge, and ``from pkg import name`` is an
edge to ``pkg`` unless ``name`` is a module of it. A submodule's own parent packages are
not edges (Python imports them first anyway).

Rust: every path through ``crate::`` or ``super::`` in a module's file (comments and
in-file test modules aside) is an edge to the deepest module it names. A module's edges to
its own ancestors are not counted: a child using ``super::*`` is how Rust nests modules,
and the parent declaring the child is not a use of it. Every Rust source file is also
declared by its parent (`mod name;`): a file without one is silently not compiled."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import torch_cudagraph_debug

ROOT = Path(torch_cudagraph_debug.__file__).parent
PACKAGE = "torch_cudagraph_debug"
CRATES = Path(__file__).resolve().parents[1] / "rust"


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


def _rust_modules(src: Path) -> dict[tuple[str, ...], Path]:
    """The crate's modules by path (``("report", "html")``), the crate root as ``()``."""
    out = {}
    for path in src.rglob("*.rs"):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "mod" or parts in (("lib",), ("main",)):
            parts = parts[:-1]
        if parts and parts[-1] == "tests":  # test modules use their parent, nothing uses them
            continue
        out[parts] = path
    return out


_RUST_PATH = re.compile(r"\b(crate|super)((?:::\w+)+|::\{[^}]*\})")


def _rust_code(path: Path) -> str:
    """The file's code without comments and without an in-file ``#[cfg(test)] mod``."""
    text = re.split(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", path.read_text())[0]
    return "\n".join(line.split("//")[0] for line in text.splitlines())


def _rust_edges(src: Path) -> dict[str, set[str]]:
    modules = _rust_modules(src)
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[tuple[str, ...]] = set()
        for root, rest in _RUST_PATH.findall(_rust_code(path)):
            base = () if root == "crate" else name[:-1]
            # `crate::{a::b, c}` names several paths; `crate::a::b::f` one
            for tail in re.findall(r"\w+(?:::\w+)*", rest):
                deepest = None
                prefix = list(base)
                for segment in tail.split("::"):
                    prefix.append(segment)
                    if tuple(prefix) in modules:
                        deepest = tuple(prefix)
                if deepest is not None:
                    found.add(deepest)
        edges["::".join(name) or "lib"] = {
            "::".join(m) or "lib" for m in found if m != name[: len(m)]
        }
    return edges


def test_no_rust_crate_has_module_cycles() -> None:
    crates = sorted(p for p in CRATES.iterdir() if (p / "src").is_dir())
    assert len(crates) >= 8  # every crate was found
    for crate in crates:
        edges = _rust_edges(crate / "src")
        cycle = _cycle(edges)
        assert cycle is None, f"{crate.name}: " + " -> ".join(cycle or [])


def test_the_rust_edge_finder_sees_uses_and_skips_comments(tmp_path: Path) -> None:
    (tmp_path / "report").mkdir()
    (tmp_path / "lib.rs").write_text("mod report;\nmod state;\n")
    (tmp_path / "report" / "mod.rs").write_text("use super::*;\nmod html;\n")
    (tmp_path / "report" / "html.rs").write_text(
        "use crate::{state::State, report};\n/// [`x`]: crate::lib_only\n"
    )
    (tmp_path / "state.rs").write_text(
        "// crate::report::html is only named here\n"
        "fn f() { crate::report::html::g() }\n"
        "#[cfg(test)]\nmod tests {\n    use crate::report;\n}\n"
    )
    edges = _rust_edges(tmp_path)
    assert edges == {
        "lib": set(),
        "report": set(),
        "report::html": {"state"},
        "state": {"report::html"},
    }
    assert _cycle(edges) == ["report::html", "state", "report::html"]


def _declared(parent: Path, name: str) -> bool:
    return (
        re.search(rf"^\s*(pub(\([^)]*\))?\s+)?mod\s+{name}\s*;", parent.read_text(), re.M)
        is not None
    )


def test_every_rust_source_file_is_part_of_its_crate() -> None:
    # A file whose `mod` line went missing is not compiled, and neither are its tests.
    orphans = []
    for crate in sorted(p for p in CRATES.iterdir() if (p / "src").is_dir()):
        src = crate / "src"
        for path in src.rglob("*.rs"):
            rel = path.relative_to(src)
            if rel.parts in (("lib.rs",), ("main.rs",)) or rel.parts[0] == "bin":
                continue
            name = rel.stem if rel.name != "mod.rs" else rel.parent.name
            folder = path.parent if rel.name != "mod.rs" else path.parent.parent
            parents = [folder / "mod.rs", folder.with_suffix(".rs")]
            if folder == src:
                parents = [src / "lib.rs", src / "main.rs"]
            if not any(p.is_file() and _declared(p, name) for p in parents):
                orphans.append(str(path.relative_to(CRATES)))
    assert orphans == []
