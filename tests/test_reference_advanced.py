"""The normalization and summary names of ``memory_debug.advanced`` (the reference's
"Experimental Advanced API"): normalized snapshots and trace entries, per-(device, pool,
stream) statistics, pool roll-ups, the action sets and the comparison formatting.

Expected values are computed here from the snapshot dicts FakeAllocator produces, never
read back from the functions under test."""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from test_memory_support import MIB, FakeAllocator
from torch_cudagraph_debug import memory_debug
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.memory_debug import MemoryRecorder, advanced

PRIVATE_STREAM = 0x77


def scenario(*, devices: int = 2) -> FakeAllocator:
    """Device 0: a default-pool segment of 2 MiB with a live 1 KiB block (16 bytes
    requested) and a 4 KiB block awaiting its stream-safe free; a private pool (1, 0) on
    stream 0x77 with a 16 MiB segment holding a live 12 MiB block; and, on device 1, an
    expandable segment of 4 MiB grown by 2 MiB, nothing allocated."""
    alloc = FakeAllocator(devices=devices)
    default = alloc.segment(2 * MIB)
    alloc.alloc(default, 1024, requested=16)
    pending = alloc.alloc(default, 4096)
    alloc.free(pending, pending=True)
    private = alloc.segment(16 * MIB, pool=(1, 0), stream=PRIVATE_STREAM)
    alloc.alloc(private, 12 * MIB, requested=12 * MIB - 100)
    if devices > 1:
        expandable = alloc.segment(4 * MIB, device=1, expandable=True)
        alloc.grow(expandable, 2 * MIB)
    return alloc


def expected_stats(segments: Iterable[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, int]]:
    """Per (device, pool, stream), every stored statistic, from the raw segment dicts."""
    out: dict[tuple[Any, ...], dict[str, int]] = {}
    for s in segments:
        key = (s["device"], tuple(s["segment_pool_id"]), s["stream"])
        e = out.setdefault(
            key,
            dict.fromkeys(
                (
                    "reserved_bytes",
                    "allocated_bytes",
                    "active_bytes",
                    "requested_bytes",
                    "segment_count",
                    "block_count",
                    "inactive_block_count",
                    "largest_inactive_block_bytes",
                    "expandable_segment_count",
                    "expandable_reserved_bytes",
                    "expandable_inactive_bytes",
                ),
                0,
            ),
        )
        size = sum(b["size"] for b in s["blocks"])
        inactive = [b["size"] for b in s["blocks"] if b["state"] == "inactive"]
        active = [b for b in s["blocks"] if b["state"] != "inactive"]
        e["reserved_bytes"] += size
        e["allocated_bytes"] += sum(b["size"] for b in active if b["state"] == "active_allocated")
        e["active_bytes"] += sum(b["size"] for b in active)
        e["requested_bytes"] += sum(b["requested_size"] for b in active)
        e["segment_count"] += 1
        e["block_count"] += len(s["blocks"])
        e["inactive_block_count"] += len(inactive)
        e["largest_inactive_block_bytes"] = max([e["largest_inactive_block_bytes"], *inactive])
        if s["is_expandable"]:
            e["expandable_segment_count"] += 1
            e["expandable_reserved_bytes"] += size
            e["expandable_inactive_bytes"] += sum(inactive)
    return out


def as_plain(stats: Any) -> dict[tuple[Any, ...], dict[str, int]]:
    return {tuple(k): {n: getattr(v, n) for n in FIELDS} for k, v in stats.items()}


FIELDS = (
    "reserved_bytes",
    "allocated_bytes",
    "active_bytes",
    "requested_bytes",
    "segment_count",
    "block_count",
    "inactive_block_count",
    "largest_inactive_block_bytes",
    "expandable_segment_count",
    "expandable_reserved_bytes",
    "expandable_inactive_bytes",
)


# ------------------------------------------------------------------------ names, sets


def test_state_types_are_the_memory_model_types() -> None:
    assert advanced.MemoryObservationKey is memory_debug.MemoryObservationKey
    assert advanced.MemoryPoolKey is memory_debug.MemoryPoolKey
    assert advanced.MemoryStats is memory_debug.MemoryStats
    for name in (
        "AllocatorSnapshotData",
        "AllocatorTraceEntry",
        "KNOWN_TRACE_ACTIONS",
        "ALLOCATION_LIFETIME_ACTIONS",
        "normalize_snapshot",
        "normalize_trace_entries",
        "summarize_snapshot",
        "summarize_segments",
        "summarize_pools",
        "format_comparison",
    ):
        assert name in advanced.__all__


def test_action_sets_are_torchs_names() -> None:
    known = {
        "alloc",
        "free_requested",
        "free_completed",
        "segment_alloc",
        "segment_free",
        "segment_map",
        "segment_unmap",
        "snapshot",
        "oom",
    }
    assert isinstance(advanced.KNOWN_TRACE_ACTIONS, frozenset)
    assert known == advanced.KNOWN_TRACE_ACTIONS
    assert isinstance(advanced.ALLOCATION_LIFETIME_ACTIONS, frozenset)
    assert {"alloc", "free_requested", "free_completed"} == advanced.ALLOCATION_LIFETIME_ACTIONS
    assert advanced.ALLOCATION_LIFETIME_ACTIONS < advanced.KNOWN_TRACE_ACTIONS


def test_action_sets_match_the_installed_torch() -> None:
    torch = pytest.importorskip("torch")
    header = Path(torch.__file__).parent / "include/c10/core/CachingDeviceAllocator.h"
    if not header.is_file():
        pytest.skip(f"{header} is not installed")
    text = header.read_text(encoding="utf-8")
    table = re.search(r"kActionTable\[\]\s*=\s*\{(.*?)\};", text, flags=re.DOTALL)
    assert table is not None
    names = set(re.findall(r'\{"(\w+)",\s*TraceEntry::Action::\w+\}', table.group(1)))
    assert names == advanced.KNOWN_TRACE_ACTIONS


# ------------------------------------------------------------------------ normalization


def test_normalize_snapshot_of_a_full_snapshot() -> None:
    alloc = scenario()
    snapshot = alloc.snapshot()
    data = advanced.normalize_snapshot(snapshot)
    assert isinstance(data, advanced.AllocatorSnapshotData)
    assert data.devices == (0, 1)
    assert len(data.segments) == len(snapshot["segments"]) == 3
    for typed, raw in zip(data.segments, snapshot["segments"], strict=True):
        assert typed.device_index == raw["device"]
        assert typed.address == raw["address"]
        assert typed.total_size == raw["total_size"]
        assert typed.stream == raw["stream"]
        assert typed.pool_id == tuple(raw["segment_pool_id"])
        assert typed.is_expandable is raw["is_expandable"]
        assert typed.key == (raw["device"], tuple(raw["segment_pool_id"]), raw["stream"])
        assert [b.size for b in typed.blocks] == [b["size"] for b in raw["blocks"]]
        assert [b.address for b in typed.blocks] == [b["address"] for b in raw["blocks"]]
    default = data.segments[0]
    assert [b.state for b in default.blocks] == [
        "active_allocated",
        "active_awaiting_free",  # torch's active_pending_free
        "inactive",
    ]
    assert [b.requested_size for b in default.blocks] == [16, 4096, 0]
    assert default.blocks[0].frames == ({"filename": "model.py", "line": 10, "name": "forward"},)
    assert default.blocks[2].frames == ()
    assert data.segments[1].pool_key == memory_debug.MemoryPoolKey(0, (1, 0))
    assert data.segments[2].is_expandable and data.segments[2].total_size == 6 * MIB

    # Every trace entry of every device, in trace order.
    assert [len(t) for t in data.device_traces] == [len(t) for t in snapshot["device_traces"]]
    for typed_trace, raw_trace in zip(data.device_traces, snapshot["device_traces"], strict=True):
        assert [e.action for e in typed_trace] == [e["action"] for e in raw_trace]
        assert [e.size for e in typed_trace] == [e["size"] for e in raw_trace]
        assert [e.index for e in typed_trace] == list(range(len(raw_trace)))

    # Frozen all the way down.
    with pytest.raises(dataclasses.FrozenInstanceError):
        data.segments = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        default.blocks[0].size = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        default.blocks[0].frames[0]["line"] = 1  # type: ignore[index]
    assert advanced.normalize_snapshot(data) is data


def test_normalize_snapshot_of_a_segment_sequence() -> None:
    snapshot = scenario().snapshot()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "no history" warning for a bare segment list
        data = advanced.normalize_snapshot(snapshot["segments"])
    assert [s.total_size for s in data.segments] == [2 * MIB, 16 * MIB, 6 * MIB]
    assert data.trace_entries == ()
    assert all(trace == () for trace in data.device_traces)
    # Typed segments round-trip through their _snapshot() shape.
    again = advanced.normalize_snapshot([s.to_dict() for s in data.segments])
    assert again.segments == data.segments


def test_missing_block_addresses_are_inferred() -> None:
    snapshot = scenario(devices=1).snapshot()
    segment = snapshot["segments"][0]
    for block in segment["blocks"]:
        del block["address"]
    with pytest.warns(memory_debug.MemoryDebugWarning, match="block.address"):
        data = advanced.normalize_snapshot(snapshot)
    blocks = data.segments[0].blocks
    assert all(b.address_inferred for b in blocks)
    assert [b.address for b in blocks] == [
        segment["address"],
        segment["address"] + 1024,
        segment["address"] + 1024 + 4096,
    ]


def test_normalize_trace_entries() -> None:
    alloc = scenario(devices=1)
    alloc.set_metadata("marker-1")
    first = alloc.snapshot()  # writes a snapshot entry carrying the marker
    alloc.attribution_oom(0, 3 * MIB, 512 * MIB)
    snapshot = alloc.snapshot()
    raw = snapshot["device_traces"][0]
    entries = advanced.normalize_trace_entries(snapshot)
    assert all(isinstance(e, advanced.AllocatorTraceEntry) for e in entries)
    assert [e.action for e in entries] == [e["action"] for e in raw]
    assert len(entries) == len(first["device_traces"][0]) + 2
    assert {e.action for e in entries} <= advanced.KNOWN_TRACE_ACTIONS
    marker = next(e for e in entries if e.action == "snapshot")
    assert marker.user_metadata == "marker-1"
    oom = entries[-1]
    assert (oom.action, oom.size, oom.device_free_bytes, oom.address) == (
        "oom",
        3 * MIB,
        512 * MIB,
        None,
    )
    assert oom.frames[0]["name"] == "step"
    alloc_entries = [e for e in entries if e.action == "alloc"]
    assert [(e.address, e.size, e.stream) for e in alloc_entries] == [
        (r["addr"], r["size"], r["stream"]) for r in raw if r["action"] == "alloc"
    ]
    assert all(e.device_free_bytes is None for e in entries if e.action != "oom")
    assert [e.time_us for e in entries] == [r["time_us"] for r in raw]
    assert entries == advanced.normalize_snapshot(snapshot).trace_entries


def test_typed_entries_work_with_the_event_helpers() -> None:
    alloc = scenario(devices=1)
    snapshot = alloc.snapshot()
    data = advanced.normalize_snapshot(snapshot)
    typed = advanced.summarize_allocator_events(
        data.device_traces[0],
        reference_segments=data.segments,
        candidate_segments=data.segments,
    )
    plain = advanced.summarize_allocator_events(
        snapshot["device_traces"][0],
        reference_segments=snapshot["segments"],
        candidate_segments=snapshot["segments"],
    )
    assert [r.to_dict() for r in typed] == [r.to_dict() for r in plain]
    alloc.set_metadata("start")
    alloc.snapshot()
    alloc.set_metadata("")
    alloc.churn(data.segments[0].address, 2)
    entries = advanced.normalize_trace_entries(alloc.snapshot())
    window = advanced.extract_event_window(
        entries, start_marker="start", end_marker=None, start_label="s"
    )
    assert window.complete
    assert [e.action for e in window.entries] == ["alloc", "free_requested", "free_completed"] * 2


# ------------------------------------------------------------------------ statistics


def test_summarize_snapshot_computes_every_slice() -> None:
    snapshot = scenario().snapshot()
    stats = advanced.summarize_snapshot(snapshot)
    assert all(isinstance(k, advanced.MemoryObservationKey) for k in stats)
    assert all(isinstance(v, advanced.MemoryStats) for v in stats.values())
    expected = expected_stats(snapshot["segments"])
    assert as_plain(stats) == expected
    private = stats[advanced.MemoryObservationKey(0, (1, 0), PRIVATE_STREAM)]
    assert private.reserved_bytes == 16 * MIB
    assert private.allocated_bytes == 12 * MIB
    assert private.internal_fragmentation_bytes == 100
    default = stats[advanced.MemoryObservationKey(0, (0, 0), 0)]
    assert default.awaiting_free_bytes == 4096
    assert default.inactive_bytes == 2 * MIB - 1024 - 4096
    expandable = stats[advanced.MemoryObservationKey(1, (0, 0), 0)]
    assert expandable.expandable_inactive_bytes == 6 * MIB
    assert expandable.inactive_block_count == 2
    with pytest.raises(TypeError):
        stats[advanced.MemoryObservationKey(9, (0, 0), 0)] = default  # type: ignore[index]


def test_summarize_segments_matches_summarize_snapshot() -> None:
    snapshot = scenario().snapshot()
    by_segments = advanced.summarize_segments(snapshot["segments"])
    assert as_plain(by_segments) == expected_stats(snapshot["segments"])
    typed = advanced.normalize_snapshot(snapshot).segments
    assert dict(advanced.summarize_segments(typed)) == dict(by_segments)
    assert dict(advanced.summarize_segments(list(reversed(typed)))) == dict(by_segments)
    with pytest.raises(InvalidInputError):
        advanced.summarize_segments(snapshot)


def test_summarize_snapshot_equals_a_recorded_point_of_the_same_state(tmp_path: Path) -> None:
    alloc = scenario()
    with MemoryRecorder(name="run", run_dir=tmp_path / "run", _source=alloc) as recorder:
        recorder.record_point("state")
    point = recorder.result["state"]
    snapshot = alloc.snapshot()  # the same allocator state, taken again
    stats = advanced.summarize_snapshot(snapshot)
    assert dict(stats) == dict(point.observation_stats)
    assert list(stats) == list(point.observation_stats)
    assert dict(advanced.summarize_pools(stats)) == dict(point.pool_stats)
    assert dict(advanced.summarize_snapshot(point)) == dict(point.observation_stats)
    assert advanced.normalize_snapshot(point).segments == (
        advanced.normalize_snapshot(snapshot).segments
    )


def test_summarize_pools_drops_the_stream() -> None:
    alloc = FakeAllocator()
    a = alloc.segment(2 * MIB, pool=(2, 0), stream=0x10)
    b = alloc.segment(8 * MIB, pool=(2, 0), stream=0x20)
    alloc.alloc(a, 1 * MIB, requested=MIB - 8)
    alloc.alloc(b, 3 * MIB)
    alloc.alloc(alloc.segment(2 * MIB), 512)
    observations = advanced.summarize_snapshot(alloc.snapshot())
    assert len(observations) == 3
    pools = advanced.summarize_pools(observations)
    # One key per pool, in the order the pools first appear among the observations.
    assert list(pools) == list(dict.fromkeys(k.pool_key for k in observations))
    assert set(pools) == {advanced.MemoryPoolKey(0, (2, 0)), advanced.MemoryPoolKey(0, (0, 0))}
    assert all(isinstance(k, advanced.MemoryPoolKey) for k in pools)
    private = pools[advanced.MemoryPoolKey(0, (2, 0))]
    assert private.reserved_bytes == 10 * MIB
    assert private.allocated_bytes == 4 * MIB
    assert private.requested_bytes == 4 * MIB - 8
    assert private.segment_count == 2
    assert private.block_count == 4
    assert private.inactive_block_count == 2
    assert private.largest_inactive_block_bytes == 5 * MIB  # a maximum, not a sum
    default = pools[advanced.MemoryPoolKey(0, (0, 0))]
    assert (default.reserved_bytes, default.allocated_bytes) == (2 * MIB, 512)
    # MemoryObservation objects are accepted too.
    from torch_cudagraph_debug.memory_debug import MemoryProbeSnapshot

    probe = MemoryProbeSnapshot.from_snapshot(alloc.snapshot())
    assert dict(advanced.summarize_pools(probe.observations)) == dict(pools)


# ------------------------------------------------------------------------ formatting


def test_format_comparison() -> None:
    assert advanced.format_comparison(2 * MIB, 18 * MIB, 16 * MIB) == (
        "2.00 MiB -> 18.00 MiB (+16.00 MiB)"
    )
    assert advanced.format_comparison(4096, 1024, -3072) == "4.00 KiB -> 1.00 KiB (-3.00 KiB)"
    assert advanced.format_comparison(512, 512, 0) == "512 B -> 512 B (+0 B)"
    assert advanced.format_comparison(None, 1536, None) == "n/a -> 1.50 KiB (n/a)"
