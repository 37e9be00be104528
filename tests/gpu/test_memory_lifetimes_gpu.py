"""Allocation lifetimes on the real CUDA caching allocator: history recorded by torch
(`_record_memory_history(max_entries=...)`), points by a MemoryRecorder, allocations whose
sizes and lifetimes are known."""

from __future__ import annotations

import pytest
import torch
from torch_cudagraph_debug.errors import MemoryHistoryTruncatedError
from torch_cudagraph_debug.memory_debug import (
    MemoryLifetimeSelection,
    MemoryRecorder,
    MemoryRun,
)

MIB = 1024 * 1024


def _kept_scratch(n: int) -> torch.Tensor:
    return torch.empty(n, dtype=torch.uint8, device="cuda")


def _transient(n: int) -> None:
    t = torch.empty(n, dtype=torch.uint8, device="cuda")
    t.fill_(1)
    del t


def test_leak_transient_and_release_on_cuda(tmp_path, allocator_history) -> None:
    held = []
    with MemoryRecorder(name="life-gpu", run_dir=tmp_path / "run") as rec:
        rec.record_point("start")
        held.append(_kept_scratch(8 * MIB))
        _transient(32 * MIB)
        torch.cuda.synchronize()
        rec.record_point("middle")
        held.clear()
        rec.record_point("end")
    run = MemoryRun.load(tmp_path / "run")

    born = run.lifetimes(MemoryLifetimeSelection.born_between("start", "middle"))
    sizes = sorted(c.event_owner_peak_bytes for c in born.cohorts)
    assert 8 * MIB in sizes and 32 * MIB in sizes, sizes
    transient = next(c for c in born.cohorts if c.event_owner_peak_bytes == 32 * MIB)
    assert transient.peak_active_bytes == 0, "freed before the middle snapshot"
    assert transient.free_completed_bytes == 32 * MIB
    kept = next(c for c in born.cohorts if c.event_owner_peak_bytes == 8 * MIB)
    assert [p.owner_active_bytes for p in kept.points] == [0, 8 * MIB, 0]
    assert kept.free_requested_bytes == 8 * MIB
    assert kept.pool_id == (0, 0)

    active = run.lifetimes(MemoryLifetimeSelection.active_at("middle"), through="end")
    assert any(c.peak_active_bytes >= 8 * MIB for c in active.cohorts)


def test_overwritten_ring_is_refused_on_cuda(tmp_path) -> None:
    torch.cuda.memory._record_memory_history(
        enabled="all", context="all", stacks="python", max_entries=64
    )
    try:
        with MemoryRecorder(name="ring", run_dir=tmp_path / "run") as rec:
            rec.record_point("a")
            for _ in range(200):
                _transient(MIB)
            rec.record_point("b")
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    with pytest.raises(MemoryHistoryTruncatedError):
        MemoryRun.load(tmp_path / "run").lifetimes()
