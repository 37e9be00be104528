"""`tcgd-tensor` as the reference design documents it: its commands, their arguments and
defaults, the comparison flags, `--output` / `--overwrite`, and its exit statuses (0 match,
1 mismatch or inconclusive, 2 invalid input or an operational error). `tcgd tensor` keeps
its own statuses (3 for inconclusive); both are checked where they differ."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
import torch
from processes import head_of
from torch_cudagraph_debug.cli import main, tensor_main
from torch_cudagraph_debug.tensor_debug import TensorRecorder


def record(path, points, *, name="m", payload="full", rank=None, world_size=None):
    """A run in `path`: `points` is [(label, {observation name: tensor})]."""
    with TensorRecorder(
        name=name,
        run_dir=path,
        payload=payload,
        rank=rank,
        world_size=world_size,
        non_contiguous="copy",
    ) as rec:
        for label, values in points:
            with rec.record_point(label):
                for key, value in values.items():
                    rec.observe(value, name=key)
    return path


def ones(*extra):
    return {"x": torch.ones(4), **dict(extra)}


@pytest.fixture
def runs(tmp_path):
    """`a` and `b` differ at their second point, whose label also differs (s1 / t1)."""
    record(tmp_path / "a", [("s0", ones()), ("s1", ones()), ("s2", ones())])
    changed = {"x": torch.tensor([1.0, 1.0, 9.0, 1.0])}
    record(tmp_path / "b", [("s0", ones()), ("t1", changed), ("s2", ones())])
    # Same values as `a` under `b`'s labels: a --point-map from a to it matches.
    record(tmp_path / "c", [("s0", ones()), ("t1", ones()), ("s2", ones())])
    return tmp_path


def tcgd_tensor(capsys, *argv):
    code = tensor_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def tcgd(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------- summary
def test_summary_prints_state_points_payload_and_each_points_counts(tmp_path, capsys):
    root = tmp_path / "run"
    with TensorRecorder(name="m", run_dir=root, payload="summary") as rec:
        with rec.record_point("warmup"):
            rec.observe(torch.ones(3), name="x")
            rec.observe(torch.ones(3), name="y", payload="full")
        with rec.record_point("step"):
            rec.observe(torch.ones(3), name="x")
    code, out, err = tcgd_tensor(capsys, "summary", root)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "run 'm' (eager, rank 0 of 1, complete)"
    assert "  2 points; default payload summary" in lines
    assert "point #0 'warmup' (eager): 2 observations (1 full, 1 summary)" in lines
    assert "point #1 'step' (eager): 1 observation (0 full, 1 summary)" in lines
    code, out, _ = tcgd_tensor(capsys, "summary", root, "--json")
    data = json.loads(out)
    assert data["run"]["default_payload"] == "summary"
    assert [
        (p["observation_count"], p["full_payloads"], p["summary_payloads"], p["replay_index"])
        for p in data["points"]
    ] == [(2, 1, 1, None), (1, 0, 1, None)]


def test_summary_of_an_interrupted_run_says_incomplete(tmp_path, capsys):
    root = tmp_path / "crashed"
    with pytest.raises(RuntimeError), TensorRecorder(name="m", run_dir=root) as rec:
        with rec.record_point("s0"):
            rec.observe(torch.ones(2), name="x")
        raise RuntimeError("the training step failed")
    code, out, _ = tcgd_tensor(capsys, "summary", root)
    assert code == 0
    assert out.splitlines()[0] == "run 'm' (eager, rank 0 of 1, INCOMPLETE)"
    assert "  1 points; default payload full" in out.splitlines()


def test_summary_takes_no_output_directory(runs, capsys, tmp_path):
    with pytest.raises(SystemExit) as done:
        tensor_main(["summary", str(runs / "a"), "--output", str(tmp_path / "r")])
    assert done.value.code == 2
    assert "unrecognized arguments: --output" in capsys.readouterr().err


# ---------------------------------------------------------------------- compare-points
def test_compare_points_with_point_flags_across_two_bundles(runs, capsys):
    a, b = runs / "a", runs / "b"
    code, out, _ = tcgd_tensor(
        capsys, "compare-points", a, b, "--reference-point", "s0", "--candidate-point", "s0"
    )
    assert code == 0 and "status:      match" in out
    code, out, _ = tcgd_tensor(
        capsys, "compare-points", a, b, "--reference-point", "s1", "--candidate-point", "t1"
    )
    assert code == 1
    assert "first at (2,): reference 1, candidate 9" in out


def test_compare_points_without_a_candidate_reuses_the_reference(runs, capsys):
    code, out, _ = tcgd_tensor(
        capsys,
        "compare-points",
        runs / "b",
        "--reference-point",
        "s0",
        "--candidate-point",
        "t1",
        "--json",
    )
    assert code == 1
    report = json.loads(out)
    assert report["status"] == "mismatch"
    assert report["reference"]["name"] == "s0" and report["candidate"]["name"] == "t1"


def test_compare_points_needs_both_point_flags(runs, capsys):
    code, _, err = tcgd_tensor(capsys, "compare-points", runs / "a", "--reference-point", "s0")
    assert code == 2
    assert (
        err
        == "tcgd: error: compare-points needs --reference-point LABEL and --candidate-point LABEL\n"
    )
    code, _, err = tcgd_tensor(capsys, "compare-points", runs / "a")
    assert code == 2 and "--reference-point LABEL --candidate-point LABEL" in err
    code, _, err = tcgd_tensor(
        capsys, "compare-points", runs / "a", runs / "b", runs / "c",
        "--reference-point", "s0", "--candidate-point", "s0",
    )  # fmt: skip
    assert code == 2 and "takes REFERENCE [CANDIDATE], got 3 paths" in err


def test_compare_points_keeps_the_positional_point_spelling(runs, capsys):
    code, _, _ = tcgd_tensor(capsys, "compare-points", runs / "b", "s0", "t1")
    assert code == 1
    code, _, _ = tcgd_tensor(
        capsys, "compare-points", runs / "a", "#0", "s0", "--candidate-run", runs / "b"
    )
    assert code == 0


# ------------------------------------------------------------------------ compare-runs
def test_compare_runs_point_map_pairs_the_rest_by_label(runs, capsys):
    code, out, err = tcgd_tensor(
        capsys, "compare-runs", runs / "a", runs / "b", "--point-map", "s1=t1", "--json"
    )
    assert code == 1 and err == ""
    pairs = [(p["reference"]["label"], p["candidate"]["label"]) for p in json.loads(out)["points"]]
    assert pairs == [("s0", "s0"), ("s1", "t1"), ("s2", "s2")]
    code, out, err = tcgd_tensor(
        capsys, "compare-runs", runs / "a", runs / "c", "--point-map", "s1=t1"
    )
    assert code == 0 and "status:      match" in out and err == ""
    # Without the map the labels that differ are one-sided: a mismatch.
    code, out, _ = tcgd_tensor(capsys, "compare-runs", runs / "a", runs / "c")
    assert code == 1 and "'t1' (candidate only)" in out


def test_compare_runs_point_map_reports_points_left_without_a_partner(runs, capsys):
    code, out, err = tcgd_tensor(
        capsys, "compare-runs", runs / "a", runs / "c", "--point-map", "s0=s0"
    )
    assert code == 1
    assert (
        "points without a partner (--point-map; not compared): reference only: ['s1']; "
        "candidate only: ['t1']"
    ) in out
    assert "status with them: MISMATCH" in out
    assert err.startswith("tcgd: warning: --point-map left points without a partner")


def test_compare_runs_point_map_rejects_unknown_labels_and_bad_pairs(runs, capsys):
    a, b = runs / "a", runs / "b"
    code, _, err = tcgd_tensor(capsys, "compare-runs", a, b, "--point-map", "zz=t1")
    assert code == 2
    assert "--point-map: the reference run has no point 'zz'; its labels are" in err
    code, _, err = tcgd_tensor(capsys, "compare-runs", a, b, "--point-map", "s1")
    assert code == 2 and "--point-map takes REF=CAND, got 's1'" in err
    # --map (compare exactly these pairs) and --point-map cannot be combined.
    with pytest.raises(SystemExit) as done:
        tensor_main(["compare-runs", str(a), str(b), "--point-map", "s1=t1", "--map", "s0=s0"])
    assert done.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


# ---------------------------------------------------------------- compare-point-series
def test_compare_point_series_with_reference_point_flag(runs, capsys):
    code, out, _ = tcgd_tensor(
        capsys, "compare-point-series", runs / "a", runs / "b", "--reference-point", "s0",
        "--json",
    )  # fmt: skip
    assert code == 1
    assert json.loads(out)["series"]["first_divergence"]["label"] == "t1"
    # The candidate left out: the reference's own run is the series.
    code, out, _ = tcgd_tensor(
        capsys, "compare-point-series", runs / "a", "--reference-point", "s0", "--json"
    )
    assert code == 0
    assert json.loads(out)["series"]["first_divergence"] is None
    code, out, _ = tcgd_tensor(
        capsys, "compare-point-series", runs / "b", "--reference-point", "s0"
    )
    assert code == 1 and "first divergence: 't1'" in out
    # This CLI's positional spelling still works.
    code, _, _ = tcgd_tensor(capsys, "compare-point-series", runs / "a", "s0", runs / "b")
    assert code == 1


# ---------------------------------------------------------------------- run groups
@pytest.fixture
def groups(tmp_path):
    for root, late in (("g1", "s1"), ("g2", "t1")):
        for rank in (0, 1):
            record(
                tmp_path / root,
                [("s0", {"x": torch.ones(2) * rank}), (late, {"x": torch.ones(2)})],
                name="job",
                payload="summary" if rank else "full",
                rank=rank,
                world_size=2,
            )
    return tmp_path


def test_group_summary_output_writes_rank_points(groups, capsys):
    out_dir = groups / "report"
    code, out, _ = tcgd_tensor(capsys, "group-summary", groups / "g1", "--output", out_dir)
    assert code == 0 and out.startswith("run group 'job' at ")
    written = {p.name for p in out_dir.iterdir()}
    assert {"rank_points.csv", "summary.json", "summary.txt"} <= written
    assert "2 of 2 ranks" in (out_dir / "summary.txt").read_text()
    lines = (out_dir / "rank_points.csv").read_text().splitlines()
    assert lines[0].split(",")[:7] == [
        "rank",
        "point_index",
        "label",
        "replay_index",
        "observation_count",
        "full_payload_count",
        "summary_payload_count",
    ]
    # Rank 1 recorded summaries only.
    assert [line.split(",")[:7] for line in lines[1:]] == [
        ["0", "0", "s0", "", "1", "1", "0"],
        ["0", "1", "s1", "", "1", "1", "0"],
        ["1", "0", "s0", "", "1", "0", "1"],
        ["1", "1", "s1", "", "1", "0", "1"],
    ]
    data = json.loads((out_dir / "summary.json").read_text())
    assert data["name"] == "job" and len(data["rank_points"]) == 4


def rerun_needs_overwrite(capsys, argv: list, out_dir, hint: str) -> int:
    """Running ``argv`` again into its non-empty report directory ``out_dir`` is refused
    (exit 2, nothing on stdout, an error naming the directory and ``hint``); returns the
    exit code of the run with --overwrite added."""
    code, out, err = tcgd_tensor(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith(f"tcgd: error: report directory '{out_dir}' is not empty")
    assert hint in err
    return tcgd_tensor(capsys, *argv, "--overwrite")[0]


def test_group_summary_output_twice_needs_overwrite(groups, capsys):
    out_dir = groups / "report"
    argv = ["group-summary", groups / "g1", "--output", out_dir]
    assert tcgd_tensor(capsys, *argv)[0] == 0
    (out_dir / "notes.md").write_text("mine")
    assert rerun_needs_overwrite(capsys, argv, out_dir, "--overwrite") == 0
    # Only the summary's own files are replaced.
    assert (out_dir / "notes.md").read_text() == "mine"


def test_compare_run_groups_with_point_map(groups, capsys):
    g1, g2 = groups / "g1", groups / "g2"
    code, out, _ = tcgd_tensor(capsys, "compare-run-groups", g1, g2, "--point-map", "s1=t1")
    assert code == 0 and "status:      match" in out
    code, _, _ = tcgd_tensor(capsys, "compare-run-groups", g1, g2)
    assert code == 1
    out_dir = groups / "cmp"
    code, _, _ = tcgd_tensor(
        capsys, "compare-run-groups", g1, g2, "--point-map", "s1=t1", "--output", out_dir
    )
    assert code == 0 and (out_dir / "rank_comparisons.csv").is_file()


# ------------------------------------------------------------------ comparison flags
def test_mode_exact_decides_what_allclose_leaves_inconclusive(tmp_path, capsys):
    ref = record(tmp_path / "s", [("s0", {"x": torch.ones(4)})], payload="summary")
    cand = record(tmp_path / "t", [("s0", {"x": torch.ones(4) * 2})], payload="summary")
    # Different digests of summary-only payloads: allclose cannot decide.
    code, out, _ = tcgd_tensor(capsys, "compare-runs", ref, cand)
    assert code == 1 and "status:      INCONCLUSIVE" in out
    code, out, _ = tcgd_tensor(capsys, "compare-runs", ref, cand, "--mode", "exact")
    assert code == 1 and "status:      MISMATCH" in out
    with pytest.raises(SystemExit) as done:
        tensor_main(["compare-runs", str(ref), str(cand), "--mode", "close"])
    assert done.value.code == 2
    assert "invalid choice: 'close'" in capsys.readouterr().err


def test_rtol_and_atol(tmp_path, capsys):
    ref = record(tmp_path / "r", [("s0", {"x": torch.full((4,), 100.0)})])
    cand = record(tmp_path / "c", [("s0", {"x": torch.full((4,), 100.01)})])
    assert tcgd_tensor(capsys, "compare-runs", ref, cand)[0] == 1
    assert tcgd_tensor(capsys, "compare-runs", ref, cand, "--rtol", "1e-3")[0] == 0
    assert tcgd_tensor(capsys, "compare-runs", ref, cand, "--atol", "0.1")[0] == 0
    code, _, err = tcgd_tensor(capsys, "compare-runs", ref, cand, "--rtol", "-1")
    assert code == 2 and err.startswith("tcgd: error: --rtol must be")


def test_equal_nan(tmp_path, capsys):
    nan = torch.tensor([1.0, float("nan")])
    ref = record(tmp_path / "r", [("s0", {"x": nan})])
    cand = record(tmp_path / "c", [("s0", {"x": nan.clone()})])
    assert tcgd_tensor(capsys, "compare-runs", ref, cand)[0] == 1
    assert tcgd_tensor(capsys, "compare-runs", ref, cand, "--equal-nan")[0] == 0


def test_promote_dtypes_is_dtype_policy_promote(tmp_path, capsys):
    ref = record(tmp_path / "r", [("s0", {"x": torch.ones(4)})])
    cand = record(tmp_path / "c", [("s0", {"x": torch.ones(4, dtype=torch.float64)})])
    code, out, _ = tcgd_tensor(capsys, "compare-runs", ref, cand)
    assert code == 1
    code, out, _ = tcgd_tensor(capsys, "compare-runs", ref, cand, "--promote-dtypes")
    assert code == 0 and "dtype_policy=promote" in out
    code, same, _ = tcgd_tensor(capsys, "compare-runs", ref, cand, "--dtype-policy", "promote")
    assert code == 0 and same == out


def test_ignore_layout_is_layout_policy_ignore(tmp_path, capsys):
    ref = record(tmp_path / "r", [("s0", {"x": torch.ones(2, 3)})])
    cand = record(tmp_path / "c", [("s0", {"x": torch.ones(3, 2).t()})])
    assert tcgd_tensor(capsys, "compare-runs", ref, cand)[0] == 1
    code, out, _ = tcgd_tensor(capsys, "compare-runs", ref, cand, "--ignore-layout")
    assert code == 0 and "layout_policy=ignore" in out
    assert tcgd_tensor(capsys, "compare-runs", ref, cand, "--layout-policy", "ignore")[0] == 0


def test_limit_caps_the_rows_of_each_table(tmp_path, capsys):
    many = {f"v{i}": torch.ones(2) for i in range(5)}
    ref = record(tmp_path / "r", [("s0", many)])
    cand = record(tmp_path / "c", [("s0", {k: v * 2 for k, v in many.items()})])
    code, out, _ = tcgd_tensor(capsys, "compare-runs", ref, cand, "--limit", "2")
    assert code == 1
    rows = [line for line in out.splitlines() if re.match(r"  's0' +v\d\[0\] +MISMATCH", line)]
    assert len(rows) == 2
    assert "  ... 3 more not shown (limit 2" in out


def test_only_changed_leaves_matching_rows_out(runs, capsys):
    code, full, _ = tcgd_tensor(
        capsys, "compare-runs", runs / "a", runs / "b", "--point-map", "s1=t1"
    )
    assert code == 1 and "  's0'  " in full
    code, out, _ = tcgd_tensor(
        capsys, "compare-runs", runs / "a", runs / "b", "--point-map", "s1=t1", "--only-changed"
    )
    assert code == 1
    assert "  's0'  " not in out and "  's2'  " not in out
    assert "  's1' vs 't1'  MISMATCH" in out
    # The header still counts the whole comparison.
    assert "3 points: 2 match, 1 mismatch, 0 inconclusive" in out


# ----------------------------------------------------------------- --output, --overwrite
@pytest.mark.parametrize("flag", ["--output", "--report"])
def test_output_directory_twice_needs_overwrite(runs, capsys, flag):
    out_dir = runs / "report"
    argv = ["compare-runs", runs / "a", runs / "b", "--point-map", "s1=t1", flag, out_dir]
    code, _, _ = tcgd_tensor(capsys, *argv)
    assert code == 1
    written = sorted(p.name for p in out_dir.iterdir())
    assert written == ["observations.csv", "points.csv", "report.html", "report.json", "report.txt"]
    assert rerun_needs_overwrite(capsys, argv, out_dir, "(--overwrite)") == 1
    assert json.loads((out_dir / "report.json").read_text())["status"] == "mismatch"


def test_compare_points_and_series_write_output(runs, capsys):
    out_dir = runs / "points-report"
    code, _, _ = tcgd_tensor(
        capsys, "compare-points", runs / "a", "--reference-point", "s0",
        "--candidate-point", "s1", "--output", out_dir,
    )  # fmt: skip
    assert code == 0 and (out_dir / "report.json").is_file()
    series_dir = runs / "series-report"
    code, _, _ = tcgd_tensor(
        capsys, "compare-point-series", runs / "a", runs / "b", "--reference-point", "s0",
        "--output", series_dir,
    )  # fmt: skip
    assert code == 1 and (series_dir / "divergence.csv").is_file()


# ---------------------------------------------------------------------- exit statuses
def test_inconclusive_is_1_for_tcgd_tensor_and_3_for_tcgd_tensor_subcommand(tmp_path, capsys):
    ref = record(tmp_path / "s", [("s0", {"x": torch.ones(4)})], payload="summary")
    cand = record(tmp_path / "t", [("s0", {"x": torch.ones(4) * 2})], payload="summary")
    assert tcgd_tensor(capsys, "compare-runs", ref, cand)[0] == 1
    assert tcgd(capsys, "tensor", "compare-runs", ref, cand)[0] == 3
    # The same for every comparison command of each.
    args = ["--reference-point", "s0", "--candidate-point", "s0"]
    assert tcgd_tensor(capsys, "compare-points", ref, cand, *args)[0] == 1
    assert tcgd(capsys, "tensor", "compare-points", ref, cand, *args)[0] == 3
    series = ["compare-point-series", ref, cand, "--reference-point", "s0"]
    assert tcgd_tensor(capsys, *series)[0] == 1
    assert tcgd(capsys, "tensor", *series)[0] == 3


def test_match_is_0_and_mismatch_is_1(runs, capsys):
    assert tcgd_tensor(capsys, "compare-runs", runs / "a", runs / "a")[0] == 0
    assert tcgd_tensor(capsys, "compare-runs", runs / "a", runs / "b")[0] == 1
    assert tcgd(capsys, "tensor", "compare-runs", runs / "a", runs / "b")[0] == 1


def test_wrong_path_is_2(runs, capsys):
    code, out, err = tcgd_tensor(capsys, "compare-runs", runs / "a", runs / "nope")
    assert code == 2 and out == ""
    assert err.startswith("tcgd: error:") and "is not a job root" in err
    code, _, err = tcgd_tensor(capsys, "summary", runs / "nope")
    assert code == 2 and "is not a job root" in err
    code, _, err = tcgd_tensor(capsys, "group-summary", runs / "nope")
    assert code == 2 and err.startswith("tcgd: error:")


def test_malformed_run_is_2(runs, capsys):
    parts = sorted((runs / "b" / "observations").rglob("*.parquet"))
    assert parts
    data = parts[0].read_bytes()
    parts[0].write_bytes(data[: len(data) // 2])
    code, out, err = tcgd_tensor(capsys, "compare-runs", runs / "a", runs / "b")
    assert code == 2 and out == ""
    assert err.startswith("tcgd: error:") and len(err.splitlines()) == 1


def test_unknown_point_and_bad_flag_are_2(runs, capsys):
    code, _, err = tcgd_tensor(
        capsys, "compare-points", runs / "a", "--reference-point", "zz", "--candidate-point", "s0"
    )
    assert code == 2 and "has no point 'zz'" in err
    with pytest.raises(SystemExit) as done:
        tensor_main(["compare-runs", str(runs / "a"), str(runs / "b"), "--no-such-flag"])
    assert done.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_help_states_the_reference_exit_statuses(capsys):
    with pytest.raises(SystemExit) as done:
        tensor_main(["--help"])
    assert done.value.code == 0
    assert "1 mismatch or inconclusive, 2 error" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "1 mismatch, 3 inconclusive, 2 error" in capsys.readouterr().out


def test_closed_stdout_ends_quietly(tmp_path):
    big = {f"v{i}": torch.full((4,), float(i)) for i in range(60)}
    root = record(tmp_path / "big", [(f"s{p}", big) for p in range(30)], payload="summary")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    lines, err, code = head_of(
        [
            sys.executable,
            "-c",
            "import sys; from torch_cudagraph_debug.cli import tensor_main; "
            "sys.exit(tensor_main())",
            "summary",
            str(root),
            "--limit",
            "100",
        ],
        env=env,
    )
    assert lines == ["run 'm' (eager, rank 0 of 1, complete)"]
    assert err == ""
    # SIGPIPE's code, not 0 or 1: a cut-off report must not read as a verdict.
    assert code == 141
