"""Memory debug on a real CUDA allocator (run on the GPU machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import torch
from repo_scripts import load_script
from torch_cudagraph_debug import _native
from torch_cudagraph_debug.memory_debug import (
    MemoryDebugWarning,
    MemoryProbe,
    MemoryProbeSnapshot,
    MemoryRecorder,
    MemoryRun,
)

# The hand capture whose snapshots tests/data holds: these tests take the same one.
FIXTURE_RECORDER = load_script("tests/data/record_memory_fixtures.py")
CAPTURE_BYTES: int = FIXTURE_RECORDER.CAPTURE_BYTES


def private_pools(report: dict) -> list[dict]:
    return [
        p
        for d in report["devices"]
        for p in d["pools"]
        if p["candidate_pool"] is not None and tuple(p["candidate_pool"]) != (0, 0)
    ]


def hand_capture(name: str) -> tuple[MemoryProbe, MemoryProbeSnapshot, MemoryProbeSnapshot]:
    """A probe's snapshots before and after a graph that allocates ``CAPTURE_BYTES`` in
    its private pool is captured and replayed once."""
    probe = MemoryProbe(name=name)
    static_x = torch.ones(256, device="cuda")
    torch.cuda.synchronize()
    before = probe.snapshot()
    captured = FIXTURE_RECORDER.capture_private_pool(static_x)
    after = probe.snapshot()
    del captured
    return probe, before, after


def test_hand_capture_shows_a_new_private_pool() -> None:
    probe, before, after = hand_capture("graph-capture")
    comparison = probe.compare(before, after)
    assert comparison.lifecycle_label == "exact"
    report = comparison.report_tree()
    new = [p for p in private_pools(report) if p["reference_pool"] is None]
    assert new, comparison.to_text()
    assert sum(p["stats"]["active"]["candidate"] for p in new) >= CAPTURE_BYTES
    assert sum(p["lifecycle"]["newly_active_bytes"] for p in new) >= CAPTURE_BYTES
    assert after.allocator_scope_stats["private"].active_bytes >= CAPTURE_BYTES


def test_expandable_segments_capture_in_a_fresh_process() -> None:
    # The same capture in a child process (this file run as a script), so that
    # PYTORCH_CUDA_ALLOC_CONF is read by a torch that has not initialised CUDA yet.
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    done = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    new = [p for p in private_pools(report) if p["reference_pool"] is None]
    assert new, done.stdout
    assert sum(p["stats"]["active"]["candidate"] for p in new) >= CAPTURE_BYTES
    assert any(p["stats"]["expandable_segment_count"]["candidate"] > 0 for p in new)


def test_residual_is_cuda_used_minus_reserved() -> None:
    keep = torch.empty(8 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    snapshot = MemoryProbe().snapshot()
    device = torch.cuda.current_device()
    sample = snapshot.device_memory[device]
    d = snapshot.device_readings[device]
    reserved = sum(
        s.reserved_bytes for k, s in snapshot.pool_stats.items() if k.device_index == device
    )
    assert d.allocator_reserved_bytes == reserved
    assert sample.used_bytes == sample.total_bytes - sample.free_bytes == d.used_bytes
    assert d.cuda_allocator_residual_bytes == d.used_bytes - reserved
    # The allocator's own count agrees with the snapshot's segments.
    assert reserved == torch.cuda.memory_reserved(device)
    assert d.probe_device_bytes == _native.probe_memory()[0]
    del keep


def test_recorder_cuts_history_at_its_markers(tmp_path) -> None:
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    try:
        torch.cuda.memory._set_memory_metadata("user-metadata")
        with MemoryRecorder(name="history", run_dir=tmp_path / "run") as rec:
            rec.record_point("start")
            for _ in range(100):
                t = torch.empty(4096, device="cuda")
                del t
            rec.record_point("after-churn")
        assert torch.cuda.memory._get_memory_metadata() == "user-metadata"
    finally:
        torch.cuda.memory._set_memory_metadata("")
        torch.cuda.memory._record_memory_history(enabled=None)
    run = MemoryRun.load(tmp_path / "run")
    devices = run.table("memory_devices").to_pylist()
    assert [d["history_status"] for d in devices] == ["first_point", "complete"]
    assert run["after-churn"].boundary_recorded
    events = [e for e in run.table("memory_events").to_pylist() if e["point_index"] == 1]
    allocs = [e for e in events if e["action"] == "alloc"]
    assert len(allocs) == 100
    # The user's metadata was restored around the first point's marker.
    assert {e["user_metadata"] for e in allocs} == {"user-metadata"}


def test_snapshot_during_capture_warns_and_keeps_the_capture() -> None:
    probe = MemoryProbe()
    x = torch.ones(1024, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.cuda.graph(graph):
            y = x * 3
            inside = probe.snapshot()
            z = y + 1
    assert any(issubclass(w.category, MemoryDebugWarning) for w in caught)
    assert inside._identity()["during_capture"]
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(z, torch.full_like(x, 4))


if __name__ == "__main__":
    # The child of test_expandable_segments_capture_in_a_fresh_process: the comparison
    # as JSON on one line (the last of its output).
    probe, before, after = hand_capture("child")
    print(json.dumps(probe.compare(before, after).report_tree()))
