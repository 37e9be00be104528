"""Examples run as users run them; the installed package carries every source file."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch_cudagraph_debug

REPO = Path(__file__).resolve().parents[1]


def run_example(name: str, run_dir: Path, *, timeout: float, **run: Any) -> str:
    """The standard output of ``examples/<name> --run-dir run_dir``, which must exit 0."""
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / name), "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **run,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_record_eager_example_prints_the_duckdb_query(tmp_path):
    out = run_example("record_eager.py", tmp_path, timeout=300)
    assert "points: ('step0', 'step1', 'step2', 'step3')" in out
    assert "DuckDB over the run's observation files" in out
    # Four steps of decreasing-then-noisy loss: one value per step, all finite.
    loss_line = next(line for line in out.splitlines() if line.startswith("loss by step:"))
    values = [float(v) for v in loss_line.split(":")[1].strip(" []\n").split(",")]
    assert len(values) == 4 and all(0.5 < v < 2.0 for v in values)


def test_compile_probes_example_records_and_queries(tmp_path):
    out = run_example(
        "compile_probes.py",
        tmp_path,
        timeout=600,
        env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-cache")},
    )
    assert "graph inference (compile id 0/0): 4 selected" in out, out
    assert "points: ('call0', 'call1', 'call2', 'call3', 'call4')" in out
    assert out.count("aten.addmm.default") >= 8  # four sites explained, four queried
    assert "blocks.1.down" in out.split("DuckDB")[1]
    assert "differential (eager vs compiled): match" in out
    assert "  eager vs compiled (model outputs (1)): match" in out
    # Each worst site is named with its point: the same site at two calls is two places.
    worst = [line for line in out.splitlines() if line.startswith("  worst: ")]
    assert len(worst) == 3, out
    assert all(line.startswith("  worst: point 'call") for line in worst), worst
    assert len(set(worst)) == 3, worst
    # Where every run went.
    written = out.split("runs written")[1]
    diff = tmp_path.parent / f"{tmp_path.name}-diff"
    for root, name in (
        (tmp_path, "compiled-mlp"),
        (diff, "eager"),
        (diff, "compiled"),
        (diff, "float64"),
    ):
        assert f"  {root}  (run {name!r}" in written, written


def test_multirank_example_writes_one_run_per_rank(tmp_path):
    job = tmp_path / "job"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            str(REPO / "examples" / "multirank_record.py"),
            "--job-dir",
            str(job),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    summary = subprocess.run(
        [sys.executable, "-m", "torch_cudagraph_debug.cli", "tensor", "group-summary", str(job)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "2 of 2 ranks, 3 points, complete" in summary, summary


def test_fx_passes_ship_inside_the_package():
    source = REPO / "python" / "torch_cudagraph_debug" / "fx_passes"
    installed = Path(torch_cudagraph_debug.__file__).parent / "fx_passes"
    sources = sorted(p.relative_to(source) for p in source.rglob("*.py"))
    assert Path("probe_insertion.py") in sources
    for rel in sources:
        shipped = installed / rel
        assert shipped.is_file(), f"fx_passes/{rel} is not in the installed package"
        assert shipped.read_text() == (source / rel).read_text()
    module = importlib.import_module("torch_cudagraph_debug.fx_passes.probe_insertion")
    assert callable(module.ProbeInsertionPass)


def test_flight_recorder_example_finds_the_injected_nan(tmp_path):
    out = run_example("flight_recorder.py", tmp_path, timeout=600)
    assert "first NaN: point call7, site inference/layers.2/" in out, out
    assert "first-anomaly exit status: 1" in out, out
