"""History analyses on real allocator snapshots recorded on the H200
(``tests/data/record_memory_fixtures.py``): between ``before`` and ``after`` the fixture
captures a CUDA graph that allocates ``capture_bytes`` (16 MiB) in its private pool, with
allocator history on. Stacks, events and lifetimes must each find exactly that block, at
the line of the fixture script that allocated it."""

from __future__ import annotations

import json
import os

import pytest
from torch_cudagraph_debug.memory_debug import (
    MemoryAttributionOptions,
    MemoryPoolKey,
    MemoryRun,
    import_snapshots,
)

DATA = os.path.join(os.path.dirname(__file__), "data")
PRIVATE = (1, 0)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> MemoryRun:
    names = ["memory_default_before.pickle", "memory_default_after.pickle"]
    return import_snapshots(
        [os.path.join(DATA, n) for n in names],
        run_dir=tmp_path_factory.mktemp("real") / "run",
        labels=["before", "after"],
    )


@pytest.fixture(scope="module")
def capture_bytes() -> int:
    with open(os.path.join(DATA, "memory_fixtures.json")) as f:
        return int(json.load(f)["memory_default_after.pickle"]["capture_bytes"])


def _capture_frame(frames: list[dict[str, object]]) -> bool:
    """The fixture's ``torch.empty(CAPTURE_BYTES, ...)`` inside ``torch.cuda.graph``."""
    return any(
        str(f["filename"]).endswith("record_memory_fixtures.py") and f["name"] == "record_variant"
        for f in frames
    )


def test_stacks_attribute_the_capture_to_its_line(run: MemoryRun, capture_bytes: int) -> None:
    c = run.compare("before", "after", attribution=MemoryAttributionOptions(stacks=True))
    assert c.attribution_status.stacks.available and c.attribution_status.stacks.complete
    grown = [d for d in c.stack_deltas if d.delta_size_bytes == capture_bytes]
    assert len(grown) == 1
    assert grown[0].candidate_key == MemoryPoolKey(0, PRIVATE)
    assert _capture_frame(grown[0].stack_frames)
    pool = next(p for p in c.pools if p.candidate_key == MemoryPoolKey(0, PRIVATE))
    assert pool.match == "candidate_only"
    assert pool.delta.active_bytes >= capture_bytes


def test_events_between_the_points_hold_the_capture(run: MemoryRun, capture_bytes: int) -> None:
    c = run.compare("before", "after", attribution=MemoryAttributionOptions(events=True))
    assert c.attribution_status.events.complete
    allocs = [
        e
        for e in c.event_summaries
        if e.action == "alloc" and e.pool_id == PRIVATE and e.total_bytes == capture_bytes
    ]
    assert len(allocs) == 1 and allocs[0].count == 1
    assert allocs[0].attribution_confidence in ("reported", "matched")
    assert _capture_frame(allocs[0].stack_frames)


def test_lifetimes_find_the_capture_born_and_alive(run: MemoryRun, capture_bytes: int) -> None:
    analysis = run.lifetimes()
    private = [c for c in analysis.cohorts if c.pool_id == PRIVATE]
    big = [c for c in private if c.born_bytes == capture_bytes]
    assert len(big) == 1
    cohort = big[0]
    assert cohort.peak_active_bytes == capture_bytes
    assert cohort.free_requested_bytes == 0 and cohort.free_completed_bytes == 0
    assert [p.owner_active_bytes for p in cohort.points] == [0, capture_bytes]
