"""The command line never lies about how it ended: every error is one line on stderr with
exit 2 (for `tcgd`, `tcgd-tensor` and `tcgd-memory`), a closed stdout ends quietly, help
and version are plain, options are checked when made, run groups have one definition of
complete, CSV cells cannot run as formulas, and report directories behave the same for
tensor and memory reports."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest
import torch
import torch_cudagraph_debug
from processes import head_of
from test_memory_support import FakeAllocator
from torch_cudagraph_debug.cli import main, memory_main, tensor_main
from torch_cudagraph_debug.cli import tensor as tensor_cli
from torch_cudagraph_debug.errors import InvalidInputError, ReportExistsError
from torch_cudagraph_debug.memory_debug import MemoryRecorder
from torch_cudagraph_debug.tensor_debug import (
    TensorComparisonOptions,
    TensorRecorder,
    TensorRunGroup,
    compare_run_groups,
    compare_runs,
)

CLI = [sys.executable, "-m", "torch_cudagraph_debug.cli"]


def record(path, points, *, name="m", rank=None, world_size=None, payload=None):
    with TensorRecorder(name=name, run_dir=path, rank=rank, world_size=world_size) as rec:
        for label, values in points:
            with rec.record_point(label):
                for i, x in enumerate(values):
                    rec.observe(x, name=f"x{i}", payload=payload)
    return path


def cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("tcgd: error: "), stderr
    return lines[0]


# ------------------------------------------------------------------ fault 8: errors


@pytest.fixture
def small_run(tmp_path):
    return record(tmp_path / "run", [("s0", [torch.ones(4)])])


@pytest.mark.parametrize("entry", ["tcgd", "tcgd-tensor"])
def test_fault8_an_unexpected_exception_is_one_line_and_exit_2(
    entry, small_run, monkeypatch, capsys
):
    def broken(args):
        raise KeyError("nosuch")

    monkeypatch.setattr(tensor_cli, "_summary", broken)
    monkeypatch.delenv("TCGD_DEBUG", raising=False)
    if entry == "tcgd":
        code = main(["tensor", "summary", str(small_run)])
    else:
        code = tensor_main(["summary", str(small_run)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert line == "tcgd: error: KeyError: 'nosuch' (set TCGD_DEBUG=1 to see the traceback)"


def test_fault8_memory_alias_reports_unexpected_errors_the_same_way(monkeypatch, capsys, tmp_path):
    from torch_cudagraph_debug.cli import memory as memory_cli

    def broken(args):
        raise FileNotFoundError(2, "No such file or directory", "x.pickle")

    monkeypatch.setattr(memory_cli, "_import", broken)
    monkeypatch.delenv("TCGD_DEBUG", raising=False)
    # The snapshot exists, so the command's own check of its paths lets the handler run.
    snapshot = tmp_path / "x.pickle"
    snapshot.write_bytes(b"")
    assert memory_main(["import", str(snapshot), "--run", str(tmp_path / "r")]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("tcgd: error: FileNotFoundError: [Errno 2] No such file or directory")


def test_fault8_tcgd_debug_shows_the_traceback(small_run, monkeypatch, capsys):
    def broken(args):
        raise KeyError("nosuch")

    monkeypatch.setattr(tensor_cli, "_summary", broken)
    monkeypatch.setenv("TCGD_DEBUG", "1")
    assert main(["tensor", "summary", str(small_run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert err.splitlines()[-1].startswith("tcgd: error: KeyError: 'nosuch'")


def test_fault8_interrupt_exits_130(small_run, monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(tensor_cli, "_summary", interrupted)
    assert main(["tensor", "summary", str(small_run)]) == 130
    assert capsys.readouterr().err == "tcgd: interrupted\n"


def test_fault8_errors_are_one_line_through_a_real_process(tmp_path):
    config = tmp_path / "probes.toml"
    config.write_text('version = 1\n[[select]]\nops = ["aten.relu"]\n')
    factory = tmp_path / "model.py"
    factory.write_text("def make():\n    return None, []\n")
    done = cli(
        "differential",
        str(config),
        f"{factory}:nosuch",
        "--run-dir",
        str(tmp_path / "d"),
        env={"TCGD_DEBUG": ""},
    )
    assert done.returncode == 2, done.stderr
    assert "nosuch" in one_error_line(done.stderr)
    done = cli("differential", str(config), f"{tmp_path / 'absent.py'}:make", "--run-dir", "d")
    assert done.returncode == 2
    assert "absent.py" in one_error_line(done.stderr)
    done = cli("explain", str(config), str(tmp_path / "absent.py"))
    assert done.returncode == 2
    assert "absent.py" in one_error_line(done.stderr)


def test_fault8_closed_stdout_ends_quietly(tmp_path):
    # Enough output to fill the pipe, so that writing fails once `head` has gone.
    run = record(
        tmp_path / "big",
        [(f"s{p}", [torch.full((4,), float(i)) for i in range(60)]) for p in range(30)],
        payload="summary",
    )
    lines, err, code = head_of([*CLI, "tensor", "summary", str(run), "--limit", "100"])
    assert lines == ["run 'm' (eager, rank 0 of 1, complete)"]
    assert err == ""
    assert code == 141


# ------------------------------------------------------------- fault 11: help, version


def test_fault11_help_is_plain_text(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out
    assert out.startswith("usage: tcgd [-h] [--version] command ...")
    assert "A debugger for PyTorch CUDA Graphs" in out
    assert "TCGD_DEBUG=1" in out and "141" in out


@pytest.mark.parametrize(
    ("entry", "prog"), [(main, "tcgd"), (tensor_main, "tcgd-tensor"), (memory_main, "tcgd-memory")]
)
def test_fault11_version(entry, prog, capsys):
    with pytest.raises(SystemExit) as done:
        entry(["--version"])
    assert done.value.code == 0
    version = torch_cudagraph_debug.__version__
    assert capsys.readouterr().out == f"{prog} (torch-cudagraph-debug) {version}\n"


@pytest.mark.parametrize(
    ("argv", "prog", "choices"),
    [
        ([], "tcgd", "tensor, memory, explain"),
        (["tensor"], "tcgd tensor", "summary, compare-points"),
        (["memory"], "tcgd memory", "summary, timeline"),
    ],
)
def test_fault11_a_missing_command_is_one_error_line(argv, prog, choices, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{prog}: error: a command is required: one of "), err
    assert choices in lines[0] and lines[0].endswith(f"(see {prog} --help)")
    assert "domain" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["tensor", "summary", "--bogus", "RUN"],
        ["tensor", "compare-runs", "REF"],
        ["tensor", "nosuch"],
        ["memory", "import"],
    ],
)
def test_fault8_usage_errors_are_one_line_with_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and ": error: " in err and "--help)" in err, err


# ------------------------------------------------------------ fault 11: options


@pytest.mark.parametrize(
    ("kwargs", "option", "reason"),
    [
        ({"rtol": -1}, "rtol", "must be a finite number >= 0, got -1"),
        ({"rtol": float("nan")}, "rtol", "must be a finite number >= 0, got NaN"),
        ({"atol": float("inf")}, "atol", "must be a finite number >= 0, got inf"),
        ({"mode": "close"}, "mode", 'must be one of allclose, exact, got "close"'),
        ({"dtype_policy": "loose"}, "dtype_policy", "must be one of strict, promote"),
        ({"layout_policy": "any"}, "layout_policy", "must be one of strict, ignore"),
        ({"limit": -1}, "limit", "must be an integer >= 0, got -1"),
        ({"equal_nan": "yes"}, "equal_nan", "must be a bool, got 'yes'"),
    ],
)
def test_fault11_options_are_checked_when_made(kwargs, option, reason):
    with pytest.raises(InvalidInputError) as info:
        TensorComparisonOptions(**kwargs)
    assert info.value.option == option
    assert reason in info.value.reason
    assert str(info.value).startswith(f"TensorComparisonOptions.{option} {reason}")


def test_fault11_valid_options_reach_the_comparison(tmp_path):
    run = record(tmp_path / "a", [("s0", [torch.ones(4)])])
    other = record(tmp_path / "b", [("s0", [torch.ones(4) * 1.001])])
    loose = TensorComparisonOptions(rtol=1e-2)
    assert compare_runs(run, other, options=loose).status == "match"
    assert compare_runs(run, other, options=TensorComparisonOptions()).status == "mismatch"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--rtol", "nan"], "tcgd: error: --rtol must be a finite number >= 0, got NaN"),
        (["--atol", "-0.001"], "tcgd: error: --atol must be a finite number >= 0, got -0.001"),
        (["--limit", "-2"], "tcgd: error: --limit must be an integer >= 0, got -2"),
    ],
)
def test_fault11_a_bad_option_names_its_flag(flags, message, small_run, capsys):
    code = main(["tensor", "compare-runs", str(small_run), str(small_run), *flags])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == message + "\n"


# -------------------------------------------------------- fault 11: group complete


def test_fault11_a_group_missing_a_rank_is_incomplete_everywhere(tmp_path, capsys):
    for root in ("ref", "cand"):
        ranks = (0, 1, 2) if root == "ref" else (0, 1)
        for rank in ranks:
            record(
                tmp_path / root,
                [("s0", [torch.ones(2)])],
                name="job",
                rank=rank,
                world_size=3,
            )
    with pytest.warns(UserWarning, match="rank 2"):
        group = TensorRunGroup.load(tmp_path / "cand")
    assert group.missing_ranks == (2,)
    assert all(m.complete for m in group.members)
    assert group.complete is False
    result = compare_run_groups(tmp_path / "ref", tmp_path / "cand")
    assert result.to_dict()["candidate"]["complete"] is False
    assert result.to_dict()["reference"]["complete"] is True
    assert main(["tensor", "group-summary", str(tmp_path / "cand"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["complete"] is False
    assert (
        main(["tensor", "compare-run-groups", str(tmp_path / "ref"), str(tmp_path / "cand")]) == 3
    )
    text = capsys.readouterr().out
    assert "(2 of 3 ranks, 1 point, INCOMPLETE)" in text


# ---------------------------------------------------------- fault 11: CSV formulas

FORMULA = '=HYPERLINK("http://example.com","click")'


def test_fault11_tensor_csv_cells_cannot_run_as_formulas(tmp_path):
    ref = record(tmp_path / "a", [(FORMULA, [torch.tensor([1.0, -2.5])])])
    cand = record(tmp_path / "b", [(FORMULA, [torch.tensor([1.0, -3.5])])])
    result = compare_runs(ref, cand)
    result.write(tmp_path / "report")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "report" / "observations.csv").read_text())))
    assert rows[0]["reference_point"] == "'" + FORMULA
    assert rows[0]["candidate_point"] == "'" + FORMULA
    # Numbers stay numbers.
    assert rows[0]["first_mismatch_reference"] == "-2.5"
    assert rows[0]["first_mismatch_candidate"] == "-3.5"
    assert float(rows[0]["max_abs_error"]) == 1.0
    points = list(csv.DictReader(io.StringIO((tmp_path / "report" / "points.csv").read_text())))
    assert points[0]["reference_point"] == "'" + FORMULA


def memory_run(path, label):
    alloc = FakeAllocator()
    seg = alloc.segment(2 * 1024 * 1024)
    with MemoryRecorder(name="m", run_dir=path, _source=alloc) as rec:
        rec.record_point("start")
        alloc.alloc(seg, 4096)
        rec.record_point(label)
    return path


def test_fault11_memory_csv_cells_cannot_run_as_formulas(tmp_path, capsys):
    run = memory_run(tmp_path / "mem", FORMULA)
    assert main(["memory", "timeline", str(run), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    labels = {r["label"] for r in rows}
    assert labels == {"start", "'" + FORMULA}
    assert main(["memory", "summary", str(run), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["point"] for r in rows} == {"start", "'" + FORMULA}
    assert main(["memory", "compare-points", str(run), "start", "1", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    active = next(r for r in rows if r["level"] == "allocator" and r["metric"] == "inactive")
    assert active["change"] == "-4096", "a negative number is written as a number"


def test_memory_commands_choose_a_run_in_a_shared_root_by_name(tmp_path, capsys):
    root = tmp_path / "job"
    alloc = FakeAllocator()
    seg = alloc.segment(2 * 1024 * 1024)
    for name, size in (("before", 4096), ("after", 8192)):
        with MemoryRecorder(name=name, run_dir=root, _source=alloc) as rec:
            rec.record_point("start")
            block = alloc.alloc(seg, size)
            rec.record_point("end")
        alloc.free(block)
    assert main(["memory", "timeline", str(root)]) == 2
    assert "2 runs match kind memory" in capsys.readouterr().err
    assert main(["memory", "timeline", str(root), "--name", "after", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["label"] for r in rows} == {"start", "end"}
    argv = ["memory", "compare-points", str(root), "end", "end", "--name", "before"]
    assert main([*argv, "--candidate-name", "after", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    active = next(r for r in rows if r["level"] == "allocator" and r["metric"] == "active")
    assert active["change"] == "4096"


# --------------------------------------------------- fault 11: report directories


def test_fault11_memory_and_tensor_reports_refuse_a_non_empty_directory_alike(tmp_path, capsys):
    from torch_cudagraph_debug.memory_debug import MemoryRun

    tensor_run = record(tmp_path / "t", [("s0", [torch.ones(2)])])
    memory = MemoryRun.load(memory_run(tmp_path / "mem", "end"))
    for kind in ("tensor", "memory"):
        directory = tmp_path / f"{kind}-report"
        directory.mkdir()
        (directory / "notes.md").write_text("mine")
        if kind == "tensor":
            result = compare_runs(tensor_run, tensor_run)

            def write(overwrite, result=result, directory=directory):
                return list(result.write(directory, overwrite=overwrite).values())
        else:
            timeline = memory.timeline()

            def write(overwrite, timeline=timeline, directory=directory):
                return timeline.save(directory, overwrite=overwrite)

        with pytest.raises(ReportExistsError) as info:
            write(False)
        message = str(info.value)
        assert f"report directory '{directory}' is not empty (it holds notes.md)" in message
        assert "overwrite=True (--overwrite)" in message
        written = write(True)
        assert written and all(os.path.isfile(p) for p in written)
        assert (directory / "notes.md").read_text() == "mine"
    out = tmp_path / "cli-report"
    out.mkdir()
    (out / "notes.md").write_text("mine")
    mem = str(tmp_path / "mem")
    assert main(["memory", "timeline", mem, "--output", str(out)]) == 2
    assert "--overwrite" in one_error_line(capsys.readouterr().err)
    assert main(["memory", "timeline", mem, "--output", str(out), "--overwrite"]) == 0
    assert sorted(os.listdir(out))[-1] == "notes.md"
