"""Known answers on a real four-point allocator history recorded on the H200
(``tests/data/record_memory_fixtures.py``, ``memory_history_*.pickle``). One process with
history on from its first allocation, between its points:

- ``start -> allocated``: four 2 MiB blocks born and kept, one 6 MiB block born and freed;
- ``allocated -> captured``: a CUDA graph capture allocating 16 MiB in its private pool
  (and, as ``torch.cuda.graph`` does on entry, releasing the cache and allocating two
  8-byte tensors in ``capture_begin``: two 512 B blocks of the default pool);
- ``captured -> freed``: two of the four kept blocks freed.

Every figure below follows from that workload (2 MiB multiples are not rounded by the
allocator), and every analysis must find it: state deltas, stack and event attribution,
lifetimes and their selections, the timeline."""

from __future__ import annotations

import json
import os

import pytest
from torch_cudagraph_debug.memory_debug import (
    AllocationCohort,
    MemoryAttributionOptions,
    MemoryLifetimeSelection,
    MemoryPoolKey,
    MemoryRun,
    import_snapshots,
)

DATA = os.path.join(os.path.dirname(__file__), "data")
MIB = 1024 * 1024
DEFAULT, PRIVATE = MemoryPoolKey(0, (0, 0)), MemoryPoolKey(0, (1, 0))
ALL = MemoryAttributionOptions(stacks=True, events=True, lifetimes=True)
# torch.cuda.graph's capture_begin allocates two 8-byte tensors: 512 B blocks.
CAPTURE_BEGIN_BLOCK = 512


@pytest.fixture(scope="module")
def facts() -> dict:
    with open(os.path.join(DATA, "memory_history.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def run(facts: dict, tmp_path_factory: pytest.TempPathFactory) -> MemoryRun:
    points = facts["points"]
    return import_snapshots(
        [os.path.join(DATA, p["file"]) for p in points],
        run_dir=tmp_path_factory.mktemp("history") / "run",
        labels=[p["label"] for p in points],
    )


def _cohorts_of_size(result, size: int) -> list[AllocationCohort]:
    """Cohorts of the fixture script whose blocks are `size` bytes."""
    return [
        c
        for c in result.cohorts
        if c.stack_frames
        and c.stack_frames[0][0].endswith("record_memory_fixtures.py")
        and any(b.size_bytes == size for b in c.size_histogram)
    ]


def test_the_fixture_is_the_documented_workload(facts: dict, run: MemoryRun) -> None:
    w = facts["workload"]
    assert (w["kept_blocks"], w["kept_block_bytes"]) == (4, 2 * MIB)
    assert (w["transient_bytes"], w["capture_bytes"], w["freed_blocks"]) == (6 * MIB, 16 * MIB, 2)
    assert run.labels == ("start", "allocated", "captured", "freed")
    statuses = [p.device_readings[0].history_status for p in run.points]
    assert statuses == ["first_point", "complete", "complete", "complete"]


def test_state_deltas_between_each_pair_of_points(run: MemoryRun) -> None:
    allocated = run.compare("start", "allocated")
    default = next(p for p in allocated.pools if p.candidate_key == DEFAULT)
    assert default.delta.allocated_bytes == 4 * 2 * MIB  # the transient is gone again
    captured = run.compare("allocated", "captured")
    default = next(p for p in captured.pools if p.candidate_key == DEFAULT)
    assert default.delta.allocated_bytes == 2 * CAPTURE_BEGIN_BLOCK
    private = next(p for p in captured.pools if p.candidate_key == PRIVATE)
    assert private.match == "candidate_only"
    assert private.delta.allocated_bytes == 16 * MIB
    freed = run.compare("captured", "freed")
    default = next(p for p in freed.pools if p.candidate_key == DEFAULT)
    assert default.delta.allocated_bytes == -2 * 2 * MIB


def test_events_count_every_allocation_and_free_of_the_interval(run: MemoryRun) -> None:
    c = run.compare("start", "allocated", attribution=ALL)
    assert c.attribution_status.events.complete
    by_action: dict[str, tuple[int, int]] = {}
    for e in c.event_summaries:
        count, total = by_action.get(e.action, (0, 0))
        by_action[e.action] = (count + e.count, total + e.total_bytes)
    assert by_action["alloc"] == (5, 4 * 2 * MIB + 6 * MIB)
    assert by_action["free_completed"] == (1, 6 * MIB)


def test_stacks_put_the_capture_in_its_private_pool(run: MemoryRun) -> None:
    c = run.compare("allocated", "captured", attribution=MemoryAttributionOptions(stacks=True))
    grown = [d for d in c.stack_deltas if d.delta_size_bytes == 16 * MIB]
    assert len(grown) == 1 and grown[0].candidate_key == PRIVATE
    assert any(
        str(f["filename"]).endswith("record_memory_fixtures.py") for f in grown[0].stack_frames
    )


def test_lifetimes_of_the_whole_run(run: MemoryRun) -> None:
    result = run.lifetimes()
    assert result.points == ("start", "allocated", "captured", "freed")
    (kept,) = _cohorts_of_size(result, 2 * MIB)
    assert kept.generation_count == 4
    assert kept.born_bytes == 4 * 2 * MIB
    assert kept.free_completed_bytes == 2 * 2 * MIB
    assert [p.owner_active_bytes for p in kept.points] == [0, 8 * MIB, 8 * MIB, 4 * MIB]
    outcomes = sorted((o.outcome, o.count) for o in kept.size_outcomes)
    assert outcomes == [("free_completed", 2), ("owner_active", 2)]
    (transient,) = _cohorts_of_size(result, 6 * MIB)
    assert (transient.born_bytes, transient.free_completed_bytes) == (6 * MIB, 6 * MIB)
    # Never seen by a snapshot, only by the events between two of them.
    assert transient.peak_active_bytes == 0
    assert transient.event_owner_peak_bytes == 6 * MIB
    (capture,) = _cohorts_of_size(result, 16 * MIB)
    assert capture.pool_id == (1, 0)
    assert [p.owner_active_bytes for p in capture.points] == [0, 0, 16 * MIB, 16 * MIB]


def test_lifetime_selections(run: MemoryRun) -> None:
    born = run.lifetimes(MemoryLifetimeSelection.born_between("allocated", "captured"))
    by_pool = {c.pool_id: c for c in born.cohorts if c.born_bytes}
    assert set(by_pool) == {(0, 0), (1, 0)}
    assert by_pool[(1, 0)].born_bytes == 16 * MIB
    assert by_pool[(0, 0)].born_bytes == 2 * CAPTURE_BEGIN_BLOCK
    assert by_pool[(0, 0)].stack_frames[0][2] == "capture_begin"
    alive = run.lifetimes(MemoryLifetimeSelection.active_at("freed"))
    (kept,) = _cohorts_of_size(alive, 2 * MIB)
    assert kept.generation_count == 2  # the two blocks still held at "freed"
    assert not _cohorts_of_size(alive, 6 * MIB)
    through = run.lifetimes(through="allocated")
    assert through.points == ("start", "allocated")


def test_a_comparison_carries_the_lifetimes_of_its_range(run: MemoryRun) -> None:
    c = run.compare("captured", "freed", attribution=ALL)
    status = c.attribution_status.lifetimes
    assert (status.requested, status.available, status.complete) == (True, True, True)
    (kept,) = _cohorts_of_size(c.allocation_lifetimes, 2 * MIB)
    assert [p.owner_active_bytes for p in kept.points] == [8 * MIB, 4 * MIB]


def test_the_timeline_follows_the_workload(run: MemoryRun) -> None:
    timeline = run.timeline()
    default = [e for e in timeline.pool_entries if e.pool_key == DEFAULT]
    changes = [None if e.delta is None else e.delta.allocated_bytes for e in default]
    assert changes == [None, 8 * MIB, 2 * CAPTURE_BEGIN_BLOCK, -4 * MIB]


def test_the_cli_prints_the_attribution_it_was_asked_for(
    run: MemoryRun, capsys: pytest.CaptureFixture[str]
) -> None:
    from torch_cudagraph_debug.cli import memory_main

    args = ["compare-points", run.path, "allocated", "captured", "--only-changed"]
    assert memory_main([*args, "--stacks"]) == 0
    out = capsys.readouterr().out
    assert "allocation stacks (2 of 2 rows)" in out and "capture_begin" in out
    assert memory_main([*args, "--lifetimes", "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "Allocation lifetimes 'import'" in out and "cohorts: 3 (showing 1)" in out
    assert memory_main(args) == 0
    out = capsys.readouterr().out
    assert "allocation stacks" not in out and "Allocation lifetimes" not in out
