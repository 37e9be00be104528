"""`tcgd memory ...` / `tcgd-memory ...`: every command on real fixtures and recorded runs,
JSON output, report files, exit codes 0 and 2."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import pytest
from test_memory_support import DATA, MIB, FakeAllocator, private_pool_reserved_row
from torch_cudagraph_debug.cli import main, memory_main
from torch_cudagraph_debug.memory_debug import MemoryRecorder


def fixture(name: str) -> str:
    return os.path.join(DATA, name)


@pytest.fixture
def imported(tmp_path):
    run = tmp_path / "imported"
    code = main(
        [
            "memory",
            "import",
            fixture("memory_default_before.pickle"),
            fixture("memory_default_after.pickle"),
            "--run",
            str(run),
            "--label",
            "before",
            "--label",
            "after",
        ]
    )
    assert code == 0
    return run


def test_import_then_compare_points(imported, capsys) -> None:
    capsys.readouterr()
    assert main(["memory", "compare-points", str(imported), "before", "after", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["relation"] == "same_origin"
    assert report["lifecycle_label"] == "exact"
    device = report["devices"][0]
    private = [p for p in device["pools"] if p["kind"] == "private"]
    assert sum(p["stats"]["active"]["change"] for p in private) >= 16 * MIB
    assert device["cuda_used"]["candidate"] is None, "pickles carry no mem_get_info"
    assert main(["memory", "compare-points", str(imported), "0", "1", "--only-changed"]) == 0
    text = capsys.readouterr().out
    assert "pool[1,0] (private, candidate only)" in text
    assert "address lifecycle: exact" in text


def test_import_json_and_history(tmp_path, capsys) -> None:
    run = tmp_path / "r"
    argv = ["import", fixture("memory_expandable_before.pickle")]
    argv += [fixture("memory_expandable_after.pickle"), "--run", str(run), "--json"]
    assert memory_main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["label"] for p in out["points"]] == [
        "memory_expandable_before",
        "memory_expandable_after",
    ]
    assert out["points"][1]["history"] == ["complete"]
    assert out["points"][1]["private_reserved"] >= 16 * MIB


def test_summary_timeline_and_output_files(imported, tmp_path, capsys) -> None:
    capsys.readouterr()
    assert main(["memory", "summary", str(imported), "--point", "after", "--depth", "pool"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("Memory state 'import@after'")
    assert "stream 0x" not in text
    assert main(["memory", "summary", str(imported), "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("point,level,")
    assert {line.split(",")[0] for line in lines[1:]} == {"before", "after"}
    out = tmp_path / "reports"
    assert main(["memory", "timeline", str(imported), "--output", str(out)]) == 0
    written = sorted(os.listdir(out))
    assert written == [f"memory-timeline.{e}" for e in ("csv", "html", "json", "txt")]
    timeline = json.loads((out / "memory-timeline.json").read_text())
    scopes = [r for r in timeline["rows"] if r["level"] == "scope" and r["scope"] == "private"]
    assert scopes[0]["stats"]["reserved"] == 0 and scopes[1]["stats"]["reserved"] > 0
    # Existing report files are kept unless --overwrite.
    assert main(["memory", "timeline", str(imported), "--output", str(out)]) == 2
    assert "overwrite" in capsys.readouterr().err
    assert main(["memory", "timeline", str(imported), "--output", str(out), "--overwrite"]) == 0


def test_compare_phases_across_runs(tmp_path, capsys) -> None:
    runs = []
    for name, size in (("a", 16 * MIB), ("b", 24 * MIB)):
        alloc = FakeAllocator()
        alloc.segment(2 * MIB)
        with MemoryRecorder(name=name, run_dir=tmp_path / name, _source=alloc) as rec:
            rec.record_point("start")
            alloc.alloc(alloc.segment(size, pool=(1, 0)), size)
            rec.record_point("end")
        runs.append(str(tmp_path / name))
    capsys.readouterr()
    argv = ["memory", "compare-phases", runs[0], "start", "end", "start", "end"]
    argv += ["--candidate-run", runs[1], "--pool-map", "0:1,0=0:1,0", "--json"]
    assert main(argv) == 0
    row = private_pool_reserved_row(json.loads(capsys.readouterr().out))
    assert row["end_gap"] == 8 * MIB
    assert row["identity_holds"] is True
    argv = ["memory", "compare-points", runs[0], "end", "end", "--candidate-run", runs[1]]
    assert main([*argv, "--events"]) == 2
    assert "events" in capsys.readouterr().err


def test_errors_exit_2(tmp_path, capsys) -> None:
    evil = tmp_path / "evil.pickle"
    evil.write_bytes(pickle.dumps({"x": print}, protocol=4))
    assert main(["memory", "import", str(evil), "--run", str(tmp_path / "r1")]) == 2
    err = capsys.readouterr().err
    assert "GLOBAL" in err and "refused" in err
    assert main(["memory", "summary", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "is not a job root" in err and "it does not exist" in err
    assert main(["memory", "summary", str(tmp_path)]) == 2
    assert "it has no runs table" in capsys.readouterr().err
    broken = tmp_path / "broken.pickle"
    snap = {"segments": [{"device": 0, "blocks": []}], "device_traces": []}
    broken.write_bytes(pickle.dumps(snap))
    assert main(["memory", "import", str(broken), "--run", str(tmp_path / "r2")]) == 2
    assert "segments[0].total_size" in capsys.readouterr().err
    run = tmp_path / "ok"
    assert (
        main(["memory", "import", fixture("memory_default_before.pickle"), "--run", str(run)]) == 0
    )
    assert main(["memory", "compare-points", str(run), "memory_default_before", "zzz"]) == 2
    assert "zzz" in capsys.readouterr().err
    assert main(["memory", "compare-points", str(run), "0", "0", "--pool-map", "junk"]) == 2
    with pytest.raises(SystemExit) as info:
        main(["memory", "summary"])
    assert info.value.code == 2


def test_console_alias(tmp_path) -> None:
    script = "from torch_cudagraph_debug.cli import memory_main; raise SystemExit(memory_main())"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "import",
            fixture("memory_default_after.pickle"),
            "--run",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "imported 1 snapshot" in done.stdout
