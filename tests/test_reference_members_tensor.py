"""The reference design's members and parameter names on the Python tensor classes and
functions: observation digests and descriptors, key labels, point and run identity, the
run group's fields, the comparison functions' parameter names, and ``compare_snapshots`` /
``compare_points`` handing memory states to ``memory_debug``. CPU only; every expected
value is computed from the recorded tensors or rows, not read back from the member under
test."""

from __future__ import annotations

import hashlib
import json
import warnings

import pytest
import torch
from storage_files import data_files
from tensor_runs import record
from test_memory_support import MIB, FakeAllocator, two_runs
from torch_cudagraph_debug import _native
from torch_cudagraph_debug import memory_debug as md
from torch_cudagraph_debug.errors import InvalidInputError, TensorBundleError
from torch_cudagraph_debug.memory_debug import MemoryAttributionOptions, MemoryProbe
from torch_cudagraph_debug.tensor_debug import (
    RecordAction,
    TensorComparisonOptions,
    TensorObservationKey,
    TensorOwnershipError,
    TensorProbe,
    TensorRun,
    TensorRunGroup,
    compare_point_series,
    compare_points,
    compare_run_groups,
    compare_runs,
    compare_snapshots,
)


def raw_sha256(t: torch.Tensor) -> str:
    """SHA-256 of a tensor's contiguous bytes, through a same-width integer view (numpy
    has no bfloat16)."""
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    as_int = t.contiguous().view(width[t.element_size()])
    return hashlib.sha256(as_int.numpy().tobytes()).hexdigest()


def runs_row(root, run_id: str) -> dict:
    """The root's ``runs`` table row of ``run_id``, as the store wrote it."""
    rows = _native.list_runs(str(root)).to_pylist()
    (row,) = [r for r in rows if r["run_id"] == run_id]
    return row


# ------------------------------------------------------------------ observations
def test_observation_sha256_payload_flag_and_descriptor(tmp_path):
    x = torch.tensor([1.5, -2.0, float("nan"), 0.0])
    h = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    s = torch.tensor([7, 8, 9], dtype=torch.int64)
    run = record(
        tmp_path, [("p", {"x": x, "h": h, "s": (s, "summary")})], name="r", execution="eager"
    )
    point = run["p"]
    ox, oh, os_ = (point.observation(n) for n in ("x", "h", "s"))

    assert ox.sha256 == raw_sha256(x) and oh.sha256 == raw_sha256(h)
    assert ox.sha256 != oh.sha256 and len(ox.sha256) == 64
    assert (ox.has_payload, oh.has_payload) == (True, True)
    # A summary-only observation kept no values: no payload, no SHA-256 of them.
    assert os_.has_payload is False and os_.payload == "summary" and os_.sha256 is None

    d = json.loads(json.dumps(ox.descriptor()))
    assert (d["name"], d["invocation_index"], d["order"]) == ("x", 0, ox.order)
    assert (d["shape"], d["stride"], d["dtype"]) == ([4], [1], "float32")
    assert (d["nbytes"], d["payload"]) == (4 * 4, "full")
    assert d["sha256"] == raw_sha256(x) and d["digest"] == ox.digest
    assert d["summary"]["nan_count"] == 1 and d["summary"]["zero_count"] == 1
    assert d["summary"]["min"] == -2.0 and d["summary"]["max"] == 1.5
    ds = os_.descriptor()
    assert ds["sha256"] is None and ds["payload"] == "summary" and ds["nbytes"] == 3 * 8
    assert ds["summary"]["max"] == 9.0 and ds["summary"]["numel"] == 3


def test_key_label_is_the_name_reports_use(tmp_path):
    run = record(tmp_path / "a", [("p", {"x": torch.ones(2)})], execution="eager")
    assert TensorObservationKey("x", 0).label == "x[0]"
    assert TensorObservationKey("enc.out", 3).label == "enc.out[3]"
    # The comparison report names the mismatching observation by that label.
    other = record(tmp_path / "b", [("p", {"x": torch.zeros(2)})], execution="eager")
    result = compare_points(run["p"], other["p"])
    (obs,) = run["p"].observations
    assert result.status == "mismatch"
    assert f"{obs.key.label}:" in result.to_text()


# ------------------------------------------------------------------ points and runs
def test_point_run_id_and_descriptor(tmp_path):
    run = record(
        tmp_path / "r",
        [("a", {"x": torch.ones(3)}), ("b", {"x": torch.ones(3), "y": torch.zeros(1)})],
        execution="eager",
        run_metadata={"step": 1},
    )
    row = runs_row(tmp_path / "r", run.run_id)
    assert [p.run_id for p in run.points] == [row["run_id"], row["run_id"]]
    other = record(tmp_path / "o", [("a", {"x": torch.ones(3)})], execution="eager")
    assert other["a"].run_id != run.run_id
    with pytest.raises(TensorOwnershipError):
        run.point(other["a"])

    d = json.loads(json.dumps(run["b"].descriptor()))
    assert (d["run_id"], d["index"], d["label"]) == (row["run_id"], 1, "b")
    assert d["replay_index"] is None and d["metadata"] == {}
    assert d["timestamp"] == run["b"].timestamp.isoformat()
    assert [o["name"] for o in d["observations"]] == ["x", "y"]
    assert d["observations"][1]["sha256"] == raw_sha256(torch.zeros(1))


def test_run_descriptor_and_load_by_bundle_dir(tmp_path):
    run = record(
        tmp_path,
        [("a", {"x": torch.ones(3)}), ("b", {"x": torch.ones(3)})],
        execution="eager",
        rank=0,
        world_size=1,
        group_id="job-7",
        run_metadata={"lr": 0.5},
    )
    loaded = TensorRun.load(bundle_dir=tmp_path, cache_tensors=True)
    row = runs_row(tmp_path, loaded.run_id)
    d = json.loads(json.dumps(loaded.descriptor()))
    assert d["run_id"] == row["run_id"] == run.run_id
    assert (d["name"], d["execution"], d["rank"]) == (row["name"], row["execution"], 0)
    assert (d["group_id"], d["world_size"]) == ("job-7", 1) == (row["group_id"], 1)
    assert d["complete"] is row["complete"] is True
    assert d["created_at"] == row["created_at"].isoformat()
    assert d["finished_at"] == row["finished_at"].isoformat()
    assert d["labels"] == ["a", "b"] and d["bundle_dir"] == str(tmp_path)
    assert d["run_metadata"] == {"lr": 0.5} == json.loads(row["run_metadata"])
    assert d["default_payload"] == "full"
    assert d["provenance"] == json.loads(row["provenance"])


# ------------------------------------------------------------------ run groups
def job(root, ranks, *, world_size, group_ids=None, labels=("s0", "s1")):
    for rank in ranks:
        points = [(label, {"x": torch.full((3,), float(rank))}) for label in labels]
        record(
            root,
            points,
            name="job",
            execution="eager",
            rank=rank,
            world_size=world_size,
            group_id=(group_ids or {}).get(rank),
        )


def test_run_group_fields_and_descriptor(tmp_path):
    job(tmp_path, [0, 1, 3], world_size=4, group_ids={0: "g", 1: "g", 3: "g"})
    with pytest.warns(UserWarning, match="rank 2 of world size 4"):
        group = TensorRunGroup.load(tmp_path)
    rows = {r["rank"]: r for r in _native.list_runs(str(tmp_path)).to_pylist()}
    assert (group.name, group.execution, group.group_id) == ("job", "eager", "g")
    assert group.world_size == 4 and group.missing_ranks == (2,) and not group.complete
    assert group.root == str(tmp_path)
    assert group.point_labels == ("s0", "s1") == group.labels
    assert len(group.warnings) == 1 and "rank 2" in group.warnings[0]
    runs = group.runs
    assert [r.rank for r in runs] == [0, 1, 3]
    assert [r.run_id for r in runs] == [rows[k]["run_id"] for k in (0, 1, 3)]
    assert runs[2] is group[3]  # loaded once, kept
    assert runs[1]["s1"].tensor("x").tolist() == [1.0, 1.0, 1.0]

    d = json.loads(json.dumps(group.descriptor()))
    assert (d["name"], d["root"], d["execution"], d["group_id"]) == (
        "job",
        str(tmp_path),
        "eager",
        "g",
    )
    assert (d["world_size"], d["ranks"], d["missing_ranks"]) == (4, [0, 1, 3], [2])
    assert d["complete"] is False and d["point_labels"] == ["s0", "s1"]
    assert d["warnings"] == list(group.warnings)
    assert [(m["rank"], m["run_id"], m["point_count"]) for m in d["members"]] == [
        (k, rows[k]["run_id"], rows[k]["point_count"]) for k in (0, 1, 3)
    ]


def test_run_group_ids_none_and_conflicting(tmp_path):
    job(tmp_path / "plain", [0, 1], world_size=2)
    assert TensorRunGroup.load(tmp_path / "plain").group_id is None
    # One rank declaring an id beside one declaring none: that id.
    job(tmp_path / "half", [0, 1], world_size=2, group_ids={1: "x"})
    assert TensorRunGroup.load(tmp_path / "half").group_id == "x"
    job(tmp_path / "a", [0], world_size=2, group_ids={0: "first"})
    job(tmp_path / "b", [1], world_size=2, group_ids={1: "second"})
    mixed = TensorRunGroup.from_runs([TensorRun.load(tmp_path / "a"), tmp_path / "b"])
    with pytest.raises(InvalidInputError, match="one group id") as info:
        _ = mixed.group_id
    assert "'first'" in str(info.value) and "'second'" in str(info.value)


def test_run_group_from_runs_root_and_cache_tensors(tmp_path):
    job(tmp_path / "a", [0], world_size=2)
    job(tmp_path / "b", [1], world_size=2)
    r0, r1 = TensorRun.load(tmp_path / "a"), TensorRun.load(tmp_path / "b")
    grouped = TensorRunGroup.from_runs(runs=[r1, r0], root=tmp_path)
    assert grouped.root == str(tmp_path) and grouped.ranks == (0, 1)
    assert grouped[0] is r0 and grouped.runs == (r0, r1)
    assert TensorRunGroup.from_runs([r0, r1]).root is None
    with pytest.raises(InvalidInputError, match="root"):
        TensorRunGroup.from_runs([r0, r1], root=3)

    # cache_tensors reaches each rank's run: a value read once survives its payload file.
    job(tmp_path / "c", [0, 1], world_size=2)
    cached = TensorRunGroup.load(tmp_path / "c", cache_tensors=True)
    plain = TensorRunGroup.load(tmp_path / "c")
    first = cached[1]["s0"].tensor("x")
    plain_run = plain[1]
    for part in data_files(tmp_path / "c", "payloads", rank=1):
        part.write_bytes(b"")
    assert torch.equal(cached[1]["s0"].tensor("x"), first) and first.tolist() == [1.0] * 3
    with pytest.raises(TensorBundleError):
        plain_run["s0"].tensor("x")
    with pytest.raises(InvalidInputError, match="cache_tensors"):
        TensorRunGroup.load(tmp_path / "c", cache_tensors="yes")


# ------------------------------------------------------------------ parameter names
def test_comparison_functions_take_the_reference_parameter_names(tmp_path):
    ref = record(tmp_path / "r", [("a", {"x": torch.ones(4)})], execution="eager")
    same = record(tmp_path / "s", [("a", {"x": torch.ones(4)})], execution="eager")
    off = torch.ones(4)
    off[2] = 5.0
    diff = record(
        tmp_path / "d", [("a", {"x": torch.ones(4)}), ("b", {"x": off})], execution="eager"
    )
    options = TensorComparisonOptions(mode="exact")

    assert compare_points(reference=ref["a"], candidate=same["a"], options=options).ok
    assert compare_runs(reference=ref, candidate=same, options=options).status == "match"
    mapped = compare_runs(reference=ref, candidate=diff, point_mapping={"a": "b"})
    assert mapped.status == "mismatch"
    series = compare_point_series(reference=ref["a"], candidates=diff, options=options)
    # The reference point equals the candidate's first point and differs from its second.
    assert [c.status for c in series.point_comparisons] == ["match", "mismatch"]

    job(tmp_path / "g1", [0, 1], world_size=2)
    job(tmp_path / "g2", [0, 1], world_size=2)
    groups = compare_run_groups(
        reference=TensorRunGroup.load(tmp_path / "g1"), candidate=tmp_path / "g2"
    )
    assert groups.status == "match"

    probe = TensorProbe("p", [RecordAction()], when="always")
    probe(torch.tensor([1.0, 2.0]), name="v")
    before = probe.snapshot()
    probe(torch.tensor([1.0, 3.0]), name="v")
    after = probe.snapshot()
    result = probe.compare(reference=before, candidate=after)
    (obs,) = result.observation_comparisons
    assert result.status == "mismatch" and obs.mismatch_count == 1
    assert compare_snapshots(reference=before, candidate=before).status == "match"
    with pytest.raises(InvalidInputError, match="earlier snapshot as reference"):
        probe.compare(reference=after, candidate=before)
    probe.close()


# ------------------------------------------------------------------ memory states
def memory_snapshots():
    alloc0, alloc1 = FakeAllocator(devices=2), FakeAllocator(devices=2)
    alloc0.alloc(alloc0.segment(2 * MIB, device=0), 4096)
    alloc1.alloc(alloc1.segment(2 * MIB, device=1), 8192)
    s0 = MemoryProbe(_source=alloc0, devices=[0]).snapshot()
    s1 = MemoryProbe(_source=alloc1, devices=[1]).snapshot()
    return s0, s1


def test_memory_snapshots_and_points_go_to_memory_debug(tmp_path):
    s0, s1 = memory_snapshots()
    ours = compare_snapshots(s0, s1, device_mapping={0: 1})
    theirs = md.compare_snapshots(s0, s1, device_mapping={0: 1})
    assert type(ours) is md.MemorySnapshotComparison
    assert ours.to_json() == theirs.to_json()
    # The device mapping took effect: device 0 paired with device 1, 4096 bytes allocated.
    (device,) = ours.report_tree()["devices"]
    assert (device["reference_device"], device["candidate_device"]) == (0, 1)
    assert device["allocator"]["allocated"]["change"] == 4096

    a, b = two_runs(tmp_path)
    plain = md.compare_points(a["captured"], b["captured"])
    mapping = plain.suggested_pool_mapping
    ours = compare_points(a["captured"], b["captured"], pool_mapping=mapping)
    theirs = md.compare_points(a["captured"], b["captured"], pool_mapping=mapping)
    assert type(ours) is md.MemoryPointComparison
    assert ours.to_json() == theirs.to_json() != plain.to_json()
    same_run = compare_points(a[0], a[1], attribution=MemoryAttributionOptions(stacks=True))
    assert same_run.attribution_status.stacks.requested is True


def test_keywords_of_the_other_kind_are_refused_by_name(tmp_path):
    s0, s1 = memory_snapshots()
    run = record(tmp_path, [("p", {"x": torch.ones(2)})], execution="eager")
    point = run["p"]
    with pytest.raises(InvalidInputError, match=r"compare_snapshots\(options=\.\.\.\)"):
        compare_snapshots(s0, s1, options=TensorComparisonOptions())
    with pytest.raises(InvalidInputError, match=r"compare_points\(progress=\.\.\.\)"):
        compare_points(s0, s1, progress=lambda *_: None)
    with pytest.raises(InvalidInputError, match=r"compare_points\(pool_mapping=\.\.\.\)"):
        compare_points(point, point, pool_mapping={})
    with pytest.raises(InvalidInputError, match=r"compare_points\(attribution=\.\.\.\)"):
        compare_points(point, point, attribution=MemoryAttributionOptions())
    with pytest.raises(InvalidInputError, match=r"compare_snapshots\(device_mapping=\.\.\.\)"):
        compare_snapshots(point, point, device_mapping={0: 0})
    # A tensor point against a memory snapshot is neither comparison.
    with pytest.raises(InvalidInputError, match=r"TensorPoint.*MemoryProbeSnapshot"):
        compare_points(point, s0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compare_points(point, point).status == "match"


# ------------------------------------------------------------------ inputs held by results
def test_results_hold_what_was_compared(tmp_path):
    ref = record(tmp_path / "r", [("a", {"x": torch.ones(4)})], execution="eager")
    run = record(
        tmp_path / "c",
        [("a", {"x": torch.ones(4)}), ("b", {"x": torch.zeros(4)})],
        execution="eager",
    )
    series = compare_point_series(ref["a"], run)
    assert series.candidate_run is run
    assert [c.status for c in series.point_comparisons] == ["match", "mismatch"]
    # A job root is compared as a path: no run object was made for it.
    assert compare_point_series(ref["a"], tmp_path / "c").candidate_run is None

    job(tmp_path / "g1", [0, 1], world_size=2)
    job(tmp_path / "g2", [0, 1], world_size=2)
    g1 = TensorRunGroup.load(tmp_path / "g1")
    result = compare_run_groups(g1, tmp_path / "g2")
    assert result.reference_group is g1
    loaded = result.candidate_group
    assert isinstance(loaded, TensorRunGroup)
    assert list(loaded.ranks) == [0, 1] and loaded.world_size == 2
    assert result.status == "match"

    summary = g1.summary()
    assert summary.run_group is g1 and summary.group is g1


def test_value_summary_from_dict_takes_value(tmp_path):
    run = record(tmp_path, [("a", {"x": (torch.tensor([1.0, -3.0, 0.0]), "summary")})])
    summary = run["a"].observations[0].summary
    again = type(summary).from_dict(value=summary.to_dict())
    assert again == summary
    assert (again.minimum, again.maximum, again.zero_count) == (-3.0, 1.0, 1)
