"""Comparison options and results under the reference design's names: native frozen
classes with the documented fields, defaults and rendering methods, and the documented
rules (statuses, observation order, metadata mismatches, layout policy, limit, options kept
in every serialised report)."""

from __future__ import annotations

import math
import pickle
import warnings
from typing import get_args

import pytest
import torch
import torch_cudagraph_debug._native as native
from tensor_runs import record
from torch_cudagraph_debug import tensor_debug
from torch_cudagraph_debug.errors import ComparisonFailedError, InvalidInputError
from torch_cudagraph_debug.tensor_debug import (
    ComparisonMode,
    ComparisonStatus,
    DTypePolicy,
    LayoutPolicy,
    ObservationComparisonKind,
    TensorComparisonOptions,
    TensorObservationComparison,
    TensorPointComparison,
    TensorPointSeriesComparison,
    TensorProbe,
    TensorRankPointSummary,
    TensorRankRunComparison,
    TensorRunComparison,
    TensorRunGroup,
    TensorRunGroupComparison,
    TensorRunGroupSummary,
    TensorSnapshotComparison,
    TensorValueSummary,
    compare_point_series,
    compare_points,
    compare_run_groups,
    compare_runs,
    compare_snapshots,
)

ALL_OPTIONS = {
    "mode": "exact",
    "rtol": 0.25,
    "atol": 0.5,
    "equal_nan": True,
    "dtype_policy": "promote",
    "layout_policy": "ignore",
    "limit": 7,
}


# ------------------------------------------------------------------------------ options


def test_options_defaults_are_the_reference_design_s():
    o = TensorComparisonOptions()
    assert (o.mode, o.rtol, o.atol, o.equal_nan) == ("allclose", 1e-5, 1e-8, False)
    assert (o.dtype_policy, o.layout_policy, o.limit) == ("strict", "strict", 20)
    assert o.to_dict() == {
        "mode": "allclose",
        "rtol": 1e-5,
        "atol": 1e-8,
        "equal_nan": False,
        "dtype_policy": "strict",
        "layout_policy": "strict",
        "limit": 20,
    }
    assert repr(o) == (
        "TensorComparisonOptions(mode='allclose', rtol=1e-05, atol=1e-08, equal_nan=False, "
        "dtype_policy='strict', layout_policy='strict', limit=20)"
    )


def test_options_are_a_frozen_native_value():
    o = TensorComparisonOptions(**ALL_OPTIONS)
    assert type(o) is native.TensorComparisonOptions
    assert o.to_dict() == ALL_OPTIONS
    with pytest.raises(AttributeError):
        o.rtol = 1.0  # type: ignore[misc]
    assert o == TensorComparisonOptions(**ALL_OPTIONS)
    assert o != TensorComparisonOptions()
    assert hash(o) == hash(TensorComparisonOptions(**ALL_OPTIONS))
    assert len({o, TensorComparisonOptions(**ALL_OPTIONS), TensorComparisonOptions()}) == 2
    assert pickle.loads(pickle.dumps(o)) == o
    changed = o.replace(limit=3, mode="allclose")
    assert changed.to_dict() == {**ALL_OPTIONS, "limit": 3, "mode": "allclose"}
    with pytest.raises(InvalidInputError) as raised:
        o.replace(rtol=-1.0)
    assert (raised.value.option, raised.value.reason) == (
        "rtol",
        "must be a finite number >= 0, got -1",
    )
    with pytest.raises(InvalidInputError, match="no option 'tolerance'"):
        o.replace(tolerance=1.0)


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"mode": "close"}, "mode"),
        ({"rtol": -0.5}, "rtol"),
        ({"atol": math.nan}, "atol"),
        ({"rtol": True}, "rtol"),
        ({"equal_nan": 1}, "equal_nan"),
        ({"dtype_policy": "loose"}, "dtype_policy"),
        ({"layout_policy": "Strict"}, "layout_policy"),
        ({"limit": -1}, "limit"),
        ({"limit": 2.5}, "limit"),
    ],
)
def test_bad_options_name_the_option(kwargs, option):
    with pytest.raises(InvalidInputError) as raised:
        TensorComparisonOptions(**kwargs)
    assert raised.value.option == option
    assert str(raised.value).startswith(f"TensorComparisonOptions.{option} ")


def test_enumerations_are_the_engine_s_names():
    literals = native.comparison_literals()
    assert get_args(ComparisonMode) == literals["ComparisonMode"] == ("allclose", "exact")
    assert get_args(ComparisonStatus) == literals["ComparisonStatus"]
    assert set(get_args(ComparisonStatus)) == {"match", "mismatch", "inconclusive"}
    assert get_args(DTypePolicy) == literals["DTypePolicy"] == ("strict", "promote")
    assert get_args(LayoutPolicy) == literals["LayoutPolicy"] == ("strict", "ignore")
    assert get_args(ObservationComparisonKind) == literals["ObservationComparisonKind"]


def test_the_facade_exports_the_native_classes_and_the_old_names():
    assert tensor_debug.TensorPointComparison is native.TensorPointComparison
    assert tensor_debug.TensorValueSummary is native.TensorValueSummary
    assert tensor_debug.ObservationComparison is TensorObservationComparison
    assert tensor_debug.PointComparison is TensorPointComparison
    assert tensor_debug.RankComparison is TensorRankRunComparison
    for name in (
        "TensorObservationComparison",
        "TensorSnapshotComparison",
        "TensorPointComparison",
        "TensorRunComparison",
        "TensorPointSeriesComparison",
        "TensorRankRunComparison",
        "TensorRunGroupComparison",
        "TensorValueSummary",
        "TensorRankPointSummary",
        "TensorRunGroupSummary",
        "ComparisonMode",
        "ComparisonStatus",
        "DTypePolicy",
        "LayoutPolicy",
        "ObservationComparisonKind",
    ):
        assert name in tensor_debug.__all__


def test_options_of_another_type_are_refused(tmp_path):
    run = record(tmp_path / "a", [("p", {"x": torch.ones(2)})])
    with pytest.raises(InvalidInputError, match="options must be a TensorComparisonOptions"):
        compare_points(run["p"], run["p"], options={"rtol": 0.1})  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ points


def test_point_comparison_follows_reference_order_then_candidate_only_keys(tmp_path):
    a, b, c = torch.ones(2), torch.zeros(3), torch.arange(4.0)
    ref = record(tmp_path / "r", [("p", {"a": a, "b": b, "c": c})])
    cand = record(
        tmp_path / "c",
        [
            ("p", {"a": a, "c": c, "y": torch.ones(1), "x": torch.ones(1)}),
            ("q", {"c": c, "x": torch.ones(1), "a": a}),
        ],
    )
    result = compare_points(ref["p"], cand["p"])
    assert type(result) is TensorPointComparison
    got = [(o.key, o.status, o.kind) for o in result.observation_comparisons]
    assert got == [
        (("a", 0), "match", "digest"),
        (("b", 0), "mismatch", "reference_only"),
        (("c", 0), "match", "digest"),
        (("y", 0), "mismatch", "candidate_only"),
        (("x", 0), "mismatch", "candidate_only"),
    ]
    assert [o.position for o in result.observation_comparisons] == [0, 1, 2, 3, 4]
    # A candidate-only key recorded between shared keys is placed right after the key it
    # followed in the candidate (docs/comparison.md, Execution order), not at the end.
    between = compare_points(ref["p"], cand["q"])
    assert [o.name for o in between.observation_comparisons] == ["a", "b", "c", "x"]
    b = result.observation("b")
    assert (b.reference.shape, b.candidate) == ((3,), None)
    assert (result.counts.total, result.counts.match, result.counts.mismatch) == (5, 2, 3)
    assert result.reference.label == "p" and result.candidate.index == 0
    assert result.first_issue.observation == b
    assert result.first_issue.scope == "observation"
    assert set(result.by_key) == {("a", 0), ("b", 0), ("c", 0), ("y", 0), ("x", 0)}
    with pytest.raises(KeyError, match="no observation \\('z', 0\\)"):
        result.observation("z")
    with pytest.raises(AttributeError):
        result.status = "match"  # type: ignore[misc]


def test_shape_dtype_and_stride_changes_are_metadata_mismatches(tmp_path):
    base = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    ref = record(tmp_path / "r", [("p", {"shape": base, "dtype": base, "stride": base})])
    cand = record(
        tmp_path / "c",
        [
            (
                "p",
                {
                    "shape": base.reshape(3, 2),
                    "dtype": base.double(),
                    "stride": base.t().contiguous().t(),
                },
            )
        ],
        non_contiguous="copy",
    )
    strict = compare_points(ref["p"], cand["p"])
    got = {o.name: (o.status, o.kind, o.reason) for o in strict.observation_comparisons}
    assert got == {
        "shape": ("mismatch", "metadata", "shape [2, 3] vs [3, 2]; stride [3, 1] vs [2, 1]"),
        "dtype": ("mismatch", "metadata", "dtype float32 vs float64"),
        "stride": ("mismatch", "metadata", "stride [3, 1] vs [1, 2]"),
    }
    stride = strict.observation("stride")
    assert (stride.reference.stride, stride.candidate.stride) == ((3, 1), (1, 2))
    assert stride.metrics is None and stride.mismatch_count is None

    ignore = compare_points(
        ref["p"], cand["p"], options=TensorComparisonOptions(layout_policy="ignore")
    )
    assert ignore.observation("stride").status == "match"
    assert ignore.observation("dtype").kind == "metadata"  # dtype stays strict
    promote = compare_points(
        ref["p"],
        cand["p"],
        options=TensorComparisonOptions(layout_policy="ignore", dtype_policy="promote"),
    )
    assert {o.name: o.status for o in promote.observation_comparisons} == {
        "shape": "mismatch",
        "dtype": "match",
        "stride": "match",
    }
    assert promote.observation("dtype").kind == "values"


def test_observation_comparison_metrics_and_first_mismatch(tmp_path):
    ref_values = torch.tensor([[1.0, 2.0], [4.0, 8.0]])
    cand_values = torch.tensor([[1.0, 2.5], [4.0, 6.0]])
    big = 2**53
    ref = record(tmp_path / "r", [("p", {"x": ref_values, "i": torch.tensor([big, big + 1])})])
    cand = record(tmp_path / "c", [("p", {"x": cand_values, "i": torch.tensor([big, big + 3])})])
    result = compare_points(ref["p"], cand["p"])
    x = result.observation("x")
    assert (x.status, x.kind) == ("mismatch", "values")
    assert (x.mismatch_count, x.mismatch_fraction) == (2, 0.5)
    assert x.max_abs_error == 2.0
    assert x.max_rel_error == 0.25
    assert x.mean_abs_error == (0.5 + 2.0) / 4
    assert x.first_mismatch.coordinate == (0, 1)
    assert (x.first_mismatch.reference, x.first_mismatch.candidate) == (2.0, 2.5)
    assert x.metrics.total == 4 and x.metrics.finite_pairs == 4
    i = result.observation("i")
    # Integers stay exact beyond 2**53.
    assert (i.first_mismatch.reference, i.first_mismatch.candidate) == (big + 1, big + 3)
    assert type(i.first_mismatch.reference) is int
    assert i.max_abs_error == 2.0 and i.metrics.compared_as == "integer"
    assert x.to_dict()["metrics"]["mismatch_count"] == 2


def test_value_summary_counts_every_class_of_element(tmp_path):
    values = torch.tensor([1.0, math.inf, -math.inf, math.nan, 0.0])
    run = record(tmp_path / "r", [("p", {"v": values}), ("q", {"v": values})])
    side = compare_points(run["p"], run["q"]).observation("v").reference
    s = side.summary
    assert type(s) is TensorValueSummary
    assert (s.numel, s.finite_count, s.nan_count, s.pos_inf_count, s.neg_inf_count) == (
        5,
        2,
        1,
        1,
        1,
    )
    assert s.zero_count == 1
    assert (s.min, s.max, s.mean, s.std, s.l2_norm) == (0.0, 1.0, 0.5, 0.5, 1.0)
    assert s.finite_count + s.nan_count + s.pos_inf_count + s.neg_inf_count == s.numel
    assert s.to_dict()["pos_inf_count"] == 1
    assert (side.dtype, side.shape, side.payload) == ("float32", (5,), "full")
    made = TensorValueSummary(
        numel=3,
        finite_count=2,
        nan_count=1,
        pos_inf_count=0,
        neg_inf_count=0,
        zero_count=1,
        min=0.0,
        max=2.0,
        mean=1.0,
        std=1.0,
        l2_norm=2.0,
    )
    assert made.numel == 3 and made == made
    with pytest.raises(InvalidInputError, match="== numel"):
        TensorValueSummary(
            numel=3, finite_count=1, nan_count=0, pos_inf_count=0, neg_inf_count=0, zero_count=0
        )


def test_statuses_and_assert_ok(tmp_path):
    a = record(tmp_path / "a", [("p", {"s": (torch.tensor([1.0, 2.0]), "summary")})])
    b = record(tmp_path / "b", [("p", {"s": (torch.tensor([1.0, 2.5]), "summary")})])
    open_ = compare_points(a["p"], b["p"])
    assert (open_.status, open_.ok, open_.conclusive) == ("inconclusive", False, False)
    assert open_.observation("s").kind == "summary"
    with pytest.raises(ComparisonFailedError, match="inconclusive"):
        open_.assert_ok()
    exact = compare_points(a["p"], b["p"], options=TensorComparisonOptions(mode="exact"))
    assert (exact.status, exact.conclusive) == ("mismatch", True)
    same = compare_points(a["p"], a["p"])
    assert (same.status, same.ok, same.first_issue) == ("match", True, None)
    same.assert_ok()


def test_limit_caps_rendered_rows_but_not_the_json(tmp_path):
    a = record(tmp_path / "a", [("p", {f"x{i}": torch.zeros(2) for i in range(6)})])
    b = record(tmp_path / "b", [("p", {f"x{i}": torch.ones(2) for i in range(6)})])
    result = compare_points(a["p"], b["p"], options=TensorComparisonOptions(limit=2))
    text = result.to_text()
    assert "x0[0]" in text and "x1[0]" in text and "x2[0]" not in text
    assert "4 more not shown (limit 2" in text
    assert "x5[0]" in result.to_text(limit=6)
    d = result.to_dict()
    assert len(d["points"][0]["observations"]) == 6
    assert len(result.observation_comparisons) == 6
    assert len(result.worst_observation_comparisons(3)) == 3
    with pytest.raises(InvalidInputError, match="n must be None or an integer"):
        result.worst_observation_comparisons(-1)


def test_include_unchanged_leaves_matches_out_of_text_and_html(tmp_path):
    a = record(tmp_path / "a", [("s0", {"same": torch.ones(2), "diff": torch.zeros(2)})])
    b = record(tmp_path / "b", [("s0", {"same": torch.ones(2), "diff": torch.ones(2)})])
    for result in (compare_points(a["s0"], b["s0"]), compare_runs(a, b)):
        text = result.to_text()
        assert "same[0]" in text and "diff[0]" in text
        changed = result.to_text(include_unchanged=False)
        assert "same[0]" not in changed and "diff[0]" in changed
        # The chart shows every observation; the table lists the rows asked for.
        table = result.to_html(include_unchanged=False).split('<table id="observations">')[1]
        assert "same[0]" not in table and "diff[0]" in table
        assert "same[0]" in result.to_html().split('<table id="observations">')[1]
        # JSON stays complete.
        assert len(result.to_dict()["points"][0]["observations"]) == 2
    out = compare_runs(a, b).write(tmp_path / "report", include_unchanged=False)
    assert "same[0]" not in (tmp_path / "report" / "report.txt").read_text()
    assert {p.name for p in out.values()} >= {"report.txt", "report.json", "report.html"}
    assert out["html"] == tmp_path / "report" / "report.html"


# ---------------------------------------------------------------------------- serialised


def test_every_option_is_kept_in_every_serialised_report(tmp_path):
    options = TensorComparisonOptions(**ALL_OPTIONS)
    run = record(tmp_path / "r", [("s0", {"x": torch.ones(2)}), ("s1", {"x": torch.ones(2)})])
    probe = TensorProbe("p", when="always")
    probe(torch.ones(3), name="x")
    snap = probe.snapshot()
    results = [
        compare_snapshots(snap, snap, options=options),
        compare_points(run["s0"], run["s1"], options=options),
        compare_runs(run, run, options=options),
        compare_point_series(run["s0"], run, options=options),
    ]
    for result in results:
        assert result.options == options
        assert result.to_dict()["options"] == ALL_OPTIONS
    for nested in results[2].point_comparisons + results[3].point_comparisons:
        assert nested.to_dict()["options"] == ALL_OPTIONS
        assert nested.options == options


def test_snapshot_comparison_is_a_sibling_of_the_point_comparison():
    probe = TensorProbe("p", when="always")
    probe(torch.tensor([1.0, 2.0]), name="x")
    before = probe.snapshot()
    probe(torch.tensor([1.0, 3.0]), name="x")
    after = probe.snapshot()
    result = compare_snapshots(before, after)
    assert type(result) is TensorSnapshotComparison
    assert not isinstance(result, TensorPointComparison)
    assert result.kind == "snapshots"
    assert (result.reference.snapshot_index, result.candidate.snapshot_index) == (0, 1)
    assert "point_comparison" not in result.to_dict()
    (x,) = result.observation_comparisons
    assert (x.status, x.first_mismatch.coordinate) == ("mismatch", (1,))
    assert probe.compare(before, after).to_dict() == result.to_dict()


# ---------------------------------------------------------------------- runs and series


def test_run_comparison_keeps_complete_point_comparisons(tmp_path):
    a = record(tmp_path / "a", [("s0", {"x": torch.ones(2)}), ("s1", {"x": torch.ones(2)})])
    b = record(tmp_path / "b", [("s0", {"x": torch.ones(2)}), ("s1", {"x": torch.zeros(2)})])
    result = compare_runs(a, b)
    assert type(result) is TensorRunComparison
    assert [type(p) for p in result.point_comparisons] == [TensorPointComparison] * 2
    assert [p.status for p in result.point_comparisons] == ["match", "mismatch"]
    s1 = result.point("s1")
    assert s1.position == 1 and s1.reference.label == "s1"
    assert s1.to_dict()["points"][0]["observations"][0]["status"] == "mismatch"
    assert s1.first_issue.observation.name == "x"
    # Run reports give their first issue as a (label, issue) pair.
    label, issue = result.first_issue
    assert (label, issue.name, issue.status) == ("s1", "x", "mismatch")
    assert (result.reference.kind, result.reference.points) == ("run", 2)
    with pytest.raises(KeyError, match="no compared point labelled 'nope'"):
        result.point("nope")


def test_point_series_comparison(tmp_path):
    points = [(f"step{i}", {"w": torch.full((2,), 1.0 + (i >= 2))}) for i in range(4)]
    run = record(tmp_path / "r", points)
    result = compare_point_series(run["step0"], run)
    assert type(result) is TensorPointSeriesComparison
    assert [p.status for p in result.point_comparisons] == [
        "match",
        "match",
        "mismatch",
        "mismatch",
    ]
    assert result.first_divergence.label == "step2"
    w = result.divergence_of("w")
    assert (w.status, w.first_mismatch.label, w.mismatched_points) == ("mismatch", "step2", 2)
    label, issue = result.first_issue
    assert (label, issue.name) == ("step2", "w")  # the candidate point's label
    assert result.first_issue.point.candidate.label == "step2"


# ------------------------------------------------------------------------------ groups


def test_run_group_comparison_pairs_ranks_with_run_comparisons(tmp_path):
    for root, ranks in (("ref", [0, 1]), ("cand", [0])):
        for rank in ranks:
            record(
                tmp_path / root,
                [("s0", {"x": torch.full((2,), float(rank))})],
                name="job",
                rank=rank,
                world_size=2,
            )
    ref = TensorRunGroup.load(tmp_path / "ref")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cand = TensorRunGroup.load(tmp_path / "cand")
    result = compare_run_groups(ref, cand)
    assert type(result) is TensorRunGroupComparison
    assert result.status == "inconclusive"
    r0, r1 = result.rank_comparisons
    assert type(r0) is TensorRankRunComparison
    assert (r0.rank, r0.status, r0.ok) == (0, "match", True)
    assert type(r0.comparison) is TensorRunComparison
    assert r0.comparison.status == "match" and len(r0.points) == 1
    assert (r1.rank, r1.status, r1.comparison, r1.points) == (1, "inconclusive", None, ())
    assert r1.reason == "rank 1 has no run in the candidate group"
    assert result.one_sided_ranks == (1,)
    assert result.first_issue.rank == 1 and result.first_issue.scope == "rank"
    assert result.rank(1).reason == r1.reason
    assert result.to_dict()["options"] == TensorComparisonOptions().to_dict()


def test_run_group_summary_lists_every_rank_point(tmp_path):
    points = [
        ("s0", {"x": torch.ones(2), "y": (torch.ones(3), "summary")}),
        ("s1", {"x": torch.ones(2)}),
    ]
    for rank in (0, 1):
        record(tmp_path / "job", points, name="job", rank=rank, world_size=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = TensorRunGroup.load(tmp_path / "job")
    summary = group.summary()
    assert type(summary) is TensorRunGroupSummary
    assert summary.group is group
    assert (summary.name, summary.world_size, summary.complete) == ("job", 3, False)
    assert (summary.ranks, summary.missing_ranks) == ((0, 1), (2,))
    assert any("rank 2 of world size 3 has no run" in w for w in summary.warnings)
    replay = group.run(0)["s0"].replay_index
    rows = [
        (
            r.rank,
            r.point_index,
            r.label,
            r.replay_index,
            r.observation_count,
            r.full_payload_count,
            r.summary_payload_count,
        )
        for r in summary.rank_points
    ]
    assert rows == [
        (0, 0, "s0", replay, 2, 1, 1),
        (0, 1, "s1", replay, 1, 1, 0),
        (1, 0, "s0", replay, 2, 1, 1),
        (1, 1, "s1", replay, 1, 1, 0),
    ]
    assert type(summary.rank_points[0]) is TensorRankPointSummary
    member = group.members[1]
    assert type(member) is tensor_debug.TensorRunGroupMember
    assert (member.rank, member.labels, member.complete) == (1, ("s0", "s1"), True)
    assert member.points == summary.rank_points[2:]
    d = summary.to_dict()
    assert d["missing_ranks"] == [2] and len(d["rank_points"]) == 4
    assert d["rank_points"][0] == {
        "rank": 0,
        "point_index": 0,
        "label": "s0",
        "replay_index": replay,
        "observation_count": 2,
        "full_payload_count": 1,
        "summary_payload_count": 1,
    }
    csv = summary.csv_tables()["rank_points.csv"].splitlines()
    assert csv[0].startswith(
        "rank,point_index,label,replay_index,observation_count,full_payload_count,"
        "summary_payload_count"
    )
    assert len(csv) == 5 and csv[1].startswith("0,0,s0,")
    text = summary.to_text()
    assert "rank points (4):" in text and "missing ranks: 2" in text
    assert "2 more not shown" in summary.to_text(limit=2)
    assert 'id="rank-points"' in summary.to_html()
    written = summary.write(tmp_path / "out")
    assert set(written) == {"text", "json", "html", "rank_points"}
    assert {p.name for p in written.values()} == {
        "summary.txt",
        "summary.json",
        "summary.html",
        "rank_points.csv",
    }
    with pytest.raises(FileExistsError):
        summary.write(tmp_path / "out")
    summary.write(tmp_path / "out", overwrite=True)
    assert (tmp_path / "out" / "summary.txt").read_text() == text
