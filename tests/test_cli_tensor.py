"""The `tcgd tensor ...` commands and `tcgd query`: output, --json, reports and exit codes
(0 match, 1 mismatch, 3 inconclusive, 2 error)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch
from torch_cudagraph_debug.cli import main, tensor_main
from torch_cudagraph_debug.tensor_debug import TensorRecorder


def record(path, values, *, rank=None, world_size=None, payload=None, name="m"):
    with TensorRecorder(name=name, run_dir=path, rank=rank, world_size=world_size) as rec:
        for label, x in values:
            with rec.record_point(label):
                rec.observe(x, name="x", payload=payload)
                rec.observe(torch.arange(3), name="ids")
    return rec.result


@pytest.fixture
def runs(tmp_path):
    record(tmp_path / "a", [("s0", torch.ones(4)), ("s1", torch.ones(4))])
    record(tmp_path / "b", [("s0", torch.ones(4)), ("s1", torch.tensor([1.0, 1.0, 9.0, 1.0]))])
    record(tmp_path / "s", [("s0", torch.ones(4))], payload="summary")
    record(tmp_path / "t", [("s0", torch.ones(4) * 2)], payload="summary")
    return tmp_path


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compare_runs_exit_codes_and_outputs(runs, capsys):
    code, out, _ = run_cli(capsys, "tensor", "compare-runs", str(runs / "a"), str(runs / "a"))
    assert code == 0 and "status:      match" in out
    code, out, _ = run_cli(capsys, "tensor", "compare-runs", str(runs / "a"), str(runs / "b"))
    assert code == 1
    assert "first at (2,): reference 1, candidate 9" in out
    code, out, _ = run_cli(
        capsys, "tensor", "compare-runs", str(runs / "s"), str(runs / "t"), "--json"
    )
    assert code == 3
    report = json.loads(out)
    assert report["status"] == "inconclusive" and report["conclusive"] is False
    code, out, _ = run_cli(
        capsys, "tensor", "compare-runs", str(runs / "s"), str(runs / "t"), "--mode", "exact"
    )
    assert code == 1
    code, _, err = run_cli(capsys, "tensor", "compare-runs", str(runs / "a"), str(runs / "nope"))
    assert code == 2 and "tcgd: error:" in err and "is not a job root" in err


def test_point_pairing_options(runs, capsys):
    a, b = str(runs / "a"), str(runs / "b")
    code, out, _ = run_cli(capsys, "tensor", "compare-runs", a, b, "--map", "s1=s0", "--json")
    assert code == 0
    points = json.loads(out)["points"]
    assert [(p["reference"]["label"], p["candidate"]["label"]) for p in points] == [("s1", "s0")]
    code, out, _ = run_cli(capsys, "tensor", "compare-runs", a, b, "--map", "#1=#1", "--json")
    assert code == 1 and len(json.loads(out)["points"]) == 1
    code, _, err = run_cli(capsys, "tensor", "compare-runs", a, b, "--map", "s1")
    assert code == 2 and "REF=CAND" in err
    code, _, _ = run_cli(capsys, "tensor", "compare-runs", a, b, "--by-index", "--rtol", "10")
    assert code == 0


def test_report_directory_and_overwrite(runs, capsys):
    out_dir = runs / "report"
    argv = ["tensor", "compare-runs", str(runs / "a"), str(runs / "b"), "--report", str(out_dir)]
    code, _, _ = run_cli(capsys, *argv)
    assert code == 1
    assert {p.name for p in out_dir.iterdir()} == {
        "report.txt",
        "report.json",
        "report.html",
        "observations.csv",
        "points.csv",
    }
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and "overwrite" in err
    code, _, _ = run_cli(capsys, *argv, "--overwrite")
    assert code == 1


def test_compare_points_and_series(runs, capsys):
    code, out, _ = run_cli(capsys, "tensor", "compare-points", str(runs / "b"), "s0", "s1")
    assert code == 1 and "observations (2, execution order)" in out
    code, out, _ = run_cli(
        capsys,
        "tensor",
        "compare-points",
        str(runs / "a"),
        "#0",
        "s0",
        "--candidate-run",
        str(runs / "b"),
    )
    assert code == 0
    code, _, err = run_cli(capsys, "tensor", "compare-points", str(runs / "a"), "zz", "s0")
    assert code == 2 and "no point 'zz'" in err
    code, out, _ = run_cli(
        capsys, "tensor", "compare-point-series", str(runs / "a"), "s0", str(runs / "b"), "--json"
    )
    assert code == 1
    series = json.loads(out)["series"]
    assert series["first_divergence"]["label"] == "s1"


def test_summary(runs, capsys):
    code, out, _ = run_cli(capsys, "tensor", "summary", str(runs / "b"))
    assert code == 0 and "point #1 's1'" in out and "x[0]" in out
    code, out, _ = run_cli(capsys, "tensor", "summary", str(runs / "b"), "--point", "s1", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["run"]["points"] == 2
    assert [p["label"] for p in data["points"]] == ["s1"]
    assert data["points"][0]["observations"][0]["summary"]["max"] == 9.0


def test_groups(tmp_path, capsys):
    for root, ranks in (("ref", (0, 1)), ("cand", (0,))):
        for rank in ranks:
            record(
                tmp_path / root, [("s0", torch.ones(2) * rank)], rank=rank, world_size=2, name="job"
            )
    code, out, _ = run_cli(capsys, "tensor", "group-summary", str(tmp_path / "cand"), "--json")
    assert code == 0
    summary = json.loads(out)
    assert summary["missing_ranks"] == [1] and summary["members"][0]["rank"] == 0
    code, out, _ = run_cli(capsys, "tensor", "group-summary", str(tmp_path / "cand"))
    assert code == 0 and "warning: rank 1 of world size 2 has no run" in out
    code, out, _ = run_cli(
        capsys, "tensor", "compare-run-groups", str(tmp_path / "ref"), str(tmp_path / "cand")
    )
    assert code == 3 and "rank 1 has no run in the candidate group" in out
    code, _, _ = run_cli(
        capsys, "tensor", "compare-run-groups", str(tmp_path / "ref"), str(tmp_path / "ref")
    )
    assert code == 0
    # The rank of every row comes from its run (the files hold none): as a column in queries.
    code, out, _ = run_cli(
        capsys,
        "query",
        "SELECT o.rank, r.rank AS run_rank, count(*) AS n FROM observations o "
        "JOIN runs r USING (run_id) GROUP BY ALL ORDER BY o.rank",
        str(tmp_path / "ref"),
        "--json",
    )
    assert code == 0
    assert json.loads(out) == [
        {"rank": 0, "run_rank": 0, "n": 2},
        {"rank": 1, "run_rank": 1, "n": 2},
    ]
    # A second job under another name shares the root; --name picks a group.
    record(tmp_path / "ref", [("s0", torch.ones(2))], rank=0, world_size=1, name="solo")
    code, _, err = run_cli(capsys, "tensor", "group-summary", str(tmp_path / "ref"))
    assert code == 2 and "runs named 'job', 'solo'" in err
    code, out, _ = run_cli(
        capsys, "tensor", "group-summary", str(tmp_path / "ref"), "--name", "solo", "--json"
    )
    assert code == 0 and json.loads(out)["name"] == "solo"
    code, _, _ = run_cli(
        capsys, "tensor", "compare-run-groups", str(tmp_path / "ref"), str(tmp_path / "cand"),
        "--name", "job",
    )  # fmt: skip
    assert code == 3


def test_query(runs, capsys):
    sql = "SELECT point_label, name, max FROM observations WHERE name = 'x' ORDER BY point_label"
    code, out, _ = run_cli(capsys, "query", sql, str(runs / "b"), "--json")
    assert code == 0
    assert json.loads(out) == [
        {"point_label": "s0", "name": "x", "max": 1.0},
        {"point_label": "s1", "name": "x", "max": 9.0},
    ]
    roots = [str(runs / root) for root in "abst"]
    code, out, _ = run_cli(
        capsys, "query", "SELECT name, count(*) AS n FROM runs GROUP BY name", *roots
    )
    assert code == 0
    assert [line.split() for line in out.splitlines()] == [["name", "n"], ["m", "4"]]
    code, out, _ = run_cli(capsys, "query", "SELECT count(*) AS n FROM runs", *roots, "--json")
    assert json.loads(out) == [{"n": 4}]
    code, _, err = run_cli(capsys, "query", "SELECT nope FROM points", str(runs / "a"))
    assert code == 2 and "query failed" in err
    # Arguments are job roots: a directory above them is not searched.
    code, _, err = run_cli(capsys, "query", "SELECT 1", str(runs))
    assert code == 2 and "is not a job root" in err
    code, _, err = run_cli(capsys, "query", "SELECT 1", str(runs / "missing"))
    assert code == 2 and "is not a job root" in err


def test_runs_sharing_one_root_are_chosen_by_name_and_rank(tmp_path, capsys):
    root = tmp_path / "job"
    record(root, [("s0", torch.ones(4)), ("s1", torch.ones(4))], name="eager")
    record(
        root, [("s0", torch.ones(4)), ("s1", torch.tensor([1.0, 9.0, 1.0, 1.0]))], name="compiled"
    )
    code, out, _ = run_cli(
        capsys, "query", "SELECT name, point_count FROM runs ORDER BY name", str(root), "--json"
    )
    assert json.loads(out) == [
        {"name": "compiled", "point_count": 2},
        {"name": "eager", "point_count": 2},
    ]
    # Without a name the choice is ambiguous, and the error says how to make it.
    code, _, err = run_cli(capsys, "tensor", "summary", str(root))
    assert code == 2 and "--name/--rank" in err
    code, out, _ = run_cli(capsys, "tensor", "summary", str(root), "--name", "compiled", "--json")
    assert code == 0 and json.loads(out)["run"]["name"] == "compiled"
    compare = ["tensor", "compare-runs", str(root), str(root), "--name", "eager"]
    code, out, _ = run_cli(capsys, *compare, "--candidate-name", "compiled")
    assert code == 1 and "first at (1,): reference 1, candidate 9" in out
    code, _, _ = run_cli(capsys, *compare)  # the candidate's name defaults to --name
    assert code == 0
    code, _, _ = run_cli(
        capsys, "tensor", "compare-points", str(root), "s1", "s1",
        "--name", "eager", "--candidate-name", "compiled",
    )  # fmt: skip
    assert code == 1
    code, out, _ = run_cli(
        capsys, "tensor", "compare-point-series", str(root), "s0",
        "--name", "eager", "--candidate-name", "compiled", "--json",
    )  # fmt: skip
    assert code == 1 and json.loads(out)["series"]["first_divergence"]["label"] == "s1"
    code, _, err = run_cli(capsys, "tensor", "summary", str(root), "--name", "nope")
    assert code == 2 and "'nope'" in err


def test_progress_line_on_request(runs, capsys):
    code, _, err = run_cli(
        capsys, "tensor", "compare-runs", str(runs / "a"), str(runs / "b"), "--progress"
    )
    assert code == 1
    assert "[tcgd] comparing" in err and "100.0%" in err


def test_tcgd_tensor_alias_and_entry_point(runs, capsys):
    assert tensor_main(["compare-runs", str(runs / "a"), str(runs / "a")]) == 0
    capsys.readouterr()
    exe = shutil.which("tcgd-tensor") or shutil.which("tcgd-tensor", path=sys.prefix + "/bin")
    if exe is None:
        pytest.skip("the tcgd-tensor script is not installed in this environment")
    done = subprocess.run(
        [exe, "compare-runs", str(runs / "a"), str(runs / "b"), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["status"] == "mismatch"
