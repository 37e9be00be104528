"""CUDA graph coverage and the observer check on the CPU: the kernels Inductor generates
with and without probes, and a coverage report that says plainly why no CUDA graph runs."""

from __future__ import annotations

import logging
import re

import pytest
import torch
from compile_models import MLP
from torch_cudagraph_debug import _native
from torch_cudagraph_debug.compile.coverage import (
    CompileEvent,
    collect_compile_events,
    coverage_from_events,
    cuda_graph_coverage,
    observer_check,
    parse_wrapper_code,
)

pytestmark = pytest.mark.usefixtures("fresh_inductor")

SHA256 = re.compile(r"[0-9a-f]{64}")


@pytest.fixture
def addmm_probes(tmp_path):
    path = tmp_path / "probes.toml"
    path.write_text('version = 1\n[[select]]\nops = ["aten.addmm"]\n')
    return path


def batches(n: int = 3, rows: int = 4):
    g = torch.Generator().manual_seed(1)
    return [torch.randn(rows, 8, generator=g) for _ in range(n)]


def model() -> MLP:
    torch.manual_seed(0)
    return MLP(8, 16, 4)


def test_observer_check_reports_each_kernel_with_its_hash_deterministically(addmm_probes):
    first = observer_check(model(), batches(), addmm_probes)
    second = observer_check(model(), batches(), addmm_probes)

    assert [g.label for g in first.graphs] == ["0/0 inference"]
    graph = first.graphs[0]
    assert graph.without is not None and graph.with_probes is not None
    # One generated kernel on each side (the relu; both matmuls are extern addmm calls).
    assert [k.name for k in graph.without.kernels] == ["cpp_fused_relu_0"]
    assert [k.name for k in graph.with_probes.kernels] == ["cpp_fused_relu_0"]
    assert all(k.builder == "cpp_pybinding" for k in graph.without.kernels)
    for k in (*graph.without.kernels, *graph.with_probes.kernels):
        assert SHA256.fullmatch(k.sha256), k
    # The probe op is an extern call, not a kernel, and only on the probed side.
    assert graph.probe_calls == 1
    assert not any(c.startswith("torch.ops.tcgd.") for c in graph.without.extern_calls)
    assert graph.without.extern_calls.count("extern_kernels.addmm") == 2
    assert graph.with_probes.extern_calls.count("extern_kernels.addmm") == 2
    # The probe keeps the first addmm's output alive, so the relu can no longer update it
    # in place: the same kernel name, different code (in_out_ptr0 -> in_ptr0, out_ptr0).
    assert [(c.kernel, c.change) for c in first.changes] == [("cpp_fused_relu_0", "code differs")]
    assert first.changed[0].sha256_without != first.changed[0].sha256_with
    before, after = first.changed[0].first_difference
    assert "in_out_ptr0" in before and "in_ptr0" in after and "in_out_ptr0" not in after
    assert not first.identical
    assert "1 with different code" in first.summary
    assert "in_out_ptr0" in graph.without.code and "in_out_ptr0" not in graph.with_probes.code

    # Deterministic: the same kernels and hashes from a second check.
    assert first.to_dict() == second.to_dict()


def test_observer_check_says_nothing_changed_when_the_probed_value_is_materialized(tmp_path):
    # The last addmm is the graph's output: probing it cannot change a fusion or a reuse.
    config = {"version": 1, "select": [{"ops": ["aten.addmm"], "names": ["addmm_1"]}]}
    check = observer_check(model(), batches(), config)

    assert check.identical, check.to_text()
    assert [(c.kernel, c.change) for c in check.changes] == [("cpp_fused_relu_0", "unchanged")]
    assert check.changes[0].sha256_without == check.changes[0].sha256_with
    assert check.graphs[0].probe_calls == 1
    assert "Probing changed no kernel" in check.summary


def test_observer_check_names_a_fusion_a_probe_changes():
    class Chain(torch.nn.Module):
        def forward(self, x):
            return torch.sigmoid(torch.relu(x * 2) + 1)

    # Probing the relu inside the fused chain makes the kernel store it as well.
    config = {"version": 1, "select": [{"ops": ["aten.relu"]}]}
    check = observer_check(Chain(), batches(2), config)

    changes = {(c.kernel, c.change) for c in check.changes}
    assert changes == {("cpp_fused_add_mul_relu_sigmoid_0", "code differs")}, check.to_text()
    graph = check.graphs[0]
    assert graph.probe_calls == 1


def test_observer_check_renders_through_the_report_document(addmm_probes):
    check = observer_check(model(), batches(2), addmm_probes)
    doc = _native.ReportDocument("why")
    check.add_to(doc)
    text = doc.to_text()
    assert "Observer check" in text and "cpp_fused_relu_0" in text and "code differs" in text
    assert check.changed[0].sha256_without[:16] in text
    assert "cpp_fused_relu_0" in doc.to_html()


def test_coverage_on_cpu_says_no_cuda_graphs_run_because_inputs_are_not_on_cuda(addmm_probes):
    coverage = cuda_graph_coverage(model(), batches(), probes=addmm_probes)

    assert coverage.on_cuda is False
    assert "No CUDA graphs run: the inputs are not on CUDA" in coverage.summary
    [function] = coverage.functions
    assert (function.compile_id, function.graph_kind) == ("0/0", "inference")
    assert function.devices == ("cpu",)
    assert function.status == "not on CUDA"
    assert function.recordings == 0 and function.rerecordings == ()
    # torch counts the graph as skipped without a message (no CUDA work in it).
    assert coverage.cudagraph_skips == 1
    # The probes ran, eagerly: every point has both sites, none from a replay.
    assert function.sites == ("inference/fc1/addmm", "inference/fc2/addmm_1")
    assert function.sites_at_replay == ()
    assert [p.replay_index for p in coverage.points] == [None, None, None]
    assert all(p.sites == function.sites for p in coverage.points)
    text = coverage.to_text()
    assert "not on CUDA" in text and "inputs are not on CUDA" in text
    assert coverage.to_dict()["functions"][0]["status"] == "not on CUDA"


def test_coverage_from_collected_events_reports_recompilations(addmm_probes):
    net = model()
    with torch.no_grad(), collect_compile_events() as events:
        compiled = torch.compile(net, mode="reduce-overhead", dynamic=False)
        for i, x in enumerate([*batches(2), *batches(1, rows=2)]):
            events.note_call(i, x)
            compiled(x)
    coverage = cuda_graph_coverage(events=events)

    assert coverage.on_cuda is False
    assert [f.label for f in coverage.functions] == ["0/0 inference", "0/1 inference"]
    assert {f.status for f in coverage.functions} == {"not on CUDA"}
    [recompile] = coverage.recompilations
    assert recompile.compile_id == "0/1"
    assert "size mismatch at index 0" in recompile.reason
    assert "expected 4, actual 2" in recompile.reason
    assert coverage.function("0/1").recompile_reason == recompile.reason
    # No DEBUG records of ours leaked to torch's own handlers or were left enabled.
    logger = logging.getLogger("torch._inductor.cudagraph_trees.__cudagraphs")
    assert logger.level == logging.NOTSET and not logger.handlers


def test_graph_trees_messages_become_skips_and_rerecordings_with_their_causes():
    """The messages Graph Trees logs on a GPU, sent through torch's own loggers and skip
    function in torch's formats: skips, recordings, and a re-recording with its cause."""
    from torch._inductor import cudagraph_trees
    from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

    log = cudagraph_trees.log
    with collect_compile_events() as events:
        events.note_call(0)
        log.debug("[%s] Running warmup function=%s", "0/0", "partition_0")
        events.note_call(1)
        log.debug(
            "[%s] Recording function=%s, cuda_graph_id=%d, inputs: %s", "0/0", "partition_0", 0, ""
        )
        events.note_call(2)
        log.debug(
            "[%s] Re-recording function=%s, reason=%s",
            "0/0",
            "partition_0",
            "static input data pointer changed.\ninput name: primals_1. data pointer changed",
        )
        log.debug(
            "[%s] Recording function=%s, cuda_graph_id=%d, inputs: %s", "0/0", "partition_0", 1, ""
        )
        events.note_call(3)
        # A failed invariant for one recorded graph, then another graph that fits: no
        # recording follows, and the cause must not stick to a later recording.
        log.debug("[%s] Re-recording function=%s, reason=%s", "0/0", "partition_0", "stale")
        events.note_call(4)
        log.debug(
            "[%s] Recording function=%s, cuda_graph_id=%d, inputs: %s", "0/0", "partition_0", 2, ""
        )
        log_cudagraph_skip_and_bump_counter(
            "skipping cudagraphs due to mutated inputs (1 instances). Found from : \n  x.add_(1)"
        )
    assert events.cudagraph_skips == 1
    kinds = [e.kind for e in events.events if e.kind != "call"]
    assert kinds == ["warmup", "record", "invariant", "record", "invariant", "record", "skip"]
    # Graph events name their function; the skip has no compile context here.
    events.graphs.append(
        _graph("0/0", "inference", devices=("cuda",))  # as Inductor's output code would
    )
    coverage = coverage_from_events(events)

    [function] = coverage.functions
    assert function.status == "partly"  # recorded, and torch skipped part of it
    assert function.recordings == 3
    assert function.functions == ("partition_0",)
    causes = [r.cause for r in function.rerecordings]
    assert causes[0].startswith("static input data pointer changed")
    assert "stale" not in causes[1] and "no failed invariant" in causes[1]
    assert function.reasons[0].startswith("mutated inputs (1 instances)")


def test_a_skip_without_recordings_is_reported_as_skipped():
    events = [
        CompileEvent("graph", "0/0", "inference"),
        CompileEvent("skip", "0/0", "inference", reason="mutated inputs (1 instances)"),
    ]
    coverage = coverage_from_events(events, on_cuda=True)
    [function] = coverage.functions
    assert function.status == "skipped"
    assert function.reasons == ("mutated inputs (1 instances)",)
    assert "1 skipped" in coverage.summary


def _graph(compile_id, kind, devices):
    from torch_cudagraph_debug.compile.coverage import GeneratedGraph

    return GeneratedGraph(compile_id, kind, 0, devices, (), (), "")


def test_triton_wrapper_code_is_parsed_into_kernels_and_extern_calls():
    code = (
        "from torch._inductor.async_compile import AsyncCompile\n"
        "async_compile = AsyncCompile()\n"
        "triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', '''\n"
        "import triton\n@triton.jit\ndef triton_poi_fused_relu_0(in_out_ptr0, xnumel):\n"
        "    pass\n''', device_str='cuda')\n"
        "def call(args):\n"
        "    buf0 = empty_strided_cuda((4, 16), (16, 1), torch.float32)\n"
        "    extern_kernels.addmm(a, b, c, alpha=1, beta=1, out=buf0)\n"
        "    triton_poi_fused_relu_0.run(buf0, 64, stream=stream0)\n"
        "    torch.ops.tcgd.probe_group.default([buf0], 'k', '[]')\n"
    )
    kernels, externs = parse_wrapper_code(code)
    [kernel] = kernels
    assert (kernel.name, kernel.builder) == ("triton_poi_fused_relu_0", "triton")
    source = "\nimport triton\n@triton.jit\ndef triton_poi_fused_relu_0(in_out_ptr0, xnumel):\n"
    import hashlib

    assert kernel.sha256 == hashlib.sha256((source + "    pass\n").encode()).hexdigest()
    assert externs == ("extern_kernels.addmm", "torch.ops.tcgd.probe_group.default")
