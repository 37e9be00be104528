"""The reference design's members of memory comparisons, checked against facts computed
here from the underlying rows, states and written files: the row views of a state
comparison (flat rows, pruning, stack and event views), the phase comparison's names and
decomposition rows, the display defaults, ``lifetime_options()``, the parameter names of
``compare_points`` and ``write()``'s keys."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from test_memory_support import MIB, FakeAllocator, two_runs
from torch_cudagraph_debug.memory_debug import (
    MemoryAttributionOptions,
    MemoryDisplayOptions,
    MemoryLifetimeOptions,
    MemoryPointComparison,
    MemoryPoolKey,
    MemoryProbe,
    MemoryRecorder,
    MemorySnapshotComparison,
    compare_phases,
    compare_points,
    compare_snapshots,
)

PRIVATE = MemoryPoolKey(0, (1, 0))
STACKS = MemoryAttributionOptions(stacks=True)
BOTH = MemoryAttributionOptions(stacks=True, events=True)
EMBED = "model.py:30:embed <- model.py:12:main"
ATTN = "model.py:40:attn <- model.py:11:step <- model.py:12:main"
SIDE_STREAM = 0x22
# The statistics every comparison row holds per side (MemoryStats' public names).
STATS = (
    "reserved_bytes",
    "allocated_bytes",
    "active_bytes",
    "requested_bytes",
    "segment_count",
    "block_count",
)


def csv_rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def dicts(rows) -> list[dict]:
    """Native rows compare by identity; their ``to_dict()`` by value."""
    return [r.to_dict() for r in rows]


def as_int(cell: str) -> int | None:
    return None if cell == "" else int(cell)


def stack_run(tmp_path: Path, name: str = "run"):
    """One pool, two streams. start: nothing allocated. end: `embed` 1 MiB on stream 0
    and 1 MiB on SIDE_STREAM, `attn` 1 MiB on stream 0. moved: the stream-0 `embed`
    block freed and another 1 MiB `embed` block taken on SIDE_STREAM (the pool's
    per-stack total does not change, its per-stream totals do)."""
    alloc = FakeAllocator()
    alloc.attribution_frame("embed", 30)
    alloc.attribution_frame("attn", 40)
    with MemoryRecorder(name=name, run_dir=tmp_path / name, _source=alloc) as rec:
        main = alloc.segment(8 * MIB)
        side = alloc.segment(8 * MIB, stream=SIDE_STREAM)
        rec.record_point("start")
        embed = alloc.attribution_alloc(main, MIB, ("embed", "main"))
        alloc.attribution_alloc(side, MIB, ("embed", "main"))
        alloc.attribution_alloc(main, MIB, ("attn", "step", "main"))
        rec.record_point("end")
        alloc.free(embed)
        alloc.attribution_alloc(side, MIB, ("embed", "main"))
        rec.record_point("moved")
    return rec.result


# ------------------------------------------------------------- state comparisons


def test_reference_and_candidate_are_the_compared_states(tmp_path) -> None:
    a, b = two_runs(tmp_path)
    by_position = compare_points(a["start"], b["captured"])
    by_name = compare_points(reference=a["start"], candidate=b["captured"])
    assert isinstance(by_name, MemoryPointComparison)
    assert by_name.reference is a["start"] and by_name.candidate is b["captured"]
    assert by_name.to_json() == by_position.to_json()
    # Declared on the class, so the reference's field list shows them.
    for name in ("reference", "candidate", "device_comparisons", "allocator_scope_comparisons"):
        assert hasattr(MemorySnapshotComparison, name) and hasattr(MemoryPointComparison, name)
    alloc = FakeAllocator()
    probe = MemoryProbe(_source=alloc)
    before = probe.snapshot()
    alloc.segment(2 * MIB)
    after = probe.snapshot()
    snapshots = compare_snapshots(before, after)
    assert isinstance(snapshots, MemorySnapshotComparison)
    assert (snapshots.reference, snapshots.candidate) == (before, after)
    (device,) = snapshots.device_comparison_rows()
    assert device["delta_allocator_reserved_bytes"] == 2 * MIB


def test_aliases_hold_the_rows_we_have(tmp_path) -> None:
    a, b = two_runs(tmp_path)
    c = compare_points(a["captured"], b["captured"], pool_mapping={PRIVATE: PRIVATE})
    assert c.allocator_scope_comparisons is c.allocator_scopes
    assert c.pool_comparisons is c.pools
    assert c.observation_comparisons is c.observations
    assert [s.scope for s in c.allocator_scope_comparisons] == ["all", "default", "private"]
    private = c.allocator_scope_comparisons[2]
    assert (
        private.reference.reserved_bytes
        == a["captured"].allocator_scope_stats["private"].reserved_bytes
    )
    assert private.delta.reserved_bytes == 16 * MIB
    # Without attribution every attribution view is empty.
    assert c.allocation_stack_comparisons == ()
    assert c.allocation_stack_observation_comparisons == ()
    assert c.allocator_events == () and c.event_rows() == [] and c.event_dicts() == []
    assert c.allocation_stack_comparison_rows() == []


def test_flat_rows_are_the_lines_of_the_csv_files(tmp_path) -> None:
    a, b = two_runs(tmp_path)
    c = compare_points(a["captured"], b["captured"], pool_mapping={PRIVATE: PRIVATE})
    out = c.write(tmp_path / "report")
    for rows, name in (
        (c.allocator_scope_comparison_rows(), "allocator_scopes"),
        (c.pool_comparison_rows(), "pools"),
        (c.observation_comparison_rows(), "observations"),
    ):
        lines = csv_rows(out[name])
        assert len(rows) == len(lines), name
        for row, line in zip(rows, lines, strict=True):
            for side in ("reference", "candidate", "delta"):
                for stat in STATS:
                    column = f"{side}_{stat}"
                    assert row[column] == as_int(line[column]), (name, column)
    # Values against the rows they come from: a one-sided observation has no candidate.
    for row, obs in zip(c.observation_comparison_rows(), c.observations, strict=True):
        assert row["match"] == obs.match and row["pool_kind"] == obs.pool_kind
        if obs.candidate is None:
            assert all(row[f"candidate_{s}"] is None for s in STATS)
        else:
            assert row["candidate_reserved_bytes"] == obs.candidate.reserved_bytes
        assert row["delta_reserved_bytes"] == obs.delta.reserved_bytes
    (device,) = c.device_comparison_rows()
    (line,) = csv_rows(out["devices"])
    for column in ("used_bytes", "free_bytes", "cuda_allocator_residual_bytes"):
        for side in ("reference", "candidate", "delta"):
            assert device[f"{side}_{column}"] == as_int(line[f"{side}_{column}"])
    assert device["delta_used_bytes"] == 16 * MIB
    assert device["reference_cuda_allocator_residual_bytes"] == 400 * MIB
    assert device["match"] == c.device_comparisons[0].match == "same_index"


def test_unchanged_rows_are_pruned_bottom_up(tmp_path) -> None:
    alloc = FakeAllocator()
    with MemoryRecorder(name="r", run_dir=tmp_path / "r", _source=alloc) as rec:
        alloc.segment(2 * MIB)
        moving = alloc.segment(4 * MIB, stream=SIDE_STREAM)
        rec.record_point("start")
        rec.record_point("same")
        # One stream gives its segment back, another takes one of the same size: the
        # default pool's totals do not move, its two streams' do.
        alloc.release(moving)
        alloc.segment(4 * MIB, stream=0x33)
        rec.record_point("moved")
        capture = alloc.segment(16 * MIB, pool=(1, 0), stream=0x77)
        alloc.alloc(capture, 16 * MIB)
        rec.record_point("captured")
    run = rec.result

    still = run.compare("start", "same")
    assert still.pool_comparison_rows(include_unchanged=False) == []
    assert still.observation_comparison_rows(include_unchanged=False) == []
    assert still.device_comparison_rows(include_unchanged=False) == []
    assert still.allocator_scope_comparison_rows(include_unchanged=False) == []
    assert len(still.pool_comparison_rows()) == len(still.pools) == 1

    moved = run.compare("same", "moved")
    (pool,) = moved.pools
    assert not pool.changed, "the pool's totals offset"
    changed_streams = {
        (o.reference_key or o.candidate_key).stream for o in moved.observations if o.changed
    }
    assert changed_streams == {SIDE_STREAM, 0x33}
    kept = moved.observation_comparison_rows(include_unchanged=False)
    assert len(kept) == 2 and all(r["delta_reserved_bytes"] in (4 * MIB, -4 * MIB) for r in kept)
    # The unchanged pool stays as the parent of its changed streams, and so does the
    # device.
    (kept_pool,) = moved.pool_comparison_rows(include_unchanged=False)
    assert kept_pool["delta_reserved_bytes"] == 0 and kept_pool["match"] == "same_run"
    assert len(moved.device_comparison_rows(include_unchanged=False)) == 1
    assert moved.allocator_scope_comparison_rows(include_unchanged=False) == []

    captured = run.compare("moved", "captured")
    pools = captured.pool_comparison_rows(include_unchanged=False)
    assert [(r["match"], r["pool_kind"], r["delta_reserved_bytes"]) for r in pools] == [
        ("candidate_only", "private", 16 * MIB)
    ]
    assert pools[0]["reference_reserved_bytes"] is None
    scopes = captured.allocator_scope_comparison_rows(include_unchanged=False)
    assert [(r["scope"], r["delta_reserved_bytes"]) for r in scopes] == [
        ("all", 16 * MIB),
        ("private", 16 * MIB),
    ]


def test_stack_views_changed_only_by_pool_and_by_stream(tmp_path) -> None:
    run = stack_run(tmp_path)
    c = run.compare("start", "end", attribution=STACKS)
    # Per pool: every stack that changed, from the full list we keep.
    assert dicts(c.allocation_stack_comparisons) == dicts(d for d in c.stack_deltas if d.changed)
    by_key = {d.stack_key: d.delta_size_bytes for d in c.allocation_stack_comparisons}
    assert by_key == {EMBED: 2 * MIB, ATTN: MIB}
    # Per stream: the same bytes split by stream, summing to the pool's.
    per_stream = {
        (d.stack_key, d.stream): d.delta_size_bytes
        for d in c.allocation_stack_observation_comparisons
    }
    assert per_stream == {(EMBED, 0): MIB, (EMBED, SIDE_STREAM): MIB, (ATTN, 0): MIB}
    rows = c.allocation_stack_comparison_rows()
    assert [r["scope"] for r in rows] == ["pool"] * 2 + ["observation"] * 3
    assert [r["delta_size_bytes"] for r in rows[:2]] == [
        d.delta_size_bytes for d in c.allocation_stack_comparisons
    ]
    assert {(r["stack_key"], r["stream"]) for r in rows[2:]} == set(per_stream)

    # Moving a block between streams changes no pool total but two stream totals.
    moved = run.compare("end", "moved", attribution=STACKS)
    assert all(d.stack_key != EMBED or not d.changed for d in moved.stack_deltas)
    assert moved.allocation_stack_comparisons == ()
    per_stream = {
        (d.stack_key, d.stream): d.delta_size_bytes
        for d in moved.allocation_stack_observation_comparisons
    }
    assert per_stream == {(EMBED, 0): -MIB, (EMBED, SIDE_STREAM): MIB}
    assert moved.to_dict()["allocation_stack_observation_comparisons"][0]["stack_frames"]

    # Across runs streams never pair: no per-stream view.
    other = stack_run(tmp_path, "other")
    cross = compare_points(run["end"], other["end"], attribution=STACKS)
    assert cross.relation == "cross_run"
    assert cross.allocation_stack_comparisons == ()
    assert cross.allocation_stack_observation_comparisons == ()


def test_event_rows_are_the_lines_of_events_csv(tmp_path) -> None:
    run = stack_run(tmp_path)
    c = run.compare("start", "end", attribution=BOTH)
    assert dicts(c.allocator_events) == dicts(c.event_summaries) and c.allocator_events
    rows = c.event_rows()
    assert len(rows) == len(c.allocator_events)
    for row, event in zip(rows, c.allocator_events, strict=True):
        assert (row["reference"], row["candidate"]) == ("run@start", "run@end")
        assert row["action"] == event.action and row["count"] == event.count
        assert row["total_bytes"] == event.total_bytes
    # The fake records three allocations of 1 MiB between the points.
    allocs = [r for r in rows if r["action"] == "alloc"]
    assert sum(r["count"] for r in allocs) == 3
    assert sum(r["total_bytes"] for r in allocs) == 3 * MIB
    out = c.write(tmp_path / "report")
    lines = csv_rows(out["events"])
    assert [(line["reference"], line["action"], int(line["count"])) for line in lines] == [
        (r["reference"], r["action"], r["count"]) for r in rows
    ]
    assert [line["stack_frames_json"] for line in lines] == [r["stack_frames_json"] for r in rows]
    nested = c.event_dicts()
    assert [d["stack_frames"] for d in nested] == [
        list(e.to_dict()["stack_frames"]) for e in c.allocator_events
    ]
    assert all("stack_frames_json" not in d and d["candidate"] == "run@end" for d in nested)


def test_display_defaults_come_from_the_attribution_options(tmp_path) -> None:
    run = stack_run(tmp_path)
    plain = run.compare("start", "end")
    assert (plain.display_stack_depth, plain.display_limit) == (2, 20)
    shown = MemoryDisplayOptions(stack_depth=3, limit=7)
    options = MemoryAttributionOptions(stacks=True, display=shown)
    c = run.compare("start", "end", attribution=options)
    assert (c.display_stack_depth, c.display_limit) == (3, 7)
    data = c.to_dict()
    assert (data["display_stack_depth"], data["display_limit"]) == (3, 7)


def test_write_returns_paths_keyed_by_format(tmp_path) -> None:
    run = stack_run(tmp_path)
    c = run.compare("start", "end", attribution=BOTH)
    out = c.write(tmp_path / "report")
    assert set(out) == {
        "text",
        "json",
        "html",
        "allocator_scopes",
        "pools",
        "observations",
        "devices",
        "allocation_stack_comparisons",
        "events",
    }
    documents = {"text": "report.txt", "json": "report.json", "html": "report.html"}
    for key, path in out.items():
        assert path.name == documents.get(key, f"{key}.csv") and path.is_file()
    assert out["text"].read_text().strip() == c.to_text().strip()


# ------------------------------------------------------------- options


def test_lifetime_options_carry_the_request_display(tmp_path) -> None:
    shown = MemoryDisplayOptions(stack_depth=5, limit=3)
    options = MemoryAttributionOptions(lifetimes=True, display=shown)
    found = options.lifetime_options()
    assert isinstance(found, MemoryLifetimeOptions) and found.display == shown
    assert MemoryAttributionOptions().lifetime_options().display == MemoryDisplayOptions()
    a, _ = two_runs(tmp_path)
    c = compare_points(a[0], a[1], attribution=options)
    if c.allocation_lifetimes is None:
        pytest.fail(f"no lifetimes attached: {c.warnings}")
    assert c.allocation_lifetimes.options == found


# ------------------------------------------------------------- phase comparisons


def phase_of(tmp_path, attribution=None):
    a, b = two_runs(tmp_path)
    phase = compare_phases(
        a.between("start", "captured"),
        b.between("start", "captured"),
        pool_mapping={PRIVATE: PRIVATE},
        attribution=attribution,
    )
    return a, b, phase


def terms(row) -> tuple:
    c = row.components
    return (c.baseline_change_bytes, c.candidate_change_bytes, c.start_gap_bytes, c.end_gap_bytes)


def test_phase_names_and_legs(tmp_path) -> None:
    a, b, phase = phase_of(tmp_path)
    assert (phase.baseline_name, phase.candidate_name) == ("a", "b")
    assert phase.baseline_name == a.name and phase.candidate_name == b.name
    legs = (phase.baseline_change, phase.candidate_change, phase.start_gap, phase.end_gap)
    assert all(isinstance(leg, MemoryPointComparison) for leg in legs)
    # Each leg is the comparison of its two points.
    assert (phase.baseline_change.reference.label, phase.baseline_change.candidate.label) == (
        "start",
        "captured",
    )
    assert phase.baseline_change.reference.run_id == a.run_id
    assert phase.end_gap.candidate.run_id == b.run_id
    private = {leg: leg.allocator_scope_comparisons[2].delta.reserved_bytes for leg in legs}
    assert list(private.values()) == [16 * MIB, 32 * MIB, 0, 16 * MIB]
    data = phase.to_dict()
    assert (data["baseline_name"], data["candidate_name"]) == ("a", "b")
    assert (phase.display_stack_depth, phase.display_limit) == (2, 20)
    shown = MemoryAttributionOptions(stacks=True, display=MemoryDisplayOptions(4, 9))
    _, _, attributed = phase_of(tmp_path / "again", shown)
    assert (attributed.display_stack_depth, attributed.display_limit) == (4, 9)


def test_phase_decomposition_rows(tmp_path) -> None:
    _, _, phase = phase_of(tmp_path)
    out = phase.write(tmp_path / "phase")
    scope_rows = phase.allocator_scope_decomposition_rows()
    assert len(scope_rows) == len(phase.allocator_scope_decomposition) == 27
    for row, native in zip(scope_rows, phase.allocator_scope_decomposition, strict=True):
        assert (row["scope"], row["metric"]) == (native.scope, native.metric)
        assert (
            row["baseline_change_bytes"],
            row["candidate_change_bytes"],
            row["start_gap_bytes"],
            row["end_gap_bytes"],
        ) == terms(native)
        assert row["end_gap_bytes"] == (
            row["start_gap_bytes"] + row["candidate_change_bytes"] - row["baseline_change_bytes"]
        )
        assert row["identity_holds"] is True
    changed = [r for r in phase.allocator_scope_decomposition if any(t for t in terms(r) if t)]
    kept = phase.allocator_scope_decomposition_rows(include_unchanged=False)
    assert [(r["scope"], r["metric"]) for r in kept] == [(r.scope, r.metric) for r in changed]
    assert ("default", "reserved_bytes") not in {(r["scope"], r["metric"]) for r in kept}
    assert ("private", "reserved_bytes") in {(r["scope"], r["metric"]) for r in kept}

    pools = phase.pool_decomposition_rows(include_unchanged=False)
    moved = [r for r in phase.pool_decomposition if any(t for t in terms(r) if t)]
    assert moved and all(r.baseline_pool == PRIVATE for r in moved), "the default pool is equal"
    assert [r["metric"] for r in pools] == [r.metric for r in moved]
    reserved = next(r for r in pools if r["metric"] == "reserved_bytes")
    assert (reserved["baseline_change_bytes"], reserved["candidate_change_bytes"]) == (
        16 * MIB,
        32 * MIB,
    )
    assert len(phase.pool_decomposition_rows()) == len(phase.pool_decomposition)

    devices = phase.device_decomposition_rows()
    lines = csv_rows(out["device_decomposition"])
    assert [(r["metric"], r["end_gap_bytes"]) for r in devices] == [
        (line["metric"], as_int(line["end_gap_bytes"])) for line in lines
    ]
    used = next(r for r in devices if r["metric"] == "used_bytes")
    assert (used["baseline_device_index"], used["candidate_device_index"]) == (0, 0)
    assert used["end_gap_bytes"] == 16 * MIB
    assert all(
        any(r[t] for t in ("baseline_change_bytes", "candidate_change_bytes", "start_gap_bytes"))
        or r["end_gap_bytes"]
        for r in phase.device_decomposition_rows(include_unchanged=False)
    )
