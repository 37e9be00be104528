"""Differential runs: an eager reference with the same sites as the compiled model, and
the report naming the first diverging site."""

from __future__ import annotations

import pytest
import torch
from compile_models import PerturbSigmoid, SigmoidMLP, write_differential_factory
from torch_cudagraph_debug.compile.differential import differential
from torch_cudagraph_debug.tensor_debug import TensorRun

CONFIG = {
    "version": 1,
    "select": [{"ops": ["aten.addmm", "aten.relu", "aten.sigmoid", "aten.tanh"]}],
}


pytestmark = pytest.mark.usefixtures("fresh_inductor")


def batches():
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(4, 8, generator=g),) for _ in range(3)]


def test_reference_and_compiled_align_site_by_site_and_match(tmp_path):
    torch.manual_seed(0)
    result = differential(SigmoidMLP(), batches(), probes=CONFIG, run_dir=tmp_path)
    ref, cmp = result.reference, result.compiled
    assert ref.labels == cmp.labels == ("call0", "call1", "call2")
    ref_sites = [o.name for o in ref[0].observations]
    assert ref_sites == [o.name for o in cmp[0].observations]
    # three addmm, relu, sigmoid, then the model's output
    assert ref_sites[-1] == "output/0" and len(ref_sites) == 6
    assert set(result.aligned_sites) == set(ref_sites[:-1])
    assert result.comparison.status == "match", result.to_text()
    assert result.status == "match" and result.first_divergence is None
    # The float64 judgement saw every site and output of every call: within rounding.
    assert len(result.accuracy) == 3 * 6
    assert {a.verdict for a in result.accuracy} <= {"close", "rounding"}
    # write() keys its files by format, as every report's write() does.
    paths = result.write(tmp_path / "report")
    assert paths["text"] == tmp_path / "report" / "differential.txt"
    assert set(paths) == {"text", "html", "json", "comparison"}
    assert all(p.exists() for p in paths.values())
    assert paths["comparison"] / "report.json" in set(paths["comparison"].iterdir())


def test_a_perturbed_node_is_named_as_the_first_diverging_site(tmp_path):
    torch.manual_seed(0)
    result = differential(
        SigmoidMLP(),
        batches(),
        probes=CONFIG,
        run_dir=tmp_path,
        extra_inductor_options={"post_grad_custom_post_pass": PerturbSigmoid()},
    )
    assert result.comparison.status == "mismatch"
    text = result.to_text()
    first = result.first_divergence
    # Upstream sites match; the perturbed node is the first to diverge in execution order.
    assert first is not None and first.observation.name == "inference/-/sigmoid", (first, text)
    assert "inference/-/sigmoid" in text
    worst = {o.name for o in result.comparison.worst_observation_comparisons()[:2]}
    assert "inference/-/sigmoid" in worst, worst


def test_differential_cli_reports_and_exits_with_the_status(tmp_path):
    import os
    import subprocess
    import sys

    factory, config = write_differential_factory(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch_cudagraph_debug.cli",
            "differential",
            str(config),
            f"{factory}:make",
            "--run-dir",
            str(tmp_path / "runs"),
            "--json",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "c")},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    import json

    report = json.loads(done.stdout)
    assert report["status"] == "match"
    assert [v["status"] for v in report["verdicts"]][:2] == ["match", "match"]
    # The variants are runs of one job root, by name.
    assert report["runs"] == ["eager", "compiled", "float64"]
    eager, compiled = (TensorRun.load(tmp_path / "runs", name=n) for n in ("eager", "compiled"))
    assert eager.complete and compiled.complete
    assert eager.labels == compiled.labels and len(eager.labels) > 0
