"""What a new user meets first on the command line: a comparison that compared nothing is
inconclusive (never a match), a wrong path fails before torch is imported, and a bad flag
names the subcommand's usage."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
from torch_cudagraph_debug.cli import main, memory_main, tensor_main
from torch_cudagraph_debug.errors import MissingDependencyError
from torch_cudagraph_debug.tensor_debug import (
    TensorRecorder,
    TensorRun,
    TensorRunGroup,
    compare_point_series,
    compare_points,
    compare_run_groups,
    compare_runs,
)

NOTHING = (
    "nothing was compared: none of the 3 point pairs holds an observation on either side; a "
    "match needs at least one observation compared (were the probes or observe() calls "
    "reached?)"
)


def points_without_observations(path, *, rank=None, world_size=None):
    """A run of three points in which nothing was observed (probes never reached)."""
    with TensorRecorder(name="m", run_dir=path, rank=rank, world_size=world_size) as rec:
        for label in ("s0", "s1", "s2"):
            with rec.record_point(label):
                pass
    return path


# ------------------------------------------------------- nothing compared is no match
def test_runs_without_observations_compare_inconclusive_through_the_api(tmp_path):
    a = TensorRun.load(points_without_observations(tmp_path / "a"))
    b = TensorRun.load(points_without_observations(tmp_path / "b"))
    result = compare_runs(a, b)
    assert (result.status, result.ok, result.conclusive) == ("inconclusive", False, False)
    assert (result.counts.total, result.point_counts.total) == (0, 3)
    issue = result.first_issue
    assert (issue.scope, issue.status, issue.label, issue.point) == (
        "comparison",
        "inconclusive",
        None,
        None,
    )
    assert issue.description == NOTHING
    text = result.to_text()
    assert re.search(r"^status: +INCONCLUSIVE$", text, flags=re.MULTILINE), text
    assert re.search(rf"^first issue: +{re.escape(NOTHING)}$", text, flags=re.MULTILINE), text
    assert json.loads(result.to_json())["status"] == "inconclusive"

    point = compare_points(a["s0"], b["s1"])
    assert (point.status, point.first_issue.description) == (
        "inconclusive",
        NOTHING.replace("none of the 3 point pairs holds", "neither point holds").replace(
            " on either side", ""
        ),
    )
    assert compare_point_series(a["s0"], b).status == "inconclusive"


def test_run_groups_without_observations_compare_inconclusive(tmp_path):
    for root in ("a", "b"):
        for rank in (0, 1):
            points_without_observations(tmp_path / root, rank=rank, world_size=2)
    groups = [TensorRunGroup.load(tmp_path / root) for root in ("a", "b")]
    result = compare_run_groups(*groups)
    assert result.status == "inconclusive"
    assert [r.status for r in result.rank_comparisons] == ["inconclusive", "inconclusive"]
    assert result.first_issue.description == f"rank 0: {NOTHING}"


@pytest.mark.parametrize(
    ("entry", "prefix", "code"),
    [(main, ["tensor"], 3), (tensor_main, [], 1)],
    ids=["tcgd", "tcgd-tensor"],
)
def test_cli_comparisons_of_nothing_exit_inconclusive(tmp_path, capsys, entry, prefix, code):
    a = str(points_without_observations(tmp_path / "a"))
    b = str(points_without_observations(tmp_path / "b"))
    for argv in (
        ["compare-runs", a, b],
        ["compare-points", a, "s0", "s1", "--candidate-run", b],
        ["compare-point-series", a, "s0", b],
    ):
        assert entry([*prefix, *argv]) == code, argv
        out = capsys.readouterr().out
        assert re.search(r"^status: +INCONCLUSIVE$", out, flags=re.MULTILINE), out
        assert re.search(r"^compared: +0 observations: ", out, flags=re.MULTILINE), out
        assert re.search(r"^first issue: +nothing was compared: ", out, flags=re.MULTILINE), out


# ---------------------------------------------- paths are checked before torch loads
def _missing(tmp_path):
    return str(tmp_path / "nosuch")


COMMANDS = {
    "tensor summary": lambda m: ["tensor", "summary", m],
    "tensor compare-runs": lambda m: ["tensor", "compare-runs", m, m],
    "tensor compare-points": lambda m: ["tensor", "compare-points", m, "a", "b"],
    "tensor compare-point-series": lambda m: ["tensor", "compare-point-series", m, "a"],
    "tensor group-summary": lambda m: ["tensor", "group-summary", m],
    "tensor compare-run-groups": lambda m: ["tensor", "compare-run-groups", m, m],
    "tensor first-anomaly": lambda m: ["tensor", "first-anomaly", m],
    "memory summary": lambda m: ["memory", "summary", m],
    "memory timeline": lambda m: ["memory", "timeline", m],
    "memory compare-points": lambda m: ["memory", "compare-points", m, "a", "b"],
    "memory compare-phases": lambda m: ["memory", "compare-phases", m, "a", "b", "c", "d"],
    "memory group-summary": lambda m: ["memory", "group-summary", m],
    "memory export-viz": lambda m: ["memory", "export-viz", m, "a", m + ".pickle"],
    "memory import": lambda m: ["memory", "import", m + ".pickle", "--run", m],
    "memory allocation-lifetimes": lambda m: ["memory", "allocation-lifetimes", m],
    "query": lambda m: ["query", "select 1", m],
    "validate": lambda m: ["validate", m],
    "compact": lambda m: ["compact", m],
    "explain (config)": lambda m: ["explain", m + ".toml", m + ".py"],
    "differential (config)": lambda m: ["differential", m + ".toml", m + ".py:f", "--run-dir", m],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_missing_path_fails_before_torch_is_imported(tmp_path, command):
    missing = _missing(tmp_path)
    argv = COMMANDS[command](missing)
    probe = textwrap.dedent(
        """
        import sys
        from torch_cudagraph_debug.cli import main
        code = main(sys.argv[1:])
        print(code, "torch" in sys.modules, file=sys.stderr)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TCGD_DEBUG": ""},
    )
    *errors, verdict = done.stderr.splitlines()
    assert verdict == "2 False", done.stderr
    assert len(errors) == 1 and errors[0].startswith("tcgd: error: "), done.stderr
    assert "nosuch" in errors[0], errors[0]


def test_explain_and_differential_check_the_script_before_torch(tmp_path):
    config = tmp_path / "probes.toml"
    config.write_text('version = 1\n[[select]]\nops = ["aten.addmm"]\n')
    probe = (
        "import sys\nfrom torch_cudagraph_debug.cli import main\n"
        "print(main(sys.argv[1:]), 'torch' in sys.modules, file=sys.stderr)\n"
    )
    for argv in (
        ["explain", str(config), str(tmp_path / "nosuch.py")],
        ["differential", str(config), f"{tmp_path / 'nosuch.py'}:f", "--run-dir", "r"],
    ):
        done = subprocess.run(
            [sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120
        )
        error, verdict = done.stderr.splitlines()
        assert verdict == "2 False", done.stderr
        assert "nosuch.py" in error and "does not exist" in error, error


# ------------------------------------------- a bad flag names the subcommand's --help
@pytest.mark.parametrize(
    ("entry", "argv", "prog"),
    [
        (main, ["tensor", "compare-runs", "a", "b", "--bogus"], "tcgd tensor compare-runs"),
        (main, ["tensor", "summary", "--bogus", "a"], "tcgd tensor summary"),
        (main, ["tensor", "first-anomaly", "a", "--bogus"], "tcgd tensor first-anomaly"),
        (main, ["memory", "timeline", "a", "--bogus"], "tcgd memory timeline"),
        (main, ["memory", "import", "x.pickle", "--run", "r", "--bogus"], "tcgd memory import"),
        (main, ["query", "select 1", "a", "--bogus"], "tcgd query"),
        (main, ["validate", "a", "--bogus"], "tcgd validate"),
        (main, ["compact", "a", "--bogus"], "tcgd compact"),
        (main, ["differential", "c", "f:g", "--run-dir", "r", "--bogus"], "tcgd differential"),
        (main, ["tensor", "--bogus", "summary", "a"], "tcgd tensor"),
        (main, ["--bogus", "tensor", "summary", "a"], "tcgd"),
        (tensor_main, ["compare-runs", "a", "b", "--bogus"], "tcgd-tensor compare-runs"),
        (memory_main, ["summary", "a", "--bogus"], "tcgd-memory summary"),
    ],
)
def test_an_unknown_flag_names_the_subcommands_help(capsys, entry, argv, prog):
    with pytest.raises(SystemExit) as done:
        entry(argv)
    assert done.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"{prog}: error: unrecognized arguments: --bogus (see {prog} --help)\n"


# ------------------------------------------------------- to_pandas without pandas
def test_to_pandas_without_pandas_says_what_to_install(tmp_path, monkeypatch):
    with TensorRecorder(name="m", run_dir=tmp_path / "r") as rec:
        with rec.record_point("p"):
            rec.observe(__import__("torch").ones(2), name="x")
    run = TensorRun.load(tmp_path / "r")
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError
    with pytest.raises(MissingDependencyError) as raised:
        run.to_pandas()
    message = str(raised.value)
    assert message.startswith("TensorRun.to_pandas() needs pandas, which is not installed")
    assert "pip install pandas" in message and "to_arrow()" in message
    assert isinstance(raised.value, ImportError)
    assert run.to_arrow().num_rows == 1
