"""The reference design's memory state and comparison model: typed statistics with their
``*_bytes`` names, snapshot/point accessors, ownership and range rules, cross-run pairing,
device rows, timelines, phase equations and the report file set. Every workload is built
with the fake allocator, so each expected number is known by construction."""

from __future__ import annotations

import copy
import csv
import io
import json
import pickle
import warnings

import pytest
from test_memory_support import MIB, FakeAllocator, two_runs
from torch_cudagraph_debug.errors import InvalidInputError, MemoryOwnershipError
from torch_cudagraph_debug.memory_debug import (
    DeviceMemorySample,
    MemoryComparison,
    MemoryObservationKey,
    MemoryPhaseRange,
    MemoryPointComparison,
    MemoryPoolKey,
    MemoryProbe,
    MemoryRange,
    MemoryRecorder,
    MemorySnapshotComparison,
    MemoryStats,
    MemoryStatsDelta,
    compare_phases,
    compare_points,
)

PRIVATE = MemoryPoolKey(0, (1, 0))
# The files a point comparison and a timeline write.
# What write() returns: the report documents by format, each CSV file by its stem.
REPORT_FILES = {
    "text",
    "json",
    "html",
    "allocator_scopes",
    "pools",
    "observations",
    "devices",
}


def test_stats_fields_and_derived_metrics() -> None:
    alloc = FakeAllocator()
    seg = alloc.segment(2 * MIB)
    alloc.alloc(seg, 1024, requested=1000)
    alloc.free(alloc.alloc(seg, 4096), pending=True)
    s = MemoryProbe(_source=alloc).snapshot()
    stats = s.observation(0, (0, 0), 0).stats
    assert isinstance(stats, MemoryStats)
    assert stats.reserved_bytes == 2 * MIB
    assert stats.allocated_bytes == 1024
    assert stats.active_bytes == 1024 + 4096
    assert stats.requested_bytes == 1000 + 4096
    assert stats.awaiting_free_bytes == 4096
    assert stats.inactive_bytes == 2 * MIB - 5120
    assert stats.internal_fragmentation_bytes == 24
    assert (stats.segment_count, stats.block_count, stats.inactive_block_count) == (1, 3, 1)
    assert stats.largest_inactive_block_bytes == 2 * MIB - 5120
    assert stats.to_dict()["internal_fragmentation_bytes"] == 24
    assert stats.metric("awaiting_free_bytes") == 4096
    with pytest.raises(ValueError, match="unknown memory metric"):
        stats.metric("reserved")
    with pytest.warns(DeprecationWarning, match="reserved_bytes"):
        assert stats.reserved == 2 * MIB

    built = MemoryStats(reserved_bytes=10, allocated_bytes=4, active_bytes=6, requested_bytes=5)
    assert (built.awaiting_free_bytes, built.inactive_bytes) == (2, 4)
    assert built.internal_fragmentation_bytes == 1
    assert built == MemoryStats(
        reserved_bytes=10, allocated_bytes=4, active_bytes=6, requested_bytes=5
    )
    assert hash(built) == hash(
        MemoryStats(reserved_bytes=10, allocated_bytes=4, active_bytes=6, requested_bytes=5)
    )
    with pytest.raises(ValueError, match=">= 0"):
        MemoryStats(reserved_bytes=-1)
    with pytest.raises(ValueError, match="unknown MemoryStats field"):
        MemoryStats(reserved=1)
    delta = MemoryStats() - built
    assert isinstance(delta, MemoryStatsDelta)
    assert delta.reserved_bytes == -10 and delta.inactive_bytes == -4
    assert MemoryStatsDelta.between(None, built) == MemoryStatsDelta(
        reserved_bytes=10, allocated_bytes=4, active_bytes=6, requested_bytes=5
    )
    with pytest.raises(AttributeError):
        built.reserved_bytes = 3  # type: ignore[misc]

    sample = DeviceMemorySample(free_bytes=30, total_bytes=100)
    assert sample.used_bytes == 70
    with pytest.raises(ValueError):
        DeviceMemorySample(free_bytes=101, total_bytes=100)


def test_statistics_values_compare_by_class_and_survive_pickling() -> None:
    stats = MemoryStats(reserved_bytes=10, allocated_bytes=4, active_bytes=6)
    delta = MemoryStatsDelta(reserved_bytes=10, allocated_bytes=4, active_bytes=6)
    # Same numbers, different meaning: an absolute reading is not a change.
    assert stats != delta and not isinstance(delta, MemoryStats)
    negative = MemoryStatsDelta(reserved_bytes=-7, largest_inactive_block_bytes=-1)
    sample = DeviceMemorySample(free_bytes=30, total_bytes=100)
    for value in (stats, delta, negative, sample):
        again = pickle.loads(pickle.dumps(value))
        assert again == value and type(again) is type(value)
        assert copy.deepcopy(value) == value
    assert pickle.loads(pickle.dumps(negative)).reserved_bytes == -7


def test_snapshot_accessors_and_immutable_views() -> None:
    alloc = FakeAllocator(context_bytes=100 * MIB, total_bytes=1024 * MIB)
    alloc.alloc(alloc.segment(2 * MIB), 1024)
    alloc.alloc(alloc.segment(4 * MIB, pool=(1, 0), stream=0x77), 4 * MIB)
    probe = MemoryProbe(name="p", _source=alloc)
    s = probe.snapshot()
    key = MemoryObservationKey(0, (1, 0), 0x77)
    assert s.by_key[key].stats.reserved_bytes == 4 * MIB
    assert s.by_key[key].key == key
    assert s.observation_stats[key] == s.observation(0, (1, 0), 0x77).stats
    assert s.pool_stats[PRIVATE].allocated_bytes == 4 * MIB
    scopes = s.allocator_scope_stats
    assert [scopes[k].reserved_bytes for k in ("all", "default", "private")] == [
        6 * MIB,
        2 * MIB,
        4 * MIB,
    ]
    assert s.device_memory[0] == DeviceMemorySample(
        free_bytes=(1024 - 106) * MIB, total_bytes=1024 * MIB
    )
    assert s.device_memory[0].used_bytes == 106 * MIB
    assert s.probe_name == "p" and s.snapshot_index == 0 and s.probe_id
    assert s.descriptor()["probe_id"] == s.probe_id
    raw = s.raw_snapshot()
    with pytest.raises(TypeError):
        raw["segments"] = []  # type: ignore[index]
    assert isinstance(raw["segments"], tuple)
    state = s.allocator_state()
    assert "device_traces" not in state and len(state["segments"]) == 2
    assert dict(s.allocator_settings) == {}


def test_ownership_errors(tmp_path) -> None:
    alloc = FakeAllocator()
    alloc.segment(MIB)
    first, second = MemoryProbe(_source=alloc), MemoryProbe(_source=alloc)
    a, b = first.snapshot(), second.snapshot()
    with pytest.raises(MemoryOwnershipError, match="compare_snapshots"):
        first.compare(a, b)
    assert isinstance(first.compare(a, first.snapshot()), MemorySnapshotComparison)
    run_a, run_b = two_runs(tmp_path)
    with pytest.raises(MemoryOwnershipError, match="compare_points"):
        run_a.point(run_b["start"])
    with pytest.raises(MemoryOwnershipError):
        run_a.between(run_b["start"], "captured")
    with pytest.raises(MemoryOwnershipError):
        run_a.compare(run_b["start"], "captured")
    assert run_a.point(run_a["captured"]).label == "captured"


def test_range_order_and_compare(tmp_path) -> None:
    run, _ = two_runs(tmp_path)
    phase = run.between("start", "captured")
    assert isinstance(phase, MemoryRange) and MemoryPhaseRange is MemoryRange
    assert (phase.run, phase.start.label, phase.end.label) == (run, "start", "captured")
    with pytest.raises(InvalidInputError, match="must come after"):
        run.between("captured", "start")
    with pytest.raises(InvalidInputError, match="must come after"):
        run.between("start", "start")
    c = phase.compare()
    assert isinstance(c, MemoryPointComparison) and isinstance(c, MemoryComparison)
    assert c.to_dict() == run.compare("start", "captured").to_dict()
    assert c.lifecycle_available and c.lifecycle_confidence == "exact"
    default = next(p for p in c.pools if p.candidate_key == MemoryPoolKey(0, (0, 0)))
    assert default.match == "same_run" and default.delta.reserved_bytes == 0
    # Born during the phase: one-sided, even inside one run.
    private = next(p for p in c.pools if p.candidate_key == PRIVATE)
    assert private.match == "candidate_only" and private.reference is None
    assert private.delta.reserved_bytes == 16 * MIB
    assert private.lifecycle is not None and private.lifecycle.new_segment_bytes == 16 * MIB


def test_cross_run_pairs_default_pools_and_maps_private_ones(tmp_path) -> None:
    a, b = two_runs(tmp_path)
    c = compare_points(a["captured"], b["captured"])
    assert not c.lifecycle_available and c.lifecycle_confidence == "unavailable"
    matches = sorted((p.match, p.reference_key, p.candidate_key) for p in c.pools)
    assert matches == [
        ("candidate_only", None, PRIVATE),
        ("default", MemoryPoolKey(0, (0, 0)), MemoryPoolKey(0, (0, 0))),
        ("reference_only", PRIVATE, None),
    ]
    # Scope totals include the unmatched private pools.
    private = next(s for s in c.allocator_scopes if s.scope == "private")
    assert (private.reference.reserved_bytes, private.candidate.reserved_bytes) == (
        16 * MIB,
        32 * MIB,
    )
    assert private.delta.reserved_bytes == 16 * MIB
    # Streams are process-local: no observation pairs across runs.
    assert c.observations and all(
        (o.reference_key is None) != (o.candidate_key is None) for o in c.observations
    )
    mapped = compare_points(a["captured"], b["captured"], pool_mapping={PRIVATE: PRIVATE})
    row = next(p for p in mapped.pools if p.reference_key == PRIVATE)
    assert (row.match, row.candidate_key) == ("mapped", PRIVATE)
    assert row.delta.allocated_bytes == 16 * MIB and row.lifecycle is None
    assert [d.match for d in mapped.device_comparisons] == ["same_index"]


def test_device_rows_and_residual_sign() -> None:
    alloc = FakeAllocator(context_bytes=300 * MIB, total_bytes=1024 * MIB)
    seg = alloc.segment(2 * MIB)
    probe = MemoryProbe(_source=alloc)
    a = probe.snapshot()
    alloc.alloc(seg, MIB)
    alloc.segment(6 * MIB)
    b = probe.snapshot()
    (d,) = probe.compare(a, b).device_comparisons
    assert (d.reference_device_index, d.candidate_device_index, d.match) == (0, 0, "same_probe")
    assert (d.reference_used_bytes, d.candidate_used_bytes) == (302 * MIB, 308 * MIB)
    assert d.delta_used_bytes == 6 * MIB and d.delta_free_bytes == -6 * MIB
    assert d.delta_total_bytes == 0
    assert (d.reference_allocator_reserved_bytes, d.candidate_allocator_reserved_bytes) == (
        2 * MIB,
        8 * MIB,
    )
    assert d.reference_cuda_allocator_residual_bytes == 300 * MIB
    assert d.delta_cuda_allocator_residual_bytes == 0
    assert d.changed

    # A process whose allocator reserves more than CUDA reports used (the two readings are
    # not atomic): the residual is negative, and kept as such.
    skewed = FakeAllocator(context_bytes=-MIB, total_bytes=1024 * MIB)
    skewed.segment(4 * MIB)
    probe = MemoryProbe(_source=skewed)
    x = probe.snapshot()
    y = probe.snapshot()
    (row,) = probe.compare(x, y).device_comparisons
    assert row.candidate_cuda_allocator_residual_bytes == -MIB
    assert row.to_dict()["candidate"]["cuda_allocator_residual_bytes"] == -MIB


def test_timeline_first_delta_none_and_disappearing_pool(tmp_path) -> None:
    alloc = FakeAllocator()
    alloc.alloc(alloc.segment(2 * MIB), 1024)
    with MemoryRecorder(name="t", run_dir=tmp_path / "t", _source=alloc) as rec:
        rec.record_point("p0")
        private = alloc.segment(8 * MIB, pool=(1, 0), stream=0x77)
        rec.record_point("p1")
        alloc.release(private)
        rec.record_point("p2")
    timeline = rec.result.timeline()
    assert all(e.delta is None for e in timeline.allocator_scope_entries if e.point_index == 0)
    assert all(e.delta is None for e in timeline.pool_entries if e.point_index == 0)
    assert all(e.delta is None for e in timeline.observation_entries if e.point_index == 0)
    pool = [e for e in timeline.pool_entries if e.pool_key == PRIVATE]
    assert [(e.point_label, e.stats.reserved_bytes) for e in pool] == [
        ("p1", 8 * MIB),
        ("p2", 0),
    ]
    assert [e.delta.reserved_bytes for e in pool] == [8 * MIB, -8 * MIB]
    assert pool[1].stats == MemoryStats()
    obs = [e for e in timeline.observation_entries if e.key == (0, (1, 0), 0x77)]
    assert [e.delta.reserved_bytes for e in obs] == [8 * MIB, -8 * MIB]
    devices = timeline.device_entries
    assert [e.point_label for e in devices] == ["p0", "p1", "p2"]
    assert devices[0].delta is None and devices[0].delta_used_bytes is None
    assert devices[1].delta_used_bytes == 8 * MIB and devices[2].delta_used_bytes == -8 * MIB
    assert devices[1].delta.reserved_bytes == 8 * MIB
    assert devices[1].cuda_allocator_residual_bytes == 400 * MIB
    out = timeline.write(tmp_path / "timeline")
    assert set(out) == REPORT_FILES
    rows = list(csv.DictReader(io.StringIO(out["pools"].read_text())))
    last = next(r for r in rows if r["pool_id"] == "1,0" and r["point_label"] == "p2")
    assert int(last["delta_reserved_bytes"]) == -8 * MIB


def test_phase_identity_and_components(tmp_path) -> None:
    a, b = two_runs(tmp_path)
    phase = compare_phases(
        a.between("start", "captured"),
        b.between("start", "captured"),
        pool_mapping={PRIVATE: PRIVATE},
    )
    rows = (
        *phase.allocator_scope_decomposition,
        *phase.pool_decomposition,
        *phase.device_decomposition,
    )
    assert rows and all(r.identity_holds is True for r in rows)
    assert len(phase.allocator_scope_decomposition) == 3 * 9
    assert {r.metric for r in phase.allocator_scope_decomposition} == {
        "reserved_bytes",
        "allocated_bytes",
        "active_bytes",
        "awaiting_free_bytes",
        "inactive_bytes",
        "requested_bytes",
        "internal_fragmentation_bytes",
        "expandable_reserved_bytes",
        "expandable_inactive_bytes",
    }
    private = next(
        r
        for r in phase.pool_decomposition
        if r.baseline_pool == PRIVATE and r.metric == "reserved_bytes"
    )
    c = private.components
    assert (c.baseline_change_bytes, c.candidate_change_bytes) == (16 * MIB, 32 * MIB)
    assert (c.start_gap_bytes, c.end_gap_bytes, c.change_gap_bytes) == (0, 16 * MIB, 16 * MIB)
    used = next(r for r in phase.device_decomposition if r.metric == "used_bytes")
    assert (used.baseline_device_index, used.candidate_device_index) == (0, 0)
    assert used.components.end_gap_bytes == 16 * MIB
    assert isinstance(phase.baseline_change, MemoryPointComparison)
    assert phase.end_gap is not None
    end_private = next(s for s in phase.end_gap.allocator_scopes if s.scope == "private")
    assert end_private.delta.reserved_bytes == 16 * MIB
    out = phase.write(tmp_path / "phase")
    assert {"device_decomposition", "allocator_scopes", "pools"} <= set(out)
    header = out["device_decomposition"].read_text().splitlines()[0].split(",")
    assert header == [
        "baseline_device_index",
        "candidate_device_index",
        "metric",
        "baseline_change_bytes",
        "candidate_change_bytes",
        "start_gap_bytes",
        "end_gap_bytes",
        "change_gap_bytes",
        "identity_holds",
    ]


def test_report_files_csv_columns_and_json_shape(tmp_path) -> None:
    a, b = two_runs(tmp_path)
    c = compare_points(a["captured"], b["captured"], pool_mapping={PRIVATE: PRIVATE})
    with pytest.raises(InvalidInputError, match="depth"):
        c.write(tmp_path / "never", depth="segment")  # type: ignore[arg-type]
    assert not (tmp_path / "never").exists()
    out = c.write(tmp_path / "report")
    assert set(out) == REPORT_FILES
    assert all(p.parent == tmp_path / "report" and p.is_file() for p in out.values())
    pools = list(csv.DictReader(io.StringIO(out["pools"].read_text())))
    for column in (
        "reference_allocated_bytes",
        "candidate_allocated_bytes",
        "delta_allocated_bytes",
    ):
        assert column in pools[0]
    mapped = next(r for r in pools if r["match"] == "mapped")
    assert int(mapped["delta_allocated_bytes"]) == 16 * MIB
    assert int(mapped["reference_reserved_bytes"]) == 16 * MIB
    doc = json.loads(out["json"].read_text())
    scope = next(s for s in doc["allocator_scopes"] if s["scope"] == "private")
    assert scope["reference"]["allocated_bytes"] == 16 * MIB
    assert scope["candidate"]["allocated_bytes"] == 32 * MIB
    assert scope["delta"]["allocated_bytes"] == 16 * MIB
    devices = list(csv.DictReader(io.StringIO(out["devices"].read_text())))
    assert int(devices[0]["delta_used_bytes"]) == 16 * MIB
    assert int(devices[0]["reference_cuda_allocator_residual_bytes"]) == 400 * MIB
    with pytest.raises(FileExistsError):
        c.write(tmp_path / "report")
    assert set(c.write(tmp_path / "report", overwrite=True)) == set(out)
    assert c.to_text(include_unchanged=False, depth="pool")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert c.to_html(limit=5, stack_depth=1).startswith("<!DOCTYPE html>")
