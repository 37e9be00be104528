"""The reference design's members of memory runs, points, probes, recorders, run groups,
timelines and allocation lifetime analyses. Each is checked against a fact known
independently: the workload built by hand with the fake allocator, the marker the fake saw
set, or the CSV file the same result writes."""

from __future__ import annotations

import csv
import datetime
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from test_memory_support import MIB, FakeAllocator
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.memory_debug import (
    MemoryAllocationLifetimeAnalysis,
    MemoryAttributionOptions,
    MemoryDisplayOptions,
    MemoryLifetimeOptions,
    MemoryLifetimeSelection,
    MemoryObservationKey,
    MemoryPoolKey,
    MemoryProbe,
    MemoryRecorder,
    MemoryRun,
    MemoryRunGroup,
)


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _as_csv(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Rows as a CSV reader gives them back: every value as text, ``None`` empty,
    booleans as the CSV files write them (``true``/``false``)."""
    return [{k: _cell_text(v) for k, v in row.items()} for row in rows]


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


# ------------------------------------------------------------------ points and runs


def test_point_fields_and_boundary_marker(tmp_path: Path) -> None:
    alloc = FakeAllocator()
    alloc.alloc(alloc.segment(2 * MIB), 1024)
    before = datetime.datetime.now(datetime.timezone.utc)
    with MemoryRecorder(name="pts", run_dir=tmp_path / "r", _source=alloc) as rec:
        rec.record_point("p0", metadata={"step": 1})
        rec.record_point("p1")
    run = MemoryRun.load(tmp_path / "r")
    p0, p1 = run["p0"], run["p1"]
    assert (p0.run_id, p0.index, p0.label) == (run.run_id, 0, "p0")
    assert (p1.run_id, p1.index, p1.label) == (run.run_id, 1, "p1")
    assert p0.metadata == {"step": 1} and p1.metadata == {}
    assert isinstance(p1.timestamp, datetime.datetime)
    assert before - datetime.timedelta(seconds=1) <= p0.timestamp <= p1.timestamp
    # The marker is the metadata the recorder set on the allocator around each snapshot.
    markers = [m for m in alloc.metadata_log if m.startswith("tcgd:")]
    assert [p0.boundary_marker, p1.boundary_marker] == markers
    assert p1.boundary_marker == f"tcgd:{run.run_id}:1"

    quiet = FakeAllocator(markers=False)
    with MemoryRecorder(name="quiet", run_dir=tmp_path / "q", _source=quiet) as rec:
        rec.record_point("only")
    assert rec.result["only"].boundary_marker == ""


def test_run_bundle_dir_and_point_by_ref(tmp_path: Path) -> None:
    alloc = FakeAllocator()
    with MemoryRecorder(name="b", run_dir=tmp_path / "job", _source=alloc) as rec:
        rec.record_point("a")
        rec.record_point("b")
    run = MemoryRun.load(tmp_path / "job")
    assert isinstance(run.bundle_dir, Path)
    assert run.bundle_dir == tmp_path / "job" == Path(run.path)
    assert run.point(ref="b") is run["b"]
    assert run.point(ref=0) is run["a"]
    assert run.point(ref=run["b"]).index == 1


# ------------------------------------------------------------- probes and recorders


def test_probe_and_recorder_devices(tmp_path: Path) -> None:
    alloc = FakeAllocator(devices=3)
    assert MemoryProbe(_source=alloc).devices is None
    assert MemoryProbe(devices=[2, 0], _source=alloc).devices == (0, 2)
    assert MemoryProbe(devices=1, _source=alloc).devices == (1,)
    assert MemoryProbe(devices="all", _source=alloc).devices == (0, 1, 2)
    rec = MemoryRecorder(run_dir=tmp_path / "r", devices=[1, 2], _source=alloc)
    assert rec.devices == (1, 2)
    # The points cover exactly the chosen devices.
    point = rec.record_point("p")
    assert point.devices == (1, 2)
    rec.finish()
    assert MemoryRecorder(run_dir=tmp_path / "s", _source=alloc).devices is None


def test_devices_as_the_reference_names_them() -> None:
    """``torch.device | str | int`` or a sequence of them (what a torchrun worker passes:
    ``devices=[torch.device("cuda", local_rank)]``); CPU devices and other types are
    typed errors."""
    alloc = FakeAllocator(devices=3)
    cuda = torch.device("cuda", 2)
    assert MemoryProbe(devices=cuda, _source=alloc).devices == (2,)
    assert MemoryProbe(devices=[cuda, "cuda:0", 1], _source=alloc).devices == (0, 1, 2)
    assert MemoryProbe(devices="cuda:1", _source=alloc).devices == (1,)
    assert MemoryProbe(devices="cuda", _source=alloc).devices == (alloc.current_device(),)
    for wrong in ("cpu", torch.device("cpu"), ["cuda:0", "cpu"], "gpu7", [], 1.5):
        with pytest.raises(InvalidInputError):
            MemoryProbe(devices=wrong, _source=alloc)


def test_probe_snapshot_identity() -> None:
    alloc = FakeAllocator()
    probe = MemoryProbe(name="p", _source=alloc)
    start = time.time()
    first = probe.snapshot()
    second = probe.snapshot()
    assert start <= first.timestamp <= second.timestamp <= time.time()
    assert first.probe_id == second.probe_id
    assert MemoryProbe(_source=alloc).snapshot().probe_id != first.probe_id
    # The marker the probe set while each snapshot was taken, naming the probe.
    markers = [m for m in alloc.metadata_log if m.startswith("tcgd:")]
    assert [first.boundary_marker, second.boundary_marker] == markers[:2]
    assert first.probe_id in first.boundary_marker


# ------------------------------------------------------- keys, observations, selections


def test_key_labels_and_observation_descriptor() -> None:
    alloc = FakeAllocator()
    alloc.alloc(alloc.segment(2 * MIB), 1024)
    probe = MemoryProbe(_source=alloc)
    before = probe.snapshot()
    alloc.alloc(alloc.segment(4 * MIB, pool=(1, 0), stream=0x77), MIB)
    after = probe.snapshot()
    assert MemoryPoolKey(0, (1, 0)).label == "device[0] pool[1,0]"
    assert MemoryPoolKey(3, (0, 0)).label == "device[3] pool[0,0]"
    key = MemoryObservationKey(0, (1, 0), 0x77)
    assert key.label == "device[0] pool[1,0] stream 0x77"
    # The reports name pools and streams the same way.
    text = probe.compare(before, after).to_text()
    assert "pool[1,0]" in text and "stream 0x77" in text

    observation = after.observation(0, (1, 0), 0x77)
    assert observation.descriptor() == {
        "kind": "observation",
        "order": observation.order,
        "device_index": 0,
        "pool_id": [1, 0],
        "stream": 0x77,
        "label": "device[0] pool[1,0] stream 0x77",
    }
    assert [o.order for o in after.observations] == list(range(len(after.observations)))


def test_lifetime_selection_fields(tmp_path: Path) -> None:
    everything = MemoryLifetimeSelection.all()
    assert (everything.mode, everything.start, everything.end) == ("all", None, None)
    anchored = MemoryLifetimeSelection.active_at("a")
    assert (anchored.mode, anchored.start, anchored.end) == ("active_at", "a", None)
    born = MemoryLifetimeSelection.born_between("a", 2)
    assert (born.mode, born.start, born.end) == ("born_between", "a", 2)


# ------------------------------------------------------------------------ run groups


def _rank_run(root: Path, rank: int, labels: list[str]) -> MemoryRun:
    alloc = FakeAllocator()
    alloc.segment(2 * MIB)
    rec = MemoryRecorder(name="job", run_dir=root, rank=rank, world_size=2, _source=alloc)
    for label in labels:
        rec.record_point(label)
    return rec.finish()


def test_group_runs_and_point_labels(tmp_path: Path) -> None:
    # Rank 1 is recorded first: the group still lists its runs by rank.
    _rank_run(tmp_path / "job", 1, ["a", "b", "c"])
    _rank_run(tmp_path / "job", 0, ["a", "b", "c"])
    group = MemoryRunGroup.load(tmp_path / "job")
    assert [run.rank for run in group.runs] == [0, 1]
    assert all(run is group[run.rank] for run in group.runs)
    assert group.point_labels == ("a", "b", "c") == group[0].labels


# ------------------------------------------------------------------------- timelines


def _timeline_run(tmp_path: Path) -> MemoryRun:
    """p0: a default pool of 2 MiB; p1: a private pool (1, 0) of 8 MiB appears on stream
    0x77; p2: it is released; p3: nothing changes."""
    alloc = FakeAllocator()
    alloc.alloc(alloc.segment(2 * MIB), 1024)
    with MemoryRecorder(name="t", run_dir=tmp_path / "t", _source=alloc) as rec:
        rec.record_point("p0")
        private = alloc.segment(8 * MIB, pool=(1, 0), stream=0x77)
        rec.record_point("p1")
        alloc.release(private)
        rec.record_point("p2")
        rec.record_point("p3")
    return MemoryRun.load(tmp_path / "t")


def test_timeline_fields(tmp_path: Path) -> None:
    run = _timeline_run(tmp_path)
    timeline = run.timeline()
    assert timeline.run is run
    assert [(e.point_label, e.scope) for e in timeline.allocator_scope_entries][:3] == [
        ("p0", "all"),
        ("p0", "default"),
        ("p0", "private"),
    ]
    assert len(timeline.allocator_scope_entries) == 3 * 4
    assert [e.point_label for e in timeline.device_entries] == ["p0", "p1", "p2", "p3"]
    private = [e for e in timeline.pool_entries if e.pool_key == (0, (1, 0))]
    assert [e.stats.reserved_bytes for e in private] == [8 * MIB, 0, 0]
    observed = [e for e in timeline.observation_entries if e.key == (0, (1, 0), 0x77)]
    assert [e.point_label for e in observed] == ["p1", "p2", "p3"]
    assert timeline.point_comparisons == ()
    assert timeline.allocation_lifetimes is None
    default = MemoryDisplayOptions()
    assert (timeline.display_limit, timeline.display_stack_depth) == (
        default.limit,
        default.stack_depth,
    )
    shown = MemoryAttributionOptions(display=MemoryDisplayOptions(limit=5, stack_depth=3))
    assert (run.timeline(attribution=shown).display_limit,) == (5,)
    assert run.timeline(attribution=shown).display_stack_depth == 3


def test_timeline_rows_are_the_csv_lines(tmp_path: Path) -> None:
    run = _timeline_run(tmp_path)
    timeline = run.timeline()
    out = tmp_path / "report"
    timeline.write(out)
    for rows, name in (
        (timeline.allocator_scope_rows(), "allocator_scopes.csv"),
        (timeline.pool_rows(), "pools.csv"),
        (timeline.observation_rows(), "observations.csv"),
        (timeline.device_rows(), "devices.csv"),
    ):
        assert _as_csv(rows) == _csv(out / name), name
    released = next(
        r
        for r in timeline.pool_rows()
        if r["point_label"] == "p2" and r["device_index"] == 0 and r["pool_id"] == "1,0"
    )
    assert released["delta_reserved_bytes"] == -8 * MIB
    assert released["stats_reserved_bytes"] == 0


def test_timeline_rows_without_unchanged(tmp_path: Path) -> None:
    timeline = _timeline_run(tmp_path).timeline()

    def points(rows: list[dict[str, Any]]) -> list[str]:
        return [r["point_label"] for r in rows]

    pools = timeline.pool_rows(include_unchanged=False)
    # p0 is kept whole (nothing to compare with), the default pool never changes after
    # it, the private pool changes at p1 and p2, and nothing changes at p3.
    assert [(r["point_label"], r["pool_id"]) for r in pools] == [
        ("p0", "0,0"),
        ("p1", "1,0"),
        ("p2", "1,0"),
    ]
    assert points(timeline.observation_rows(include_unchanged=False)) == ["p0", "p1", "p2"]
    assert points(timeline.device_rows(include_unchanged=False)) == ["p0", "p1", "p2"]
    scopes = timeline.allocator_scope_rows(include_unchanged=False)
    assert [(r["point_label"], r["scope"]) for r in scopes] == [
        ("p0", "all"),
        ("p0", "default"),
        ("p0", "private"),
        ("p1", "all"),
        ("p1", "private"),
        ("p2", "all"),
        ("p2", "private"),
    ]
    # Kept rows are the complete rows.
    assert all(r in timeline.pool_rows() for r in pools)


# -------------------------------------------------------------------------- lifetimes


def _lifetime_run(tmp_path: Path) -> MemoryRun:
    """a: an empty 16 MiB segment; b: 1 MiB kept at site ``kept`` and a 2 MiB transient
    at site ``temp`` born and freed before the point; c: the kept block freed."""
    alloc = FakeAllocator()
    seg = alloc.segment(16 * MIB)
    held: dict[str, int] = {}

    def work() -> None:
        held["kept"] = alloc.lifetime_alloc(seg, MIB, "kept")
        alloc.free(alloc.lifetime_alloc(seg, 2 * MIB, "temp"))

    with MemoryRecorder(name="life", run_dir=tmp_path / "run", _source=alloc) as rec:
        rec.record_point("a")
        work()
        rec.record_point("b")
        alloc.free(held["kept"])
        rec.record_point("c")
    return MemoryRun.load(tmp_path / "run")


def test_lifetime_identity_range_and_totals(tmp_path: Path) -> None:
    run = _lifetime_run(tmp_path)
    display = MemoryDisplayOptions(stack_depth=1, limit=1)
    result = run.lifetimes(options=MemoryLifetimeOptions(display=display))
    assert isinstance(result, MemoryAllocationLifetimeAnalysis)
    assert (result.source_kind, result.source_id, result.source_name) == (
        "run",
        run.run_id,
        "life",
    )
    assert (result.start, result.end) == ("a", "c")
    assert (result.active_at, result.born_between) == (None, None)
    # Two generations, 1 MiB and 2 MiB, each counted once; both carry frames.
    assert result.total_instance_bytes == 3 * MIB
    assert result.attributed_instance_bytes == 3 * MIB
    assert (result.history_requested, result.history_available) == (True, True)
    assert result.history_complete is True
    assert [h["complete"] for h in result.history] == [True]
    assert (result.display_limit, result.display_stack_depth) == (1, 1)
    assert isinstance(result.warnings, tuple)

    anchored = run.lifetimes(MemoryLifetimeSelection.active_at("b"), through="c")
    assert (anchored.start, anchored.end, anchored.active_at) == ("b", "c", "b")
    assert anchored.born_between is None
    assert anchored.total_instance_bytes == MIB, "only the kept block is live at b"
    born = run.lifetimes(MemoryLifetimeSelection.born_between(run["a"], 1), through="c")
    assert born.born_between == ("a", "b") and born.active_at is None
    assert born.total_instance_bytes == 3 * MIB
    default = run.lifetimes()
    assert (default.display_limit, default.display_stack_depth) == (20, 4)


def test_lifetime_rows_are_the_csv_lines_and_write_keys(tmp_path: Path) -> None:
    result = _lifetime_run(tmp_path).lifetimes()
    paths = result.write(tmp_path / "report")
    assert set(paths) == {
        "text",
        "json",
        "html",
        "cohorts",
        "cohort_points",
        "size_histograms",
        "size_outcomes",
        "birth_stacks",
        "free_request_stacks",
        "free_completion_stacks",
    }
    assert paths["text"] == tmp_path / "report" / "report.txt"
    assert paths["cohorts"] == tmp_path / "report" / "cohorts.csv"
    assert all(p.is_file() for p in paths.values())
    for rows, key in (
        (result.cohort_rows(), "cohorts"),
        (result.point_rows(), "cohort_points"),
        (result.size_rows(), "size_histograms"),
        (result.size_outcome_rows(), "size_outcomes"),
        (result.birth_rows(), "birth_stacks"),
        (result.free_request_rows(), "free_request_stacks"),
        (result.free_completion_rows(), "free_completion_stacks"),
    ):
        assert _as_csv(rows) == _csv(paths[key]), key
    assert len(result.point_rows()) == 2 * 3, "two cohorts at three points"
    assert {r["cohort_id"] for r in result.birth_rows()} == {c.cohort_id for c in result.cohorts}


def test_lifetime_summary_lines(tmp_path: Path) -> None:
    result = _lifetime_run(tmp_path).lifetimes()
    assert result.summary_lines() == result.to_text().splitlines()
    assert result.summary_lines(indent=2) == ["  " + x for x in result.to_text().splitlines()]
    limited = result.summary_lines(limit=1, stack_depth=1)
    assert limited == result.to_text(limit=1, stack_depth=1).splitlines()
    assert any("cohorts: 2 (showing 1)" in line for line in limited)
    with pytest.raises(InvalidInputError, match="indent"):
        result.summary_lines(indent=-1)


def test_timeline_carries_the_whole_run_lifetimes(tmp_path: Path) -> None:
    run = _lifetime_run(tmp_path)
    timeline = run.timeline(attribution=MemoryAttributionOptions(lifetimes=True))
    lifetimes = timeline.allocation_lifetimes
    assert isinstance(lifetimes, MemoryAllocationLifetimeAnalysis)
    assert (lifetimes.start, lifetimes.end) == ("a", "c")
    assert lifetimes.total_instance_bytes == run.lifetimes().total_instance_bytes


def test_lifetime_write_csv_files_replaces_only_its_own(tmp_path: Path) -> None:
    result = _lifetime_run(tmp_path).lifetimes()
    root = tmp_path / "csv"
    root.mkdir()
    (root / "notes.md").write_text("mine")
    paths = result.write_csv_files(root)
    assert set(paths) >= {"cohorts", "cohort_points", "size_histograms", "size_outcomes"}
    assert all(p.suffix == ".csv" and p.parent == root for p in paths.values())
    assert not (root / "report.txt").exists() and (root / "notes.md").read_text() == "mine"
    assert _as_csv(result.cohort_rows()) == _csv(paths["cohorts"])
    # Twice in a row: the CSV files are replaced, nothing else changes.
    assert result.write_csv_files(root) == paths
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [*(p.name for p in paths.values()), "notes.md"]
    )
