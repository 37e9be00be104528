"""The compile plugin under CUDA Graph Trees (mode="reduce-overhead") on the GPU."""

from __future__ import annotations

import copy
import os
import sys

import pytest
import torch
import torch_cudagraph_debug
import torch_cudagraph_debug.compile as tcgd_compile
from compile_models import MLP, compile_on_graph_trees
from torch import nn
from torch._dynamo.utils import counters
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.tensor_debug import TensorRun

pytestmark = pytest.mark.usefixtures("fresh_inductor")


@pytest.fixture
def capture_count(monkeypatch):
    """Counts CUDA graph captures (Graph Trees records each partition once)."""
    count = {"captures": 0}
    original = torch.cuda.CUDAGraph.capture_begin

    def counting(self, *args, **kwargs):
        count["captures"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.cuda.CUDAGraph, "capture_begin", counting)
    return count


def linear_site_value(op: str, linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """What a probed linear layer's matmul site holds: Inductor keeps addmm, or (when a
    pointwise op follows) splits it into mm plus a bias add fused downstream."""
    with torch.no_grad():
        if op.startswith("aten.addmm"):
            return linear(x).cpu()
        assert op.startswith("aten.mm"), op
        return (x @ linear.weight.t()).cpu()


CONFIG = {"version": 1, "select": [{"ops": ["aten.addmm", "aten.mm", "aten.relu"]}]}


def test_inference_graph_trees_replays_land_in_the_run(tmp_path, capture_count):
    torch.manual_seed(0)
    model = MLP(64, 128, 32).cuda()
    inputs = [torch.randn(16, 64, device="cuda") for _ in range(6)]

    # Baseline: the same model without probes, to compare captures and outputs.
    with torch.no_grad():
        plain = torch.compile(model, mode="reduce-overhead")
        plain_out = [plain(x).clone() for x in inputs]
    plain_captures = capture_count["captures"]
    assert counters["inductor"]["cudagraph_skips"] == 0
    torch._dynamo.reset()
    counters.clear()
    capture_count["captures"] = 0

    compiled = tcgd_compile.compile(
        model, probes=CONFIG, mode="reduce-overhead", run_dir=tmp_path / "run"
    )
    with torch.no_grad():
        outs = [compiled(x).clone() for x in inputs]
    session = tcgd_compile.session_for(tcgd_compile.load_config(CONFIG), run_dir=tmp_path / "run")
    run = session.finish()

    assert counters["inductor"]["cudagraph_skips"] == 0
    assert capture_count["captures"] == plain_captures >= 1  # no extra partition
    for a, b in zip(outs, plain_out, strict=True):
        assert torch.equal(a, b)  # addmm/relu outputs are materialized anyway
    # The op's Python body ran in warmup and recording only.
    assert set(session.body_calls.values()) == {2}, session.body_calls
    assert run.labels == tuple(f"call{i}" for i in range(6))
    replays = [p.replay_index for p in run.points]
    assert replays[0] is None and replays[1:] == [1, 2, 3, 4, 5], replays
    for point, x in zip(run.points, inputs, strict=True):
        by_module = {o.site.module_path: o for o in point.observations if o.site.module_path}
        with torch.no_grad():
            hidden = torch.relu(model.fc1(x))
        for name, layer_input in (("fc1", x), ("fc2", hidden)):
            site = by_module[name]
            want = linear_site_value(site.site.aten_op, getattr(model, name), layer_input)
            torch.testing.assert_close(site.tensor(), want)
        relu = next(o for o in point.observations if o.site.aten_op == "aten.relu.default")
        with torch.no_grad():
            torch.testing.assert_close(relu.tensor(), torch.relu(model.fc1(x)).cpu())
        assert all(o.source_device == "cuda:0" for o in point.observations)
    assert "graph_replays" in run["call3"].metadata


def test_a_replayed_call_runs_no_python_of_the_package(tmp_path):
    """Once its graphs replay, a probed call's point bookkeeping and point close are
    native: the only Python in the call is torch's (Dynamo's guards, Graph Trees)."""
    torch.manual_seed(0)
    model = MLP(64, 128, 32).cuda()
    x = torch.randn(16, 64, device="cuda")
    probes = {**CONFIG, "run": {"payload": "summary"}}
    compiled = tcgd_compile.compile(model, probes=probes, mode="reduce-overhead", run_dir=tmp_path)
    package = os.path.dirname(torch_cudagraph_debug.__file__)
    entered: set[str] = set()

    def watch(frame, event, _arg):
        if event == "call":
            entered.add(frame.f_code.co_filename)

    with torch.no_grad():
        for _ in range(3):  # warmup, recording, the first replay
            compiled(x)
        sys.setprofile(watch)
        try:
            for _ in range(5):
                compiled(x)
        finally:
            sys.setprofile(None)
    ours = sorted(f for f in entered if f.startswith(package))
    assert entered and not ours, ours
    session = tcgd_compile.session_for(tcgd_compile.load_config(probes), run_dir=tmp_path)
    run = session.finish()
    assert counters["inductor"]["cudagraph_skips"] == 0
    assert run.labels == tuple(f"call{i}" for i in range(8))
    replays = [p.replay_index for p in run.points]
    assert replays[0] is None and replays[1:] == list(range(1, 8)), replays


def test_training_loop_probes_forward_and_backward_under_graph_trees(tmp_path):
    torch.manual_seed(1)
    model = MLP(64, 128, 32).cuda()
    reference = copy.deepcopy(model)
    config = {
        "version": 1,
        "select": [{"ops": ["aten.addmm", "aten.mm"], "graphs": ["forward", "backward"]}],
    }
    compiled = tcgd_compile.compile(
        model, probes=config, mode="reduce-overhead", run_dir=tmp_path / "run"
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.01)
    steps = 5
    expected = []
    for _ in range(steps):
        x = torch.randn(16, 64, device="cuda")
        ref_out = reference(x)
        ref_out.square().mean().backward()
        expected.append(
            {
                "x": x,
                "fc1": copy.deepcopy(reference.fc1),
                "fc2_weight_grad": reference.fc2.weight.grad.detach().cpu(),
            }
        )
        ref_opt.step()
        ref_opt.zero_grad()
        loss = compiled(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    session = tcgd_compile.session_for(tcgd_compile.load_config(config), run_dir=tmp_path / "run")
    run = session.finish()
    assert counters["inductor"]["cudagraph_skips"] == 0
    assert set(session.body_calls.values()) == {2}, session.body_calls
    assert len(run) == steps
    for point, want in zip(run.points, expected, strict=True):
        kinds = {o.site.graph_kind for o in point.observations}
        assert kinds == {"forward", "backward"}, kinds
        fc1 = next(
            o
            for o in point.observations
            if o.site.graph_kind == "forward" and o.site.module_path == "fc1"
        )
        torch.testing.assert_close(
            fc1.tensor(),
            linear_site_value(fc1.site.aten_op, want["fc1"], want["x"]),
            rtol=1e-4,
            atol=1e-5,
        )
        grads = [o.tensor() for o in point.observations if o.site.graph_kind == "backward"]
        g = want["fc2_weight_grad"]
        assert any(
            (t.shape == g.shape and torch.allclose(t, g, rtol=1e-4, atol=1e-6))
            or (t.shape == g.t().shape and torch.allclose(t, g.t(), rtol=1e-4, atol=1e-6))
            for t in grads
        ), "no backward site equals the eager fc2 weight gradient"
    replays = [p.replay_index for p in run.points]
    assert replays[0] is None and replays[-1] == steps - 1, replays


def test_gpt2_attention_and_mlp_under_graph_trees(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        n_layer=2, n_head=2, n_embd=64, n_positions=64, vocab_size=101, attn_implementation="sdpa"
    )
    torch.manual_seed(0)
    model = transformers.GPT2Model(config).cuda().eval()
    probes = {
        "version": 1,
        "select": [
            {
                "modules": ["h.*.attn*", "h.*.mlp*"],
                "ops": ["aten.addmm", "aten.mm", "aten._scaled_dot_product_*"],
            }
        ],
    }
    compiled = tcgd_compile.compile(
        model, probes=probes, mode="reduce-overhead", run_dir=tmp_path / "run"
    )
    batches = [torch.randint(0, 101, (2, 32), device="cuda") for _ in range(4)]
    expected = []
    for ids in batches:
        captured = {}
        hook = model.h[1].mlp.c_fc.register_forward_hook(
            lambda m, i, o, captured=captured: captured.update(v=o)
        )
        with torch.no_grad():
            model(input_ids=ids)
        hook.remove()
        expected.append(captured["v"].detach().cpu())
        with torch.no_grad():
            compiled(input_ids=ids)
    session = tcgd_compile.session_for(tcgd_compile.load_config(probes), run_dir=tmp_path / "run")
    run = session.finish()
    assert counters["inductor"]["cudagraph_skips"] == 0
    assert set(session.body_calls.values()) == {2}, session.body_calls
    assert [p.replay_index for p in run.points] == [None, 1, 2, 3]
    for point, want in zip(run.points, expected, strict=True):
        site = next(o for o in point.observations if o.site.module_path == "h.1.mlp.c_fc")
        torch.testing.assert_close(site.tensor().reshape(want.shape), want, rtol=1e-3, atol=1e-4)
        modules = {o.site.module_path for o in point.observations}
        assert {"h.0.attn.c_attn", "h.1.mlp.c_proj"} <= modules, modules


def test_session_of_flush_and_preview_under_graph_trees_and_a_finished_session(tmp_path):
    torch.manual_seed(2)
    model = MLP(64, 128, 32).cuda()
    compiled, session = compile_on_graph_trees(model, CONFIG, tmp_path / "run")
    inputs = [torch.randn(16, 64, device="cuda") for _ in range(5)]

    def relu_of(x):
        with torch.no_grad():
            return torch.relu(model.fc1(x)).cpu()

    def relu_site(point):
        return next(o for o in point.observations if o.site.aten_op == "aten.relu.default")

    with torch.no_grad():
        for x in inputs[:3]:
            compiled(x)
    session.flush()  # commits the third call's point mid-run, from the replayed slots
    preview = session.preview()
    assert preview.labels == ("call0", "call1", "call2") and not preview.complete
    assert [p.replay_index for p in preview.points] == [None, 1, 2]
    torch.testing.assert_close(relu_site(preview["call2"]).tensor(), relu_of(inputs[2]))
    with torch.no_grad():
        for x in inputs[3:]:
            compiled(x)
    run = session.finish()
    assert counters["inductor"]["cudagraph_skips"] == 0
    assert set(session.body_calls.values()) == {2}, session.body_calls
    assert run.complete and run.labels == tuple(f"call{i}" for i in range(5))
    assert [p.replay_index for p in run.points] == [None, 1, 2, 3, 4]
    for point, x in zip(run.points, inputs, strict=True):
        torch.testing.assert_close(relu_site(point).tensor(), relu_of(x))
    # Finished: the model keeps running (replays, and a new shape that recompiles and
    # records a new graph), its probes record nothing, nothing raises.
    with torch.no_grad():
        for x in (inputs[0], torch.randn(8, 64, device="cuda"), torch.randn(8, 64, device="cuda")):
            torch.testing.assert_close(compiled(x), model(x))
    assert session.finish() is run
    assert TensorRun.load(tmp_path / "run").labels == run.labels


def test_a_repeated_point_label_is_refused_before_its_block_runs_under_graph_trees(tmp_path):
    # Replayed points end on the device and reach the writer later; their labels are
    # taken when they end, so a repeat is refused at once and the run stays whole.
    torch.manual_seed(3)
    model = MLP(64, 128, 32).cuda()
    compiled, session = compile_on_graph_trees(model, CONFIG, tmp_path / "run")
    x = torch.randn(16, 64, device="cuda")
    with torch.no_grad():
        for _ in range(3):
            compiled(x)  # warmup, capture, a replay
        with session.record_point("step"):
            compiled(x)
        ran = []
        with pytest.raises(InvalidInputError, match="already used"):
            with session.record_point("step"):
                ran.append(compiled(x))
        assert ran == []
        with session.record_point("after"):
            compiled(x)
    run = session.finish()
    assert run.complete and run.labels == ("call0", "call1", "call2", "step", "after")
    assert [p.replay_index for p in run.points][-2:] == [3, 4]
