"""Allocation lifetimes on FakeAllocator workloads whose answers are known by
construction: transients between markers, a leak growing per point, address reuse,
stream-ordered frees, selections, typed history errors, reports and the CLI."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_memory_support import MIB, FakeAllocator
from torch_cudagraph_debug.cli import memory_main
from torch_cudagraph_debug.errors import (
    InvalidInputError,
    MemoryHistoryBoundaryError,
    MemoryHistoryDisabledError,
    MemoryHistoryTruncatedError,
    MemoryReconciliationError,
)
from torch_cudagraph_debug.memory_debug import (
    AllocationCohort,
    CohortPointState,
    MemoryAllocationLifetimeAnalysis,
    MemoryAttributionOptions,
    MemoryDisplayOptions,
    MemoryLifetimeOptions,
    MemoryLifetimeSelection,
    MemoryProbe,
    MemoryRecorder,
    MemoryRun,
    compare_phases,
    compare_points,
)


def _one_segment(size: int, **options: Any) -> tuple[FakeAllocator, int]:
    """A fake allocator (``options`` as ``FakeAllocator`` takes them) holding one empty
    segment of ``size`` bytes in the default pool; returns it and the segment's address."""
    alloc = FakeAllocator(**options)
    return alloc, alloc.segment(size)


def _keep(
    held: dict[str, int], alloc: FakeAllocator, seg: int, size: int, site: str
) -> Callable[[], None]:
    """A point's action: allocates ``size`` bytes at ``site`` in ``seg`` and keeps the
    address as ``held[site]``, for a later point's action to free."""

    def action() -> None:
        held[site] = alloc.lifetime_alloc(seg, size, site)

    return action


def _record(tmp_path: Path, alloc: FakeAllocator, steps: list) -> MemoryRun:
    """Records one point per ``(label, action)``: the action runs first."""
    with MemoryRecorder(name="life", run_dir=tmp_path / "run", _source=alloc) as rec:
        for label, action in steps:
            if action is not None:
                action()
            rec.record_point(label)
    return MemoryRun.load(tmp_path / "run")


def _by_site(result: MemoryAllocationLifetimeAnalysis) -> dict[str, AllocationCohort]:
    return {c.stack_frames[0][2] if c.stack_frames else "<none>": c for c in result.cohorts}


def test_transient_between_markers_is_visible_only_in_event_peaks(tmp_path: Path) -> None:
    alloc, seg = _one_segment(8 * MIB)

    def transient() -> None:
        address = alloc.lifetime_alloc(seg, 3 * MIB, "scratch")
        alloc.free(address)

    run = _record(tmp_path, alloc, [("start", None), ("end", transient)])
    result = run.lifetimes()
    assert isinstance(result, MemoryAllocationLifetimeAnalysis)
    assert result.tracked_generations == 1
    (cohort,) = result.cohorts
    assert cohort.pool_id == (0, 0)
    assert cohort.pool_label == "pool[0,0]"
    assert cohort.peak_active_bytes == 0
    assert cohort.peak_block_count == 0
    assert cohort.event_owner_peak_bytes == 3 * MIB
    assert cohort.event_unreusable_peak_bytes == 3 * MIB
    assert (cohort.born_bytes, cohort.free_completed_bytes) == (3 * MIB, 3 * MIB)
    (birth,) = cohort.births
    assert (birth.start_point, birth.end_point, birth.origin) == ("start", "end", "event")
    assert [f[2] for f in birth.stack_frames] == ["scratch", "main"]
    states = cohort.points
    assert all(isinstance(p, CohortPointState) for p in states)
    assert [p.active_bytes for p in states] == [0, 0]
    assert cohort.size_outcomes[0].outcome == "free_completed"
    # born_between keeps it too; active_at(start) does not (it did not exist yet).
    born = run.lifetimes(MemoryLifetimeSelection.born_between("start", "end"))
    assert born.tracked_generations == 1
    assert run.lifetimes(MemoryLifetimeSelection.active_at("start")).cohorts == ()


def test_a_leak_grows_per_point(tmp_path: Path) -> None:
    alloc, seg = _one_segment(16 * MIB)
    steps: list = [("p0", None)]
    for i in range(1, 4):
        steps.append((f"p{i}", lambda: alloc.lifetime_alloc(seg, MIB, "leak", requested=MIB - 8)))
    result = _record(tmp_path, alloc, steps).lifetimes()
    cohort = _by_site(result)["leak"]
    assert [p.owner_active_bytes for p in cohort.points] == [0, MIB, 2 * MIB, 3 * MIB]
    assert [p.requested_bytes for p in cohort.points] == [0, MIB - 8, 2 * MIB - 16, 3 * MIB - 24]
    assert cohort.peak_active_bytes == 3 * MIB
    assert cohort.peak_block_count == 3
    assert cohort.event_owner_peak_bytes == 3 * MIB
    assert cohort.terminal_owner_active_bytes == 3 * MIB
    assert cohort.terminal_owner_active_count == 3
    assert cohort.first_sampled_point == "p1"
    assert cohort.last_sampled_point == "p3"
    assert [(b.size_bytes, b.requested_size_bytes, b.count) for b in cohort.size_histogram] == [
        (MIB, MIB - 8, 3)
    ]


def test_address_reuse_gives_two_generations(tmp_path: Path) -> None:
    alloc, seg = _one_segment(4 * MIB)
    held: dict[str, int] = {}

    def reused() -> None:
        alloc.free(held["reuse"])
        again = alloc.lifetime_alloc(seg, MIB, "reuse")
        assert again == held["reuse"], "the fake hands the same block out again"

    steps = [("p0", None), ("p1", _keep(held, alloc, seg, MIB, "reuse")), ("p2", reused)]
    result = _record(tmp_path, alloc, steps).lifetimes()
    cohort = _by_site(result)["reuse"]
    assert cohort.generation_count == 2
    assert result.tracked_generations == 2
    outcomes = sorted((o.outcome, o.count) for o in cohort.size_outcomes)
    assert outcomes == [("free_completed", 1), ("owner_active", 1)]
    assert cohort.event_unreusable_peak_bytes == MIB, "never both generations at once"
    assert [p.block_count for p in cohort.points] == [0, 1, 1]


def test_stream_ordered_free_is_awaiting_until_completed(tmp_path: Path) -> None:
    alloc, seg = _one_segment(4 * MIB)
    held: dict[str, int] = {}
    steps = [
        ("p0", None),
        ("p1", _keep(held, alloc, seg, 2 * MIB, "stream")),
        ("p2", lambda: alloc.free(held["stream"], pending=True)),
        ("p3", lambda: alloc.lifetime_complete_free(held["stream"])),
    ]
    run = _record(tmp_path, alloc, steps)
    cohort = _by_site(run.lifetimes())["stream"]
    assert [(p.owner_active_bytes, p.awaiting_free_bytes) for p in cohort.points] == [
        (0, 0),
        (2 * MIB, 0),
        (0, 2 * MIB),
        (0, 0),
    ]
    assert cohort.peak_awaiting_free_bytes == 2 * MIB
    assert [t.end_point for t in cohort.free_requests] == ["p2"]
    assert [t.end_point for t in cohort.free_completions] == ["p3"]
    # Starting at p2, the request happened before the range: a range-boundary row.
    anchored = run.lifetimes(MemoryLifetimeSelection.active_at("p2"))
    (c,) = anchored.cohorts
    assert [t.origin for t in c.free_requests] == ["range_boundary"]
    assert c.free_requests[0].start_point is None
    assert [t.origin for t in c.births] == ["range_boundary"]
    # through stops the replay early: still awaiting free at p2.
    early = run.lifetimes(MemoryLifetimeSelection.active_at("p2"), through="p2")
    assert early.cohorts[0].terminal_awaiting_free_bytes == 2 * MIB
    assert early.points == ("p2",)


def test_selections_and_through(tmp_path: Path) -> None:
    alloc, seg = _one_segment(16 * MIB)
    held: dict[str, int] = {}

    def later() -> None:
        alloc.free(held["old"])
        alloc.lifetime_alloc(seg, 4 * MIB, "later")

    steps = [
        ("a", _keep(held, alloc, seg, MIB, "old")),
        ("b", lambda: alloc.lifetime_alloc(seg, 2 * MIB, "new")),
        ("c", later),
        ("d", None),
    ]
    run = _record(tmp_path, alloc, steps)
    active = run.lifetimes(MemoryLifetimeSelection.active_at("a"), through="c")
    assert set(_by_site(active)) == {"old"}
    assert _by_site(active)["old"].free_completed_bytes == MIB
    assert active.points == ("a", "b", "c")
    born = run.lifetimes(MemoryLifetimeSelection.born_between("a", "b"))
    assert set(_by_site(born)) == {"new"}
    born_late = run.lifetimes(MemoryLifetimeSelection.born_between(run["b"], run["c"]))
    assert set(_by_site(born_late)) == {"later"}
    everything = run.lifetimes(MemoryLifetimeSelection.all())
    assert set(_by_site(everything)) == {"old", "new", "later"}
    ranks = [c.display_rank for c in everything.cohorts]
    assert ranks == [1, 2, 3]
    assert everything.cohorts[0].stack_frames[0][2] == "later", "largest first"
    ids = {c.stack_frames[0][2]: c.cohort_id for c in everything.cohorts}
    again = {c.stack_frames[0][2]: c.cohort_id for c in run.lifetimes().cohorts}
    assert ids == again
    with pytest.raises(InvalidInputError, match="precedes"):
        run.lifetimes(MemoryLifetimeSelection.active_at("c"), through="b")
    with pytest.raises(InvalidInputError, match="precedes"):
        run.lifetimes(MemoryLifetimeSelection.born_between("a", "c"), through="b")


LIFETIMES = MemoryAttributionOptions(lifetimes=True)


def test_a_same_run_comparison_carries_the_cohorts_of_its_range(tmp_path: Path) -> None:
    alloc, seg = _one_segment(16 * MIB)
    steps: list = [
        ("p0", None),
        ("p1", lambda: alloc.lifetime_alloc(seg, 2 * MIB, "kept")),
        ("p2", lambda: alloc.lifetime_alloc(seg, MIB, "later")),
    ]
    run = _record(tmp_path, alloc, steps)
    c = run.compare("p1", "p2", attribution=LIFETIMES)
    status = c.attribution_status.lifetimes
    assert (status.requested, status.available, status.complete) == (True, True, True)
    assert not [w for w in c.warnings if "lifetime" in w]
    result = c.allocation_lifetimes
    assert isinstance(result, MemoryAllocationLifetimeAnalysis)
    assert result.points == ("p1", "p2")
    # Live at the earlier point, plus born up to the later one.
    sites = _by_site(result)
    assert set(sites) == {"kept", "later"}
    assert [p.owner_active_bytes for p in sites["kept"].points] == [2 * MIB, 2 * MIB]
    assert [p.owner_active_bytes for p in sites["later"].points] == [0, MIB]
    assert c.to_dict()["allocation_lifetimes"] == result.to_dict()
    # The same range whichever way round, and from the module-level function.
    backwards = compare_points(run["p2"], run["p1"], attribution=LIFETIMES)
    assert backwards.allocation_lifetimes.to_dict() == result.to_dict()
    # Without the request nothing is attached.
    assert run.compare("p1", "p2").allocation_lifetimes is None
    # Both change legs of a phase comparison carry their own range.
    phases = compare_phases(run.between("p0", "p1"), run.between("p1", "p2"), attribution=LIFETIMES)
    assert phases.baseline_change.allocation_lifetimes.points == ("p0", "p1")
    assert _by_site(phases.baseline_change.allocation_lifetimes)["kept"].born_bytes == 2 * MIB
    assert phases.candidate_change.allocation_lifetimes.points == ("p1", "p2")


def test_lifetime_attribution_without_history_says_why(tmp_path: Path) -> None:
    alloc, seg = _one_segment(4 * MIB, history=False)
    run = _record(tmp_path, alloc, [("a", None), ("b", lambda: alloc.alloc(seg, MIB))])
    c = run.compare("a", "b", attribution=LIFETIMES)
    assert c.allocation_lifetimes is None
    assert c.attribution_status.lifetimes.requested
    assert not c.attribution_status.lifetimes.available
    (why,) = [w for w in c.warnings if "lifetime" in w]
    assert why.startswith("lifetime attribution is unavailable:") and "device 0" in why
    # Probe snapshots have no stored run history to replay.
    probe = MemoryProbe(_source=FakeAllocator())
    s0, s1 = probe.snapshot(), probe.snapshot()
    snap = probe.compare(s0, s1, attribution=LIFETIMES)
    assert not snap.attribution_status.lifetimes.available
    assert any("two different points of one run" in w for w in snap.warnings)


def test_disabled_history_is_refused(tmp_path: Path) -> None:
    alloc, seg = _one_segment(4 * MIB, history=False)
    run = _record(tmp_path, alloc, [("a", None), ("b", lambda: alloc.alloc(seg, MIB))])
    with pytest.raises(MemoryHistoryDisabledError, match="device 0"):
        run.lifetimes()


def test_truncated_history_is_refused(tmp_path: Path) -> None:
    alloc, seg = _one_segment(4 * MIB, max_entries=8)
    run = _record(tmp_path, alloc, [("a", None), ("b", lambda: alloc.churn(seg, 10))])
    with pytest.raises(MemoryHistoryTruncatedError, match=r"'a'.*'b'"):
        run.lifetimes()
    # A range that does not cross the lost window is still analysable.
    assert run.lifetimes(through="a").points == ("a",)


def test_unrecognisable_boundary_is_a_boundary_error(tmp_path: Path) -> None:
    alloc, seg = _one_segment(4 * MIB, markers=False)

    def damage_boundary() -> None:
        # Without markers the window is cut at the previous point's last entry, found by
        # its fingerprint; an entry that no longer matches leaves no boundary.
        alloc.rings[0][-2]["size"] += 1
        alloc.alloc(seg, MIB)

    run = _record(tmp_path, alloc, [("a", None), ("b", damage_boundary)])
    with pytest.raises(MemoryHistoryBoundaryError, match="device 0"):
        run.lifetimes()


def test_history_contradicting_the_state_is_a_reconciliation_error(tmp_path: Path) -> None:
    alloc, seg = _one_segment(4 * MIB)

    def silent_alloc() -> None:
        # A block appears without its alloc entry (the history lost it).
        alloc.alloc(seg, MIB)
        del alloc.rings[0][-1]

    run = _record(tmp_path, alloc, [("a", None), ("b", silent_alloc)])
    with pytest.raises(MemoryReconciliationError, match=r"no live generation.*on device 0: 1"):
        run.lifetimes()


def test_reports_and_files(tmp_path: Path) -> None:
    alloc, seg = _one_segment(16 * MIB)
    held = {}

    def work() -> None:
        held["x"] = alloc.lifetime_alloc(seg, MIB, "kept")
        t = alloc.lifetime_alloc(seg, 2 * MIB, "temp")
        alloc.free(t)

    run = _record(tmp_path, alloc, [("a", None), ("b", work), ("c", lambda: alloc.free(held["x"]))])
    options = MemoryLifetimeOptions(display=MemoryDisplayOptions(stack_depth=1, limit=1))
    result = run.lifetimes(options=options)
    text = result.to_text()
    assert "2 cohorts" not in text and "cohorts: 2 (showing 1)" in text
    assert "owner_event_peak" in text and "unreusable_event_peak" in text
    assert "snapshot_peak" in text
    assert "... 1 more frames" in text, "stack_depth=1 of two frames"
    assert "cohorts: 2 (showing 2)" in result.to_text(limit=5)
    data = result.to_dict()
    assert data["kind"] == "memory_allocation_lifetimes"
    assert len(data["cohorts"]) == 2, "display limits never cut JSON"
    assert data["cohorts"][0]["pool_id"] == [0, 0]
    html = result.to_html()
    assert "<svg" in html and "Showing 1 of 2 cohorts" in html
    out = tmp_path / "report"
    written = {Path(p).name for p in result.write(out).values()}
    assert written == {
        "report.txt",
        "report.json",
        "report.html",
        "cohorts.csv",
        "cohort_points.csv",
        "size_histograms.csv",
        "size_outcomes.csv",
        "birth_stacks.csv",
        "free_request_stacks.csv",
        "free_completion_stacks.csv",
    }
    with open(out / "cohorts.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    temp = next(r for r in rows if "temp" in r["stack_frames_json"])
    assert int(temp["event_owner_peak_bytes"]) == 2 * MIB
    assert int(temp["peak_active_bytes"]) == 0
    with open(out / "cohort_points.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == 2 * 3
    with pytest.raises(Exception, match="overwrite"):
        result.write(out)
    result.write(out, overwrite=True)
    d = result.cohorts[0].to_dict()
    assert d["points"][0]["label"] == "a"
    assert "AllocationCohort(cohort_id=" in repr(result.cohorts[0])
    # Every repr in Python's spelling: no Rust `Some(..)`, structs or double quotes.
    cohort = result.cohorts[0]
    rows = [result, cohort, *cohort.points, *cohort.births, *cohort.size_histogram]
    shown = [repr(r) for r in [*rows, *cohort.size_outcomes, *cohort.free_requests]]
    assert not [r for r in shown if "Some(" in r or "PointRef" in r or '"' in r], shown
    birth = cohort.births[0]
    assert repr(birth).startswith(f"CohortBirth(start_point={birth.start_point!r}, ")
    # The per-cohort rows know their cohort: to_row() defaults to it.
    for row in [*cohort.points, *cohort.size_histogram, *cohort.size_outcomes]:
        assert row.cohort_id == cohort.cohort_id
        assert row.to_row()["cohort_id"] == cohort.cohort_id
        assert row.to_row(cohort_id="other")["cohort_id"] == "other"
        assert "cohort_id" not in row.to_dict()
    with pytest.raises(InvalidInputError):
        result.to_text(limit=-1)


def test_cli_allocation_lifetimes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    alloc, seg = _one_segment(16 * MIB)

    def work() -> None:
        alloc.lifetime_alloc(seg, MIB, "cli")

    _record(tmp_path, alloc, [("a", None), ("b", work), ("c", None)])
    root = str(tmp_path / "run")
    out = tmp_path / "cli-report"
    code = memory_main(
        [
            "allocation-lifetimes",
            root,
            "--born-between",
            "a",
            "b",
            "--through",
            "c",
            "--output",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "born_between(a, b]" in printed
    assert (out / "cohorts.csv").exists()
    assert memory_main(["allocation-lifetimes", root, "--active-at", "b", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["selection"]["kind"] == "active_at"
    assert len(data["cohorts"]) == 1
    assert memory_main(["allocation-lifetimes", root, "--active-at", "c", "--through", "a"]) == 2
