"""Comparisons through the public API: snapshots, points, runs, series and run groups;
their rules (alignment, metadata, digests, summary-only pairs, status precedence) and the
typed results."""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch
from storage_files import data_files
from tensor_runs import record
from torch_cudagraph_debug.errors import (
    ComparisonFailedError,
    CorruptRunError,
    InvalidInputError,
    RunNotFoundError,
    TcgdError,
)
from torch_cudagraph_debug.tensor_debug import (
    TensorComparisonOptions,
    TensorProbe,
    TensorRecorder,
    TensorRun,
    TensorRunGroup,
    compare_point_series,
    compare_points,
    compare_run_groups,
    compare_runs,
    compare_snapshots,
)


def test_probe_compare_finds_the_first_changed_element():
    probe = TensorProbe("p", when="always")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    probe(x, name="x")
    probe(torch.tensor([1, 2, 3]), name="ids")
    before = probe.snapshot()
    x2 = x.clone()
    x2[1, 1] = 40.0
    probe(x2, name="x")
    probe(torch.tensor([1, 2, 3]), name="ids")
    after = probe.snapshot()

    result = probe.compare(before, after)
    assert result.kind == "snapshots"
    assert (result.status, result.ok, result.conclusive) == ("mismatch", False, True)
    o = result.observation("x")
    m = o.metrics
    assert (o.status, o.kind) == ("mismatch", "values")
    assert (m.mismatch_count, m.total) == (1, 6)
    assert m.first_mismatch.coordinate == (1, 1)
    assert (m.first_mismatch.reference, m.first_mismatch.candidate) == (4.0, 40.0)
    assert m.max_abs_error == 36.0 and m.max_rel_error == 9.0
    assert result.observation("ids").kind == "digest"
    assert result.first_issue.observation == o
    # Snapshots of another probe are refused by the probe method, accepted by the function.
    other = TensorProbe("q", when="always")
    other(x, name="x")
    with pytest.raises(InvalidInputError, match="probe 'q'"):
        probe.compare(before, other.snapshot())
    assert compare_snapshots(before, other.snapshot()).status == "mismatch"


def test_metrics_match_torch_on_a_point(tmp_path):
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(64, 33, generator=g)
    cand = ref + 1e-3 * torch.randn(64, 33, generator=g)
    cand[3, 7] = math.nan
    run = record(tmp_path / "r", [("a", {"h": ref}), ("b", {"h": cand})])
    result = compare_points(run["a"], run["b"])
    m = result.observation("h").metrics
    r, c = ref.double().reshape(-1), cand.double().reshape(-1)
    finite = torch.isfinite(c)
    close = torch.isclose(c, r, rtol=1e-5, atol=1e-8)
    e = (c - r).abs()[finite]
    assert m.mismatch_count == int((~close).sum())
    assert m.max_abs_error == float(e.max())
    assert math.isclose(m.mean_abs_error, float(e.mean()), rel_tol=1e-12)
    assert m.nan_introduced == 1 and m.inf_introduced == 0
    assert m.finite_pairs == ref.numel() - 1
    cos = torch.nn.functional.cosine_similarity(c[finite], r[finite], dim=0)
    assert math.isclose(m.cosine_similarity, float(cos), rel_tol=1e-12)
    rel_l2 = torch.linalg.vector_norm(c[finite] - r[finite]) / torch.linalg.vector_norm(r[finite])
    assert math.isclose(m.relative_l2_error, float(rel_l2), rel_tol=1e-12)
    first = int((~close).nonzero()[0])
    assert m.first_mismatch.index == first
    assert m.first_mismatch.coordinate == (first // 33, first % 33)


def test_runs_align_points_and_observations(tmp_path):
    a = record(
        tmp_path / "a",
        [
            ("s0", {"x": torch.ones(3), "y": torch.zeros(2)}),
            ("s1", {"x": torch.ones(3), "y": torch.zeros(2)}),
        ],
    )
    b = record(
        tmp_path / "b",
        [
            ("s0", {"x": torch.ones(3), "z": torch.zeros(2)}),
            ("s2", {"x": torch.ones(3) * 2}),
        ],
    )
    result = compare_runs(a, b)
    assert result.status == "mismatch"
    labels = [
        (p.reference.label if p.reference else None, p.candidate.label if p.candidate else None)
        for p in result.points
    ]
    # A candidate-only point follows the point before it in the candidate's order.
    assert labels == [("s0", "s0"), (None, "s2"), ("s1", None)]
    kinds = {o.name: o.kind for o in result.points[0].observations}
    assert kinds == {"x": "digest", "y": "reference_only", "z": "candidate_only"}
    assert result.first_issue.scope == "observation"
    assert result.first_issue.observation.name == "z"

    by_index = compare_runs(a, b, point_mapping="index")
    assert [p.status for p in by_index.points] == ["mismatch", "mismatch"]
    explicit = compare_runs(a.path, b.path, point_mapping={"s1": "s0", 0: -1})
    assert [(p.reference.label, p.candidate.label) for p in explicit.points] == [
        ("s1", "s0"),
        ("s0", "s2"),
    ]
    pairs = compare_runs(a, b, point_mapping=[("s1", "s0")])
    assert len(pairs.points) == 1
    with pytest.raises(InvalidInputError, match="no point labelled 'nope'"):
        compare_runs(a, b, point_mapping={"nope": "s0"})
    with pytest.raises(InvalidInputError, match="point_mapping"):
        compare_runs(a, b, point_mapping="sideways")


def test_no_common_label_suggests_a_point_mapping(tmp_path):
    a = record(tmp_path / "a", [("eager0", {"x": torch.ones(2)})])
    b = record(tmp_path / "b", [("graph0", {"x": torch.ones(2)})])
    result = compare_runs(a, b)
    assert result.status == "mismatch"
    assert any("point_mapping" in w for w in result.warnings)
    assert compare_runs(a, b, point_mapping="index").status == "match"


def test_metadata_policies(tmp_path):
    base = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    a = record(tmp_path / "a", [("p", {"x": base, "t": base})])
    rec = TensorRecorder(run_dir=tmp_path / "b", non_contiguous="copy")
    with rec.record_point("p"):
        rec.observe(base.double(), name="x")
        rec.observe(base.t().contiguous().t(), name="t")  # same values, other strides
    b = rec.finish()
    strict = compare_runs(a, b)
    reasons = {o.name: o.reason for o in strict.observations}
    assert reasons == {"x": "dtype float32 vs float64", "t": "stride [3, 1] vs [1, 2]"}
    relaxed = compare_runs(
        a, b, options=TensorComparisonOptions(dtype_policy="promote", layout_policy="ignore")
    )
    assert relaxed.status == "match"
    assert {o.kind for o in relaxed.observations} == {"values", "digest"}


def test_summary_only_pairs(tmp_path):
    a = record(tmp_path / "a", [("p", {"s": (torch.tensor([1.0, 2.0]), "summary")})])
    b = record(tmp_path / "b", [("p", {"s": (torch.tensor([1.0, 2.5]), "summary")})])
    c = record(tmp_path / "c", [("p", {"s": (torch.tensor([1.0, math.nan]), "summary")})])
    result = compare_runs(a, b)
    assert (result.status, result.conclusive, result.ok) == ("inconclusive", False, False)
    assert 'payload="full"' in result.observations[0].reason
    assert compare_runs(a, b, options=TensorComparisonOptions(mode="exact")).status == "mismatch"
    nan = compare_runs(a, c).observations[0]
    assert (nan.status, nan.kind) == ("mismatch", "summary")
    same = compare_runs(a, a)
    assert same.status == "match" and same.observations[0].kind == "digest"
    with pytest.raises(ComparisonFailedError, match="inconclusive"):
        result.assert_ok()


def test_status_precedence_first_issue_and_worst(tmp_path):
    a = record(
        tmp_path / "a",
        [
            (
                "p",
                {
                    "ok": torch.ones(4),
                    "open": (torch.ones(4), "summary"),
                    "small": torch.ones(4),
                    "big": torch.ones(4),
                },
            )
        ],
    )
    b = record(
        tmp_path / "b",
        [
            (
                "p",
                {
                    "ok": torch.ones(4),
                    "open": (torch.ones(4) * 2, "summary"),
                    "small": torch.tensor([1.0, 1.0, 1.0, 1.1]),
                    "big": torch.tensor([5.0, 5.0, 1.0, 1.0]),
                },
            )
        ],
    )
    result = compare_runs(a, b)
    assert result.status == "mismatch"
    assert (result.counts.match, result.counts.mismatch, result.counts.inconclusive) == (1, 2, 1)
    assert result.first_issue.observation.name == "open"
    worst = [o.name for o in result.worst_observation_comparisons()]
    assert worst == ["big", "small", "open", "ok"]
    assert [o.name for o in result.worst_observation_comparisons(2)] == ["big", "small"]
    with pytest.raises(ComparisonFailedError) as raised:
        result.assert_ok()
    assert isinstance(raised.value, AssertionError) and isinstance(raised.value, TcgdError)
    assert "2 of 4 observations mismatch" in str(raised.value)
    compare_runs(a, a).assert_ok()


def test_point_series_finds_the_first_diverging_point(tmp_path):
    points = []
    for step in range(5):
        w = torch.ones(4)
        b = torch.zeros(2)
        if step >= 2:
            w[0] += 0.1 * step
        if step >= 4:
            b[1] = math.inf
        points.append((f"step{step}", {"w": w, "b": b}))
    run = record(tmp_path / "run", points)
    progress = []
    result = compare_point_series(run["step0"], run, progress=lambda *a: progress.append(a))
    assert result.status == "mismatch"
    assert result.first_divergence.label == "step2"
    w = result.divergence_of("w")
    assert (w.first_mismatch.label, w.mismatched_points) == ("step2", 3)
    assert math.isclose(w.max_abs_error, 0.4, rel_tol=1e-6)
    b = result.divergence_of("b")
    assert b.first_mismatch.label == "step4"
    assert result.points[4].observation("b").metrics.inf_introduced == 1
    assert [p.status for p in result.points] == [
        "match",
        "match",
        "mismatch",
        "mismatch",
        "mismatch",
    ]
    # Progress is reported in payload bytes and ends complete.
    assert progress and progress[-1][0] == progress[-1][1] > 0


def job(root, ranks, labels, *, value=1.0, crashed=None, world_size=None):
    world = world_size or (max(ranks) + 1)
    for rank in ranks:
        points = [(label, {"x": torch.full((3,), value + rank)}) for label in labels]
        record(
            root,
            points,
            name="job",
            rank=rank,
            world_size=world,
            crash_after=crashed.get(rank) if crashed else None,
        )


def test_run_groups_rank_by_rank(tmp_path):
    job(tmp_path / "ref", [0, 1, 2], ["s0", "s1", "s2"])
    job(tmp_path / "cand", [0, 1], ["s0", "s1", "s2"], crashed={1: 2}, world_size=3)
    ref = TensorRunGroup.load(tmp_path / "ref")
    assert ref.ranks == (0, 1, 2) and ref.complete and ref.warnings == ()
    with pytest.warns(UserWarning) as caught:
        cand = TensorRunGroup.load(tmp_path / "cand")
    messages = [str(w.message) for w in caught]
    assert any("rank 1 has 2 of 3 points" in m and "may have crashed" in m for m in messages)
    assert any("rank 2 of world size 3 has no run" in m for m in messages)
    assert cand.missing_ranks == (2,) and not cand.complete
    assert cand.run(0).rank == 0 and cand[1].complete is False

    result = compare_run_groups(ref, cand)
    assert [r.status for r in result.ranks] == ["match", "inconclusive", "inconclusive"]
    assert result.status == "inconclusive"
    assert result.rank(2).reason == "rank 2 has no run in the candidate group"
    assert result.first_issue.rank == 1
    # The same comparison from the job directories directly.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = compare_run_groups(tmp_path / "ref", tmp_path / "cand")
    assert again.to_dict()["ranks"] == result.to_dict()["ranks"]

    job(tmp_path / "diff", [0, 1, 2], ["s0", "s1", "s2"], value=2.0)
    differing = compare_run_groups(ref, TensorRunGroup.load(tmp_path / "diff"))
    assert differing.status == "mismatch"
    assert len(differing.ranks[0].points) == 3

    grouped = TensorRunGroup.from_runs([ref.run(2), ref.run(0), ref.run(1)])
    assert grouped.ranks == (0, 1, 2)
    with pytest.raises(InvalidInputError, match="one run per rank"):
        TensorRunGroup.from_runs([ref.run(0), ref.run(0)])


def test_errors_are_typed(tmp_path):
    run = record(tmp_path / "a", [("p", {"x": torch.ones(1024)})])
    with pytest.raises(RunNotFoundError):
        compare_runs(run, tmp_path / "missing")
    with pytest.raises(InvalidInputError, match="rtol"):
        compare_runs(run, run, options=TensorComparisonOptions(rtol=-1.0))
    with pytest.raises(InvalidInputError, match="mode"):
        TensorComparisonOptions(mode="close")
    with pytest.raises(InvalidInputError, match="TensorPoint"):
        compare_points(run, run)
    # A payload damaged on disk (same size) is an error naming the damage, never a verdict.
    other = record(tmp_path / "b", [("p", {"x": torch.ones(1024) * 2})])
    (part,) = data_files(tmp_path / "b", "payloads")
    data = bytearray(part.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)
    part.write_bytes(bytes(data))
    with pytest.raises(CorruptRunError):
        compare_runs(run, other)
    with pytest.raises(CorruptRunError):
        # Through the Python loader: its own exception reaches the caller unchanged.
        compare_points(run["p"], TensorRun.load(tmp_path / "b")["p"])


def test_to_dict_is_complete_json_with_non_finite_as_strings(tmp_path):
    a = record(tmp_path / "a", [("p", {f"x{i}": torch.tensor([0.0, 1.0]) for i in range(30)})])
    b = record(tmp_path / "b", [("p", {f"x{i}": torch.tensor([1.0, 1.0]) for i in range(30)})])
    result = compare_runs(a, b, options=TensorComparisonOptions(limit=3))
    d = result.to_dict()
    assert len(d["points"][0]["observations"]) == 30
    assert d["points"][0]["observations"][0]["metrics"]["max_rel_error"] == "inf"
    assert result.observations[0].metrics.max_rel_error == math.inf
    json.dumps(d, allow_nan=False)  # standard JSON
    text = result.to_text()
    assert "27 more not shown (limit 3" in text
