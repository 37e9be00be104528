"""TensorProbe and the probe op on CPU: what works without a GPU, and every misuse."""

from __future__ import annotations

import pytest
import torch
from torch_cudagraph_debug import _native, errors
from torch_cudagraph_debug._probe_op import probe_op
from torch_cudagraph_debug.tensor_debug import (
    CheckAction,
    PrintAction,
    RecordAction,
    TensorProbe,
    TensorRecorder,
)


def test_eager_probe_resamples_one_slot_per_name():
    probe = TensorProbe("cpu", when="always")
    x = torch.arange(4.0)
    assert probe(x, name="a") is x
    probe(x * 2, name="a")
    probe(x.int(), name="b")
    x.add_(100)  # the slot holds a copy, not the tensor
    snap = probe.snapshot()
    assert snap.replay_index == 0 and snap.snapshot_index == 0
    assert snap.tensor("a").tolist() == [0.0, 2.0, 4.0, 6.0]
    assert snap.tensor("b").dtype is torch.int32
    assert snap.overwrite_counts == {("a", 0): 1, ("b", 0): 0}
    assert [o.order for o in snap.observations] == [0, 1]
    a = snap.observation("a")
    assert a.summary.mean == 3.0 and a.digest.startswith("blake3:")
    assert probe.snapshot().snapshot_index == 1
    with pytest.raises(errors.InvalidInputError, match="one slot per name"):
        probe(torch.zeros(3), name="a")


def test_capture_mode_eager_calls_are_no_ops():
    probe = TensorProbe("silent")
    x = torch.ones(2)
    assert probe(x) is x
    # Nothing was observed, so there is no snapshot to take.
    with pytest.raises(errors.NoObservationsError, match="when='always'"):
        probe.snapshot()


def test_failed_calls_use_no_index_and_misuse_is_typed():
    probe = TensorProbe("strict", when="always")
    with pytest.raises(errors.NonContiguousTensorError, match="non_contiguous='copy'"):
        probe(torch.ones(2, 3).t(), name="t")
    with pytest.raises(errors.UnsupportedDtypeError, match="qint8"):
        probe(torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8), name="q")
    with pytest.raises(errors.InvalidInputError, match=r"expected a torch\.Tensor"):
        probe([1.0], name="l")
    probe(torch.ones(1), name="t")
    assert [o.order for o in probe.snapshot().observations] == [0]
    copying = TensorProbe("copying", when="always", non_contiguous="copy")
    t = torch.arange(6.0).reshape(2, 3).t()
    copying(t, name="t")
    obs = copying.snapshot().observation("t")
    assert obs.stride == (1, 3) and torch.equal(obs.tensor(), t)
    probe.close()
    probe.close()
    with pytest.raises(errors.ProbeClosedError):
        probe(torch.ones(1), name="late")
    with pytest.raises(errors.ProbeClosedError):
        probe.snapshot()


def test_cpu_tensor_in_a_cuda_probe_is_rejected():
    probe = TensorProbe("gpu-bound", device="cuda:0", when="always")
    with pytest.raises(errors.WrongDeviceError, match="CPU tensor in a CUDA probe"):
        probe(torch.ones(2), name="x")


def test_print_and_check_need_a_cuda_probe():
    probe = TensorProbe("p", [RecordAction(), PrintAction()], when="always")
    with pytest.raises(errors.InvalidInputError, match="need a CUDA probe"):
        probe(torch.ones(2), name="x")


def test_actions_validate_their_arguments():
    with pytest.raises(errors.InvalidInputError, match="max_items"):
        PrintAction(max_items=0)
    with pytest.raises(errors.InvalidInputError, match="every"):
        PrintAction(every=1.5)
    with pytest.raises(errors.InvalidInputError, match="rtol"):
        CheckAction(torch.ones(1), rtol=-1)
    with pytest.raises(errors.InvalidInputError, match="actions must be"):
        TensorProbe("bad", [object()])
    with pytest.raises(errors.InvalidInputError, match="when"):
        TensorProbe("bad", when="sometimes")
    check = CheckAction({("a", 0): [1.0, 2.0]})
    assert check.expected_for("a", 0, 0).tolist() == [1.0, 2.0]
    assert check.expected_for("b", 0, 1) is None
    ordered = CheckAction([torch.ones(1)])
    with pytest.raises(errors.InvalidInputError, match="capture order"):
        ordered.expected_for("b", 0, 1)


def test_the_probe_op_survives_dead_code_elimination():
    probe = TensorProbe("fx", when="always")

    def f(x):
        y = x * 2
        probe_op(y, probe._id, "0")
        return x + 1

    gm = torch.fx.symbolic_trace(f)
    gm.graph.eliminate_dead_code()
    assert any(n.target is probe_op for n in gm.graph.nodes), gm.graph


def test_cuda_runtime_without_a_driver_is_a_typed_error():
    if _native.cuda_available():
        pytest.skip("a CUDA driver is present")
    with pytest.raises(errors.CudaUnavailableError, match="libcuda"):
        _native.ProbeRuntime(0)


def test_cuda_graph_recorder_on_cpu_records_nothing_outside_capture(tmp_path):
    rec = TensorRecorder(execution="cuda_graph", run_dir=tmp_path / "run")
    x = torch.ones(2)
    assert rec.observe(x, name="x") is x
    strict = TensorRecorder(execution="cuda_graph", run_dir=tmp_path / "s", strict_scope=True)
    with pytest.raises(errors.RecorderStateError, match="outside a capture"):
        strict.observe(x, name="x")
    assert rec.finish().labels == ()


@pytest.mark.parametrize("history", [-1, 1025, 2.0, True])
def test_record_action_history_is_validated(history):
    with pytest.raises(errors.InvalidInputError, match=r"RecordAction\.history"):
        RecordAction(history=history)


def test_history_of_an_uncaptured_probe_is_empty_and_needs_a_depth():
    probe = TensorProbe("h", [RecordAction(history=4)], when="always")
    probe(torch.ones(2), name="v")
    # Only replays of a captured graph enter the ring; eager calls re-sample the slot.
    assert probe.history() == ()
    assert probe.history_frozen_at is None
    with pytest.raises(errors.RecorderStateError, match="before the probe was captured"):
        probe.freeze_history()
    with pytest.raises(errors.RecorderStateError, match=r"RecordAction\(history=N\)"):
        TensorProbe("none", when="always").history()
    # The deepest enabled RecordAction decides the depth.
    deep = TensorProbe("d", [RecordAction(history=2), RecordAction(history=7)])
    assert deep.history_depth == 7
    assert TensorProbe("off", [RecordAction(history=9, enabled=False)]).history_depth == 0
