"""The native module's stubs are complete and checked; exit codes and byte sizes are defined
once."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch_cudagraph_debug
import torch_cudagraph_debug._native as native
from torch_cudagraph_debug.cli import _exit, compile, memory, tensor, tensor_options

PACKAGE = Path(torch_cudagraph_debug.__file__).parent
STUB = PACKAGE / "_native.pyi"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def _stub() -> ast.Module:
    return ast.parse(STUB.read_text())


def _stub_names(body: list[ast.stmt]) -> set[str]:
    names = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_stubs_name_every_class_function_and_member_of_the_native_module():
    stub = _stub()
    top = _stub_names(stub.body)
    assert set(native.__all__) <= top, set(native.__all__) - top
    classes = {n.name: n for n in stub.body if isinstance(n, ast.ClassDef)}
    for name in native.__all__:
        runtime = getattr(native, name)
        if not isinstance(runtime, type):
            continue
        public = {m for m in vars(runtime) if not m.startswith("_")}
        # With those of its stub-only bases (attributes several classes share).
        bases = [ast.unparse(b) for b in classes[name].bases]
        stubbed = [classes[name]] + [classes[b] for b in bases if b in classes]
        members = set().union(*(_stub_names(c.body) for c in stubbed))
        assert public <= members, (name, public - members)


def test_stubs_pass_stubtest_against_the_installed_module():
    # From tests/, as scripts/test runs it: the installed package is what is checked. (The
    # cache mypy leaves there ignores itself in git.)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy.stubtest",
            "--mypy-config-file",
            str(PYPROJECT),
            "--allowlist",
            str(Path(__file__).parent / "stubtest-allowlist.txt"),
            "torch_cudagraph_debug._native",
        ],
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found in 1 module" in done.stdout


def test_comparison_enumerations_are_the_values_the_options_take():
    # The stubs are generated from the Rust declarations (scripts/generate-stubs), so the
    # enumerations are checked where they are declared: the engine's names are the values
    # the options accept, and nothing else is accepted.
    literals = native.comparison_literals()
    options = dict(
        mode="allclose",
        rtol=0.0,
        atol=0.0,
        equal_nan=False,
        dtype_policy="strict",
        layout_policy="strict",
        limit=10,
    )
    for option, alias in [
        ("mode", "ComparisonMode"),
        ("dtype_policy", "DTypePolicy"),
        ("layout_policy", "LayoutPolicy"),
    ]:
        assert literals[alias]
        for value in literals[alias]:
            assert (
                getattr(native.TensorComparisonOptions(**{**options, option: value}), option)
                == value
            )
        with pytest.raises(torch_cudagraph_debug.errors.InvalidInputError):
            native.TensorComparisonOptions(**{**options, option: "neither"})
    assert set(literals["ComparisonStatus"]) == {"match", "inconclusive", "mismatch"}
    assert set(native.RunReader.table_names()) >= {"points", "observations", "payloads"}


def test_stubs_ship_inside_the_package_marked_typed():
    # Where the installed package is: a type checker finds the stubs only beside the
    # extension, with the py.typed marker.
    assert STUB.parent == Path(native.__file__).parent
    assert (PACKAGE / "py.typed").is_file()


def test_exit_codes_defined_once_and_imported_everywhere():
    assert (
        _exit.EXIT_OK,
        _exit.EXIT_MISMATCH,
        _exit.EXIT_ERROR,
        _exit.EXIT_INCONCLUSIVE,
        _exit.EXIT_INTERRUPTED,
        _exit.EXIT_OUTPUT_CLOSED,
    ) == (0, 1, 2, 3, 130, 141)
    assert _exit.EXIT_FOR_STATUS == {"match": 0, "mismatch": 1, "inconclusive": 3}
    assert tensor.EXIT_OK is _exit.EXIT_OK and memory.EXIT_OK is _exit.EXIT_OK
    assert compile.EXIT_OK is _exit.EXIT_OK
    defines = re.compile(r"^\s*(?:\w+\s*,\s*)*_?EXIT_\w+\s*(?:,\s*\w+\s*)*=", re.MULTILINE)
    for source in (PACKAGE / "cli").glob("*.py"):
        if source.name == "_exit.py":
            continue
        assert not defines.search(source.read_text()), f"{source.name} defines exit codes"


def test_byte_sizes_formatted_once_by_the_native_core():
    assert native.format_bytes(0) == "0 B"
    assert native.format_bytes(1023) == "1023 B"
    assert native.format_bytes(1536) == "1.50 KiB"
    assert native.format_bytes(3 << 20) == "3.00 MiB"
    assert native.format_bytes(-1024) == "-1.00 KiB"
    assert native.format_bytes(5 << 40) == "5.00 TiB"
    # The CLI's progress line uses the same text as the memory reports.
    assert tensor_options._size(1536.9) == "1.50 KiB"
    assert tensor_options._size(430.1 * 2**20) == native.format_bytes(int(430.1 * 2**20))
    for source in PACKAGE.rglob("*.py"):
        assert '"KiB"' not in source.read_text(), f"{source} formats bytes itself"
