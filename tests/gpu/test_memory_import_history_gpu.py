"""Lifetimes between imported ``torch.cuda.memory._dump_snapshot`` pickles of the real
caching allocator: history on (``_record_memory_history``), no recorder and no metadata
markers, three dumps whose rings overlap. The import joins the rings at each dump's own
``snapshot`` entry, so the windows between the dumps are complete."""

from __future__ import annotations

import pickle

import torch
from torch_cudagraph_debug.memory_debug import (
    MemoryAttributionOptions,
    MemoryLifetimeSelection,
    import_snapshots,
)

MIB = 1024 * 1024


def _kept(n: int) -> torch.Tensor:
    return torch.empty(n, dtype=torch.uint8, device="cuda")


def _transient(n: int) -> None:
    t = torch.empty(n, dtype=torch.uint8, device="cuda")
    t.fill_(1)
    del t


def _later(n: int) -> torch.Tensor:
    return torch.empty(n, dtype=torch.uint8, device="cuda")


def test_three_dumps_give_lifetimes_between_them(tmp_path, allocator_history) -> None:
    files = [str(tmp_path / f"{label}.pickle") for label in ("start", "mid", "end")]
    torch.cuda.memory._dump_snapshot(files[0])
    held = [_kept(8 * MIB)]
    _transient(32 * MIB)
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(files[1])
    held.clear()
    held.append(_later(4 * MIB))
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(files[2])

    run = import_snapshots(files, run_dir=tmp_path / "run")
    assert run.labels == ("start", "mid", "end")
    for point in run.points[1:]:
        statuses = {d: r.history_status for d, r in point.device_readings.items()}
        assert set(statuses.values()) == {"complete"}, (point.label, statuses)

    born = run.lifetimes(MemoryLifetimeSelection.born_between("start", "mid"), through="end")
    kept = next(c for c in born.cohorts if c.event_owner_peak_bytes == 8 * MIB)
    assert [p.owner_active_bytes for p in kept.points] == [0, 8 * MIB, 0]
    assert kept.born_bytes == kept.free_requested_bytes == 8 * MIB
    assert kept.pool_id == (0, 0)
    transient = next(c for c in born.cohorts if c.event_owner_peak_bytes == 32 * MIB)
    assert transient.peak_active_bytes == 0, "freed before the mid dump"
    assert transient.born_bytes == transient.free_completed_bytes == 32 * MIB
    later = run.lifetimes(MemoryLifetimeSelection.born_between("mid", "end"))
    (grown,) = [c for c in later.cohorts if c.born_bytes == 4 * MIB]
    assert [p.owner_active_bytes for p in grown.points] == [0, 4 * MIB]

    # Each entry of the overlapping rings is stored once; the dumps' own `snapshot`
    # entries after the first ring are the boundaries, stored in no window.
    with open(files[2], "rb") as f:
        last = pickle.load(f)  # written by this test
    device = torch.cuda.current_device()
    ring = last["device_traces"][device]
    stored = [e for e in run.table("memory_events").to_pylist() if e["device"] == device]
    assert len(stored) == len(ring) - 2
    later_windows = [e for e in stored if e["point_index"] > 0]
    assert "snapshot" not in {e["action"] for e in later_windows}

    c = run.compare("start", "mid", attribution=MemoryAttributionOptions(events=True))
    assert c.attribution_status.events.complete
    allocs = [e for e in c.event_summaries if e.action == "alloc"]
    assert sum(e.total_bytes for e in allocs) >= 8 * MIB + 32 * MIB
