"""Comparisons and reports: lifecycle labels, pool and device mapping across runs, phase
identity per row, every report level summing to its parent, formats agreeing."""

from __future__ import annotations

import csv
import io
import warnings

import pytest
from test_memory_support import MIB, FakeAllocator, capture_scenario, two_runs
from torch_cudagraph_debug.errors import CrossRunError, InvalidInputError, ReportExistsError
from torch_cudagraph_debug.memory_debug import (
    MemoryAttributionOptions,
    MemoryDebugWarning,
    MemoryPoolKey,
    MemoryProbe,
    MemoryProbeSnapshot,
    MemoryRecorder,
    compare_phases,
    compare_points,
    compare_snapshots,
)
from torch_cudagraph_debug.memory_debug._model import thaw


def sums_hold(report: dict) -> None:
    """Each level of the tree sums to its parent, for both sides and the change."""
    for device in report["devices"]:
        for side in ("reference", "candidate", "change"):
            if device["cuda_used"][side] is not None:
                assert (
                    device["cuda_used"][side]
                    == device["residual"][side] + device["allocator"]["reserved"][side]
                )
            if device["probe_slots"][side] is not None:
                assert (
                    device["residual"][side]
                    == device["probe_slots"][side] + device["residual_other"][side]
                )
            for metric in ("reserved", "allocated", "active", "requested", "segment_count"):
                assert device["allocator"][metric][side] == sum(
                    p["stats"][metric][side] for p in device["pools"]
                ), (metric, side)
                for pool in device["pools"]:
                    assert pool["stats"][metric][side] == sum(
                        s["stats"][metric][side] for s in pool["streams"]
                    ), (metric, side, pool["reference_pool"], pool["candidate_pool"])


def test_independent_runs_need_an_explicit_pool_mapping(tmp_path) -> None:
    a, b = two_runs(tmp_path)
    plain = compare_points(a["captured"], b["captured"])
    assert plain.relation == "cross_run"
    assert plain.lifecycle_label == "unavailable"
    report = plain.report_tree()
    sums_hold(report)
    pools = report["devices"][0]["pools"]
    pairs = [(p["reference_pool"], p["candidate_pool"]) for p in pools]
    assert pairs == [([0, 0], [0, 0]), ([1, 0], None), (None, [1, 0])]
    # Streams never pair across runs: every stream row is one-sided.
    for p in pools:
        for s in p["streams"]:
            assert (s["reference_stream"] is None) != (s["candidate_stream"] is None)
    assert plain.suggested_pool_mapping == {MemoryPoolKey(0, (1, 0)): MemoryPoolKey(0, (1, 0))}
    assert any("pool_mapping" in w for w in plain.warnings)

    mapped = compare_points(a["captured"], b["captured"], pool_mapping=plain.suggested_pool_mapping)
    report = mapped.report_tree()
    sums_hold(report)
    private = report["devices"][0]["pools"][1]
    assert private["reference_pool"] == [1, 0] and private["candidate_pool"] == [1, 0]
    assert private["stats"]["reserved"]["change"] == 16 * MIB
    # Bare pool ids work when each side covers one device.
    bare = compare_points(a["captured"], b["captured"], pool_mapping={(1, 0): (1, 0)})
    assert bare.report_tree() == report
    with pytest.raises(InvalidInputError, match=r"\(7, 7\)"):
        compare_points(a["captured"], b["captured"], pool_mapping={(7, 7): (1, 0)})


def test_events_and_lifetimes_across_runs_are_rejected(tmp_path) -> None:
    a, b = two_runs(tmp_path)
    with pytest.raises(CrossRunError, match="events"):
        compare_points(a[0], b[0], attribution=MemoryAttributionOptions(events=True))
    same = compare_points(a[0], a[1], attribution=MemoryAttributionOptions(stacks=True))
    assert same.attribution_status.stacks.to_dict() == {
        "requested": True,
        "available": True,
        "complete": True,
    }
    # Lifetimes inside one run: the cohort report of the range, from its history.
    lifetimes = compare_points(a[0], a[1], attribution=MemoryAttributionOptions(lifetimes=True))
    assert lifetimes.attribution_status.lifetimes.complete
    assert lifetimes.allocation_lifetimes.points == ("start", "captured")
    with pytest.raises(CrossRunError, match="lifetimes"):
        compare_points(a[0], b[0], attribution=MemoryAttributionOptions(lifetimes=True))


def test_device_mapping(tmp_path) -> None:
    alloc0, alloc1 = FakeAllocator(devices=2), FakeAllocator(devices=2)
    alloc0.alloc(alloc0.segment(2 * MIB, device=0), 4096)
    alloc1.alloc(alloc1.segment(2 * MIB, device=1), 8192)
    s0 = MemoryProbe(_source=alloc0, devices=[0]).snapshot()
    s1 = MemoryProbe(_source=alloc1, devices=[1]).snapshot()
    unmapped = compare_snapshots(s0, s1).report_tree()
    assert [(d["reference_device"], d["candidate_device"]) for d in unmapped["devices"]] == [
        (0, None),
        (None, 1),
    ]
    mapped = compare_snapshots(s0, s1, device_mapping={0: 1}).report_tree()
    assert [(d["reference_device"], d["candidate_device"]) for d in mapped["devices"]] == [(0, 1)]
    assert mapped["devices"][0]["allocator"]["allocated"]["change"] == 4096
    sums_hold(mapped)
    with pytest.raises(InvalidInputError, match="device_mapping"):
        compare_snapshots(s0, s1, device_mapping={5: 1})


def test_lifecycle_labels() -> None:
    alloc = FakeAllocator()
    seg = alloc.segment(2 * MIB)
    probe = MemoryProbe(_source=alloc)
    a = probe.snapshot()
    block = alloc.alloc(seg, MIB)
    capture_scenario(alloc)
    b = probe.snapshot()
    alloc.free(block)
    c = probe.snapshot()
    ab = probe.compare(a, b).report_tree()
    assert ab["lifecycle_label"] == "exact"
    assert ab["devices"][0]["lifecycle"] == {
        "new_segment_bytes": 16 * MIB,
        "removed_segment_bytes": 0,
        "newly_active_bytes": 17 * MIB,
        "became_inactive_bytes": 0,
    }
    bc = probe.compare(b, c).report_tree()
    assert bc["devices"][0]["lifecycle"]["became_inactive_bytes"] == MIB

    # Addresses missing: matched by size, labelled approximate, with a warning.
    raw_a, raw_b = thaw(a.raw_snapshot()), thaw(b.raw_snapshot())
    for raw in (raw_a, raw_b):
        for s in raw["segments"]:
            del s["address"]
            for blk in s["blocks"]:
                del blk["address"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = MemoryProbe(_source=_Replay([raw_a, raw_b]))
        ra, rb = other.snapshot(), other.snapshot()
    approx = other.compare(ra, rb)
    assert approx.lifecycle_label == "approximate"
    assert any("approximate" in w for w in approx.warnings)
    assert approx.report_tree()["devices"][0]["lifecycle"]["new_segment_bytes"] == 16 * MIB

    # Unrelated snapshots: unavailable.
    with pytest.warns(MemoryDebugWarning) as caught:
        loose = compare_snapshots(
            MemoryProbeSnapshot.from_snapshot(raw_a), MemoryProbeSnapshot.from_snapshot(raw_b)
        )
    assert sum("'segment.address'" in str(w.message) for w in caught) == 2
    assert loose.lifecycle_label == "unavailable"


class _Replay(FakeAllocator):
    """A source that returns prepared snapshot dicts in turn."""

    def __init__(self, snapshots):
        super().__init__()
        self._queue = list(snapshots)

    def snapshot(self):
        return self._queue.pop(0)


def test_expandable_segments_grow_by_mapped_ranges() -> None:
    alloc = FakeAllocator()
    seg = alloc.segment(20 * MIB, expandable=True)
    alloc.alloc(seg, 20 * MIB)
    probe = MemoryProbe(_source=alloc)
    a = probe.snapshot()
    alloc.grow(seg, 2 * MIB)
    alloc.alloc(seg, 2 * MIB)
    b = probe.snapshot()
    report = probe.compare(a, b).report_tree()
    device = report["devices"][0]
    assert device["lifecycle"]["new_segment_bytes"] == 2 * MIB
    assert device["lifecycle"]["removed_segment_bytes"] == 0
    assert device["allocator"]["expandable_reserved"]["candidate"] == 22 * MIB
    assert device["allocator"]["expandable_segment_count"]["candidate"] == 1
    assert "expandable segments: 1 -> 1" in probe.compare(a, b).to_text()


def test_phase_identity_per_row(tmp_path) -> None:
    a, b = two_runs(tmp_path)
    phases = compare_phases(
        a.between("start", "captured"),
        b.between("start", "captured"),
        pool_mapping={(1, 0): (1, 0)},
    )
    assert phases.identity_failures == 0
    rows = phases.rows
    assert rows
    for r in rows:
        if None in (
            r["baseline_start"],
            r["baseline_end"],
            r["candidate_start"],
            r["candidate_end"],
        ):
            assert r["identity_holds"] is None
            continue
        assert r["baseline_change"] == r["baseline_end"] - r["baseline_start"]
        assert r["candidate_change"] == r["candidate_end"] - r["candidate_start"]
        assert r["start_gap"] == r["candidate_start"] - r["baseline_start"]
        assert r["end_gap"] == r["candidate_end"] - r["baseline_end"]
        assert r["end_gap"] == r["start_gap"] + r["candidate_change"] - r["baseline_change"]
        assert r["identity_holds"] is True
    private = next(
        r
        for r in rows
        if r["level"] == "pool" and r["baseline_pool"] == [1, 0] and r["metric"] == "reserved"
    )
    assert (private["baseline_change"], private["candidate_change"]) == (16 * MIB, 32 * MIB)
    assert private["end_gap"] == 16 * MIB
    used = next(r for r in rows if r["metric"] == "cuda_used")
    assert used["end_gap"] == 16 * MIB
    scopes = {r["scope"] for r in rows if r["level"] == "scope"}
    assert scopes == {"all", "default", "private"}
    with pytest.raises(InvalidInputError):
        a.between("captured", "start")


def test_formats_agree_and_prune(tmp_path) -> None:
    alloc = FakeAllocator()
    alloc.alloc(alloc.segment(2 * MIB), 1024)
    alloc.segment(MIB, stream=0x42)
    probe = MemoryProbe(_source=alloc)
    a = probe.snapshot()
    capture_scenario(alloc)
    b = probe.snapshot()
    c = probe.compare(a, b)
    full = c.report_tree()
    sums_hold(full)
    pruned = c.report_tree(include_unchanged=False)
    assert len(pruned["devices"][0]["pools"]) == 1
    assert len(full["devices"][0]["pools"]) == 2
    pool_only = c.report_tree(depth="pool")
    assert all(p["streams"] == [] for p in pool_only["devices"][0]["pools"])
    device_only = c.report_tree(depth="device")
    assert device_only["devices"][0]["pools"] == []
    rows = list(csv.DictReader(io.StringIO(c.to_csv())))
    reserved = next(r for r in rows if r["level"] == "allocator" and r["metric"] == "reserved")
    assert int(reserved["candidate"]) == full["devices"][0]["allocator"]["reserved"]["candidate"]
    streams = [r for r in rows if r["level"] == "stream" and r["metric"] == "reserved"]
    assert len(streams) == sum(len(p["streams"]) for p in full["devices"][0]["pools"])
    html = c.to_html()
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html
    paths = c.save(tmp_path / "out")
    assert sorted(p.rsplit(".", 1)[1] for p in paths) == ["csv", "html", "json", "txt"]
    with pytest.raises(ReportExistsError, match="overwrite"):
        c.save(tmp_path / "out")
    assert c.save(tmp_path / "out", overwrite=True) == paths


def test_html_escapes_user_strings(tmp_path) -> None:
    alloc = FakeAllocator()
    alloc.segment(MIB)
    rec = MemoryRecorder(name="<b>x</b>", run_dir=tmp_path / "r", _source=alloc)
    rec.record_point("<script>alert(1)</script>")
    rec.record_point("after & more")
    run = rec.finish()
    html = run.compare(0, 1).to_html()
    assert "<script>alert" not in html and "<b>x</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "after &amp; more" in html
