"""Runs on disk must never lie: one writer per run directory, re-runnable recordings
(overwrite), literal paths in `tcgd query`, damaged runs that still load what is intact,
and point lookups that say what the run holds.

Tests go through the public API and the CLI; where a file must be damaged, the file is
found through the manifest, so they do not depend on part names."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch
from test_memory_support import DATA, MIB, FakeAllocator
from torch_cudagraph_debug.cli import main
from torch_cudagraph_debug.errors import (
    CorruptRunError,
    InvalidInputError,
    PointNotFoundError,
    RunExistsError,
    SnapshotFormatError,
)
from torch_cudagraph_debug.memory_debug import MemoryRecorder, MemoryRun, import_snapshots
from torch_cudagraph_debug.tensor_debug import TensorRecorder, TensorRun
from torch_cudagraph_debug.tensor_debug.recorder import open_run_writer

POINTS_PER_RUN = 4


def record(run_dir: Path | str, who: str, points: int = POINTS_PER_RUN, **kwargs) -> TensorRun:
    with TensorRecorder(name=who, run_dir=run_dir, **kwargs) as rec:
        for k in range(points):
            with rec.record_point(f"{who}-{k}"):
                rec.observe(torch.full((256,), float(k)), name="x")
                rec.observe(torch.arange(8) + k, name="ids")
    assert rec.result is not None
    return rec.result


def parts(run_dir: Path | str, table: str) -> list[Path]:
    """The committed parts of one table, in commit order, as the manifest lists them."""
    manifest = json.loads(Path(run_dir, "run.json").read_text())
    return [Path(run_dir, p["path"]) for p in manifest["parts"] if p["table"] == table]


def flip_a_byte(path: Path) -> None:
    """Damage in place, at the committed size: only a digest can tell."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


# ------------------------------------------------------------------------- fault 3

RACE_ROUNDS = 24
ROUND_S = 0.06
CHILDREN = 3
THREADS = 3

RACER = textwrap.dedent(
    """
    import random, sys, time
    import torch
    from torch_cudagraph_debug.errors import RunExistsError
    from torch_cudagraph_debug.tensor_debug import TensorRecorder

    who, root, rounds, round_s, points = sys.argv[1:6]
    rounds, round_s, points = int(rounds), float(round_s), int(points)
    print("ready", flush=True)
    start = float(sys.stdin.readline())
    rng = random.Random(who)
    for i in range(rounds):
        # Every racer aims at the same instant, give or take 0-3 ms.
        time.sleep(max(0.0, start + i * round_s + rng.uniform(0, 0.003) - time.time()))
        try:
            rec = TensorRecorder(name=who, run_dir=f"{root}/r{i:02d}")
        except RunExistsError:
            print(f"lost {i}", flush=True)
            continue
        for k in range(points):
            with rec.record_point(f"{who}-{k}"):
                rec.observe(torch.full((256,), float(k)), name="x")
                rec.observe(torch.arange(8) + k, name="ids")
        rec.finish()
        print(f"won {i}", flush=True)
    """
)


def race_in_thread(who: str, root: Path, start: float, outcomes: list[tuple[str, int, str]]):
    rng = random.Random(who)
    for i in range(RACE_ROUNDS):
        time.sleep(max(0.0, start + i * ROUND_S + rng.uniform(0, 0.003) - time.time()))
        try:
            rec = TensorRecorder(name=who, run_dir=root / f"r{i:02d}")
        except RunExistsError:
            outcomes.append((who, i, "lost"))
            continue
        for k in range(POINTS_PER_RUN):
            with rec.record_point(f"{who}-{k}"):
                rec.observe(torch.full((256,), float(k)), name="x")
                rec.observe(torch.arange(8) + k, name="ids")
        rec.finish()
        outcomes.append((who, i, "won"))


def test_fault3_two_writers_never_share_a_run_dir(tmp_path: Path) -> None:
    """Processes and threads race to create the same run, round after round: exactly one
    wins each round, and the run holds the winner's points, intact."""
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    root = tmp_path / "runs"
    root.mkdir()
    children = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                f"proc{n}",
                str(root),
                str(RACE_ROUNDS),
                str(ROUND_S),
                str(POINTS_PER_RUN),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(CHILDREN)
    ]
    for child in children:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
    start = time.time() + 0.5
    for child in children:
        child.stdin.write(f"{start}\n")
        child.stdin.flush()
    outcomes: list[tuple[str, int, str]] = []
    threads = [
        threading.Thread(target=race_in_thread, args=(f"thread{n}", root, start, outcomes))
        for n in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for n, child in enumerate(children):
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        for line in out.splitlines():
            verdict, i = line.split()
            outcomes.append((f"proc{n}", int(i), verdict))

    racers = CHILDREN + THREADS
    assert len(outcomes) == RACE_ROUNDS * racers
    for i in range(RACE_ROUNDS):
        winners = [who for who, r, verdict in outcomes if r == i and verdict == "won"]
        assert len(winners) == 1, (i, winners)
        run = TensorRun.load(root / f"r{i:02d}")
        assert run.name == winners[0]
        assert run.complete is True
        assert run.labels == tuple(f"{winners[0]}-{k}" for k in range(POINTS_PER_RUN))
        assert torch.equal(run[-1].tensor("x"), torch.full((256,), float(POINTS_PER_RUN - 1)))
        assert run.validate() == []


def test_fault3_a_second_writer_of_a_run_being_recorded_is_refused(tmp_path: Path) -> None:
    first = TensorRecorder(name="first", run_dir=tmp_path / "run")
    with first.record_point("p0"):
        first.observe(torch.ones(3), name="x")
    # The first run is being written: neither a plain nor an overwriting writer may join.
    for overwrite in (False, True):
        with pytest.raises(RunExistsError, match="being written by another recorder"):
            TensorRecorder(name="second", run_dir=tmp_path / "run", overwrite=overwrite)
    run = first.finish()
    assert run.name == "first" and run.labels == ("p0",)


# ------------------------------------------------------------------------- fault 6


def test_fault6_rerunning_with_overwrite_replaces_the_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = record(run_dir, "first")
    (run_dir / "notes.txt").write_text("mine")
    with pytest.raises(RunExistsError, match="overwrite=True"):
        record(run_dir, "second")
    second = record(run_dir, "second", points=2, overwrite=True)
    assert second.run_id != first.run_id
    loaded = TensorRun.load(run_dir)
    assert loaded.run_id == second.run_id
    assert loaded.labels == ("second-0", "second-1")
    assert loaded.validate() == []
    # No part of the first run is left for a raw glob to find.
    assert len(parts(run_dir, "points")) == 2
    assert sorted(p.name for p in (run_dir / "points").iterdir()) == sorted(
        p.name for p in parts(run_dir, "points")
    )
    assert (run_dir / "notes.txt").read_text() == "mine"


def test_fault6_overwrite_replaces_only_a_run(tmp_path: Path) -> None:
    """A directory whose run.json is not ours, or a run with foreign files among its
    parts, is refused: nothing the user put there is deleted."""
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "run.json").write_text('{"schema": "someone-else"}')
    (foreign / "data.bin").write_bytes(b"keep")
    with pytest.raises(RunExistsError, match="not a torch-cudagraph-debug manifest"):
        record(foreign, "x", overwrite=True)
    assert (foreign / "run.json").read_text() == '{"schema": "someone-else"}'
    assert sorted(p.name for p in foreign.iterdir()) == ["data.bin", "run.json"]

    run_dir = tmp_path / "run"
    record(run_dir, "old")
    (run_dir / "points" / "my-notes.txt").write_text("keep")
    with pytest.raises(RunExistsError, match=r"my-notes\.txt"):
        record(run_dir, "new", overwrite=True)
    assert TensorRun.load(run_dir).name == "old"
    assert (run_dir / "points" / "my-notes.txt").read_text() == "keep"

    # A directory with files but no run: nothing to replace, nothing deleted.
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "keep.txt").write_text("keep")
    assert record(plain, "fresh", overwrite=True).labels[0] == "fresh-0"
    assert (plain / "keep.txt").read_text() == "keep"


def test_fault6_open_run_writer_takes_overwrite(tmp_path: Path) -> None:
    def writer(overwrite: bool):
        return open_run_writer(
            name="low",
            root=tmp_path / "run",
            execution="eager",
            rank=0,
            world_size=1,
            group_id=None,
            devices=None,
            run_metadata={},
            overwrite=overwrite,
        )

    writer(False).close(True)
    with pytest.raises(RunExistsError):
        writer(False)
    replacing = writer(True)
    replacing.close(True)
    assert TensorRun.load(tmp_path / "run").complete is True


def test_fault6_memory_recorder_overwrite(tmp_path: Path) -> None:
    def one_run(name: str, **kwargs) -> MemoryRun:
        alloc = FakeAllocator()
        alloc.alloc(alloc.segment(2 * MIB), 4096)
        with MemoryRecorder(name=name, run_dir=tmp_path / "m", _source=alloc, **kwargs) as rec:
            rec.record_point(f"{name}-0")
        assert rec.result is not None
        return rec.result

    one_run("first")
    with pytest.raises(RunExistsError):
        one_run("second")
    assert one_run("second", overwrite=True).labels == ("second-0",)
    assert MemoryRun.load(tmp_path / "m").name == "second"


def test_fault6_failed_import_leaves_nothing_and_overwrite_reimports(tmp_path: Path) -> None:
    good = os.path.join(DATA, "memory_default_before.pickle")
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(b"this is no pickle")
    run_dir = tmp_path / "jobs" / "imported"
    with pytest.raises(SnapshotFormatError):
        import_snapshots([good, bad], run_dir=run_dir, labels=["a", "b"])
    # Nothing is left to block the retry: not the run, not the directories made for it.
    assert not (tmp_path / "jobs").exists()
    assert import_snapshots([good], run_dir=run_dir, labels=["a"]).labels == ("a",)

    args = ["memory", "import", good, "--run", str(run_dir), "--label", "again"]
    assert main(args) == 2
    assert main([*args, "--overwrite"]) == 0
    assert MemoryRun.load(run_dir).labels == ("again",)


# ------------------------------------------------------------------------- fault 5


def test_fault5_query_paths_are_never_globs(tmp_path: Path, capsys) -> None:
    for name in ("exp[1]", "exp1", "e*", "e?x"):
        record(tmp_path / name, name, points=2)

    def labels(path: Path) -> list[str]:
        capsys.readouterr()
        sql = "SELECT DISTINCT point_label FROM observations ORDER BY 1"
        assert main(["query", sql, str(path), "--json"]) == 0
        return [row["point_label"] for row in json.loads(capsys.readouterr().out)]

    assert labels(tmp_path / "exp[1]") == ["exp[1]-0", "exp[1]-1"]
    assert labels(tmp_path / "exp1") == ["exp1-0", "exp1-1"]
    assert labels(tmp_path / "e*") == ["e*-0", "e*-1"]
    assert labels(tmp_path / "e?x") == ["e?x-0", "e?x-1"]
    capsys.readouterr()
    sql = "SELECT r.name, count(*) AS n FROM runs r JOIN points p USING (run_id) GROUP BY 1"
    assert main(["query", sql, str(tmp_path / "e*"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"name": "e*", "n": 2}]


# ------------------------------------------------------------------------- fault 7


def test_fault7_a_missing_part_is_a_corrupt_run_naming_the_file(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    record(run_dir, "r")
    gone = parts(run_dir, "observations")[1]
    gone.unlink()
    with pytest.raises(CorruptRunError, match="missing") as caught:
        TensorRun.load(run_dir)
    message = str(caught.value)
    assert str(gone) in message
    # The advice names what works on a run that does not load.
    assert "validate()" not in message
    assert 'on_damage="skip"' in message and "tcgd validate" in message


def test_fault7_skip_loads_every_intact_point_and_lists_the_damage(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    record(run_dir, "r", points=5)
    truncated = parts(run_dir, "points")[1]
    truncated.write_bytes(truncated.read_bytes()[:-1])
    flipped = parts(run_dir, "observations")[3]
    flip_a_byte(flipped)

    with pytest.raises(CorruptRunError, match="truncated"):
        TensorRun.load(run_dir)
    run = TensorRun.load(run_dir, on_damage="skip")
    assert run.labels == ("r-0", "r-2", "r-4")
    assert [p.index for p in run.points] == [0, 2, 4]
    assert torch.equal(run["r-4"].tensor("x"), torch.full((256,), 4.0))
    damage = {(d.point_index, d.label, Path(d.path)) for d in run.damage}
    # Point 1 lost its points part (no label to tell); point 3 its observations.
    assert damage == {(1, None, truncated), (3, "r-3", flipped)}
    assert {d.table for d in run.damage} == {"points", "observations"}
    assert any("bytes differ" in d.problem for d in run.damage)
    assert {Path(p) for p, _ in run.validate()} == {truncated, flipped}
    # An intact run has nothing in its damage list.
    record(tmp_path / "good", "g")
    assert TensorRun.load(tmp_path / "good", on_damage="skip").damage == ()
    with pytest.raises(InvalidInputError, match="on_damage"):
        TensorRun.load(run_dir, on_damage="ignore")  # type: ignore[arg-type]


def test_fault7_a_damaged_payload_costs_only_the_values_stored_in_it(tmp_path: Path) -> None:
    """A payload is stored once, with the first point that saw it: a later point that saw
    the same bytes loads with its summary, and its values raise a typed error."""
    run_dir = tmp_path / "run"
    with TensorRecorder(name="r", run_dir=run_dir) as rec:
        for k in range(3):
            with rec.record_point(f"p{k}"):
                rec.observe(torch.full((64,), 7.0), name="same")
                rec.observe(torch.full((64,), float(k)), name="own")
    flip_a_byte(parts(run_dir, "payloads")[0])
    run = TensorRun.load(run_dir, on_damage="skip")
    assert run.labels == ("p1", "p2")
    assert torch.equal(run["p2"].tensor("own"), torch.full((64,), 2.0))
    assert run["p2"].observation("same").summary.mean == 7.0
    with pytest.raises(CorruptRunError, match="damaged part"):
        run["p2"].tensor("same")
    lost = sorted((d.label, d.problem.split("'")[1]) for d in run.damage if d.point_index != 0)
    assert lost == [("p1", "same"), ("p2", "same")]
    assert {Path(p) for p, _ in run.validate()} == {parts(run_dir, "payloads")[0]}


def memory_run(run_dir: Path) -> None:
    alloc = FakeAllocator()
    segment = alloc.segment(2 * MIB)
    with MemoryRecorder(name="m", run_dir=run_dir, _source=alloc) as rec:
        for k in range(3):
            alloc.alloc(segment, 4096)
            rec.record_point(f"m{k}")


def test_fault7_a_left_out_point_still_lends_its_intact_payloads(tmp_path: Path) -> None:
    """The first point stores the bytes later points share; losing that point's own
    observations must not cost the later points their values."""
    run_dir = tmp_path / "run"
    with TensorRecorder(name="r", run_dir=run_dir) as rec:
        for k in range(3):
            with rec.record_point(f"p{k}"):
                rec.observe(torch.full((64,), 7.0), name="same")
    flip_a_byte(parts(run_dir, "observations")[0])
    run = TensorRun.load(run_dir, on_damage="skip")
    assert run.labels == ("p1", "p2")
    assert torch.equal(run["p2"].tensor("same"), torch.full((64,), 7.0))
    assert [(d.point_index, d.table) for d in run.damage] == [(0, "observations")]


def test_fault7_memory_runs_load_their_intact_points(tmp_path: Path) -> None:
    memory_run(tmp_path / "m")
    flip_a_byte(parts(tmp_path / "m", "memory_segments")[1])
    with pytest.raises(CorruptRunError):
        MemoryRun.load(tmp_path / "m")
    run = MemoryRun.load(tmp_path / "m", on_damage="skip")
    assert run.labels == ("m0", "m2")
    assert [(d.point_index, d.label, d.table) for d in run.damage] == [(1, "m1", "memory_segments")]
    assert run["m2"].allocator_scope_stats["all"].reserved == 2 * MIB


def test_fault7_damaged_stacks_cost_the_points_that_may_name_them(tmp_path: Path) -> None:
    """Frames and stacks are stored once, with the first point that saw them: when that
    part is damaged, the later points (which may name its stacks) are left out too."""
    memory_run(tmp_path / "m")
    frames = parts(tmp_path / "m", "memory_frames")
    assert len(frames) == 1, "the fake allocator's frames are all seen at the first point"
    flip_a_byte(frames[0])
    run = MemoryRun.load(tmp_path / "m", on_damage="skip")
    assert run.labels == ()
    assert [(d.point_index, d.label) for d in run.damage] == [(0, "m0"), (1, "m1"), (2, "m2")]
    assert "may name stacks stored with damaged point 0" in run.damage[2].problem

    # The first point left out for another table: its intact stacks still serve the rest.
    memory_run(tmp_path / "n")
    flip_a_byte(parts(tmp_path / "n", "memory_segments")[0])
    run = MemoryRun.load(tmp_path / "n", on_damage="skip")
    assert run.labels == ("m1", "m2")
    assert [(d.point_index, d.table) for d in run.damage] == [(0, "memory_segments")]
    block = run["m2"].raw_snapshot()["segments"][0]["blocks"][0]
    assert block["frames"] == [{"filename": "model.py", "line": 10, "name": "forward"}]


def test_fault7_tcgd_validate(tmp_path: Path, capsys) -> None:
    record(tmp_path / "job" / "a", "a")
    record(tmp_path / "job" / "b", "b")
    capsys.readouterr()
    assert main(["validate", str(tmp_path / "job")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[:2]] == ["ok", "ok"]
    assert out[-1] == "2 runs checked: 2 intact, 0 damaged (0 problems)"

    truncated = parts(tmp_path / "job" / "b", "observations")[0]
    truncated.write_bytes(truncated.read_bytes()[:10])
    flipped = parts(tmp_path / "job" / "b", "points")[2]
    flip_a_byte(flipped)
    assert main(["validate", str(tmp_path / "job")]) == 2
    out = capsys.readouterr().out.splitlines()
    damaged = [line for line in out if line.startswith("DAMAGED")]
    assert len(damaged) == 2
    assert any(str(truncated) in line and "truncated" in line for line in damaged)
    assert any(str(flipped) in line and "bytes differ" in line for line in damaged)
    assert out[-1] == "2 runs checked: 1 intact, 1 damaged (2 problems)"

    (tmp_path / "job" / "a" / "run.json").write_text("{")
    assert main(["validate", str(tmp_path / "job" / "a")]) == 2
    assert "DAMAGED" in capsys.readouterr().out


def test_fault7_query_over_a_folder_skips_a_damaged_run(tmp_path: Path, capsys) -> None:
    record(tmp_path / "job" / "a", "a")
    record(tmp_path / "job" / "b", "b")
    flip_a_byte(parts(tmp_path / "job" / "b", "observations")[0])
    capsys.readouterr()
    sql = "SELECT DISTINCT point_label FROM observations ORDER BY 1"
    assert main(["query", sql, str(tmp_path / "job"), "--json"]) == 0
    captured = capsys.readouterr()
    assert [r["point_label"] for r in json.loads(captured.out)] == [
        f"a-{k}" for k in range(POINTS_PER_RUN)
    ]
    assert "warning: skipping run" in captured.err and str(tmp_path / "job" / "b") in captured.err
    assert main(["query", sql, str(tmp_path / "job"), "--strict"]) == 2
    assert "bytes differ" in capsys.readouterr().err


# ------------------------------------------------------------------------- fault 11


def test_fault11_a_point_past_the_end_is_a_typed_index_error(tmp_path: Path) -> None:
    run = record(tmp_path / "run", "r", points=3)
    with pytest.raises(PointNotFoundError) as caught:
        run[99]
    assert isinstance(caught.value, IndexError) and isinstance(caught.value, KeyError)
    message = str(caught.value)
    assert message.startswith("run 'r' has no point [99]")
    assert "it has 3 points: 'r-0', 'r-1', 'r-2'" in message
    with pytest.raises(IndexError):
        run[-4]
    with pytest.raises(KeyError, match="has no point 'nope'; it has 3 points"):
        run["nope"]
    assert run[-1].label == "r-2"

    many = record(tmp_path / "many", "m", points=14)
    with pytest.raises(PointNotFoundError) as caught:
        many[20]
    message = str(caught.value)
    assert "it has 14 points: 'm-0'" in message and "'m-9', ... (4 more)" in message
    assert "'m-10'" not in message
