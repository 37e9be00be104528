"""The reference design's members of the native memory row classes (cohorts and their
rows, run-group rows, attribution rows, statistics), each checked against a fact computed
independently: the CSV line the report writes for the same row, the row's own fields, or
the workload's known sizes."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from test_memory_support import MIB, FakeAllocator
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.memory_debug import (
    MemoryAttributionOptions,
    MemoryLifetimeSelection,
    MemoryRecorder,
    MemoryRun,
)


def csv_text(row: dict[str, Any]) -> dict[str, str]:
    """A ``to_row()`` mapping as the CSV writer prints it: empty for ``None``, booleans
    in lower case."""

    def text(v: Any) -> str:
        if v is None:
            return ""
        if isinstance(v, bool):
            return "true" if v else "false"
        return str(v)

    return {k: text(v) for k, v in row.items()}


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def located(frames: Any) -> str:
    """``file:line:function`` of every frame, innermost first, as reports show stacks."""
    return " <- ".join(f"{f}:{line}:{name}" for f, line, name in frames)


# ---------------------------------------------------------------------- lifetimes

REQUESTED = 2 * MIB - 100


@pytest.fixture
def stream_run(tmp_path: Path) -> MemoryRun:
    """p1: 2 MiB (requested 2 MiB - 100) at ``stream``; p2: freed while stream work
    still holds it (awaiting free); p3: the allocator completes the free."""
    alloc = FakeAllocator()
    seg = alloc.segment(4 * MIB)
    held: dict[str, int] = {}
    with MemoryRecorder(name="life", run_dir=tmp_path / "run", _source=alloc) as rec:
        rec.record_point("p0")
        held["b"] = alloc.lifetime_alloc(seg, 2 * MIB, "stream", requested=REQUESTED)
        rec.record_point("p1")
        alloc.free(held["b"], pending=True)
        rec.record_point("p2")
        alloc.lifetime_complete_free(held["b"])
        rec.record_point("p3")
    return MemoryRun.load(tmp_path / "run")


def test_cohort_point_states_split_requested_bytes(stream_run: MemoryRun, tmp_path) -> None:
    result = stream_run.lifetimes()
    (cohort,) = result.cohorts
    points = cohort.points
    assert [p.point_label for p in points] == [p.label for p in points] == ["p0", "p1", "p2", "p3"]
    assert [p.owner_requested_bytes for p in points] == [0, REQUESTED, 0, 0]
    assert [p.awaiting_free_requested_bytes for p in points] == [0, 0, REQUESTED, 0]
    assert all(
        p.requested_bytes == p.owner_requested_bytes + p.awaiting_free_requested_bytes
        for p in points
    )
    assert points[2].to_dict()["awaiting_free_requested_bytes"] == REQUESTED
    result.write(tmp_path / "report")
    lines = read_csv(tmp_path / "report" / "cohort_points.csv")
    assert [csv_text(p.to_row()) for p in points] == lines
    assert points[0].to_row()["cohort_id"] == cohort.cohort_id
    assert points[0].to_row(cohort_id="other")["cohort_id"] == "other"


def test_cohort_identity_span_and_terminal_names(stream_run: MemoryRun, tmp_path) -> None:
    result = stream_run.lifetimes()
    (cohort,) = result.cohorts
    # The fingerprint is the one attribution rows give the same live-block stack.
    stacks = stream_run.compare("p0", "p1", attribution=MemoryAttributionOptions(stacks=True))
    (delta,) = [d for d in stacks.stack_deltas if d.stack_frames]
    assert [f["name"] for f in delta.stack_frames] == [f[2] for f in cohort.stack_frames]
    assert cohort.stack_fingerprint == delta.stack_fingerprint
    active = [p.active_bytes for p in cohort.points]
    assert cohort.snapshot_active_span_bytes == max(active) - min(active) == 2 * MIB
    # Sampled at p1 and p2; its events run from the birth (p1) to the completion (p3).
    assert (cohort.first_sampled_point, cohort.last_sampled_point) == ("p1", "p2")
    assert (cohort.first_seen_index, cohort.first_seen_label) == (1, "p1")
    assert (cohort.last_seen_index, cohort.last_seen_label) == (3, "p3")
    early = stream_run.lifetimes(MemoryLifetimeSelection.active_at("p2"), through="p2")
    (held,) = early.cohorts
    assert (held.awaiting_free_at_end_bytes, held.awaiting_free_at_end_count) == (2 * MIB, 1)
    assert (held.owner_active_at_end_bytes, held.owner_active_at_end_count) == (0, 0)
    assert held.terminal_awaiting_free_bytes == held.awaiting_free_at_end_bytes
    assert (held.first_seen_label, held.last_seen_label) == ("p2", "p2")
    at_p1 = stream_run.lifetimes(through="p1").cohorts[0]
    assert (at_p1.owner_active_at_end_bytes, at_p1.owner_active_at_end_count) == (2 * MIB, 1)


def test_cohort_stack_display_dict_and_row(stream_run: MemoryRun, tmp_path) -> None:
    result = stream_run.lifetimes()
    (cohort,) = result.cohorts
    assert cohort.display_stack() == located(cohort.stack_frames)
    first = cohort.stack_frames[0]
    assert cohort.display_stack(1) == f"{first[0]}:{first[1]}:{first[2]} (+1 frames)"
    with pytest.raises(InvalidInputError):
        cohort.display_stack(-1)
    assert cohort.to_dict() == result.to_dict()["cohorts"][0]
    result.write(tmp_path / "report")
    (line,) = read_csv(tmp_path / "report" / "cohorts.csv")
    assert csv_text(cohort.to_row()) == line
    assert cohort.to_row()["stack_key"] == cohort.stack_key


def test_transition_rows(stream_run: MemoryRun, tmp_path) -> None:
    result = stream_run.lifetimes()
    (cohort,) = result.cohorts
    (birth,) = cohort.births
    assert (birth.start_index, birth.start_label) == (birth.start_point_index, "p0") == (0, "p0")
    assert (birth.end_index, birth.end_label) == (birth.end_point_index, "p1") == (1, "p1")
    assert birth.size_bytes == birth.bytes == 2 * MIB
    assert birth.stack_fallback is False, "the alloc event carries the stack"
    assert birth.display_stack() == located(birth.stack_frames)
    assert birth.stack_fingerprint == cohort.stack_fingerprint
    (request,) = cohort.free_requests
    (completion,) = cohort.free_completions
    assert (request.end_label, completion.end_label) == ("p2", "p3")
    result.write(tmp_path / "report")
    for rows, name in (
        (cohort.births, "birth_stacks.csv"),
        (cohort.free_requests, "free_request_stacks.csv"),
        (cohort.free_completions, "free_completion_stacks.csv"),
    ):
        assert [csv_text(t.to_row()) for t in rows] == read_csv(tmp_path / "report" / name)
    # Anchored at p2, the birth and the request happened before the range.
    (anchored,) = stream_run.lifetimes(MemoryLifetimeSelection.active_at("p2")).cohorts
    boundary = anchored.births[0]
    assert (boundary.origin, boundary.stack_fallback) == ("range_boundary", True)
    assert (boundary.start_index, boundary.start_label) == (None, None)
    assert anchored.free_requests[0].stack_fallback is True
    assert anchored.free_completions[0].stack_fallback is False


def test_size_rows(stream_run: MemoryRun, tmp_path) -> None:
    result = stream_run.lifetimes()
    (cohort,) = result.cohorts
    (bucket,) = cohort.size_histogram
    assert bucket.requested_bytes == bucket.requested_size_bytes == REQUESTED
    (outcome,) = cohort.size_outcomes
    assert outcome.terminal_state == outcome.outcome == "free_completed"
    assert outcome.requested_bytes == REQUESTED
    result.write(tmp_path / "report")
    assert [csv_text(bucket.to_row())] == read_csv(tmp_path / "report" / "size_histograms.csv")
    assert [csv_text(outcome.to_row())] == read_csv(tmp_path / "report" / "size_outcomes.csv")
    assert bucket.to_row()["cohort_id"] == cohort.cohort_id


# ---------------------------------------------------------------------- attribution

KIB = 1024


def attribution_run(tmp_path: Path) -> MemoryRun:
    """start: an empty 8 MiB segment; end: 2 MiB at ``embed``, 1 MiB (requested 1 MiB -
    100) at ``attn``, 512 KiB without frames."""
    alloc = FakeAllocator()
    alloc.attribution_frame("embed", 30)
    alloc.attribution_frame("attn", 40)
    with MemoryRecorder(name="att", run_dir=tmp_path / "att", _source=alloc) as rec:
        seg = alloc.segment(8 * MIB)
        rec.record_point("start")
        alloc.attribution_alloc(seg, 2 * MIB, ("embed", "main"))
        alloc.attribution_alloc(seg, MIB, ("attn", "step", "main"), requested=MIB - 100)
        alloc.attribution_alloc(seg, 512 * KIB, ())
        rec.record_point("end")
    return rec.result


def test_stack_coverage_and_deltas(tmp_path: Path) -> None:
    run = attribution_run(tmp_path)
    both = MemoryAttributionOptions(stacks=True, events=True)
    c = run.compare("start", "end", attribution=both)
    cov = c.candidate_stack_coverage
    assert cov.ratio == cov.coverage == pytest.approx(cov.attributed_bytes / cov.active_bytes)
    row = cov.to_row()
    assert (row["active_bytes"], row["attributed_bytes"], row["unattributed_bytes"]) == (
        3 * MIB + 512 * KIB,
        3 * MIB,
        512 * KIB,
    )
    assert row["coverage"] == cov.ratio
    deltas = c.stack_deltas
    assert [d.has_changes for d in deltas] == [d.changed for d in deltas] == [True] * 3
    unchanged = run.compare("end", "end", attribution=MemoryAttributionOptions(stacks=True))
    assert all(not d.has_changes for d in unchanged.stack_deltas)
    attn = next(d for d in deltas if d.stack_frames and d.stack_frames[0]["name"] == "attn")
    frames = [(f["filename"], f["line"], f["name"]) for f in attn.stack_frames]
    assert attn.display_stack() == located(frames) == attn.stack_key
    assert attn.display_stack(2) == located(frames[:2]) + " (+1 frames)"
    unattributed = next(d for d in deltas if not d.stack_frames)
    assert unattributed.display_stack() == "<unattributed>"
    c.write(tmp_path / "report")
    lines = read_csv(tmp_path / "report" / "allocation_stack_comparisons.csv")
    for delta, line in zip(deltas, lines, strict=True):
        titles = {k: line.pop(k) for k in ("reference", "candidate")}
        assert titles == {"reference": "att@start", "candidate": "att@end"}
        assert csv_text(delta.to_row()) == line


def test_event_rows(tmp_path: Path) -> None:
    run = attribution_run(tmp_path)
    c = run.compare("start", "end", attribution=MemoryAttributionOptions(events=True))
    (event,) = c.event_summaries
    assert event.size_bytes == event.total_bytes == 3 * MIB + 512 * KIB
    assert event.pool_id == (0, 0) and event.pool_label == "pool[0,0]"
    frames = [(f["filename"], f["line"], f["name"]) for f in event.stack_frames]
    assert event.display_stack() == located(frames)
    c.write(tmp_path / "report")
    (line,) = read_csv(tmp_path / "report" / "events.csv")
    labels = {"reference_label": line["reference"], "candidate_label": line["candidate"]}
    assert csv_text(event.to_row(**labels)) == line
    bare = dict(line)
    del bare["reference"], bare["candidate"]
    assert csv_text(event.to_row()) == bare
    d = event.to_dict(reference_label="start", candidate_label="end")
    assert (d["reference"], d["candidate"]) == ("start", "end")
    assert {k: v for k, v in d.items() if k not in ("reference", "candidate")} == event.to_dict()
    with pytest.raises(InvalidInputError, match="both or neither"):
        event.to_row(reference_label="start")


def test_oom_event_pool_label(tmp_path: Path) -> None:
    alloc = FakeAllocator()
    with MemoryRecorder(name="oom", run_dir=tmp_path / "oom", _source=alloc) as rec:
        rec.record_point("a")
        alloc.attribution_oom(0, size=64 * MIB, device_free=MIB)
        rec.record_point("b")
    c = rec.result.compare("a", "b", attribution=MemoryAttributionOptions(events=True))
    (row,) = c.event_summaries
    assert (row.attribution_confidence, row.pool_label) == ("not_applicable", "pool[n/a]")


def test_stack_summary_pool_key(tmp_path: Path) -> None:
    from torch_cudagraph_debug.memory_debug import MemoryPoolKey, advanced

    run = attribution_run(tmp_path)
    rows = advanced.summarize_allocation_stacks(run["end"])
    assert {r.pool_key for r in rows} == {MemoryPoolKey(0, (0, 0))}
    assert all(isinstance(r.pool_key, MemoryPoolKey) for r in rows)
    embed = next(r for r in rows if r.stack_frames and r.stack_frames[0]["name"] == "embed")
    assert embed.display_stack(1) == "model.py:30:embed (+1 frames)"
    row = embed.to_row()
    assert (row["device_index"], row["pool_id"], row["size_bytes"], row["count"]) == (
        0,
        "0,0",
        2 * MIB,
        1,
    )
    assert row["stack_fingerprint"] == embed.stack_fingerprint


def test_evidence_status_not_requested(tmp_path: Path) -> None:
    from torch_cudagraph_debug.memory_debug import MemoryEvidenceStatus

    none = MemoryEvidenceStatus.not_requested()
    assert none == MemoryEvidenceStatus(False, False, False)
    assert none.to_dict() == {"requested": False, "available": False, "complete": False}
    run = attribution_run(tmp_path)
    c = run.compare("start", "end", attribution=MemoryAttributionOptions(stacks=True))
    assert c.attribution_status.events == none
    assert c.attribution_status.stacks != none


# ---------------------------------------------------------------------- statistics


def test_memory_stats_combine_and_from_dict(tmp_path: Path) -> None:
    from torch_cudagraph_debug.memory_debug import MemoryStats

    alloc = FakeAllocator()
    alloc.alloc(alloc.segment(4 * MIB), MIB, requested=MIB - 8)
    alloc.alloc(alloc.segment(8 * MIB, pool=(1, 0)), 3 * MIB)
    with MemoryRecorder(name="st", run_dir=tmp_path / "st", _source=alloc) as rec:
        rec.record_point("p")
    point = rec.result["p"]
    pools = list(point.pool_stats.values())
    assert len(pools) == 2
    combined = MemoryStats.combine(point.pool_stats.values())
    assert combined == point.allocator_scope_stats["all"]
    assert combined.reserved_bytes == 12 * MIB and combined.allocated_bytes == 4 * MIB
    assert combined.largest_inactive_block_bytes == max(
        p.largest_inactive_block_bytes for p in pools
    )
    assert MemoryStats.combine([]) == MemoryStats()
    with pytest.raises(TypeError):
        MemoryStats.combine([combined, 1])
    for stats in (*pools, combined):
        assert MemoryStats.from_dict(stats.to_dict()) == stats
    assert MemoryStats.from_dict({"reserved_bytes": 5}) == MemoryStats(reserved_bytes=5)
    wrong = dict(combined.to_dict(), inactive_bytes=1)
    with pytest.raises(ValueError, match="inactive_bytes"):
        MemoryStats.from_dict(wrong)
    with pytest.raises(ValueError, match="unknown"):
        MemoryStats.from_dict({"reserved": 1})
    with pytest.raises(ValueError, match=">= 0"):
        MemoryStats.from_dict({"reserved_bytes": -1})


def test_device_memory_sample_from_dict() -> None:
    from torch_cudagraph_debug.memory_debug import DeviceMemorySample

    sample = DeviceMemorySample(free_bytes=3 * MIB, total_bytes=8 * MIB)
    assert DeviceMemorySample.from_dict(sample.to_dict()) == sample
    assert DeviceMemorySample.from_dict({"free_bytes": 1, "total_bytes": 2}).used_bytes == 1
    with pytest.raises(ValueError, match="used_bytes"):
        DeviceMemorySample.from_dict({"free_bytes": 1, "total_bytes": 2, "used_bytes": 5})
    with pytest.raises(ValueError, match="needs"):
        DeviceMemorySample.from_dict({"free_bytes": 1})


# ---------------------------------------------------------------------- run groups


def phase_groups(tmp_path: Path) -> list[Any]:
    """Two groups of two ranks: each rank starts with 2 MiB of default pool; in the phase
    baseline ranks add a private pool of (r+1)*4 MiB, candidate ranks of (r+1)*6 MiB."""
    from torch_cudagraph_debug.memory_debug import MemoryRunGroup

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


def test_group_summary_rows(tmp_path: Path) -> None:
    group, _ = phase_groups(tmp_path)
    summary = group.summary()
    assert summary.run_group.name == group.name
    assert tuple(summary.run_group.ranks) == group.ranks
    data = summary.to_dict()
    for i, r in enumerate(summary.rank_points):
        assert r.run_id == group[r.rank].run_id
        assert r.point_label == r.label
        assert r.to_dict() == data["rank_points"][i]
    assert summary.rank_devices
    for i, d in enumerate(summary.rank_devices):
        assert d.run_id == group[d.rank].run_id and d.point_label == d.label
        assert d.allocator_reserved_bytes == d.stats["reserved_bytes"]
        if d.free_bytes is None:
            assert d.sample is None
        else:
            assert (d.sample.free_bytes, d.sample.total_bytes) == (d.free_bytes, d.total_bytes)
            assert d.sample.used_bytes == d.used_bytes
        assert d.to_dict() == data["rank_devices"][i]
    end = [d for d in summary.rank_devices if d.label == "end"]
    assert [d.allocator_reserved_bytes for d in end] == [6 * MIB, 10 * MIB]
    for i, a in enumerate(summary.point_aggregates):
        assert (a.point_label, a.min_value, a.max_value, a.spread_value) == (
            a.label,
            a.min_bytes,
            a.max_bytes,
            a.spread_bytes,
        )
        assert a.to_dict() == data["point_aggregates"][i]


def test_group_phase_rows(tmp_path: Path) -> None:
    from torch_cudagraph_debug.memory_debug import (
        MemoryAllocatorScopePhaseDecomposition,
        MemoryDevicePhaseDecomposition,
        MemoryPoolKey,
        MemoryPoolPhaseDecomposition,
        compare_run_group_phases,
    )

    baseline, candidate = phase_groups(tmp_path)
    key = MemoryPoolKey(0, (1, 0))
    result = compare_run_group_phases(
        baseline,
        candidate,
        baseline_start="start",
        baseline_end="end",
        candidate_start="start",
        candidate_end="end",
        pool_mappings={0: {key: key}, 1: {key: key}},
    )
    assert result.baseline_group.name == "baseline"
    assert result.candidate_group.name == "candidate"
    assert (result.display_stack_depth, result.display_limit) == (2, 20)
    data = result.to_dict()
    for rows, name, cls in (
        (result.rank_decomposition, "rank_decomposition", MemoryAllocatorScopePhaseDecomposition),
        (result.rank_pool_decomposition, "rank_pool_decomposition", MemoryPoolPhaseDecomposition),
        (
            result.rank_device_decomposition,
            "rank_device_decomposition",
            MemoryDevicePhaseDecomposition,
        ),
    ):
        assert rows
        for i, r in enumerate(rows):
            assert isinstance(r.decomposition, cls)
            assert r.decomposition.components.end_gap_bytes == r.end_gap_bytes
            terms = (
                r.baseline_change_bytes,
                r.candidate_change_bytes,
                r.start_gap_bytes,
                r.end_gap_bytes,
            )
            assert r.changed == any(t not in (None, 0) for t in terms)
            assert r.to_dict() == data[name][i]
    # rank 0's private reserved bytes grow by 4 and 6 MiB: changed.
    private = next(
        r
        for r in result.rank_decomposition
        if (r.rank, r.scope, r.metric) == (0, "private", "reserved_bytes")
    )
    assert private.changed and private.change_gap_bytes == 2 * MIB
    out = tmp_path / "phase"
    result.write(out)
    for method, file in (
        (result.rank_decomposition_rows, "rank_decomposition.csv"),
        (result.rank_pool_decomposition_rows, "rank_pool_decomposition.csv"),
        (result.rank_device_decomposition_rows, "rank_device_decomposition.csv"),
        (result.phase_aggregate_rows, "phase_aggregates.csv"),
    ):
        lines = read_csv(out / file)
        assert [csv_text(r) for r in method()] == lines
        kept = method(include_unchanged=False)
        assert 0 < len(kept) < len(lines)
    changed = [r for r in result.rank_decomposition if r.changed]
    assert len(result.rank_decomposition_rows(include_unchanged=False)) == len(changed)
    for i, agg in enumerate(result.phase_aggregates):
        assert agg.identity_holds is True
        assert agg.to_dict() == data["phase_aggregates"][i]
        ends = [e for e in (agg.baseline_change, agg.candidate_change) if e is not None]
        if any(e.min_bytes or e.max_bytes for e in ends):
            assert agg.changed
    kept = result.phase_aggregate_rows(include_unchanged=False)
    assert len(kept) == sum(a.changed for a in result.phase_aggregates)


def test_metric_extrema_to_dict(tmp_path: Path) -> None:
    from torch_cudagraph_debug.memory_debug import compare_run_group_phases

    baseline, candidate = phase_groups(tmp_path)
    result = compare_run_group_phases(
        baseline,
        candidate,
        baseline_start="start",
        baseline_end="end",
        candidate_start="start",
        candidate_end="end",
    )
    data = result.to_dict()
    rows = result.phase_aggregate_rows()
    for i, agg in enumerate(result.phase_aggregates):
        gap = agg.end_gap
        assert gap.to_dict() == data["phase_aggregates"][i]["end_gap"]
        assert gap.to_dict()["spread_bytes"] == gap.spread_bytes
        flat = gap.to_dict("end_gap")
        assert flat == gap.to_dict(prefix="end_gap_")
        for k in ("min_bytes", "min_rank", "max_bytes", "max_rank", "spread_bytes"):
            assert flat[f"end_gap_{k}"] == rows[i][f"end_gap_{k}"] == getattr(gap, k)
