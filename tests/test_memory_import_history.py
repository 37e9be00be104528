"""Lifetimes and attribution between imported ``_dump_snapshot`` pickles of one process
with allocator history on and no recorder (so no metadata markers).

Each file holds the allocator's whole trace ring, so consecutive rings overlap; torch
records a ``snapshot`` entry (sized by the bytes active on the device) right after
gathering a snapshot's traces, so snapshot N's entry sits in snapshot N+1's ring just after
the last entry N saw. The import joins the rings there: every entry stored once, the
``snapshot`` entries kept out of the windows (they are boundaries), and a ring that no
longer reaches back to the previous snapshot is a truncated window.

The workload (``FakeAllocator``, shaped like torch 2.11's snapshots), per interval:

- before ``start``: two 2 MiB ``weights`` blocks;
- ``start -> mid``: four 1 MiB ``activations`` born and kept, one 3 MiB ``scratch`` born
  and freed (a transient no snapshot sees);
- ``mid -> end``: two activations and one weights block freed, one 4 MiB ``grads`` born.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from test_memory_support import MIB, FakeAllocator, dump
from torch_cudagraph_debug.memory_debug import (
    AllocationCohort,
    MemoryAttributionOptions,
    MemoryHistoryBoundaryError,
    MemoryHistoryTruncatedError,
    MemoryLifetimeSelection,
    MemoryRun,
    import_snapshots,
)

ALL = MemoryAttributionOptions(stacks=True, events=True, lifetimes=True)


def _write(alloc: FakeAllocator, tmp_path: Path, name: str) -> str:
    """What ``torch.cuda.memory._dump_snapshot(path)`` does: pickle ``_snapshot()``."""
    return dump(alloc.snapshot(), str(tmp_path / f"{name}.pickle"), pickle.DEFAULT_PROTOCOL)


def _import(tmp_path: Path, files: list[str]) -> MemoryRun:
    return import_snapshots(files, run_dir=tmp_path / "run")


def _workload(
    tmp_path: Path, alloc: FakeAllocator | None = None
) -> tuple[FakeAllocator, list[str]]:
    """The three dumps of the module's workload; returns the allocator and the files."""
    alloc = alloc or FakeAllocator()
    seg = alloc.segment(64 * MIB)
    weights = [alloc.lifetime_alloc(seg, 2 * MIB, "weights") for _ in range(2)]
    files = [_write(alloc, tmp_path, "start")]
    activations = [alloc.lifetime_alloc(seg, MIB, "activations") for _ in range(4)]
    scratch = alloc.lifetime_alloc(seg, 3 * MIB, "scratch")
    alloc.free(scratch)
    files.append(_write(alloc, tmp_path, "mid"))
    alloc.free(activations[0])
    alloc.free(activations[1])
    alloc.free(weights[0])
    alloc.lifetime_alloc(seg, 4 * MIB, "grads")
    files.append(_write(alloc, tmp_path, "end"))
    return alloc, files


def _cohort(result, site: str) -> AllocationCohort:
    (cohort,) = [c for c in result.cohorts if c.stack_frames and c.stack_frames[0][2] == site]
    return cohort


def _by_action(summaries) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for e in summaries:
        count, total = out.get(e.action, (0, 0))
        out[e.action] = (count + e.count, total + e.total_bytes)
    return out


def test_three_overlapping_dumps_give_complete_windows_and_lifetimes(tmp_path: Path) -> None:
    _, files = _workload(tmp_path)
    run = _import(tmp_path, files)
    statuses = [p.device_readings[0].history_status for p in run.points]
    assert statuses == ["first_point", "complete", "complete"]

    result = run.lifetimes()
    assert result.points == ("start", "mid", "end")
    weights = _cohort(result, "weights")
    assert weights.generation_count == 2
    assert [p.owner_active_bytes for p in weights.points] == [4 * MIB, 4 * MIB, 2 * MIB]
    assert weights.free_completed_bytes == 2 * MIB
    activations = _cohort(result, "activations")
    assert activations.generation_count == 4
    assert activations.born_bytes == 4 * MIB
    assert activations.free_requested_bytes == activations.free_completed_bytes == 2 * MIB
    assert [p.owner_active_bytes for p in activations.points] == [0, 4 * MIB, 2 * MIB]
    assert activations.owner_active_at_end_bytes == 2 * MIB
    scratch = _cohort(result, "scratch")
    assert (scratch.born_bytes, scratch.free_completed_bytes) == (3 * MIB, 3 * MIB)
    # Born and freed between two dumps: only the events between them show it.
    assert scratch.peak_active_bytes == 0
    assert scratch.event_owner_peak_bytes == 3 * MIB
    grads = _cohort(result, "grads")
    assert grads.born_bytes == 4 * MIB
    assert [p.owner_active_bytes for p in grads.points] == [0, 0, 4 * MIB]


def test_lifetime_selections_between_dumps(tmp_path: Path) -> None:
    _, files = _workload(tmp_path)
    run = _import(tmp_path, files)
    born = run.lifetimes(MemoryLifetimeSelection.born_between("start", "mid"))
    assert {c.stack_frames[0][2]: c.born_bytes for c in born.cohorts if c.born_bytes} == {
        "activations": 4 * MIB,
        "scratch": 3 * MIB,
    }
    later = run.lifetimes(MemoryLifetimeSelection.born_between("mid", "end"))
    assert {c.stack_frames[0][2]: c.born_bytes for c in later.cohorts if c.born_bytes} == {
        "grads": 4 * MIB
    }
    held = run.lifetimes(MemoryLifetimeSelection.active_at("mid"), through="end")
    assert _cohort(held, "activations").generation_count == 4
    assert _cohort(held, "weights").generation_count == 2
    assert not [c for c in held.cohorts if c.stack_frames[0][2] in ("scratch", "grads")]


def test_attribution_between_dumps(tmp_path: Path) -> None:
    _, files = _workload(tmp_path)
    run = _import(tmp_path, files)
    c = run.compare("start", "mid", attribution=ALL)
    assert c.attribution_status.events.complete
    deltas = {d.stack_frames[0]["name"]: d for d in c.stack_deltas if d.stack_frames}
    assert (deltas["activations"].delta_size_bytes, deltas["activations"].delta_count) == (
        4 * MIB,
        4,
    )
    assert deltas["weights"].delta_size_bytes == 0
    assert "scratch" not in deltas  # never live at either dump
    # The start dump's own `snapshot` entry opens the window; it is not an event of it.
    assert _by_action(c.event_summaries) == {
        "alloc": (5, 4 * MIB + 3 * MIB),
        "free_requested": (1, 3 * MIB),
        "free_completed": (1, 3 * MIB),
    }
    assert c.allocation_lifetimes is not None
    assert _cohort(c.allocation_lifetimes, "scratch").born_bytes == 3 * MIB

    c = run.compare("mid", "end", attribution=ALL)
    deltas = {d.stack_frames[0]["name"]: d for d in c.stack_deltas if d.stack_frames}
    assert deltas["activations"].delta_size_bytes == -2 * MIB
    assert deltas["weights"].delta_size_bytes == -2 * MIB
    assert deltas["grads"].delta_size_bytes == 4 * MIB
    assert _by_action(c.event_summaries) == {
        "alloc": (1, 4 * MIB),
        "free_requested": (3, 4 * MIB),
        "free_completed": (3, 4 * MIB),
    }


def test_an_entry_in_several_rings_is_stored_once(tmp_path: Path) -> None:
    alloc, files = _workload(tmp_path)
    run = _import(tmp_path, files)
    events = run.table("memory_events").to_pylist()
    keys = [(e["action"], e["address"], e["time_us"]) for e in events]
    assert len(keys) == len(set(keys))
    # The last file's ring holds the whole history: every entry it has is stored once,
    # except the `snapshot` entries, which are the boundaries between the files.
    ring = alloc.rings[0][:-1]  # the end dump's own entry came after its ring
    expected = [(e["action"], e["addr"], e["time_us"]) for e in ring if e["action"] != "snapshot"]
    assert sorted(keys) == sorted(expected)
    # The weights allocations are in all three rings.
    weights = [e for e in events if e["action"] == "alloc" and e["size"] == 2 * MIB]
    assert len(weights) == 2
    assert {e["point_index"] for e in weights} == {0}


def test_history_switched_on_just_before_the_first_dump(tmp_path: Path) -> None:
    # The first ring is empty: only the first dump's own entry, first in the next ring,
    # joins the two. A second device that never allocates has the same empty ring.
    alloc = FakeAllocator(devices=2)
    files = [_write(alloc, tmp_path, "empty")]
    _, more = _workload(tmp_path, alloc)
    run = _import(tmp_path, files + more)
    for point in run.points[1:]:
        assert {d: r.history_status for d, r in point.device_readings.items()} == {
            0: "complete",
            1: "complete",
        }
    result = run.lifetimes()
    assert _cohort(result, "weights").born_bytes == 4 * MIB
    assert [p.owner_active_bytes for p in _cohort(result, "weights").points] == [
        0,
        4 * MIB,
        4 * MIB,
        2 * MIB,
    ]


def test_a_ring_that_does_not_reach_back_is_truncated(tmp_path: Path) -> None:
    alloc = FakeAllocator(max_entries=8)
    seg = alloc.segment(8 * MIB)
    files = [_write(alloc, tmp_path, "a")]
    alloc.churn(seg, 10)  # 30 entries: the ring no longer holds the first dump's
    files.append(_write(alloc, tmp_path, "b"))
    run = _import(tmp_path, files)
    assert run["b"].device_readings[0].history_status == "truncated"
    with pytest.raises(MemoryHistoryTruncatedError, match=r"device 0.*'a'.*'b'"):
        run.lifetimes()
    with pytest.raises(MemoryHistoryTruncatedError):
        run.compare("a", "b", attribution=MemoryAttributionOptions(events=True))
    c = run.compare("a", "b", attribution=MemoryAttributionOptions(lifetimes=True))
    assert c.allocation_lifetimes is None
    assert not c.attribution_status.lifetimes.available
    (why,) = [w for w in c.warnings if "lifetime" in w]
    assert why.startswith("lifetime attribution is unavailable:") and "truncated" in why


def test_history_switched_on_between_dumps_has_no_boundary(tmp_path: Path) -> None:
    # No history when the first file was dumped, so no entry of it in the next ring:
    # nothing proves the second ring starts where the first dump was taken.
    alloc = FakeAllocator(history=False)
    seg = alloc.segment(8 * MIB)
    files = [_write(alloc, tmp_path, "a")]
    alloc.history = True
    alloc.alloc(seg, MIB)
    files.append(_write(alloc, tmp_path, "b"))
    run = _import(tmp_path, files)
    assert run["b"].device_readings[0].history_status == "boundary_unavailable"
    with pytest.raises(MemoryHistoryBoundaryError, match="device 0"):
        run.lifetimes()
