"""TensorProbe inside hand-captured CUDA graphs (run on the GPU machine)."""

from __future__ import annotations

import gc
import re
import time

import dtype_cases
import pytest
import torch
from torch_cudagraph_debug import _native, errors
from torch_cudagraph_debug.tensor_debug import (
    CheckAction,
    PrintAction,
    RecordAction,
    TensorProbe,
    TensorRecorder,
)

ALL_DTYPES = dtype_cases.ALL


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    return dtype_cases.as_bytes(t).cpu()


def capture(fn):
    """Captures `fn` without warmup, so the probe's first call happens inside the capture
    (allocation there must not break it)."""
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        out = fn()
    torch.cuda.current_stream().wait_stream(stream)
    return graph, out


def test_values_after_each_replay_equal_torch_and_the_counter_advances():
    x = torch.zeros(1024, device="cuda")
    probe = TensorProbe("hidden", [RecordAction()])

    def body():
        a = probe(x * 2, name="scaled")
        b = probe(torch.relu(a - 5), name="relu")
        probe(b.sum(), name="relu")  # second invocation of one name
        return b.square()

    graph, out = capture(body)
    assert probe.replay_index == 0
    for step in range(1, 5):
        x.copy_(torch.randn(1024, device="cuda") * step)
        graph.replay()
        snap = probe.snapshot()
        assert snap.replay_index == step == probe.replay_index
        assert torch.equal(snap.tensor("scaled"), (x * 2).cpu())
        assert torch.equal(snap.tensor("relu"), torch.relu(x * 2 - 5).cpu())
        assert torch.allclose(snap.tensor("relu", 1), torch.relu(x * 2 - 5).sum().cpu())
        assert torch.equal(out.cpu(), torch.relu(x * 2 - 5).square().cpu())
        assert [(o.order, o.name, o.invocation_index) for o in snap.observations] == [
            (0, "scaled", 0),
            (1, "relu", 0),
            (2, "relu", 1),
        ]
        assert snap.snapshot_index == step - 1
    del graph
    probe.close()


def test_print_action_prints_every_replay_from_a_host_function(capfd):
    x = torch.arange(8, device="cuda", dtype=torch.float32)
    probe = TensorProbe("printer", [PrintAction(max_items=4, every=2)])
    graph, _ = capture(lambda: probe(x * 2, name="doubled"))
    for _ in range(4):
        graph.replay()
    torch.cuda.synchronize()
    printed = [line for line in capfd.readouterr().out.splitlines() if "[tcgd]" in line]
    assert len(printed) == 2, printed  # replays 2 and 4
    assert "replay=2 name=doubled invocation=0 float32[8]: [0, 2, 4, 6, ... (4 more)]" in printed[0]
    assert re.search(r"min=0\.0+ max=14\.0+ mean=7\.0+", printed[0])
    assert "replay=4" in printed[1]
    probe.close()


def test_check_action_keeps_the_first_failure():
    x = torch.ones(6, device="cuda")
    expected = torch.full((2, 3), 2.0)
    probe = TensorProbe("checker", [CheckAction(expected, rtol=0, atol=1e-6)])
    graph, _ = capture(lambda: probe((x * 2).reshape(2, 3), name="v"))
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    assert probe.check_status().ok
    x[4] = 5.0
    graph.replay()
    x[0] = 7.0
    graph.replay()
    torch.cuda.synchronize()
    status = probe.check_status()
    assert (status.evaluations, status.failures) == (4, 2)
    first = status.first_failure
    assert (first.replay_index, first.name, first.invocation_index) == (3, "v", 0)
    assert first.element == (1, 1) and (first.actual, first.expected) == ("10", "2")
    with pytest.raises(AssertionError, match=r"first at replay 3.*element \(1, 1\)"):
        probe.assert_check_ok()
    probe.close()


def test_integer_checks_are_exact_across_int64():
    big = torch.tensor([2**62 + 1], dtype=torch.int64, device="cuda")
    probe = TensorProbe("ints", [CheckAction(torch.tensor([2**62]))])
    graph, _ = capture(lambda: probe(big + 0, name="big"))
    graph.replay()
    torch.cuda.synchronize()
    assert probe.check_status().failures == 1  # 2**62 + 1 != 2**62, though equal as float64
    probe.close()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_dtype_round_trips_bit_exactly(dtype):
    g = torch.Generator().manual_seed(3)
    bits = torch.randint(0, 256, (37 * dtype.itemsize,), generator=g, dtype=torch.uint8)
    source = bits.view(dtype).cuda() if dtype is not torch.bool else (bits % 2).bool().cuda()
    probe = TensorProbe("dtypes")
    graph, _ = capture(lambda: probe(source.clone(), name="v"))
    graph.replay()
    got = probe.snapshot().tensor("v")
    assert got.dtype is dtype
    assert torch.equal(as_bytes(got), as_bytes(source))
    probe.close()


def test_non_contiguous_copy_and_error():
    x = torch.arange(12.0, device="cuda").reshape(3, 4)
    copying = TensorProbe("copy", non_contiguous="copy")
    graph, _ = capture(lambda: copying(x.t(), name="t"))
    x.add_(1)
    graph.replay()
    obs = copying.snapshot().observation("t")
    assert obs.stride == (1, 4)
    assert torch.equal(obs.tensor(), x.t().cpu())
    strict = TensorProbe("strict")
    with pytest.raises(errors.NonContiguousTensorError):
        capture(lambda: strict(x.t(), name="t"))
    copying.close()
    strict.close()


def test_two_graphs_with_two_probes_stay_apart():
    x = torch.ones(16, device="cuda")
    p1, p2 = TensorProbe("one"), TensorProbe("two")
    g1, _ = capture(lambda: p1(x + 1, name="v"))
    g2, _ = capture(lambda: p2(x * 10, name="v"))
    g1.replay()
    g1.replay()
    g2.replay()
    s1, s2 = p1.snapshot(), p2.snapshot()
    assert (s1.replay_index, s2.replay_index) == (2, 1)
    assert s1.tensor("v").tolist() == [2.0] * 16
    assert s2.tensor("v").tolist() == [10.0] * 16
    with pytest.raises(errors.SecondCaptureError, match="binds to one capture"):
        capture(lambda: p1(x, name="again"))
    del g1, g2
    p1.close()
    p2.close()


def capture_then_close_probe():
    x = torch.ones(1 << 20, device="cuda")
    probe = TensorProbe("life", [RecordAction(), PrintAction(every=1000)])
    graph, out = capture(lambda: probe(x * 3, name="v") + 1)
    graph.replay()
    probe.close()
    with pytest.raises(errors.ProbeClosedError):
        probe.snapshot()
    # The graph still owns the slots and host-function state: replaying after close must
    # be valid (compute-sanitizer runs this test).
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, x * 3 + 1)
    return graph, out


def test_close_before_deleting_the_graph_is_safe():
    graph, out = capture_then_close_probe()
    assert _native.probe_memory()[0] >= 4 << 20  # the graph holds the 4 MiB slot
    del graph, out


def test_nothing_leaks_once_probe_and_graph_are_gone():
    torch.cuda.synchronize()
    gc.collect()
    _native.release_deferred()
    base_device, base_pinned = _native.probe_memory()
    graph, out = capture_then_close_probe()
    assert _native.probe_memory()[0] >= base_device + (4 << 20)
    del graph, out
    # The graph hands its reference back from a driver thread, possibly a little later.
    for _ in range(100):
        torch.cuda.synchronize()
        gc.collect()
        _native.release_deferred()
        device, pinned = _native.probe_memory()
        if device <= base_device and pinned <= base_pinned:
            break
        time.sleep(0.02)
    assert device <= base_device and pinned <= base_pinned, (device, base_device)


def test_misuse_is_a_typed_error():
    x = torch.ones(4, device="cuda")
    # Eager calls validate only with when="always" (with "capture" they do nothing at all).
    probe = TensorProbe("errors", when="always")
    with pytest.raises(errors.WrongDeviceError, match="CPU tensor in a CUDA probe"):
        probe(x, name="a")
        probe(torch.ones(4), name="b")
    with pytest.raises(errors.UnsupportedDtypeError, match="qint8"):
        probe(torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8), name="q")

    during = TensorProbe("during")

    def snapshot_inside():
        during(x + 1, name="v")
        during.snapshot()

    with pytest.raises(errors.SynchronizeDuringCaptureError):
        capture(snapshot_inside)
    during.close()
    probe.close()
    with pytest.raises(errors.ProbeClosedError):
        probe(x, name="late")


def test_eager_always_mode_resamples_in_place_and_rejects_eager_after_capture():
    x = torch.arange(4.0, device="cuda")
    probe = TensorProbe("eager", when="always")
    probe(x, name="v")
    probe(x * 5, name="v")
    snap = probe.snapshot()
    assert snap.tensor("v").tolist() == [0.0, 5.0, 10.0, 15.0]
    assert snap.overwrite_counts == {("v", 0): 1}
    graph, _ = capture(lambda: probe(x + 1, name="w"))
    graph.replay()
    assert probe.snapshot().tensor("w").tolist() == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(errors.RecorderStateError, match="eager calls after capture"):
        probe(x, name="v")
    probe.close()
    silent = TensorProbe("silent")  # when="capture": eager calls are no-ops
    assert silent(x, name="v") is x
    with pytest.raises(errors.NoObservationsError):
        silent.snapshot()
    silent.close()


def test_cuda_graph_recorder_takes_each_points_replay(tmp_path):
    x = torch.zeros(256, device="cuda")
    rec = TensorRecorder(execution="cuda_graph", name="cg", run_dir=tmp_path / "run")
    static_in = torch.zeros(256, device="cuda")
    rec.observe(static_in, name="warmup-ignored")  # outside capture: nothing
    graph, _ = capture(lambda: rec.observe(torch.sin(static_in) * 2, name="y"))
    for step in range(3):
        x.normal_()
        static_in.copy_(x)
        with rec.record_point(f"step{step}"):
            graph.replay()
    with pytest.raises(errors.RecorderStateError, match="saw no new replay"):
        with rec.record_point("idle"):
            pass
    run = rec.finish()
    assert run.labels == ("step0", "step1", "step2")
    assert [p.replay_index for p in run.points] == [1, 2, 3]
    assert torch.equal(run["step2"].tensor("y"), (torch.sin(x) * 2).cpu())
    assert run.execution == "cuda_graph"


def test_eager_recorder_copies_cuda_tensors_asynchronously(tmp_path):
    with TensorRecorder(run_dir=tmp_path / "run") as rec:
        x = torch.randn(1 << 16, device="cuda")
        with rec.record_point("p"):
            rec.observe(x, name="x")
            snapshot_value = x.cpu()
            x.mul_(0)  # the recorded value is the one at observe time
    obs = rec.result["p"].observation("x")
    assert obs.source_device == "cuda:0"
    assert torch.equal(obs.tensor(), snapshot_value)
