"""`tcgd-memory` in the reference design's forms: every command, its flags, the files
`--output` writes, and the exit codes (0 report produced, 2 error with one typed line on
stderr and no traceback)."""

from __future__ import annotations

import json
import os

import pytest
from test_memory_support import GROUP_SUMMARY_FILES, MIB, FakeAllocator, private_pool_reserved_row
from torch_cudagraph_debug.cli import main, memory_main
from torch_cudagraph_debug.memory_debug import MemoryRecorder


def _run(root, name: str, grow: int, *, rank: int | None = None, world: int | None = None):
    alloc = FakeAllocator()
    alloc.alloc(alloc.segment(2 * MIB), MIB)
    with MemoryRecorder(name=name, run_dir=root, rank=rank, world_size=world, _source=alloc) as rec:
        rec.record_point("start")
        alloc.alloc(alloc.segment(grow * MIB, pool=(1, 0)), grow * MIB)
        rec.record_point("end")
    return str(root)


@pytest.fixture
def runs(tmp_path):
    return _run(tmp_path / "a", "a", 16), _run(tmp_path / "b", "b", 24)


@pytest.fixture
def groups(tmp_path):
    out = []
    for side, step in (("base", 4), ("cand", 6)):
        for rank in range(2):
            _run(tmp_path / side, side, (rank + 1) * step, rank=rank, world=2)
        out.append(str(tmp_path / side))
    return out


def test_summary_reference_form(runs, capsys) -> None:
    assert memory_main(["summary", runs[0]]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("memory run 'a' at ") and out[0].endswith("2 points, complete")
    assert out[1] == "  rank 0 of world size 1, group id None"
    assert out[3] == (
        f"  [1] end: 2 observations, 2 pools; allocated {17 * MIB} B, reserved {18 * MIB} B, "
        f"active {17 * MIB} B, requested {17 * MIB} B"
    )


def test_timeline(runs, tmp_path, capsys) -> None:
    assert memory_main(["timeline", runs[0], "--only-changed", "--stacks", "--limit", "3"]) == 0
    assert capsys.readouterr().out
    assert memory_main(["timeline", runs[0], "--output", str(tmp_path / "t")]) == 0
    assert os.listdir(tmp_path / "t")


def test_compare_points_reference_form(runs, capsys) -> None:
    argv = ["compare-points", runs[0], "--reference-point", "start", "--candidate-point", "end"]
    assert memory_main([*argv, "--json", "--depth", "pool"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["relation"] == "same_origin"
    argv = ["compare-points", runs[0], runs[1], "--reference-point", "end"]
    argv += ["--candidate-point", "end", "--pool-map", "0:1,0=0:1,0", "--device-map", "0=0"]
    assert memory_main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["relation"] == "cross_run"
    # Mappings pair independent runs only; events have no identity across runs.
    one = ["compare-points", runs[0], "--reference-point", "start", "--candidate-point", "end"]
    assert memory_main([*one, "--pool-map", "0:1,0=0:1,0"]) == 2
    assert "independent runs" in capsys.readouterr().err
    assert memory_main([*argv, "--events"]) == 2
    assert "events" in capsys.readouterr().err
    assert memory_main(["compare-points", runs[0], "--reference-point", "start"]) == 2
    assert "--candidate-point" in capsys.readouterr().err


def test_compare_phases_reference_form(runs, tmp_path, capsys) -> None:
    argv = ["compare-phases", runs[0], runs[1], "--baseline-start", "start"]
    argv += ["--baseline-end", "end", "--candidate-start", "start", "--candidate-end", "end"]
    argv += ["--pool-map", "0:1,0=0:1,0"]
    assert memory_main([*argv, "--json"]) == 0
    row = private_pool_reserved_row(json.loads(capsys.readouterr().out))
    assert row["end_gap"] == 8 * MIB
    assert memory_main([*argv, "--output", str(tmp_path / "p")]) == 0
    assert memory_main([*argv, "--output", str(tmp_path / "p")]) == 2
    assert "overwrite" in capsys.readouterr().err
    assert memory_main([*argv, "--output", str(tmp_path / "p"), "--overwrite"]) == 0
    assert memory_main([*argv, "--lifetimes"]) == 2


def test_group_summary(groups, tmp_path, capsys) -> None:
    assert memory_main(["group-summary", groups[0]]) == 0
    text = capsys.readouterr().out
    assert "Memory run group 'base'" in text and "ranks 0,1 of world size 2" in text
    assert "spread 4.00 MiB" in text
    out = tmp_path / "g"
    assert main(["memory", "group-summary", groups[0], "--output", str(out)]) == 0
    assert sorted(os.listdir(out)) == GROUP_SUMMARY_FILES
    capsys.readouterr()
    assert memory_main(["group-summary", groups[0], "--output", str(out)]) == 2
    assert memory_main(["group-summary", groups[0], "--output", str(out), "--overwrite"]) == 0
    capsys.readouterr()
    assert memory_main(["group-summary", groups[0], "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    agg = next(
        a
        for a in report["point_aggregates"]
        if a["label"] == "end" and a["scope"] == "all" and a["metric"] == "reserved_bytes"
    )
    assert (agg["min_bytes"], agg["max_bytes"], agg["worst_rank"]) == (6 * MIB, 10 * MIB, 1)


def test_compare_run_group_phases(groups, tmp_path, capsys) -> None:
    argv = ["compare-run-group-phases", *groups, "--baseline-start", "start"]
    argv += ["--baseline-end", "end", "--candidate-start", "0", "--candidate-end", "end"]
    argv += ["--pool-map", "0@0:1,0=0:1,0", "--pool-map", "1@0:1,0=0:1,0", "--device-map", "1@0=0"]
    assert memory_main([*argv, "--stacks", "--stack-depth", "3", "--only-changed"]) == 0
    text = capsys.readouterr().out
    assert "ranks compared: 0,1" in text and "failures: 0" in text
    assert memory_main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    agg = next(
        a
        for a in report["phase_aggregates"]
        if a["scope"] == "private" and a["metric"] == "reserved_bytes"
    )
    assert agg["end_gap"]["min_bytes"] == 2 * MIB and agg["end_gap"]["max_bytes"] == 4 * MIB
    out = tmp_path / "gp"
    assert memory_main([*argv, "--output", str(out)]) == 0
    assert "phase_aggregates.csv" in os.listdir(out)
    assert "rank_pool_decomposition.csv" in os.listdir(out)
    capsys.readouterr()
    # Errors: a rank-less map, an unknown rank, events across runs, a missing point.
    assert memory_main([*argv, "--pool-map", "0:1,0=0:1,0"]) == 2
    assert "RANK@" in capsys.readouterr().err
    assert memory_main([*argv, "--device-map", "9@0=0"]) == 2
    assert "rank 9" in capsys.readouterr().err
    assert memory_main([*argv, "--events"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tcgd: error: ") and "Traceback" not in err
    bad = [a if a != "end" else "nope" for a in argv]
    assert memory_main(bad) == 2
    assert "nope" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        memory_main(["compare-run-group-phases", *groups])
    assert info.value.code == 2


def test_group_errors_exit_2(tmp_path, capsys) -> None:
    assert memory_main(["group-summary", str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert memory_main(["group-summary", str(tmp_path / "empty")]) == 2
    assert "holds no memory run" in capsys.readouterr().err
