"""Allocator snapshots from dicts and pickles: field policy, safe pickle reading, and the
statistics against values computed here from the snapshot itself."""

from __future__ import annotations

import copy
import json
import pickle
import pickletools
import warnings

import pytest
from test_memory_support import (
    DATA,
    MIB,
    capture_scenario,
    dump,
    load_fixture,
    with_small_block,
)
from torch_cudagraph_debug.errors import (
    SnapshotFormatError,
    TcgdError,
    UnsafePickleError,
)
from torch_cudagraph_debug.memory_debug import (
    MemoryDebugWarning,
    MemoryPoolKey,
    MemoryProbeSnapshot,
)
from torch_cudagraph_debug.memory_debug._model import freeze


def synthetic() -> dict:
    alloc, seg = with_small_block()
    a = alloc.alloc(seg, 4096, requested=4000)
    alloc.free(a, pending=True)
    capture_scenario(alloc)
    return alloc.snapshot()


def expected_stats(snapshot: dict) -> dict[tuple, dict[str, int]]:
    """Statistics computed in Python from the snapshot dict, to check the native ones."""
    out: dict[tuple, dict[str, int]] = {}
    for s in snapshot["segments"]:
        key = (s["device"], tuple(s["segment_pool_id"]), s["stream"])
        row = out.setdefault(
            key, {"reserved": 0, "allocated": 0, "active": 0, "requested": 0, "blocks": 0}
        )
        row["reserved"] += s["total_size"]
        for b in s["blocks"]:
            row["blocks"] += 1
            if b["state"] == "active_allocated":
                row["allocated"] += b["size"]
            if b["state"] != "inactive":
                row["active"] += b["size"]
                row["requested"] += b["requested_size"]
    return out


def test_statistics_match_the_snapshot() -> None:
    snap = synthetic()
    s = MemoryProbeSnapshot.from_snapshot(snap, mem_get_info=(70 * 1024 * MIB, 80 * 1024 * MIB))
    expected = expected_stats(snap)
    assert {o.key for o in s.observations} == set(expected)
    for o in s.observations:
        e = expected[o.key]
        assert (
            o.stats.reserved_bytes,
            o.stats.allocated_bytes,
            o.stats.active_bytes,
            o.stats.requested_bytes,
        ) == (
            e["reserved"],
            e["allocated"],
            e["active"],
            e["requested"],
        )
        assert o.stats.block_count == e["blocks"]
        assert o.stats.allocated_bytes <= o.stats.active_bytes <= o.stats.reserved_bytes
        assert o.stats.requested_bytes <= o.stats.active_bytes
    default = s.observation(0, (0, 0), 0).stats
    assert default.awaiting_free_bytes == 4096
    assert default.internal_fragmentation_bytes == 1024 - 16 + 4096 - 4000
    private = s.pool_stats[MemoryPoolKey(0, (1, 0))]
    assert private.active_bytes == 16 * MIB
    assert s.allocator_scope_stats["private"] == private
    assert s.allocator_scope_stats["all"].reserved_bytes == 18 * MIB
    d = s.device_readings[0]
    assert d.used_bytes == 10 * 1024 * MIB
    assert d.cuda_allocator_residual_bytes == d.used_bytes - d.allocator_reserved_bytes
    assert d.allocator_reserved_bytes == 18 * MIB


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_pickles_of_every_protocol_read_the_same(tmp_path, protocol: int) -> None:
    snap = synthetic()
    path = dump(snap, str(tmp_path / f"p{protocol}.pickle"), protocol)
    from_file = MemoryProbeSnapshot.from_pickle(path)
    from_dict = MemoryProbeSnapshot.from_snapshot(snap)
    assert from_file.observations == from_dict.observations
    assert from_file.table("memory_blocks").num_rows == sum(
        len(s["blocks"]) for s in snap["segments"]
    )
    events = from_file.table("memory_events")
    assert events.num_rows == len(snap["device_traces"][0])
    assert events.column("action").to_pylist() == [t["action"] for t in snap["device_traces"][0]]


def test_real_fixture_shows_the_capture_pool() -> None:
    with open(f"{DATA}/memory_fixtures.json") as f:
        facts = json.load(f)
    name = "memory_default_after.pickle"
    s = MemoryProbeSnapshot.from_pickle(
        f"{DATA}/{name}",
        mem_get_info=tuple(facts[name]["mem_get_info"]["0"]),
    )
    private = [k for k in s.pool_stats if not k.is_default]
    assert private, s.pool_stats
    assert sum(s.pool_stats[k].active_bytes for k in private) >= facts[name]["capture_bytes"]
    d = s.device_readings[0]
    free, total = facts[name]["mem_get_info"]["0"]
    assert d.used_bytes == total - free
    assert d.cuda_allocator_residual_bytes == total - free - d.allocator_reserved_bytes
    # The same numbers as Python's own unpickler sees (a data-only unpickler).
    raw = load_fixture(name)
    assert d.allocator_reserved_bytes == sum(x["total_size"] for x in raw["segments"])


def test_a_pickle_that_runs_code_is_refused(tmp_path) -> None:
    class Boom:
        def __reduce__(self):
            return (print, ("pwned",))

    for protocol in (2, 4, 5):
        data = pickle.dumps({"segments": [], "device_traces": [], "x": Boom()}, protocol=protocol)
        ops = {op.name for op, _, _ in pickletools.genops(data)}
        assert ops & {"GLOBAL", "STACK_GLOBAL"} and "REDUCE" in ops
        path = tmp_path / f"evil{protocol}.pickle"
        path.write_bytes(data)
        with pytest.raises(UnsafePickleError) as info:
            MemoryProbeSnapshot.from_pickle(path)
        assert "GLOBAL" in str(info.value)
        assert isinstance(info.value, SnapshotFormatError)


def test_truncated_and_garbage_pickles_are_typed_errors(tmp_path) -> None:
    data = pickle.dumps(synthetic(), protocol=4)
    for k, bad in enumerate((data[: len(data) // 2], b"", b"not a pickle at all", data[:-1])):
        path = tmp_path / f"bad{k}.pickle"
        path.write_bytes(bad)
        with pytest.raises(SnapshotFormatError):
            MemoryProbeSnapshot.from_pickle(path)
    missing = tmp_path / "missing.pickle"
    with pytest.raises(TcgdError, match=r"missing\.pickle"):
        MemoryProbeSnapshot.from_pickle(missing)


def test_missing_required_field_names_it() -> None:
    snap = synthetic()
    del snap["segments"][1]["blocks"][0]["size"]
    with pytest.raises(SnapshotFormatError, match=r"segments\[1\]\.blocks\[0\]\.size"):
        MemoryProbeSnapshot.from_snapshot(snap)
    snap = synthetic()
    snap["segments"][0]["total_size"] = "big"
    with pytest.raises(SnapshotFormatError, match=r"segments\[0\]\.total_size.*str"):
        MemoryProbeSnapshot.from_snapshot(snap)
    with pytest.raises(SnapshotFormatError, match="'segments'"):
        MemoryProbeSnapshot.from_snapshot({"device_traces": []})


def test_missing_optional_field_warns_once() -> None:
    snap = synthetic()
    for s in snap["segments"]:
        del s["is_expandable"]
        for b in s["blocks"]:
            del b["address"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = MemoryProbeSnapshot.from_snapshot(snap)
    messages = [str(w.message) for w in caught if issubclass(w.category, MemoryDebugWarning)]
    assert len([m for m in messages if "block.address" in m]) == 1
    assert len([m for m in messages if "segment.is_expandable" in m]) == 1
    assert len(messages) == 2, messages
    assert len(s.warnings) == 2
    # Block addresses were inferred from the segment address and the sizes before them.
    blocks = s.table("memory_blocks").to_pylist()
    assert all(b["address_inferred"] for b in blocks)
    for seg in snap["segments"]:
        at = seg["address"]
        mine = [
            b
            for b in blocks
            if b["address"] is not None and b["pool_id_0"] == seg["segment_pool_id"][0]
        ]
        for b in sorted(mine, key=lambda b: b["address"]):
            assert b["address"] == at
            at += b["size"]


def test_raw_snapshot_round_trips() -> None:
    snap = synthetic()
    s = MemoryProbeSnapshot.from_snapshot(copy.deepcopy(snap))
    assert s.raw_snapshot() == freeze(snap)
    rebuilt = s._state.raw_snapshot()
    again = MemoryProbeSnapshot.from_snapshot(rebuilt)
    assert again.observations == s.observations
    assert [t["action"] for t in rebuilt["device_traces"][0]] == [
        t["action"] for t in snap["device_traces"][0]
    ]
