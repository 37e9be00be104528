"""`tcgd explain` on programs that record with probes of their own (the project's own
example among them): the program's runs keep every observation, and stdout holds only the
report while the program prints what it likes (CPU Inductor)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from torch_cudagraph_debug.cli import main as tcgd_main
from torch_cudagraph_debug.tensor_debug import TensorRun

REPO = Path(__file__).resolve().parents[1]

CONFIG = textwrap.dedent(
    """
    version = 1

    [run]
    name = "mlp"

    [[select]]
    ops = ["aten.addmm", "aten.relu"]
    """
)

# Records its own run with the same config as explain's (so the same run name): explain
# must not take its observations.
RECORDING_SCRIPT = textwrap.dedent(
    """
    import os
    import subprocess
    import sys

    import torch
    import torch_cudagraph_debug.compile as tcgd_compile
    from torch import nn

    config, run_dir = sys.argv[1:]
    print("script: print")
    sys.stdout.write("script: sys.stdout\\n")
    sys.stdout.flush()
    os.write(1, b"script: descriptor 1\\n")
    subprocess.run([sys.executable, "-c", "print('script: child process')"], check=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    compiled = tcgd_compile.compile(model, probes=config, run_dir=run_dir)
    with torch.no_grad():
        for _ in range(3):
            compiled(torch.randn(2, 8))
    run = tcgd_compile.session_of(compiled).finish()
    print("script: observations", [len(p.observations) for p in run.points])
    """
)

pytestmark = pytest.mark.usefixtures("fresh_inductor")


def test_explain_leaves_a_scripts_own_run_whole_and_stdout_to_the_report(tmp_path, capfd):
    config = tmp_path / "probes.toml"
    config.write_text(CONFIG)
    script = tmp_path / "record.py"
    script.write_text(RECORDING_SCRIPT)
    run_dir = tmp_path / "runs"
    argv = ["explain", "--json", str(config), str(script), str(config), str(run_dir)]
    assert tcgd_main(argv) == 0
    out, err = capfd.readouterr()
    # stdout: the report alone, parseable as it is.
    (graph,) = json.loads(out)["graphs"]
    assert graph["graph_kind"] == "inference"
    assert sorted(d["op"] for d in graph["selected"]) == [
        "aten.addmm.default",
        "aten.addmm.default",
        "aten.relu.default",
    ]
    # The script's prints, through every route, went to stderr.
    for line in ("print", "sys.stdout", "descriptor 1", "child process"):
        assert f"script: {line}\n" in err, err
    # Its run holds what it recorded: 3 calls, 3 sites each (before: 0 observations).
    assert "script: observations [3, 3, 3]" in err, err
    run = TensorRun.load(run_dir, name="mlp")
    assert [len(p.observations) for p in run.points] == [3, 3, 3]
    assert run.complete
    # stdout is the command's again once the script has run.
    print("after explain")
    os.write(1, b"descriptor 1 after explain\n")
    out, _ = capfd.readouterr()
    assert out == "after explain\ndescriptor 1 after explain\n"


def test_tcgd_explain_on_the_compile_probes_example(tmp_path):
    """The issue's command, as a user types it (`--json --quiet`, output read by
    json.load): exit 0, the example's own run recorded, its differential compared."""
    run_dir = tmp_path / "c"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch_cudagraph_debug.cli",
            "explain",
            "--json",
            "--quiet",
            str(REPO / "examples" / "probes.toml"),
            str(REPO / "examples" / "compile_probes.py"),
            "--run-dir",
            str(run_dir),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-cache")},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # explain() inside the example, its compiled model, and the differential's two sides:
    # each graph is decided by the config, 4 matmul sites each.
    assert len(report["graphs"]) >= 2
    assert all(len(g["selected"]) == 4 for g in report["graphs"]), report
    run = TensorRun.load(run_dir, name="compiled-mlp")
    assert [len(p.observations) for p in run.points] == [4, 4, 4, 4, 4]
    err = done.stderr
    assert "differential (eager vs compiled): match" in err, err
    assert "worst: point 'call" in err, err
    assert "DuckDB: per site" in err and "blocks.1.down" in err.split("DuckDB")[1], err
