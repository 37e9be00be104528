"""Multi-rank memory run groups: ranks recorded by separate processes into one job root,
checked as one group, summarised across ranks (extrema, never sums) and compared phase by
phase rank by rank. Every workload's bytes are known by construction."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from test_memory_support import GROUP_SUMMARY_FILES, MIB, FakeAllocator
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.memory_debug import (
    MemoryPoolKey,
    MemoryRecorder,
    MemoryRun,
    MemoryRunGroup,
    MemoryRunGroupPhaseComparison,
    MemoryRunGroupSummary,
    compare_run_group_phases,
)

TESTS = os.path.dirname(os.path.abspath(__file__))

# One rank of a job: a default-pool segment of 2 MiB, then between `start` and `end` a
# private pool (1, 0) with a block of `grow` MiB. With `hang`, the rank flushes after
# `mid` and waits to be killed, so its run stays incomplete with two points.
RANK_SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from test_memory_support import MIB, FakeAllocator
    from torch_cudagraph_debug.memory_debug import MemoryRecorder

    root, grow, hang = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "hang"
    alloc = FakeAllocator()
    alloc.alloc(alloc.segment(2 * MIB), MIB)
    rec = MemoryRecorder(name="job", run_dir=root, group_id="g1", _source=alloc)
    rec.record_point("start")
    seg = alloc.segment(grow * MIB, pool=(1, 0))
    alloc.alloc(seg, grow * MIB)
    rec.record_point("mid")
    if hang:
        rec.flush()
        print("ready", flush=True)
        time.sleep(600)
    rec.record_point("end")
    rec.finish()
    """
).format(tests=TESTS)


def _spawn(root, rank: int, world: int, grow: int, hang: bool = False) -> subprocess.Popen:
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world))
    return subprocess.Popen(
        [sys.executable, "-c", RANK_SCRIPT, str(root), str(grow), "hang" if hang else "run"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def record_job(root, grows: list[int], *, crash: int | None = None) -> None:
    """Every rank in its own process, all at once, into the one job root."""
    procs = [
        _spawn(root, rank, len(grows), grow, hang=rank == crash) for rank, grow in enumerate(grows)
    ]
    for rank, proc in enumerate(procs):
        if rank == crash:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
            assert proc.returncode == -signal.SIGKILL
        else:
            assert proc.wait(timeout=120) == 0


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("job")
    record_job(root, [8, 24])
    return root


def _agg(summary, label: str, metric: str, scope: str = "all"):
    return next(
        a
        for a in summary.point_aggregates
        if a.label == label and a.metric == metric and a.scope == scope
    )


def test_two_processes_one_root_summary(job) -> None:
    group = MemoryRunGroup.load(job)
    assert group.ranks == (0, 1)
    assert len(group) == 2
    assert group.complete and group.missing_ranks == ()
    assert group.labels == ("start", "mid", "end")
    assert group.world_size == 2 and group.group_id == "g1"
    assert isinstance(group[1], MemoryRun) and group[1].rank == 1
    with pytest.raises(KeyError):
        group[5]
    d = group.descriptor()
    assert d["ranks"] == [0, 1] and d["complete"] is True and d["name"] == "job"

    summary = group.summary()
    assert isinstance(summary, MemoryRunGroupSummary)
    # Rank r reserves 2 MiB of default pool plus its private pool at `mid` and `end`.
    reserved = _agg(summary, "end", "reserved_bytes")
    assert (reserved.min_bytes, reserved.max_bytes) == (10 * MIB, 26 * MIB)
    assert (reserved.min_rank, reserved.max_rank, reserved.worst_rank) == (0, 1, 1)
    assert reserved.spread_bytes == 16 * MIB and reserved.rank_count == 2
    private = _agg(summary, "mid", "allocated_bytes", "private")
    assert (private.min_bytes, private.max_bytes, private.spread_bytes) == (
        8 * MIB,
        24 * MIB,
        16 * MIB,
    )
    # Equal values: both ranks own the extremum.
    start = _agg(summary, "start", "allocated_bytes")
    assert start.min_bytes == start.max_bytes == MIB
    assert start.min_ranks == [0, 1] and start.max_ranks == [0, 1] and start.spread_bytes == 0
    rows = [r for r in summary.rank_points if r.scope == "all" and r.label == "end"]
    assert [(r.rank, r.stats["reserved_bytes"]) for r in rows] == [(0, 10 * MIB), (1, 26 * MIB)]
    assert {r.pool_count for r in rows} == {2}
    devices = [d for d in summary.rank_devices if d.label == "end"]
    assert [(d.rank, d.device_index, d.stats["reserved_bytes"]) for d in devices] == [
        (0, 0, 10 * MIB),
        (1, 0, 26 * MIB),
    ]
    # Never summed: no aggregate holds 36 MiB (10 + 26).
    assert all(a.max_bytes != 36 * MIB for a in summary.point_aggregates)
    text = summary.to_text()
    assert "ranks 0,1 of world size 2, 3 points, complete" in text
    assert "spread 16.00 MiB" in text
    as_dict = summary.to_dict()
    assert as_dict["kind"] == "memory_run_group_summary"
    assert len(as_dict["rank_points"]) == 2 * 3 * 3


def test_summary_write_files(job, tmp_path) -> None:
    summary = MemoryRunGroup.load(job).summary()
    out = tmp_path / "report"
    written = summary.write(out)
    assert sorted(p.name for p in written.values()) == GROUP_SUMMARY_FILES
    assert written["text"] == out / "report.txt"
    assert written["rank_points"] == out / "rank_points.csv"
    lines = (out / "rank_points.csv").read_text().splitlines()
    assert lines[0].startswith("rank,point_index,label,scope,observation_count,pool_count,")
    assert len(lines) == 1 + 2 * 3 * 3
    aggs = (out / "point_aggregates.csv").read_text().splitlines()
    header = aggs[0].split(",")
    row = next(
        dict(zip(header, line.split(","), strict=False))
        for line in aggs[1:]
        if ",end,all,reserved_bytes," in line
    )
    assert row["min_bytes"] == str(10 * MIB) and row["worst_rank"] == "1"
    with pytest.raises(Exception, match="overwrite"):
        summary.write(out)
    assert sorted(summary.write(out, overwrite=True)) == sorted(written)


def test_crashed_rank_is_a_prefix_with_a_warning(tmp_path) -> None:
    root = tmp_path / "crash"
    record_job(root, [8, 24], crash=1)
    group = MemoryRunGroup.load(root)
    assert group.ranks == (0, 1) and not group.complete
    assert group[1].complete is False and group[1].labels == ("start", "mid")
    assert any("rank 1 is incomplete" in w and "2 of 3 points" in w for w in group.warnings)
    summary = group.summary()
    end = _agg(summary, "end", "reserved_bytes")
    # Only rank 0 recorded `end`.
    assert end.rank_count == 1 and end.min_rank == end.max_rank == 0
    assert _agg(summary, "mid", "reserved_bytes").rank_count == 2


def _record(root, name: str, rank: int, world: int | None, labels: list[str], **kw) -> MemoryRun:
    alloc = FakeAllocator()
    alloc.segment(2 * MIB)
    rec = MemoryRecorder(name=name, run_dir=root, rank=rank, world_size=world, _source=alloc, **kw)
    for i, label in enumerate(labels):
        if i:
            alloc.alloc(alloc.segment((rank + 1) * i * MIB, pool=(1, 0)), (rank + 1) * i * MIB)
        rec.record_point(label)
    return rec.finish()


def test_validation_errors_and_warnings(tmp_path) -> None:
    bad = tmp_path / "order"
    _record(bad, "job", 0, 2, ["a", "b", "c"])
    _record(bad, "job", 1, 2, ["a", "c", "b"])
    with pytest.raises(InvalidInputError, match="same order: rank 1's point 1 is 'c'"):
        MemoryRunGroup.load(bad)

    short = tmp_path / "short"
    _record(short, "job", 0, 2, ["a", "b", "c"])
    _record(short, "job", 1, 2, ["a", "b"])
    with pytest.raises(InvalidInputError, match="rank 1 finished with 2 of the group's 3 points"):
        MemoryRunGroup.load(short)

    names = tmp_path / "names"
    _record(names, "one", 0, 2, ["a"])
    _record(names, "two", 1, 2, ["a"])
    with pytest.raises(InvalidInputError, match="share one name"):
        MemoryRunGroup.load(names)

    sizes = tmp_path / "sizes"
    _record(sizes, "job", 0, 2, ["a"])
    _record(sizes, "job", 1, 3, ["a"])
    with pytest.raises(InvalidInputError, match="different world sizes"):
        MemoryRunGroup.load(sizes)

    missing = tmp_path / "missing"
    _record(missing, "job", 0, 3, ["a"], run_metadata={"lr": 1})
    _record(missing, "job", 2, 3, ["a"], run_metadata={"lr": 2})
    group = MemoryRunGroup.load(missing)
    assert group.missing_ranks == (1,) and not group.complete
    assert any("rank(s) 1 of world size 3 have no run" in w for w in group.warnings)
    assert any("run metadata differs" in w for w in group.warnings)

    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInputError, match="holds no memory run"):
        MemoryRunGroup.load(tmp_path / "empty")


def test_from_runs_and_child_roots(tmp_path) -> None:
    # Per-rank job roots as direct children of the group directory.
    runs = [_record(tmp_path / "group" / f"rank-{r}", "job", r, 2, ["a", "b"]) for r in range(2)]
    loaded = MemoryRunGroup.load(tmp_path / "group")
    assert loaded.ranks == (0, 1) and loaded.complete
    built = MemoryRunGroup.from_runs(runs)
    assert built.ranks == (0, 1) and built.root is None
    with pytest.raises(InvalidInputError, match="one run per rank"):
        MemoryRunGroup.from_runs([runs[0], runs[0]])


def _phase_groups(tmp_path):
    """Baseline ranks grow their private pool by (r+1)*4 MiB in the phase, candidate ranks
    by (r+1)*6 MiB; both start from 2 MiB of default pool."""
    roots = []
    for side, step in (("baseline", 4), ("candidate", 6)):
        root = tmp_path / side
        for rank in range(2):
            alloc = FakeAllocator()
            alloc.alloc(alloc.segment(2 * MIB), MIB)
            rec = MemoryRecorder(name=side, run_dir=root, rank=rank, world_size=2, _source=alloc)
            rec.record_point("start")
            size = (rank + 1) * step * MIB
            alloc.alloc(alloc.segment(size, pool=(1, 0)), size)
            rec.record_point("end")
            rec.finish()
        roots.append(root)
    return [MemoryRunGroup.load(r) for r in roots]


def test_group_phases_identities_and_extrema(tmp_path) -> None:
    baseline, candidate = _phase_groups(tmp_path)
    mapping = MemoryPoolKey(0, (1, 0))
    result = compare_run_group_phases(
        baseline,
        candidate,
        baseline_start="start",
        baseline_end="end",
        candidate_start=0,
        candidate_end=-1,
        pool_mappings={0: {mapping: mapping}, 1: {mapping: mapping}},
        device_mappings={0: {0: 0}},
    )
    assert isinstance(result, MemoryRunGroupPhaseComparison)
    assert result.ranks == [0, 1] and result.skipped_ranks == []
    assert result.identity_failures == 0
    rows = result.rank_decomposition
    assert rows and all(r.identity_holds for r in rows)
    reserved = {r.rank: r for r in rows if r.scope == "private" and r.metric == "reserved_bytes"}
    assert reserved[0].baseline_change_bytes == 4 * MIB
    assert reserved[0].candidate_change_bytes == 6 * MIB
    assert reserved[1].end_gap_bytes == 12 * MIB - 8 * MIB
    assert reserved[1].change_gap_bytes == 4 * MIB
    pools = [
        r
        for r in result.rank_pool_decomposition
        if r.baseline_pool_id == (1, 0) and r.metric == "reserved_bytes"
    ]
    assert [(p.rank, p.candidate_pool_id, p.end_gap_bytes) for p in pools] == [
        (0, (1, 0), 2 * MIB),
        (1, (1, 0), 4 * MIB),
    ]
    assert all(p.identity_holds for p in result.rank_pool_decomposition)
    assert {d.rank for d in result.rank_device_decomposition} == {0, 1}
    agg = next(
        a for a in result.phase_aggregates if a.scope == "private" and a.metric == "reserved_bytes"
    )
    assert agg.rank_count == 2
    assert (agg.end_gap.min_bytes, agg.end_gap.min_rank) == (2 * MIB, 0)
    assert (agg.end_gap.max_bytes, agg.end_gap.max_rank) == (4 * MIB, 1)
    assert agg.change_gap.spread_bytes == 2 * MIB
    assert agg.baseline_change.max_bytes == 8 * MIB
    assert [r for r, _ in result.rank_comparisons] == [0, 1]
    text = result.to_text()
    assert "end gap:" in text and "change gap:" in text and "failures: 0" in text
    written = result.write(tmp_path / "phase")
    assert sorted(p.name for p in written.values()) == [
        "phase_aggregates.csv",
        "rank_decomposition.csv",
        "rank_device_decomposition.csv",
        "rank_pool_decomposition.csv",
        "report.html",
        "report.json",
        "report.txt",
    ]
    assert result.to_dict()["identity_failures"] == 0


def test_group_phases_errors_and_skipped_rank(tmp_path) -> None:
    baseline, candidate = _phase_groups(tmp_path)
    ends = dict(baseline_start="start", baseline_end="end")
    with pytest.raises(InvalidInputError, match="not a point of group"):
        compare_run_group_phases(
            baseline, candidate, **ends, candidate_start="nope", candidate_end="end"
        )
    with pytest.raises(InvalidInputError, match="rank 7"):
        compare_run_group_phases(
            baseline,
            candidate,
            **ends,
            candidate_start="start",
            candidate_end="end",
            device_mappings={7: {0: 0}},
        )
    with pytest.raises(InvalidInputError, match="comes after"):
        compare_run_group_phases(
            baseline, candidate, baseline_start="end", baseline_end="start",
            candidate_start="start", candidate_end="end",
        )  # fmt: skip

    # A crashed candidate rank that stopped before `end` is skipped with a warning.
    crash = tmp_path / "crash"
    record_job(crash, [8, 24], crash=1)
    crashed = MemoryRunGroup.load(crash)
    result = compare_run_group_phases(
        crashed, crashed, baseline_start="start", baseline_end="mid",
        candidate_start="start", candidate_end="end",
    )  # fmt: skip
    assert result.ranks == [0] and result.skipped_ranks == [1]
    assert any("rank 1 is skipped" in w for w in result.warnings)
    # Rank 1 is the only common rank, and its baseline run stopped before `end`.
    only = MemoryRunGroup.from_runs([crashed[1]])
    with pytest.raises(InvalidInputError, match="no rank holds the whole phase"):
        compare_run_group_phases(
            crashed, only, baseline_start="start", baseline_end="end",
            candidate_start="start", candidate_end="mid",
        )  # fmt: skip
