"""Stack and event attribution on workloads whose answers are known by construction:
bytes per allocation stack, partial coverage and the ``<unattributed>`` bucket, allocator
events between points per action, ``oom`` rows, typed history failures, cross-run
refusals, reports and the advanced helpers."""

from __future__ import annotations

import csv
import io
import json

import pytest
from test_memory_support import MIB, FakeAllocator
from torch_cudagraph_debug.errors import (
    CrossRunError,
    InvalidInputError,
    MemoryHistoryBoundaryError,
    MemoryHistoryDisabledError,
    MemoryHistoryTruncatedError,
)
from torch_cudagraph_debug.memory_debug import (
    MemoryAttributionOptions,
    MemoryDisplayOptions,
    MemoryEvidenceStatus,
    MemoryLifetimeOptions,
    MemoryProbe,
    MemoryRecorder,
    advanced,
    compare_phases,
    compare_points,
)

KIB = 1024
EMBED = "model.py:30:embed <- model.py:12:main"
ATTN = "model.py:40:attn <- model.py:11:step <- model.py:12:main"
# The fake records every trace entry with these frames.
TRACE = "model.py:10:forward <- model.py:12:main"
STACKS = MemoryAttributionOptions(stacks=True)
BOTH = MemoryAttributionOptions(stacks=True, events=True)


def workload(tmp_path, name: str = "run", **fake):
    """start: an empty 8 MiB segment. end: 2 MiB at `embed`, 1 MiB (requested 1 MiB -
    100) at `attn`, 512 KiB without frames. freed: the `embed` block freed."""
    alloc = FakeAllocator(**fake)
    alloc.attribution_frame("embed", 30)
    alloc.attribution_frame("attn", 40)
    with MemoryRecorder(name=name, run_dir=tmp_path / name, _source=alloc) as rec:
        seg = alloc.segment(8 * MIB)
        rec.record_point("start")
        embed = alloc.attribution_alloc(seg, 2 * MIB, ("embed", "main"))
        alloc.attribution_alloc(seg, MIB, ("attn", "step", "main"), requested=MIB - 100)
        alloc.attribution_alloc(seg, 512 * KIB, ())
        rec.record_point("end")
        alloc.free(embed)
        rec.record_point("freed")
    return rec.result, alloc


def by_key(rows):
    return {r.stack_key: r for r in rows}


def test_bytes_per_stack_partial_coverage_and_unattributed(tmp_path) -> None:
    run, _ = workload(tmp_path)
    c = run.compare("start", "end", attribution=STACKS)
    assert c.attribution_status.stacks == MemoryEvidenceStatus(True, True, False)
    assert c.attribution_status.events == MemoryEvidenceStatus(False, False, False)
    assert c.reference_stack_coverage.active_bytes == 0
    assert c.reference_stack_coverage.coverage == 1.0
    cov = c.candidate_stack_coverage
    assert (cov.active_bytes, cov.attributed_bytes, cov.unattributed_bytes) == (
        3 * MIB + 512 * KIB,
        3 * MIB,
        512 * KIB,
    )
    assert cov.coverage == pytest.approx(3 / 3.5)
    rows = by_key(c.stack_deltas)
    assert set(rows) == {EMBED, ATTN, "<unattributed>"}
    assert rows[EMBED].delta_size_bytes == 2 * MIB
    assert rows[EMBED].delta_count == 1
    assert rows[ATTN].candidate_requested_bytes == MIB - 100
    assert rows[ATTN].reference_key == (0, (0, 0)) and rows[ATTN].candidate_key == (0, (0, 0))
    assert rows["<unattributed>"].delta_size_bytes == 512 * KIB
    assert rows["<unattributed>"].stack_frames == ()
    assert [f["name"] for f in rows[ATTN].stack_frames] == ["attn", "step", "main"]
    # Largest change first.
    assert [r.stack_key for r in c.stack_deltas] == [EMBED, ATTN, "<unattributed>"]
    assert any("<unattributed>" in w for w in c.warnings)
    freed = run.compare("end", "freed", attribution=STACKS)
    assert by_key(freed.stack_deltas)[EMBED].delta_size_bytes == -2 * MIB
    assert by_key(freed.stack_deltas)[ATTN].delta_size_bytes == 0


def test_events_between_points_per_action(tmp_path) -> None:
    run, _ = workload(tmp_path)
    c = run.compare("start", "end", attribution=BOTH)
    assert c.attribution_status.events == MemoryEvidenceStatus(True, True, True)
    rows = [
        (e.action, e.total_bytes, e.count, e.pool_id, e.attribution_confidence)
        for e in c.event_summaries
    ]
    assert rows == [("alloc", 3 * MIB + 512 * KIB, 3, (0, 0), "matched")]
    assert c.event_summaries[0].stack_key == TRACE
    freed = run.compare("end", "freed", attribution=BOTH)
    actions = {e.action: (e.total_bytes, e.count) for e in freed.event_summaries}
    assert actions == {"free_requested": (2 * MIB, 1), "free_completed": (2 * MIB, 1)}
    # Over two intervals, the windows of both later points are read.
    whole = run.compare("start", "freed", attribution=BOTH)
    totals = {e.action: e.count for e in whole.event_summaries}
    assert totals == {"alloc": 3, "free_requested": 1, "free_completed": 1}
    row = whole.event_summaries[0].to_row()
    assert json.loads(row["stack_frames_json"])[0]["name"] == "forward"
    assert whole.event_summaries[0].to_dict()["stack_frames"][1]["name"] == "main"


def test_oom_is_not_applicable(tmp_path) -> None:
    alloc = FakeAllocator()
    with MemoryRecorder(name="oom", run_dir=tmp_path / "oom", _source=alloc) as rec:
        rec.record_point("a")
        alloc.attribution_oom(0, size=64 * MIB, device_free=MIB)
        rec.record_point("b")
    c = rec.result.compare("a", "b", attribution=MemoryAttributionOptions(events=True))
    (row,) = c.event_summaries
    assert (row.action, row.total_bytes, row.count) == ("oom", 64 * MIB, 1)
    assert row.attribution_confidence == "not_applicable" and row.pool_id is None
    assert "pool[n/a]" in c.to_text()


def test_zero_coverage_and_disabled_history_are_typed(tmp_path) -> None:
    alloc = FakeAllocator(history=False)
    with MemoryRecorder(name="off", run_dir=tmp_path / "off", _source=alloc) as rec:
        seg = alloc.segment(4 * MIB)
        rec.record_point("a")
        alloc.attribution_alloc(seg, MIB, ())
        rec.record_point("b")
    run = rec.result
    with pytest.raises(MemoryHistoryDisabledError, match="allocation stack"):
        run.compare("a", "b", attribution=STACKS)
    with pytest.raises(MemoryHistoryDisabledError, match="device 0"):
        run.compare("a", "b", attribution=MemoryAttributionOptions(events=True))
    # State totals never need history.
    assert run.compare("a", "b").attribution_status.stacks.requested is False


def test_truncated_history_is_typed(tmp_path) -> None:
    alloc = FakeAllocator(max_entries=4)
    with MemoryRecorder(name="ring", run_dir=tmp_path / "ring", _source=alloc) as rec:
        seg = alloc.segment(4 * MIB)
        rec.record_point("a")
        alloc.churn(seg, 10)
        rec.record_point("b")
    run = rec.result
    with pytest.raises(MemoryHistoryTruncatedError):
        run.compare("a", "b", attribution=MemoryAttributionOptions(events=True))
    # Stacks alone do not read the history windows.
    assert run.compare("a", "b", attribution=STACKS).attribution_status.stacks.available


def test_unrecorded_boundary_is_typed(tmp_path) -> None:
    alloc = FakeAllocator(history=False, markers=False)
    with MemoryRecorder(name="late", run_dir=tmp_path / "late", _source=alloc) as rec:
        seg = alloc.segment(4 * MIB)
        rec.record_point("a")
        alloc.history = True
        alloc.alloc(seg, MIB)
        rec.record_point("b")
    with pytest.raises(MemoryHistoryBoundaryError):
        rec.result.compare("a", "b", attribution=MemoryAttributionOptions(events=True))


def test_cross_run_stacks_allowed_events_and_lifetimes_rejected(tmp_path) -> None:
    a, _ = workload(tmp_path, "a")
    b, _ = workload(tmp_path, "b")
    c = compare_points(a["end"], b["freed"], attribution=STACKS)
    rows = by_key(c.stack_deltas)
    assert rows[EMBED].delta_size_bytes == -2 * MIB
    assert rows[ATTN].delta_size_bytes == 0
    for kind in ("events", "lifetimes"):
        with pytest.raises(CrossRunError, match=kind):
            compare_points(a["end"], b["end"], attribution=MemoryAttributionOptions(**{kind: True}))


def test_probe_events_span_intermediate_snapshots() -> None:
    alloc = FakeAllocator()
    probe = MemoryProbe(_source=alloc)
    seg = alloc.segment(4 * MIB)
    s0 = probe.snapshot()
    alloc.alloc(seg, MIB)
    probe.snapshot()
    alloc.alloc(seg, MIB)
    s2 = probe.snapshot()
    c = probe.compare(s0, s2, attribution=BOTH)
    assert [(e.action, e.count, e.total_bytes) for e in c.event_summaries] == [
        ("alloc", 2, 2 * MIB)
    ]
    assert c.attribution_status.stacks.complete


def test_timeline_point_comparisons(tmp_path) -> None:
    run, _ = workload(tmp_path)
    assert run.timeline().point_comparisons == ()
    t = run.timeline(attribution=BOTH)
    assert len(t.point_comparisons) == 2
    assert by_key(t.point_comparisons[1].stack_deltas)[EMBED].delta_size_bytes == -2 * MIB
    text = t.to_text()
    assert "attribution run@start -> run@end" in text and "free_completed" in text
    assert len(t.report_tree()["attribution"]) == 2


def test_phase_attribution_on_change_legs_only(tmp_path) -> None:
    a, _ = workload(tmp_path, "a")
    b, _ = workload(tmp_path, "b")
    p = compare_phases(a.between("start", "end"), b.between("start", "freed"), attribution=BOTH)
    assert p.baseline_change.attribution_status.events.complete
    assert {e.action for e in p.candidate_change.event_summaries} >= {"alloc", "free_completed"}
    assert p.start_gap.attribution_status.events.requested is False
    assert p.end_gap.attribution_status.stacks.available
    assert by_key(p.end_gap.stack_deltas)[EMBED].delta_size_bytes == -2 * MIB


def test_reports_limit_text_only_and_csv_files(tmp_path) -> None:
    run, _ = workload(tmp_path)
    c = run.compare("start", "end", attribution=BOTH)
    assert "allocation stacks (3 of 3 rows)" in c.to_text()
    short = c.to_text(limit=1, stack_depth=1)
    assert "allocation stacks (1 of 3 rows)" in short
    assert "model.py:30:embed (+1 frames)" in short
    assert "showing 1 of 3 rows" in c.to_html(limit=1)
    doc = c.report_tree()["attribution"][0]
    assert len(doc["stack_deltas"]) == 3
    assert doc["attribution_status"]["stacks"] == {
        "requested": True,
        "available": True,
        "complete": False,
    }
    paths = c.save(tmp_path / "report")
    names = sorted(p.rsplit("/", 1)[-1] for p in paths)
    assert "allocation_stack_comparisons.csv" in names and "events.csv" in names
    with open(tmp_path / "report" / "allocation_stack_comparisons.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["stack_key"] for r in rows} == {EMBED, ATTN, "<unattributed>"}
    embed = next(r for r in rows if r["stack_key"] == EMBED)
    assert int(embed["delta_size_bytes"]) == 2 * MIB
    assert [f["name"] for f in json.loads(embed["stack_frames_json"])] == ["embed", "main"]
    events = list(csv.DictReader(io.StringIO((tmp_path / "report" / "events.csv").read_text())))
    assert [(e["action"], e["attribution_confidence"]) for e in events] == [("alloc", "matched")]
    with pytest.raises(InvalidInputError):
        c.to_text(limit=0)


def test_display_options_are_validated() -> None:
    with pytest.raises(InvalidInputError, match="limit"):
        MemoryDisplayOptions(limit=0)
    with pytest.raises(InvalidInputError, match="stack_depth"):
        MemoryDisplayOptions(stack_depth=-1)
    with pytest.raises(InvalidInputError, match="stacks"):
        MemoryAttributionOptions(stacks="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="display"):
        MemoryAttributionOptions(display=None)  # type: ignore[arg-type]


def test_display_defaults_are_declared_once() -> None:
    """The options' defaults, the lifetime report's and the CLI flags' are the core's."""
    import pickle

    from torch_cudagraph_debug.cli import _parser

    assert MemoryDisplayOptions() == MemoryDisplayOptions(stack_depth=2, limit=20)
    assert MemoryDisplayOptions.for_lifetimes() == MemoryDisplayOptions(4, 20)
    assert MemoryLifetimeOptions().display == MemoryDisplayOptions.for_lifetimes()
    shown = MemoryDisplayOptions(stack_depth=3, limit=7)
    assert repr(shown) == "MemoryDisplayOptions(stack_depth=3, limit=7)"
    assert pickle.loads(pickle.dumps(shown)) == shown
    assert {shown, MemoryDisplayOptions(3, 7)} == {shown}
    parser = _parser()
    summary = parser.parse_args(["memory", "summary", "run"])
    assert (summary.stack_depth, summary.limit) == (2, 20)
    lifetimes = parser.parse_args(["memory", "allocation-lifetimes", "run"])
    assert (lifetimes.stack_depth, lifetimes.limit) == (4, 20)


def test_advanced_helpers_on_raw_snapshots() -> None:
    alloc = FakeAllocator()
    alloc.attribution_frame("embed", 30)
    seg = alloc.segment(4 * MIB, pool=(2, 1))
    # Each snapshot leaves a `snapshot` entry with the metadata set at the time.
    alloc.set_metadata("m0")
    before = alloc.snapshot()
    alloc.attribution_alloc(seg, MIB, ("embed", "main"))
    alloc.attribution_alloc(seg, MIB, ())
    alloc.set_metadata("m1")
    after = alloc.snapshot()
    cov = advanced.allocation_stack_coverage(after)
    assert (cov.active_bytes, cov.attributed_bytes, cov.coverage) == (2 * MIB, MIB, 0.5)
    assert advanced.allocation_stack_coverage(after, pool=(0, 0)).coverage == 1.0
    rows = advanced.summarize_allocation_stacks(after, by_stream=True)
    assert [(r.stack_key, r.size_bytes, r.pool_id, r.stream) for r in rows] == [
        (EMBED, MIB, (2, 1), 0),
        ("<unattributed>", MIB, (2, 1), 0),
    ]
    deltas = advanced.compare_allocation_stacks(before, after)
    assert {d.stack_key: d.delta_size_bytes for d in deltas} == {
        EMBED: MIB,
        "<unattributed>": MIB,
    }
    assert advanced.compare_allocation_stacks(after, after) == ()
    assert len(advanced.compare_allocation_stacks(after, after, include_unchanged=True)) == 2
    # Events between the two snapshot markers, read from a later snapshot's ring.
    ring = alloc.snapshot()["device_traces"][0]
    window = advanced.extract_event_window(
        ring, start_marker="m0", end_marker="m1", start_label="before"
    )
    assert window.complete
    assert [e["action"] for e in window.entries] == ["alloc", "alloc"]
    missing = advanced.extract_event_window(
        ring, start_marker="zz", end_marker=None, start_label="x"
    )
    assert missing.status == "truncated" and missing.entries == ()
    events = advanced.summarize_allocator_events(
        window.entries,
        reference_segments=before["segments"],
        candidate_segments=after["segments"],
    )
    assert [(e.action, e.count, e.pool_id, e.attribution_confidence) for e in events] == [
        ("alloc", 2, (2, 1), "matched")
    ]
    assert advanced.stack_key_from_frames(rows[0].stack_frames) == EMBED
    assert advanced.stack_key_from_frames([]) == "<unattributed>"
    assert advanced.pool_id_label((1, 0)) == "pool[1,0]"
    assert advanced.pool_id_label(("unknown",)) == "pool[unknown]"
    assert advanced.stream_label(0x5A) == "stream 0x5a"
    assert advanced.format_bytes(3 * MIB // 2) == "1.50 MiB"
    assert advanced.format_delta_bytes(-512) == "-512 B"
    assert advanced.format_delta_bytes(0) == "+0 B"
    assert advanced.normalize_pool_id([3, 4]) == (3, 4)
    copy = advanced.mutable_snapshot(after)
    copy["segments"].clear()
    assert after["segments"]


def test_fx_node_fields_of_a_frame_are_kept_end_to_end(tmp_path) -> None:
    """Frames of generated code that torch augmented with their FX node keep it: stored,
    in stack frames (and their fingerprint), shown in text, exported back to memory_viz."""
    import pickle

    alloc = FakeAllocator()
    alloc.attribution_frame("kernel", 7, filename="/tmp/torchinductor/ab/cab.py")
    alloc._frames["kernel"].update(
        fx_node_op="call_function",
        fx_node_name="addmm",
        fx_node_target="aten.addmm.default",
        fx_original_trace="model.py:12 in forward",
    )
    with MemoryRecorder(name="fx", run_dir=tmp_path / "fx", _source=alloc) as rec:
        seg = alloc.segment(4 * MIB)
        rec.record_point("before")
        alloc.attribution_alloc(seg, MIB, ("kernel", "main"))
        rec.record_point("after")
    run = rec.result
    c = run.compare("before", "after", attribution=STACKS)
    (grown,) = [d for d in c.stack_deltas if d.delta_size_bytes == MIB]
    frame = grown.stack_frames[0]
    assert frame["fx_node_op"] == "call_function" and frame["fx_node_name"] == "addmm"
    assert frame["fx_node_target"] == "aten.addmm.default"
    assert frame["fx_original_trace"] == "model.py:12 in forward"
    assert "fx_node_op" not in grown.stack_frames[1]  # `main` has no FX node
    # The location key is unchanged; text shows the node next to the location.
    assert grown.stack_key.startswith("/tmp/torchinductor/ab/cab.py:7:kernel <- ")
    assert "cab.py:7:kernel [fx call_function addmm]" in c.to_text()
    frames = run._reader.table("memory_frames").to_pydict()
    assert "addmm" in frames["fx_node_name"] and None in frames["fx_node_name"]
    with open(run["after"].export_memory_viz(tmp_path / "after.pickle"), "rb") as f:
        exported = pickle.load(f)
    block_frames = [
        fr for s in exported["segments"] for b in s["blocks"] for fr in b.get("frames", [])
    ]
    assert any(fr.get("fx_node_name") == "addmm" for fr in block_frames)
