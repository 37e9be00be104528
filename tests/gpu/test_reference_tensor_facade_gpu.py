"""The reference design's tensor behaviours that need CUDA: the replay counter as a device
tensor, the check status of a captured probe and ``TensorCheckError``, key-bound checks,
synchronize targets, gradient hooks and the recorder's replay rules (run on the GPU
machine)."""

from __future__ import annotations

import pytest
import torch
from torch_cudagraph_debug.errors import (
    InvalidInputError,
    NonContiguousTensorError,
    RecorderStateError,
    SynchronizeDuringCaptureError,
    WrongDeviceError,
)
from torch_cudagraph_debug.tensor_debug import (
    CheckAction,
    RecordAction,
    TensorCheckError,
    TensorCheckStatus,
    TensorObservationKey,
    TensorProbe,
    TensorRecorder,
)
from torch_cudagraph_debug.tensor_debug.postprocess import export_snapshots_to_tensorboard


def capture(fn):
    """Captures `fn` on a side stream (no warmup); returns the graph and that stream."""
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    return graph


def test_replay_index_is_a_cuda_int64_clone_of_the_counter():
    x = torch.ones(4, device="cuda")
    probe = TensorProbe("counter", [RecordAction()])
    graph = capture(lambda: probe(x * 2, name="v"))
    before = probe.replay_index
    assert before.device.type == "cuda" and before.dtype == torch.int64 and before.dim() == 0
    assert before.item() == 0
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    counter = probe.replay_index
    assert counter.item() == 2
    counter.zero_()  # a clone: the probe still counts from 2
    graph.replay()
    torch.cuda.synchronize()
    assert probe.replay_index.item() == 3
    del graph
    probe.close()


def test_a_check_mismatch_reports_key_order_and_replay_and_raises_tensor_check_error():
    x = torch.ones(3, device="cuda")
    first_expected, second_expected = torch.full((3,), 2.0), torch.full((3,), 3.0)
    probe = TensorProbe("checks", [CheckAction([first_expected, second_expected], atol=1e-6)])

    def body():
        probe(x * 2, name="h")  # order 0: ("h", 0)
        probe(x * 3, name="h")  # order 1: ("h", 1)

    graph = capture(body)
    stream = torch.cuda.current_stream()
    graph.replay()
    ok = probe.check_status(synchronize=stream)
    assert isinstance(ok, TensorCheckStatus)
    assert (ok.ok, ok.order, ok.name, ok.invocation_index, ok.key) == (True, -1, None, -1, None)
    probe.assert_check_ok(synchronize=stream)
    x[1] = 5.0  # replay 2: both calls now differ; the first in capture order is kept
    graph.replay()
    status = probe.check_status(synchronize=torch.device("cuda", torch.cuda.current_device()))
    assert not status.ok
    assert (status.replay_index, status.order) == (2, 0)
    assert status.key == TensorObservationKey("h", 0)
    assert "replay 2" in status.message
    with pytest.raises(TensorCheckError, match="replay 2"):
        probe.assert_check_ok(synchronize=False)
    # Sticky: a later matching replay still reports the first mismatch.
    x[1] = 1.0
    graph.replay()
    assert probe.check_status().replay_index == 2
    del graph
    probe.close()


def test_a_mapping_binds_expected_values_by_key_not_capture_order():
    x = torch.ones(2, device="cuda")
    probe = TensorProbe("keyed", [CheckAction({TensorObservationKey("h", 1): torch.zeros(2)})])

    def body():
        probe(x, name="h")  # ("h", 0): not in the mapping, not checked
        probe(x * 0, name="h")  # ("h", 1): checked against zeros

    graph = capture(body)
    graph.replay()
    status = probe.check_status()
    assert status.ok and status.evaluations == 1
    del graph
    probe.close()


def test_expected_values_must_have_the_observed_shape_and_dtype():
    expected = torch.zeros(2, dtype=torch.float64)
    probe = TensorProbe("typed", [RecordAction(), CheckAction(expected)], when="always")
    with pytest.raises(InvalidInputError, match=r"torch\.float64\[2\], the observed value"):
        probe(torch.zeros(2, device="cuda"), name="v")
    with pytest.raises(InvalidInputError, match="observed shape"):
        probe(torch.zeros(3, device="cuda", dtype=torch.float64), name="v")
    probe(torch.zeros(2, device="cuda", dtype=torch.float64), name="v")
    assert probe.check_status().ok
    probe.close()


def test_synchronize_targets_must_match_the_probe_device():
    x = torch.ones(2, device="cuda")
    probe = TensorProbe("sync", [RecordAction()])
    graph = capture(lambda: probe(x + 1, name="v"))
    graph.replay()
    stream = torch.cuda.current_stream()
    assert probe.snapshot(synchronize=stream).tensor("v").tolist() == [2.0, 2.0]
    device = torch.device("cuda", torch.cuda.current_device())
    assert probe.snapshot(synchronize=device).replay_index == 1
    with pytest.raises(InvalidInputError, match="synchronize must be"):
        probe.snapshot(synchronize="cuda")
    with pytest.raises(InvalidInputError, match="synchronize must be"):
        probe.snapshot(synchronize=torch.cuda.current_device())
    del graph
    probe.close(synchronize=stream)


def test_synchronized_queries_are_refused_during_capture_unsynchronized_status_is_not():
    x = torch.ones(2, device="cuda")
    probe = TensorProbe("during", [RecordAction(), CheckAction(torch.full((2,), 2.0))])
    seen = []

    def body():
        probe(x * 2, name="v")
        seen.append(probe.check_status(synchronize=False).ok)

    graph = capture(body)
    assert seen == [True]
    other = TensorProbe("other", [RecordAction()])

    def synchronized_inside():
        other(x, name="v")
        other.check_status(synchronize=True)

    with pytest.raises(SynchronizeDuringCaptureError):
        capture(synchronized_inside)
    other.close(synchronize=False)
    del graph
    probe.close()


def test_eager_cuda_snapshot_discloses_overwrites_and_a_captured_one_has_none():
    x = torch.arange(3.0, device="cuda")
    probe = TensorProbe("eager", [RecordAction()], when="always")
    probe(x, name="v")
    probe(x + 1, name="v")
    eager = probe.snapshot(synchronize=torch.cuda.current_stream())
    assert eager.eager_overwrites == (("v", 1),)
    assert eager.eager_overwrite_counts["v"] == 1 and eager.replay_index == 0
    graph = capture(lambda: probe(x * 2, name="w"))
    graph.replay()
    captured = probe.snapshot()
    assert captured.eager_overwrites == () and captured.replay_index == 1
    assert captured.probe_id == eager.probe_id
    assert probe.compare(eager, captured).status == "mismatch"  # ("v", 0) is one-sided
    del graph
    probe.close()


def test_watch_grad_in_eager_always_mode_observes_cuda_gradients_until_close():
    w = torch.tensor([1.0, 2.0], device="cuda", requires_grad=True)
    scale = torch.tensor([3.0, 4.0], device="cuda")
    probe = TensorProbe("grads", [RecordAction()], when="always")
    handle = probe.watch_grad(w, name="w.grad")
    assert handle is not None
    (w * scale).sum().backward()
    assert probe.snapshot().tensor("w.grad").tolist() == [3.0, 4.0]
    probe.close()
    w.grad = None
    (w * scale).sum().backward()  # the closed probe's hook is gone
    assert w.grad.tolist() == [3.0, 4.0]


def test_an_eager_probe_is_bound_to_the_stream_of_its_first_call():
    x = torch.ones(2, device="cuda")
    probe = TensorProbe("eager", [RecordAction()], when="always")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side), pytest.raises(NonContiguousTensorError):
        probe(torch.ones(2, 3, device="cuda").t(), name="t")  # refused: binds no stream
    probe(x, name="v")  # the first successful call binds the current stream
    with torch.cuda.stream(side), pytest.raises(RecorderStateError, match="one stream"):
        probe(x * 2, name="v")
    snapshot = probe.snapshot()
    assert snapshot.tensor("v").tolist() == [1.0, 1.0]
    assert snapshot.eager_overwrites == (("v", 0),)  # the refused call re-sampled nothing
    probe.close()


def test_capture_only_probe_rejects_a_cpu_tensor_once_its_device_captures():
    x = torch.ones(2, device="cuda")
    probe = TensorProbe("captured", [RecordAction()])
    assert probe(torch.ones(2), name="v") is not None  # outside capture: nothing happens

    def body():
        probe(x + 1, name="v")
        probe(torch.ones(2), name="cpu")

    with pytest.raises(WrongDeviceError, match="during a CUDA graph capture"):
        capture(body)
    probe.close(synchronize=False)


def test_cuda_graph_recorder_without_captured_observations_refuses_a_point(tmp_path):
    rec = TensorRecorder(execution="cuda_graph", bundle_dir=tmp_path / "run")
    with pytest.raises(RecorderStateError, match="captured no observations"):
        with rec.record_point("p"):
            pass
    rec.close()


def test_cuda_graph_record_point_is_refused_during_capture(tmp_path):
    x = torch.ones(2, device="cuda")
    rec = TensorRecorder(execution="cuda_graph", bundle_dir=tmp_path / "run")

    def body():
        rec.observe(x + 1, name="y")
        with rec.record_point("inside"):
            pass

    with pytest.raises(RecorderStateError, match="during a CUDA graph capture"):
        capture(body)
    rec.close(synchronize=False)


def test_exported_steps_are_real_replay_indices():
    class Writer:
        def __init__(self):
            self.steps = []

        def add_scalar(self, tag, value, step, walltime=None):
            self.steps.append((tag, step))

    x = torch.ones(2, device="cuda")
    probe = TensorProbe("tb", [RecordAction()])
    graph = capture(lambda: probe(x, name="v"))
    snapshots = []
    for _ in range(3):
        graph.replay()
        snapshots.append(probe.snapshot(synchronize=torch.cuda.current_stream()))
    writer = Writer()
    export_snapshots_to_tensorboard(writer, snapshots)
    assert [step for tag, step in writer.steps if tag == "v/mean"] == [1, 2, 3]
    del graph
    probe.close()
