"""Stack and event attribution on real allocator history (run on the GPU machine): live
block frames name this file's allocating function, and the events between two recorder
points are the allocations made between them."""

from __future__ import annotations

import pytest
import torch
from torch_cudagraph_debug.memory_debug import (
    MemoryAttributionOptions,
    MemoryProbe,
    MemoryRecorder,
)

MIB = 1024 * 1024


@pytest.fixture
def history(allocator_history):
    # Blocks other tests of this process left alive carry no frames (they predate the
    # history); a small block allocated here does, so no endpoint has zero stack coverage
    # (which is an error by design) and ours stay a known part of it.
    anchor = torch.empty(MIB // 4, device="cuda")
    yield
    del anchor


def allocate_named_buffers():
    # 8 MiB and 4 MiB float32 buffers: sizes the allocator keeps exact (multiples of 2 MiB).
    return [torch.empty(2 * MIB, device="cuda"), torch.empty(MIB, device="cuda")]


def test_stacks_and_events_between_recorder_points(tmp_path, history) -> None:
    options = MemoryAttributionOptions(stacks=True, events=True)
    with MemoryRecorder(name="gpu", run_dir=tmp_path / "gpu") as rec:
        rec.record_point("start")
        buffers = allocate_named_buffers()
        rec.record_point("end")
        del buffers
        rec.record_point("freed")
    run = rec.result
    c = run.compare("start", "end", attribution=options)
    assert c.attribution_status.stacks.available
    assert c.attribution_status.events.complete
    cov = c.candidate_stack_coverage
    assert cov.active_bytes >= 12 * MIB and cov.attributed_bytes > 0
    ours = [
        d
        for d in c.stack_deltas
        if any(f["name"] == "allocate_named_buffers" for f in d.stack_frames)
    ]
    assert sum(d.delta_size_bytes for d in ours) == 12 * MIB
    allocs = [
        e
        for e in c.event_summaries
        if e.action == "alloc"
        and any(f["name"] == "allocate_named_buffers" for f in e.stack_frames)
    ]
    assert sum(e.count for e in allocs) == 2
    assert sum(e.total_bytes for e in allocs) == 12 * MIB
    assert all(e.attribution_confidence in ("reported", "matched") for e in allocs)
    assert all(e.pool_id == (0, 0) for e in allocs)
    freed = run.compare("end", "freed", attribution=options)
    completed = [
        e
        for e in freed.event_summaries
        if e.action == "free_completed" and e.total_bytes >= 4 * MIB
    ]
    assert sum(e.total_bytes for e in completed) >= 12 * MIB
    assert "allocate_named_buffers" in c.to_text(stack_depth=8)
    timeline = run.timeline(attribution=options)
    assert len(timeline.point_comparisons) == 2


def test_probe_events_on_cuda(history) -> None:
    probe = MemoryProbe()
    a = probe.snapshot()
    buffers = allocate_named_buffers()
    b = probe.snapshot()
    c = probe.compare(a, b, attribution=MemoryAttributionOptions(stacks=True, events=True))
    named = [
        e
        for e in c.event_summaries
        if e.action == "alloc"
        and any(f["name"] == "allocate_named_buffers" for f in e.stack_frames)
    ]
    assert sum(e.total_bytes for e in named) == 12 * MIB
    del buffers
