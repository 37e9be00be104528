"""RecordAction(history=N): the last N replays of each observation on the device, and
the flight recorder's failed-check trigger (run on the GPU machine)."""

from __future__ import annotations

import pytest
import torch
from torch_cudagraph_debug.errors import RecorderStateError
from torch_cudagraph_debug.tensor_debug import CheckAction, RecordAction, TensorProbe


def capture(fn):
    """Warm up on a side stream, then capture `fn` into a graph (the usual recipe)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def by_replay(snapshots):
    return {s.replay_index: {o.name: o.tensor() for o in s.observations} for s in snapshots}


@pytest.mark.parametrize("batched", [False, True], ids=["per-site", "batched"])
def test_the_ring_holds_the_last_n_replays_tagged_with_their_index(batched):
    step = torch.zeros(4, device="cuda")
    probe = TensorProbe("ring", [RecordAction(history=3)])

    def body():
        a = step + 1
        b = (step * 10).to(torch.float16)
        if batched:
            with probe.batched():
                probe(a, name="a")
                probe(b, name="b")
        else:
            probe(a, name="a")
            probe(b, name="b")
        return a

    graph, _ = capture(body)
    assert probe.history() == ()  # captured, never replayed
    for replay in range(1, 6):
        step.fill_(replay)
        graph.replay()
    snapshots = probe.history()
    assert [s.replay_index for s in snapshots] == [3, 4, 5]
    values = by_replay(snapshots)
    for replay in (3, 4, 5):
        assert torch.equal(values[replay]["a"], torch.full((4,), replay + 1.0))
        assert values[replay]["b"].dtype == torch.float16
        assert torch.equal(values[replay]["b"], torch.full((4,), replay * 10.0).half())
    # The latest snapshot agrees with the newest history entry.
    latest = {o.name: o.tensor() for o in probe.snapshot().observations}
    assert torch.equal(latest["a"], values[5]["a"])
    assert probe.history_frozen_at is None
    probe.close()


def test_a_failed_check_freezes_the_history_at_its_replay():
    x = torch.ones(8, device="cuda")
    probe = TensorProbe(
        "flight",
        [RecordAction(history=4), CheckAction(torch.full((8,), 2.0), rtol=0, atol=0)],
    )
    graph, _ = capture(lambda: probe(x * 2, name="doubled"))
    for replay in range(1, 11):
        x.fill_(1.0)
        x[0] = replay  # element 0 tells replays apart: from replay 2 on it fails the check
        graph.replay()
    torch.cuda.synchronize()
    assert probe.check_status().first_failure.replay_index == 2
    assert probe.history_frozen_at == 2
    snapshots = probe.history()
    # Frozen at replay 2: the ring keeps replays 1 and 2, not the eight after.
    assert [s.replay_index for s in snapshots] == [1, 2]
    assert [by_replay(snapshots)[r]["doubled"][0].item() for r in (1, 2)] == [2.0, 4.0]

    probe.rearm_history()
    assert probe.history_frozen_at is None
    for _ in range(11, 14):
        x.fill_(1.0)
        graph.replay()
    torch.cuda.synchronize()
    # Re-armed (and passing again), the ring records again.
    assert probe.history_frozen_at is None
    assert [s.replay_index for s in probe.history()][-3:] == [11, 12, 13]
    probe.close()


def test_a_user_call_freezes_the_history():
    x = torch.zeros(3, device="cuda")
    probe = TensorProbe("user-freeze", [RecordAction(history=2)])
    graph, _ = capture(lambda: probe(x + 1, name="v"))
    for replay in range(1, 4):
        x.fill_(replay)
        graph.replay()
    assert probe.freeze_history() == 3
    for _ in range(5):
        graph.replay()
    snapshots = probe.history()
    assert [s.replay_index for s in snapshots] == [2, 3]
    assert torch.equal(by_replay(snapshots)[3]["v"], torch.full((3,), 4.0))
    probe.close()


def test_history_needs_record_action_history():
    x = torch.zeros(3, device="cuda")
    probe = TensorProbe("no-history")
    graph, _ = capture(lambda: probe(x + 1, name="v"))
    graph.replay()
    with pytest.raises(RecorderStateError, match=r"RecordAction\(history=N\)"):
        probe.history()
    probe.close()
