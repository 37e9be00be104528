"""Allocator sums that do not fit in 64 bits, and negative sizes, are refused with a
`SnapshotFormatError` naming the field, instead of being reported as wrapped numbers."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
from torch_cudagraph_debug.errors import SnapshotFormatError
from torch_cudagraph_debug.memory_debug import MemoryProbeSnapshot, compare_snapshots

MAX = 2**63 - 1
CLI = [sys.executable, "-m", "torch_cudagraph_debug.cli"]


def segment(size: int, *, address: int = 0, stream: int = 0, state: str = "inactive") -> dict:
    return {
        "device": 0,
        "address": address,
        "total_size": size,
        "allocated_size": 0,
        "active_size": 0,
        "requested_size": 0,
        "stream": stream,
        "segment_type": "large",
        "segment_pool_id": (0, 0),
        "is_expandable": False,
        "frames": [],
        "blocks": [
            {"address": address, "size": size, "requested_size": size, "state": state, "frames": []}
        ],
    }


def snapshot(*segments: dict, traces: list | None = None) -> dict:
    return {
        "segments": list(segments),
        "device_traces": [traces or []],
        "allocator_settings": {},
        "external_annotations": [],
    }


def test_fault9_four_segments_of_2_pow_62_are_refused():
    snap = snapshot(*(segment(2**62) for _ in range(4)))
    with pytest.raises(SnapshotFormatError) as info:
        MemoryProbeSnapshot.from_snapshot(snap)
    message = str(info.value)
    assert "'segments of device 0 pool (0, 0) stream 0: reserved'" in message
    assert "the sum of reserved does not fit in a signed 64-bit integer" in message


def test_fault9_a_total_across_streams_is_checked():
    snap = snapshot(*(segment(2**62, stream=s) for s in range(4)))
    with pytest.raises(
        SnapshotFormatError, match=r"'segments of device 0 pool \(0, 0\): reserved'"
    ):
        MemoryProbeSnapshot.from_snapshot(snap)


def test_fault9_two_segments_of_i64_max_are_refused_not_contradictory():
    snap = snapshot(*(segment(MAX, state="active_allocated") for _ in range(2)))
    with pytest.raises(SnapshotFormatError) as info:
        MemoryProbeSnapshot.from_snapshot(snap)
    message = str(info.value)
    assert "does not fit in a signed 64-bit integer" in message
    assert "reserved -2" not in message


def test_fault9_sums_that_fit_are_exact():
    snap = snapshot(segment(2**62, stream=0), segment(2**62 - 1, stream=1))
    s = MemoryProbeSnapshot.from_snapshot(snap)
    assert s.allocator_scope_stats["all"].reserved_bytes == 2**63 - 1


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda s: s["segments"][0].update(total_size=-4096), "segments[0].total_size"),
        (lambda s: s["segments"][0]["blocks"][0].update(size=-1), "segments[0].blocks[0].size"),
        (lambda s: s["segments"][0].update(active_size=-1), "segments[0].active_size"),
        (
            lambda s: s["device_traces"][0].append(
                {"action": "alloc", "addr": 0, "size": -512, "stream": 0, "time_us": 1}
            ),
            "device_traces[0][0].size",
        ),
    ],
)
def test_fault9_negative_sizes_are_refused_at_ingest(edit, field):
    snap = snapshot(segment(4096))
    edit(snap)
    with pytest.raises(SnapshotFormatError) as info:
        MemoryProbeSnapshot.from_snapshot(snap)
    assert f"'{field}'" in str(info.value) and "negative" in str(info.value)


def test_fault9_a_range_past_the_address_space_is_refused():
    snap = snapshot(segment(1 << 20, address=MAX - 10))
    with pytest.raises(SnapshotFormatError, match=r"'segments\[0\]\.total_size'.*segment's end"):
        MemoryProbeSnapshot.from_snapshot(snap)


def test_fault9_a_residual_change_that_does_not_fit_is_refused():
    # Residual -(2^63 - 1) (nothing used, everything reserved), then +(2^63 - 1).
    low = MemoryProbeSnapshot.from_snapshot(snapshot(segment(MAX)), mem_get_info=(MAX, MAX))
    high = MemoryProbeSnapshot.from_snapshot(snapshot(), mem_get_info=(0, MAX))
    assert low.device_readings[0].cuda_allocator_residual_bytes == -MAX
    assert high.device_readings[0].cuda_allocator_residual_bytes == MAX
    with pytest.raises(SnapshotFormatError, match=r"'device_memory\[0\]\.residual'"):
        compare_snapshots(low, high)


def test_fault9_import_of_an_overflowing_pickle_is_one_error_line(tmp_path):
    path = tmp_path / "huge.pickle"
    with open(path, "wb") as f:
        pickle.dump(snapshot(*(segment(2**62) for _ in range(4))), f, protocol=4)
    done = subprocess.run(
        [*CLI, "memory", "import", str(path), "--run", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tcgd: error: "), done.stderr
    assert "reserved" in lines[0] and "does not fit" in lines[0]
    assert "reserved: 0 B" not in done.stdout
