"""CUDA graph coverage under CUDA Graph Trees (mode="reduce-overhead") on the GPU: a model
that runs entirely as a CUDA graph with its probes observed at replay, a function torch
skips (an input mutated in the graph), and a re-recording (a static input's address
changed) next to a recompilation (a new shape with dynamic=False)."""

from __future__ import annotations

import pytest
import torch
from compile_models import MLP
from torch._dynamo.utils import counters
from torch_cudagraph_debug.compile.coverage import (
    collect_compile_events,
    cuda_graph_coverage,
    observer_check,
)

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("fresh_inductor")]

# Inductor keeps a linear layer's addmm, or splits it into mm plus a bias add fused into
# the pointwise op that follows (fc1 here): select both forms.
CONFIG = {"version": 1, "select": [{"ops": ["aten.addmm", "aten.mm"]}]}


def cuda_batches(n: int, rows: int = 16, columns: int = 64) -> list[torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(2)
    return [torch.randn(rows, columns, device="cuda", generator=g) for _ in range(n)]


def test_a_model_that_runs_entirely_as_a_cuda_graph_with_its_probes_at_replay(tmp_path):
    torch.manual_seed(0)
    model = MLP(64, 128, 32).cuda()

    coverage = cuda_graph_coverage(model, cuda_batches(5), probes=CONFIG, run_dir=tmp_path)

    assert coverage.on_cuda is True
    [function] = coverage.functions
    assert (function.compile_id, function.graph_kind) == ("0/0", "inference")
    assert "cuda" in function.devices
    assert function.status == "cuda graph", coverage.to_text()
    assert function.reasons == ()
    assert function.recordings >= 1 and function.rerecordings == ()
    assert coverage.cudagraph_skips == 0
    # Graph Trees: warmup at the first call (values taken eagerly), then replays.
    replays = [p.replay_index for p in coverage.points]
    assert replays[0] is None and all(r is not None for r in replays[1:]), replays
    assert len(function.sites) == 2, function.sites
    assert [s.split("/")[1] for s in function.sites] == ["fc1", "fc2"]
    assert set(function.sites_at_replay) == set(function.sites)
    assert set(coverage.sites_at_replay) == set(function.sites)
    assert "1 cuda graph" in coverage.summary
    assert "cuda graph" in coverage.to_text()


def test_a_function_that_mutates_its_input_is_reported_skipped_with_torchs_reason():
    def bump(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        x.add_(1)  # a mutation of a graph input Graph Trees does not manage
        return torch.relu(x @ w)

    w = torch.randn(64, 64, device="cuda")
    batches = [(x, w) for x in cuda_batches(4)]

    coverage = cuda_graph_coverage(bump, batches)

    assert coverage.on_cuda is True
    [function] = coverage.functions
    assert function.status == "skipped", coverage.to_text()
    assert function.recordings == 0
    # torch 2.11: "skipping cudagraphs due to mutated inputs (1 instances). Found from ..."
    assert any("mutated inputs" in r for r in function.reasons), function.reasons
    assert coverage.cudagraph_skips >= 1
    assert "mutated inputs" in coverage.to_text()


def test_a_rerecording_after_a_static_input_moved_and_a_recompilation_for_a_new_shape():
    torch.manual_seed(0)
    model = MLP(64, 128, 32).cuda()
    xs = cuda_batches(6)
    smaller = cuda_batches(3, rows=8)
    with torch.no_grad(), collect_compile_events() as events:
        compiled = torch.compile(model, mode="reduce-overhead", dynamic=False)
        calls = 0
        for x in xs[:3]:  # warmup, recording, replay
            events.note_call(calls, x)
            compiled(x)
            calls += 1
        # A parameter (a static input of the graph) moves to a new address: Graph Trees'
        # invariant check fails for the recorded graph and it records again.
        model.fc1.weight.data = model.fc1.weight.data.clone()
        for x in xs[3:]:
            events.note_call(calls, x)
            compiled(x)
            calls += 1
        # A new shape with dynamic=False: Dynamo recompiles (compile id 0/1).
        for x in smaller:
            events.note_call(calls, x)
            compiled(x)
            calls += 1
        torch.cuda.synchronize()
    coverage = cuda_graph_coverage(events=events)

    assert counters["inductor"]["cudagraph_skips"] == 0
    first = coverage.function("0/0", "inference")
    assert first.status == "cuda graph", coverage.to_text()
    assert first.recordings == 2
    [rerecording] = first.rerecordings
    assert rerecording.cause.startswith("static input data pointer changed"), rerecording
    assert "data pointer changed from" in rerecording.cause
    assert coverage.rerecordings == (rerecording,)

    second = coverage.function("0/1", "inference")
    assert second.status == "cuda graph"
    assert second.recompile_reason is not None
    assert "size mismatch at index 0" in second.recompile_reason
    assert "expected 16, actual 8" in second.recompile_reason
    text = coverage.to_text()
    assert "Re-recordings" in text and "static input data pointer changed" in text
    assert "Recompilations" in text


def test_observer_check_on_the_gpu_names_triton_kernels_and_their_hashes():
    torch.manual_seed(0)
    model = MLP(64, 128, 32).cuda()
    # The last matmul is the graph output: probing it changes no kernel.
    config = {"version": 1, "select": [{"ops": ["aten.addmm", "aten.mm"], "modules": ["fc2"]}]}
    first = observer_check(model, cuda_batches(2), config)
    second = observer_check(model, cuda_batches(2), config)

    [graph] = first.graphs
    assert graph.without is not None and graph.with_probes is not None
    assert graph.without.kernels, first.to_text()
    assert all(k.builder == "triton" for k in graph.without.kernels)
    assert all(k.name.startswith("triton_") for k in graph.without.kernels)
    assert graph.probe_calls == 1
    assert first.identical, first.to_text()
    assert first.to_dict() == second.to_dict()
