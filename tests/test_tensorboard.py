"""TensorBoard export, read back with TensorBoard's own EventAccumulator."""

from __future__ import annotations

import math

import pytest
import torch
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.tensor_debug import TensorProbe, TensorRecorder, export_to_tensorboard

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason="tensorboard is a test requirement (pyproject extras 'test')",
)


def load(log_dir):
    acc = event_accumulator.EventAccumulator(
        str(log_dir), size_guidance={"scalars": 0, "histograms": 0}
    )
    acc.Reload()
    return acc


@pytest.fixture
def run(tmp_path):
    with TensorRecorder(run_dir=tmp_path / "run") as rec:
        for step in range(3):
            with rec.record_point(f"step{step}"):
                x = torch.linspace(-1, 1, 11) * (step + 1)
                x[0] = math.nan if step == 2 else x[0]
                rec.observe(x, name="x")
                rec.observe(torch.tensor([step, step + 1]), name="ids", payload="summary")
    return rec.result


def test_scalars_are_the_summaries_of_every_point(tmp_path, run):
    log_dir = export_to_tensorboard(run, tmp_path / "tb")
    acc = load(log_dir)
    tags = set(acc.Tags()["scalars"])
    assert {"x[0]/mean", "x[0]/std", "x[0]/max", "x[0]/nan_count", "ids[0]/mean"} <= tags
    assert acc.Tags()["histograms"] == []
    for tag, field in (("x[0]/mean", "mean"), ("x[0]/max", "max"), ("x[0]/nan_count", "nan_count")):
        events = acc.Scalars(tag)
        assert [e.step for e in events] == [0, 1, 2]
        for event, point in zip(events, run.points, strict=True):
            want = getattr(point.observation("x").summary, field)
            assert math.isclose(event.value, want, rel_tol=1e-6, abs_tol=1e-7), (tag, event, want)
            assert math.isclose(event.wall_time, point.timestamp.timestamp(), abs_tol=1e-3)
    assert [e.value for e in acc.Scalars("x[0]/nan_count")] == [0.0, 0.0, 1.0]


def test_histograms_on_request(tmp_path, run):
    with pytest.warns(UserWarning, match="summary-only"):
        export_to_tensorboard(run, tmp_path / "tb", histograms=True, tag_prefix="run/")
    acc = load(tmp_path / "tb")
    assert acc.Tags()["histograms"] == ["run/x[0]"]
    histograms = acc.Histograms("run/x[0]")
    assert [h.step for h in histograms] == [0, 1, 2]
    last = histograms[-1].histogram_value
    # The NaN is left out; the other ten values are there with their range.
    assert last.num == 10
    assert math.isclose(last.max, 3.0, rel_tol=1e-6)
    assert math.isclose(last.min, -3.0 * 0.8, rel_tol=1e-6)


def test_snapshots_use_the_replay_index_as_step(tmp_path):
    probe = TensorProbe("p", when="always")
    probe(torch.ones(4), name="a")
    first = probe.snapshot()
    probe(torch.ones(4) * 3, name="a")
    second = probe.snapshot()
    export_to_tensorboard([first, second], tmp_path / "tb")
    acc = load(tmp_path / "tb")
    # Eager snapshots have replay index 0: both land on step 0, in order.
    values = [(e.step, e.value) for e in acc.Scalars("a[0]/mean")]
    assert values == [(0, 1.0), (0, 3.0)]
    with pytest.raises(InvalidInputError, match="TensorRun"):
        export_to_tensorboard("not a run", tmp_path / "tb2")
