"""Recording small tensor runs for the comparison tests."""

from __future__ import annotations

from typing import Any

from torch_cudagraph_debug.tensor_debug import TensorRecorder, TensorRun


def record(
    path: Any,
    points: Any,
    *,
    name: str = "model",
    rank: int | None = None,
    world_size: int | None = None,
    crash_after: int | None = None,
    **recorder: Any,
) -> TensorRun:
    """Records ``points``: (label, {name: tensor or (tensor, payload)}) pairs, in order.
    With ``crash_after=i`` the recorder is closed before point ``i``: the run stays
    incomplete, like a crashed rank's."""
    rec = TensorRecorder(name=name, run_dir=path, rank=rank, world_size=world_size, **recorder)
    for i, (label, observations) in enumerate(points):
        if i == crash_after:
            rec.close()
            return TensorRun.load(rec.path, name=name, rank=rec.rank)
        with rec.record_point(label):
            for obs_name, value in observations.items():
                tensor, payload = value if isinstance(value, tuple) else (value, None)
                rec.observe(tensor, name=obs_name, payload=payload)
    return rec.finish()
