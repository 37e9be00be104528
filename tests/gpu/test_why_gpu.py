"""`why` on the GPU: three ways at the same sites (eager, compiled, CUDA Graph Trees), the
planted causes that exist only there (a fusion, a switch that makes Triton code less
precise, a lifecycle fault), and a transformers model where nothing is planted."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn
from torch_cudagraph_debug.compile.differential import differential
from torch_cudagraph_debug.compile.why import why

pytestmark = pytest.mark.usefixtures("fresh_inductor")


class ScaleShift(nn.Module):
    """A bias-free bfloat16 Linear, `y = proj(x) * 3.3`, returned with `y + 1.7`. `y` is
    an output, so Inductor keeps it a buffer of its own (bfloat16); the scheduler's one
    fusion puts `y + 1.7` in y's kernel, where it reads y's float32 value from a register
    instead of the rounded bfloat16 buffer eager reads."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(256, 256, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.proj(x) * 3.3
        return y + 1.7, y


def scale_shift() -> tuple[nn.Module, list[torch.Tensor]]:
    torch.manual_seed(0)
    model = ScaleShift().cuda().to(torch.bfloat16).eval()
    return model, [torch.randn(64, 256, device="cuda", dtype=torch.bfloat16) for _ in range(2)]


def test_three_ways_at_the_same_sites(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64)).cuda().eval()
    batches = [torch.randn(8, 64, device="cuda") for _ in range(3)]
    probes = {"version": 1, "select": [{"ops": ["aten.addmm", "aten.tanh"]}]}
    result = differential(model, batches, probes=probes, run_dir=tmp_path)
    assert result.run_names == ["eager", "compiled", "graphs", "float64"]
    compiled = [o.name for o in result.compiled[0].observations]
    graphs = [o.name for o in result.graphs[0].observations]
    # Sites as Inductor's graph has them (on a GPU the first bias add fuses with tanh),
    # then the output: the same in both compiled variants.
    assert compiled == graphs and len(compiled) >= 3 and compiled[-1] == "output/0"
    assert result.lifecycle.status == "match", result.to_text()
    lifecycle = next(v for v in result.verdicts if v.comparison == "compiled vs graphs")
    assert lifecycle.status == "match"
    assert {a.verdict for a in result.accuracy} <= {"close", "rounding"}, result.to_text()


def test_a_fusion_is_named(tmp_path):
    model, batches = scale_shift()
    start = time.perf_counter()
    report = why(model, batches, run_dir=tmp_path, search="always", coverage=False)
    print(report.to_text())
    print(f"search took {time.perf_counter() - start:.1f} s")
    assert report.differential.output_comparison.status == "mismatch"
    culprit = report.culprit
    assert culprit is not None and culprit.kind == "fusion", report.to_text()
    assert any("mul" in n for n in culprit.nodes) and any("add" in n for n in culprit.nodes)
    assert culprit.kernel and "mul" in culprit.kernel and "add" in culprit.kernel
    assert culprit.with_.diverges and not culprit.without.diverges


class SubtractMean(nn.Module):
    """`x - x.mean(-1)` on bfloat16 values near 100: Inductor computes the difference in
    float32 (about 30 times closer to float64 than eager, measured on the H100); with
    Triton's upcast to float32 switched off it computes in bfloat16, as eager does."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - x.mean(-1, keepdim=True)


def test_a_switch_that_drops_precision_to_eager_level_is_rounding_not_a_bug(tmp_path):
    """`triton.codegen_upcast_to_fp32 = False` is the one Triton switch that lowers
    precision; measured against float64 on the H100 it never makes a value worse than
    eager's (silu, sigmoid, gelu, softmax, logsumexp, lerp, addcmul, layer norm: equal;
    a pointwise chain: 1.04x in bfloat16, 1.38x in float16). The float64 rule must call
    that rounding, and the search must not blame the switch."""
    import torch._inductor.config as inductor_config

    torch.manual_seed(0)
    model = SubtractMean().cuda().eval()
    batches = [(100 + torch.randn(64, 256, device="cuda")).to(torch.bfloat16) for _ in range(2)]
    with inductor_config.patch({"triton.codegen_upcast_to_fp32": False}):
        report = why(model, batches, run_dir=tmp_path, coverage=False)
    print(report.to_text())
    assert report.settings["triton.codegen_upcast_to_fp32"] == (False, True)
    assert not report.differential.diverging_sites, report.to_text()
    assert report.culprit is None
    assert "diverge from the eager" not in report.conclusion


def test_a_lifecycle_fault_is_reported_as_such(tmp_path, monkeypatch):
    """The graphs variant's static input changed outside the graph: a parameter replaced
    in place between replays by code that runs only in that variant."""
    import torch_cudagraph_debug.compile.differential as diff

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.Tanh()).cuda().eval()
    batches = [torch.randn(8, 64, device="cuda") for _ in range(3)]
    run_compiled = diff._run_compiled

    def faulty(name, model_, calls, *rest):
        if name != "graphs":
            return run_compiled(name, model_, calls, *rest)

        class Stale:
            """After the first call, the weight the graph reads is changed outside it."""

            def __init__(self, call):
                self.call = call

            def __call__(self, fn):
                out = self.call(fn)
                with torch.no_grad():
                    model_[0].weight.mul_(1.5)
                return out

        return run_compiled(name, model_, [Stale(c) for c in calls], *rest)

    monkeypatch.setattr(diff, "_run_compiled", faulty)
    probes = {"version": 1, "select": [{"ops": ["aten.addmm", "aten.tanh"]}]}
    start = time.perf_counter()
    result = diff.differential(model, batches, probes=probes, run_dir=tmp_path)
    print(result.to_text())
    print(f"differential took {time.perf_counter() - start:.1f} s")
    assert result.status == "mismatch"
    assert result.lifecycle.status == "mismatch"
    first = result.lifecycle.first_issue
    assert first.label == "call1", result.to_text()  # call0 ran before the change
    verdict = next(v for v in result.verdicts if v.comparison == "compiled vs graphs")
    assert verdict.status == "mismatch" and "lifecycle" in verdict.meaning


def test_llama_with_nothing_planted_says_so(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        num_hidden_layers=2,
        hidden_size=128,
        intermediate_size=256,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=512,
        max_position_embeddings=128,
        use_cache=False,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).cuda().eval()
    batches = [{"input_ids": torch.randint(0, 512, (2, 32), device="cuda")} for _ in range(2)]
    start = time.perf_counter()
    report = why(model, batches, run_dir=tmp_path, coverage=False)
    print(report.to_text())
    print(f"why took {time.perf_counter() - start:.1f} s")
    assert report.culprit is None
    assert not [a for a in report.differential.accuracy if a.verdict == "diverges"], (
        report.to_text()
    )
    assert report.differential.lifecycle.status == "match", report.to_text()
    assert "diverge from the eager" not in report.conclusion
