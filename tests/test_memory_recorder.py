"""MemoryProbe, MemoryRecorder and MemoryRun on a fake allocator: markers, incremental
history, lifecycle rules, and what a machine without CUDA says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from test_memory_support import MIB, FakeAllocator, capture_scenario, with_small_block
from torch_cudagraph_debug.errors import (
    CudaUnavailableError,
    InvalidInputError,
    RecorderStateError,
    StorageIOError,
)
from torch_cudagraph_debug.memory_debug import (
    MemoryDebugWarning,
    MemoryPoolKey,
    MemoryProbe,
    MemoryRecorder,
    MemoryRun,
)


def test_probe_compare_shows_the_capture_pool() -> None:
    alloc, _ = with_small_block()
    alloc.probe = (8 * MIB, 4096)
    probe = MemoryProbe(name="graph-capture", _source=alloc)
    before = probe.snapshot()
    capture_scenario(alloc)
    after = probe.snapshot()
    growth = probe.compare(before, after)
    assert growth.relation == "same_origin"
    assert growth.lifecycle_label == "exact"
    report = growth.report_tree(include_unchanged=False)
    device = report["devices"][0]
    pools = {tuple(p["candidate_pool"]): p for p in device["pools"]}
    assert set(pools) == {(1, 0)}, "only the private pool changed"
    private = pools[(1, 0)]
    assert private["stats"]["active"]["change"] == 16 * MIB
    assert private["lifecycle"]["new_segment_bytes"] == 16 * MIB
    assert private["lifecycle"]["newly_active_bytes"] == 16 * MIB
    # Residual arithmetic, and the probe's own slots on their own line.
    used = device["cuda_used"]["candidate"]
    assert used == device["residual"]["candidate"] + device["allocator"]["reserved"]["candidate"]
    assert device["probe_slots"]["candidate"] == 8 * MIB
    assert device["residual_other"]["candidate"] == 400 * MIB
    text = growth.to_text(include_unchanged=False)
    assert "pool[1,0] (private, candidate only)" in text
    assert "probe slots (torch-cudagraph-debug): 8.00 MiB" in text
    assert "graph-capture@snapshot-0' -> 'graph-capture@snapshot-1' (same probe)" in text


def test_markers_restore_the_previous_metadata() -> None:
    alloc = FakeAllocator()
    alloc.metadata = "user-tag"
    probe = MemoryProbe(_source=alloc)
    s = probe.snapshot()
    assert alloc.metadata == "user-tag"
    assert alloc.metadata_log[0].startswith("tcgd:probe:")
    assert alloc.metadata_log[-1] == "user-tag"
    assert s.boundary_recorded
    # Allocations after the snapshot carry the user's metadata again.
    alloc.alloc(alloc.segment(MIB), 512)
    assert alloc.rings[0][-1]["user_metadata"] == "user-tag"


def test_without_marker_api_the_point_says_so() -> None:
    alloc = FakeAllocator(markers=False)
    probe = MemoryProbe(_source=alloc)
    s = probe.snapshot()
    assert not s.boundary_recorded
    assert alloc.metadata_log == []


def test_snapshots_during_capture_warn_and_skip_sync() -> None:
    alloc = FakeAllocator()
    probe = MemoryProbe(_source=alloc)
    probe.snapshot()
    assert alloc.synchronized == [[0]]
    alloc.capture = True
    with pytest.warns(MemoryDebugWarning, match="capture"):
        s = probe.snapshot()
    assert alloc.synchronized == [[0]], "no synchronisation during capture"
    assert s.device_readings[0].used_bytes is None
    assert 0 not in s.device_memory
    assert s._identity()["during_capture"]


def test_no_cuda_is_a_typed_error() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(CudaUnavailableError, match="import_snapshots"):
        MemoryProbe().snapshot()
    with pytest.raises(CudaUnavailableError):
        MemoryRecorder(run_dir="unused-never-created")
    assert not os.path.exists("unused-never-created")


def record_run(tmp_path, alloc: FakeAllocator, churn: list[int]) -> MemoryRun:
    seg = alloc.segment(4 * MIB)
    with MemoryRecorder(name="train", run_dir=tmp_path / "run", _source=alloc) as rec:
        for i, n in enumerate(churn):
            alloc.churn(seg, n)
            point = rec.record_point(f"step-{i}", metadata={"step": i})
            assert point.label == f"step-{i}"
    assert rec.result is not None
    return rec.result


def test_each_point_stores_only_history_new_since_the_previous(tmp_path) -> None:
    alloc = FakeAllocator()
    run = record_run(tmp_path, alloc, [10, 20, 0, 5])
    assert run.complete
    assert run.labels == ("step-0", "step-1", "step-2", "step-3")
    events = run.table("memory_events").to_pylist()
    per_point = [sum(1 for e in events if e["point_index"] == i) for i in range(4)]
    # 3 entries per churn iteration; the first point also holds the segment allocation
    # made before it. Each point's own marker entry lands in the ring after its snapshot
    # and is the boundary of the next window, stored in neither.
    assert per_point == [1 + 30, 60, 0, 15]
    devices = run.table("memory_devices").to_pylist()
    statuses = [d["history_status"] for d in devices]
    assert statuses == ["first_point", "complete", "complete", "complete"]
    # Every other ring entry is stored exactly once across the points.
    ring = [e for e in alloc.rings[0] if not e["user_metadata"].startswith("tcgd:")]
    stored = [(e["time_us"], e["action"], e["address"]) for e in events]
    assert stored == [(e["time_us"], e["action"], e["addr"]) for e in ring]
    markers = [e for e in alloc.rings[0] if e["user_metadata"].startswith("tcgd:")]
    assert [e["action"] for e in markers] == ["snapshot"] * 4
    assert run[1].metadata == {"step": 1}
    assert run.validate_payloads() == []


def test_a_wrapped_ring_is_reported_truncated(tmp_path) -> None:
    alloc = FakeAllocator(max_entries=50)
    run = record_run(tmp_path, alloc, [5, 40, 2])
    devices = run.table("memory_devices").to_pylist()
    assert [d["history_status"] for d in devices] == ["first_point", "truncated", "complete"]
    assert devices[1]["ring_entries"] == 50


def test_history_off_is_reported(tmp_path) -> None:
    alloc = FakeAllocator(history=False)
    run = record_run(tmp_path, alloc, [3, 3])
    # An empty ring at the first point may be history switched on a moment ago; at the
    # next point, a ring without even that point's marker means history is off.
    statuses = [d["history_status"] for d in run.table("memory_devices").to_pylist()]
    assert statuses == ["first_point", "disabled"]
    assert run.table("memory_events").num_rows == 0


def test_recorder_lifecycle_rules(tmp_path) -> None:
    alloc = FakeAllocator()
    rec = MemoryRecorder(name="r", run_dir=tmp_path / "r", _source=alloc)
    rec.record_point("a")
    with pytest.raises(InvalidInputError, match="already used"):
        rec.record_point("a")
    with pytest.raises(InvalidInputError, match="JSON"):
        rec.record_point("b", metadata={"x": object()})
    assert not rec.preview().complete
    assert rec.preview().labels == ("a",)
    run = rec.finish()
    assert rec.finish() is run, "finish is idempotent"
    with pytest.raises(RecorderStateError):
        rec.record_point("c")
    assert MemoryRun.load(tmp_path / "r").complete


def test_exception_keeps_an_incomplete_run(tmp_path) -> None:
    alloc = FakeAllocator()
    with pytest.raises(RuntimeError, match="boom"):
        with MemoryRecorder(name="r", run_dir=tmp_path / "r", _source=alloc) as rec:
            rec.record_point("a")
            raise RuntimeError("boom")
    run = MemoryRun.load(tmp_path / "r")
    assert not run.complete
    assert run.labels == ("a",)
    assert rec.result is not None and not rec.result.complete


def _record_three_and_kill(run_dir: Path, flush: bool) -> None:
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        from test_memory_support import FakeAllocator, MIB
        from torch_cudagraph_debug.memory_debug import MemoryRecorder
        alloc = FakeAllocator()
        seg = alloc.segment(MIB)
        rec = MemoryRecorder(name="k", run_dir={str(run_dir)!r}, _source=alloc)
        for i in range(3):
            alloc.churn(seg, 10)
            rec.record_point(f"p{{i}}")
        if {flush!r}:
            rec.flush()
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()


def test_killed_recorder_keeps_every_flushed_point(tmp_path) -> None:
    _record_three_and_kill(tmp_path / "k", flush=True)
    run = MemoryRun.load(tmp_path / "k")
    assert not run.complete
    assert run.labels == ("p0", "p1", "p2")
    assert run.validate_payloads() == []


def test_killed_recorder_before_flush_leaves_a_loadable_prefix(tmp_path) -> None:
    # Points still queued for the writer thread may be lost; what is there is whole.
    _record_three_and_kill(tmp_path / "k", flush=False)
    run = MemoryRun.load(tmp_path / "k")
    assert not run.complete
    assert run.labels == ("p0", "p1", "p2")[: len(run.labels)]
    assert run.validate_payloads() == []


def test_run_points_compare_like_live_ones(tmp_path) -> None:
    alloc = FakeAllocator()
    seg = alloc.segment(2 * MIB)
    with MemoryRecorder(name="r", run_dir=tmp_path / "r", _source=alloc) as rec:
        live_before = rec.record_point("before")
        capture_scenario(alloc)
        live_after = rec.record_point("after")
        a = alloc.alloc(seg, MIB)
        alloc.free(a)
        rec.record_point("later")
    run = rec.result
    assert run is not None
    loaded = run.compare("before", "after")
    live = live_before and live_after
    assert live
    assert loaded.to_json() == run.compare(0, 1).to_json()
    assert loaded.lifecycle_label == "exact"
    assert run["after"].pool_stats[MemoryPoolKey(0, (1, 0))].active_bytes == 16 * MIB
    assert run["after"].observations == live_after.observations
    raw = run["after"].raw_snapshot()
    assert {tuple(s["segment_pool_id"]) for s in raw["segments"]} == {(0, 0), (1, 0)}
    assert [t["action"] for t in raw["device_traces"][0]] == ["segment_alloc", "alloc"]
    # No history entry between the points' windows is an alloc with frames: the
    # lifetimes replay runs (history is on in this scenario) and finds the capture's block.
    assert run.lifetimes().cohorts
    timeline = run.timeline().rows
    private = [r for r in timeline if r["pool"] == [1, 0]]
    assert [r["stats"]["reserved"] for r in private] == [16 * MIB, 16 * MIB]
    assert json.dumps(run.compare("before", "later").report_tree())


def test_two_recorders_in_one_process_do_not_mix(tmp_path) -> None:
    # Both runs share one job root: each reads back only its own rows.
    a, b = FakeAllocator(), FakeAllocator()
    ra = MemoryRecorder(name="a", run_dir=tmp_path / "job", _source=a)
    rb = MemoryRecorder(name="b", run_dir=tmp_path / "job", _source=b)
    for i in range(3):
        a.churn(a.segment(MIB), 2)
        ra.record_point(f"p{i}")
        rb.record_point(f"p{i}")
    run_a, run_b = ra.finish(), rb.finish()
    assert run_a.table("memory_segments").num_rows == 1 + 2 + 3
    assert run_b.table("memory_segments").num_rows == 0
    assert MemoryRun.load(tmp_path / "job", name="b").labels == ("p0", "p1", "p2")
    reloaded = MemoryRun.load(tmp_path / "job", name="a")
    assert reloaded.table("memory_segments").num_rows == 1 + 2 + 3
    assert {r["run_id"] for r in reloaded.table("memory_segments").to_pylist()} == {run_a.run_id}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cross = run_a.compare(0, 2)
    assert cross.relation == "same_origin"


def _recorder_whose_next_commit_fails(root: Path) -> tuple[MemoryRecorder, Path]:
    """A recorder with point 'kept' committed and point 'lost' handed over, whose commit
    will fail: the table directory it writes into has turned into a file. Returns the
    recorder and the renamed directory (``<root>/stats-aside``)."""
    alloc = FakeAllocator()
    seg = alloc.segment(MIB)
    rec = MemoryRecorder(name="f", run_dir=root, _source=alloc)
    rec.record_point("kept")
    rec.flush()
    stats = root / "memory_stats" / "rank=0"
    stats.rename(root / "stats-aside")
    stats.write_bytes(b"")
    alloc.churn(seg, 5)
    rec.record_point("lost")
    return rec, root / "stats-aside"


def test_a_failed_background_commit_is_raised_by_the_next_call(tmp_path) -> None:
    root = tmp_path / "f"
    rec, aside = _recorder_whose_next_commit_fails(root)
    stats = root / "memory_stats" / "rank=0"
    with pytest.raises(StorageIOError, match="in the background failed"):
        rec.flush()
    with pytest.raises(StorageIOError):
        rec.record_point("after")
    with pytest.raises(StorageIOError):
        rec.finish()
    stats.unlink()
    aside.rename(stats)
    run = MemoryRun.load(root)
    assert run.labels == ("kept",)
    assert not run.complete


def test_a_failed_background_commit_names_the_point_it_lost(tmp_path) -> None:
    rec, _ = _recorder_whose_next_commit_fails(tmp_path / "f")
    with pytest.raises(StorageIOError) as caught:
        rec.flush()
    assert "committing point 'lost'" in str(caught.value)
