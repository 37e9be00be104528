"""Runs on disk must never lie: one writer per run (name and rank) of a job root,
re-runnable recordings (overwrite), literal paths in `tcgd query`, damaged runs that still
load what is intact, and point lookups that say what the run holds.

Tests go through the public API and the CLI; where a file must be damaged, it is found
from the layout's file names (tests/storage_files.py), and runs that are damaged are
recorded with one file per point (`compact=False`, `commit_interval=0`)."""

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
from processes import start_when_ready
from storage_files import data_files, logged_files, part_of, points_of
from test_memory_support import DATA, MIB, FakeAllocator
from torch_cudagraph_debug import _native
from torch_cudagraph_debug.cli import main
from torch_cudagraph_debug.errors import (
    CorruptRunError,
    InvalidInputError,
    PointNotFoundError,
    RunExistsError,
    RunNotFoundError,
    SnapshotFormatError,
    StorageIOError,
    UnsupportedFormatError,
)
from torch_cudagraph_debug.memory_debug import MemoryRecorder, MemoryRun, import_snapshots
from torch_cudagraph_debug.memory_debug._model import thaw
from torch_cudagraph_debug.tensor_debug import TensorRecorder, TensorRun
from torch_cudagraph_debug.tensor_debug.recorder import open_run_writer

POINTS_PER_RUN = 4
# One file per point and table: what the damage tests need to hit one point.
PER_POINT = {"compact": False, "commit_interval": 0}


def record(
    root: Path | str, who: str, points: int = POINTS_PER_RUN, label: str | None = None, **kwargs
) -> TensorRun:
    """Records run ``who`` in the job root ``root``; its points are labelled
    ``<label>-<k>`` (``label`` defaults to the run's name)."""
    label = who if label is None else label
    with TensorRecorder(name=who, run_dir=root, **kwargs) as rec:
        for k in range(points):
            with rec.record_point(f"{label}-{k}"):
                rec.observe(torch.full((256,), float(k)), name="x")
                rec.observe(torch.arange(8) + k, name="ids")
    assert rec.result is not None
    return rec.result


def files_of_run(root: Path, table: str, run_id: str) -> list[Path]:
    """The data files of ``table`` that hold rows of run ``run_id`` (a root with several)."""
    return [p for p in data_files(root, table) if p.name.startswith(f"part-{run_id}-")]


def part_of_run(root: Path, table: str, point: int, run_id: str) -> Path:
    """The file of ``table`` holding ``point`` of run ``run_id``."""
    for path in files_of_run(root, table, run_id):
        if point in points_of(path):
            return path
    raise AssertionError(f"no {table} file of run {run_id} holds point {point} under {root}")


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
# Every racer records the same run (name and rank) of a round's root; the labels say who.
RACE_NAME = "raced"

RACER = textwrap.dedent(
    """
    import random, sys, time
    import torch
    from torch_cudagraph_debug.errors import RunExistsError, StorageIOError
    from torch_cudagraph_debug.tensor_debug import TensorRecorder

    who, root, rounds, round_s, points, name = sys.argv[1:7]
    rounds, round_s, points = int(rounds), float(round_s), int(points)
    name = who if name == "-" else name
    print("ready", flush=True)
    start = float(sys.stdin.readline())
    rng = random.Random(who)
    for i in range(rounds):
        # Every racer aims at the same instant, give or take 0-3 ms.
        time.sleep(max(0.0, start + i * round_s + rng.uniform(0, 0.003) - time.time()))
        try:
            rec = TensorRecorder(name=name, run_dir=f"{root}/r{i:02d}")
            for k in range(points):
                with rec.record_point(f"{who}-{k}"):
                    rec.observe(torch.full((256,), float(k)), name="x")
                    rec.observe(torch.arange(8) + k, name="ids")
            rec.finish()
        except RunExistsError:
            print(f"lost {i}", flush=True)
            continue
        except StorageIOError as e:
            print(f"error {i}", flush=True)
            print(f"round {i}: {e}", file=sys.stderr, flush=True)
            continue
        print(f"won {i}", flush=True)
    """
)


def race_in_thread(
    who: str, root: Path, start: float, outcomes: list[tuple[str, int, str]], name: str, rounds: int
):
    rng = random.Random(who)
    for i in range(rounds):
        time.sleep(max(0.0, start + i * ROUND_S + rng.uniform(0, 0.003) - time.time()))
        try:
            record(root / f"r{i:02d}", name, label=who)
        except RunExistsError:
            outcomes.append((who, i, "lost"))
            continue
        except StorageIOError:
            outcomes.append((who, i, "error"))
            continue
        outcomes.append((who, i, "won"))


def race(root: Path, script: Path, name: str | None, rounds: int) -> list[tuple[str, int, str]]:
    """Processes and threads create a run in ``root/r<i>`` at the same instant, round
    after round: all of them the run ``name``, or each its own run (``name=None``).
    Returns (racer, round, "won" | "lost") for every attempt."""
    script.write_text(RACER)
    root.mkdir()
    children = start_when_ready(
        [
            [
                sys.executable,
                str(script),
                f"proc{n}",
                str(root),
                str(rounds),
                str(ROUND_S),
                str(POINTS_PER_RUN),
                name or "-",
            ]
            for n in range(CHILDREN)
        ],
        stdin=subprocess.PIPE,
    )
    start = time.time() + 0.5
    for child in children:
        child.stdin.write(f"{start}\n")
        child.stdin.flush()
    outcomes: list[tuple[str, int, str]] = []
    threads = [
        threading.Thread(
            target=race_in_thread,
            args=(f"thread{n}", root, start, outcomes, name or f"thread{n}", rounds),
        )
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
    assert len(outcomes) == rounds * (CHILDREN + THREADS)
    return outcomes


def assert_no_start_races(outcomes: list[tuple[str, int, str]]) -> None:
    """No writer starting beside others fails: a writer ending meanwhile neither removes
    the claim directory another is locking in, nor retires a runs row under a reader
    without the read starting over, and a table opened between another writer's creating
    its log and its first commit is created, not an error."""
    errors = [(who, i) for who, i, verdict in outcomes if verdict == "error"]
    assert not errors, f"{len(errors)} writers failed starting beside others: {errors}"


def test_fault3_two_writers_never_share_a_run(tmp_path: Path) -> None:
    """Racers create the same run (name and rank) of a root: exactly one wins each round,
    and the run holds the winner's points, intact."""
    root = tmp_path / "runs"
    outcomes = race(root, tmp_path / "racer.py", RACE_NAME, RACE_ROUNDS)
    for i in range(RACE_ROUNDS):
        winners = [who for who, r, verdict in outcomes if r == i and verdict == "won"]
        if not winners and any(r == i and verdict == "error" for _, r, verdict in outcomes):
            continue  # an error: assert_no_start_races below reports it
        assert len(winners) == 1, (i, winners)
        run = TensorRun.load(root / f"r{i:02d}")
        assert run.name == RACE_NAME
        assert run.complete is True
        assert run.labels == tuple(f"{winners[0]}-{k}" for k in range(POINTS_PER_RUN))
        assert torch.equal(run[-1].tensor("x"), torch.full((256,), float(POINTS_PER_RUN - 1)))
        assert run.validate() == []
    assert_no_start_races(outcomes)


def test_fault3_writers_of_different_runs_share_a_root(tmp_path: Path) -> None:
    """Racers each create their own run in the same root at the same instant (the ranks
    and runs of one job): every one of them wins, and each run holds its own points."""
    root = tmp_path / "runs"
    rounds = 8
    outcomes = race(root, tmp_path / "racer.py", None, rounds)
    assert "lost" not in {verdict for _, _, verdict in outcomes}
    for i in range(rounds):
        winners = sorted(who for who, r, verdict in outcomes if r == i and verdict == "won")
        names = _native.list_runs(str(root / f"r{i:02d}")).column("name").to_pylist()
        # A writer that failed may have left its run incomplete; every winner's is whole.
        assert set(winners) <= set(names), (i, winners, names)
        for who in winners:
            run = TensorRun.load(root / f"r{i:02d}", name=who)
            assert run.complete is True
            assert run.labels == tuple(f"{who}-{k}" for k in range(POINTS_PER_RUN))
            assert run.validate() == []
    assert_no_start_races(outcomes)


def test_fault3_a_second_writer_of_a_run_being_recorded_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "job"
    first = TensorRecorder(name="eager", run_dir=root)
    with first.record_point("p0"):
        first.observe(torch.ones(3), name="x")
    # The run is being written: neither a plain nor an overwriting writer may join it.
    for overwrite in (False, True):
        with pytest.raises(RunExistsError, match="being written by another recorder"):
            TensorRecorder(name="eager", run_dir=root, overwrite=overwrite)
    # Other runs of the root (another name, or another rank of the name) are not held up.
    other_rank = record(root, "eager", points=1, label="rank1", rank=1, world_size=2)
    other_name = record(root, "compiled", points=1)
    run = first.finish()
    assert run.name == "eager" and run.labels == ("p0",)
    with pytest.raises(RunExistsError, match="already exists"):
        TensorRecorder(name="eager", run_dir=root)
    assert TensorRun.load(root, name="eager", rank=0).labels == ("p0",)
    assert TensorRun.load(root, name="eager", rank=1).run_id == other_rank.run_id
    assert TensorRun.load(root, name="compiled").run_id == other_name.run_id


# ------------------------------------------------------------------------- fault 6


def test_fault6_rerunning_with_overwrite_replaces_the_run(tmp_path: Path) -> None:
    root = tmp_path / "job"
    first = record(root, "run", label="first", **PER_POINT)
    kept = record(root, "other", points=2)
    (root / "notes.txt").write_text("mine")
    with pytest.raises(RunExistsError, match="overwrite=True"):
        record(root, "run", label="second")
    second = record(root, "run", points=2, label="second", overwrite=True, **PER_POINT)
    assert second.run_id != first.run_id
    loaded = TensorRun.load(root, name="run")
    assert loaded.run_id == second.run_id
    assert loaded.labels == ("second-0", "second-1")
    assert loaded.validate() == []
    # No file of the first run is left, in the log or on disk for a raw glob to find.
    for table in ("runs", "points", "observations", "payloads"):
        on_disk = {f"rank=0/{p.name}" for p in data_files(root, table)}
        assert on_disk == logged_files(root, table), table
        assert not any(first.run_id in name for name in on_disk), table
    assert len(files_of_run(root, "points", second.run_id)) == 2
    # The other run of the root, and the user's file, are untouched.
    other = TensorRun.load(root, name="other")
    assert other.run_id == kept.run_id and other.labels == ("other-0", "other-1")
    assert other.validate() == []
    assert (root / "notes.txt").read_text() == "mine"


def test_fault6_overwrite_replaces_only_a_run(tmp_path: Path) -> None:
    """A version 1 run directory is refused, not replaced; files of others in a table
    directory are kept: nothing the user put there is deleted."""
    old = tmp_path / "old"
    old.mkdir()
    (old / "run.json").write_text('{"schema": "torch-cudagraph-debug/run"}')
    (old / "data.bin").write_bytes(b"keep")
    with pytest.raises(UnsupportedFormatError, match="version 1"):
        record(old, "x", overwrite=True)
    assert (old / "run.json").read_text() == '{"schema": "torch-cudagraph-debug/run"}'
    assert sorted(p.name for p in old.iterdir()) == ["data.bin", "run.json"]

    root = tmp_path / "job"
    record(root, "r", label="old")
    notes = root / "points" / "rank=0" / "my-notes.txt"
    notes.write_text("keep")
    assert record(root, "r", label="new", overwrite=True).labels[0] == "new-0"
    assert TensorRun.load(root).labels[0] == "new-0"
    assert notes.read_text() == "keep"

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
    def one_run(label: str, **kwargs) -> MemoryRun:
        alloc = FakeAllocator()
        alloc.alloc(alloc.segment(2 * MIB), 4096)
        with MemoryRecorder(name="m", run_dir=tmp_path / "m", _source=alloc, **kwargs) as rec:
            rec.record_point(f"{label}-0")
        assert rec.result is not None
        return rec.result

    first = one_run("first")
    with pytest.raises(RunExistsError):
        one_run("second")
    second = one_run("second", overwrite=True)
    assert second.labels == ("second-0",) and second.run_id != first.run_id
    loaded = MemoryRun.load(tmp_path / "m")
    assert loaded.run_id == second.run_id and loaded.labels == ("second-0",)


def test_fault6_failed_import_leaves_nothing_and_overwrite_reimports(tmp_path: Path) -> None:
    good = os.path.join(DATA, "memory_default_before.pickle")
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(b"this is no pickle")
    root = tmp_path / "jobs" / "imported"
    with pytest.raises(SnapshotFormatError):
        import_snapshots([good, bad], run_dir=root, labels=["a", "b"])
    # Nothing is left to block the retry: every file is checked before anything is
    # written, so the new root was not even created.
    assert not root.exists()
    with pytest.raises(RunNotFoundError, match="does not exist"):
        MemoryRun.load(root)
    assert import_snapshots([good], run_dir=root, labels=["a"]).labels == ("a",)

    args = ["memory", "import", good, "--run", str(root), "--label", "again"]
    assert main(args) == 2
    assert main([*args, "--overwrite"]) == 0
    assert MemoryRun.load(root).labels == ("again",)


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
    root = tmp_path / "run"
    record(root, "r", **PER_POINT)
    gone = part_of(root, "observations", 1)
    gone.unlink()
    with pytest.raises(CorruptRunError, match="missing") as caught:
        TensorRun.load(root)
    message = str(caught.value)
    assert str(gone) in message
    # The advice names what works on a run that does not load.
    assert "validate()" not in message
    assert 'on_damage="skip"' in message and "tcgd validate" in message


def test_fault7_skip_loads_every_intact_point_and_lists_the_damage(tmp_path: Path) -> None:
    root = tmp_path / "run"
    record(root, "r", points=5, **PER_POINT)
    truncated = part_of(root, "points", 1)
    truncated.write_bytes(truncated.read_bytes()[:-1])
    flipped = part_of(root, "observations", 3)
    flip_a_byte(flipped)

    with pytest.raises(CorruptRunError, match="truncated"):
        TensorRun.load(root)
    run = TensorRun.load(root, on_damage="skip")
    assert run.labels == ("r-0", "r-2", "r-4")
    assert [p.index for p in run.points] == [0, 2, 4]
    assert torch.equal(run["r-4"].tensor("x"), torch.full((256,), 4.0))
    damage = {(d.point_index, d.label, Path(d.path)) for d in run.damage}
    # Point 1 lost its points file (no label to tell); point 3 its observations.
    assert damage == {(1, None, truncated), (3, "r-3", flipped)}
    assert {d.table for d in run.damage} == {"points", "observations"}
    assert any("bytes differ" in d.problem for d in run.damage)
    assert {Path(p) for p, _ in run.validate()} == {truncated, flipped}
    # An intact run has nothing in its damage list.
    record(tmp_path / "good", "g")
    assert TensorRun.load(tmp_path / "good", on_damage="skip").damage == ()
    with pytest.raises(InvalidInputError, match="on_damage"):
        TensorRun.load(root, on_damage="ignore")  # type: ignore[arg-type]


def test_fault7_a_damaged_file_of_many_points_costs_each_of_them(tmp_path: Path) -> None:
    """After finish() a run's rows are compacted into one file per table: damage to one
    costs every point it holds, one damage entry per point."""
    root = tmp_path / "run"
    record(root, "r", points=3)
    (observations,) = data_files(root, "observations")
    assert list(data_files(root, "points")) and points_of(observations) == range(3)
    flip_a_byte(observations)
    run = TensorRun.load(root, on_damage="skip")
    assert run.labels == ()
    assert [(d.point_index, d.label, Path(d.path)) for d in run.damage] == [
        (k, f"r-{k}", observations) for k in range(3)
    ]


def test_fault7_a_damaged_payload_costs_only_the_values_stored_in_it(tmp_path: Path) -> None:
    """A payload is stored once, with the first point that saw it: a later point that saw
    the same bytes loads with its summary, and its values raise a typed error."""
    root = tmp_path / "run"
    with TensorRecorder(name="r", run_dir=root, **PER_POINT) as rec:
        for k in range(3):
            with rec.record_point(f"p{k}"):
                rec.observe(torch.full((64,), 7.0), name="same")
                rec.observe(torch.full((64,), float(k)), name="own")
    flip_a_byte(part_of(root, "payloads", 0))
    run = TensorRun.load(root, on_damage="skip")
    assert run.labels == ("p1", "p2")
    assert torch.equal(run["p2"].tensor("own"), torch.full((64,), 2.0))
    assert run["p2"].observation("same").summary.mean == 7.0
    with pytest.raises(CorruptRunError, match="damaged part"):
        run["p2"].tensor("same")
    lost = sorted((d.label, d.problem.split("'")[1]) for d in run.damage if d.point_index != 0)
    assert lost == [("p1", "same"), ("p2", "same")]
    assert {Path(p) for p, _ in run.validate()} == {part_of(root, "payloads", 0)}


def memory_run(root: Path) -> None:
    alloc = FakeAllocator()
    segment = alloc.segment(2 * MIB)
    with MemoryRecorder(name="m", run_dir=root, _source=alloc, **PER_POINT) as rec:
        for k in range(3):
            alloc.alloc(segment, 4096)
            rec.record_point(f"m{k}")


def test_fault7_a_left_out_point_still_lends_its_intact_payloads(tmp_path: Path) -> None:
    """The first point stores the bytes later points share; losing that point's own
    observations must not cost the later points their values."""
    root = tmp_path / "run"
    with TensorRecorder(name="r", run_dir=root, **PER_POINT) as rec:
        for k in range(3):
            with rec.record_point(f"p{k}"):
                rec.observe(torch.full((64,), 7.0), name="same")
    flip_a_byte(part_of(root, "observations", 0))
    run = TensorRun.load(root, on_damage="skip")
    assert run.labels == ("p1", "p2")
    assert torch.equal(run["p2"].tensor("same"), torch.full((64,), 7.0))
    assert [(d.point_index, d.table) for d in run.damage] == [(0, "observations")]


def test_fault7_memory_runs_load_their_intact_points(tmp_path: Path) -> None:
    memory_run(tmp_path / "m")
    flip_a_byte(part_of(tmp_path / "m", "memory_segments", 1))
    with pytest.raises(CorruptRunError):
        MemoryRun.load(tmp_path / "m")
    run = MemoryRun.load(tmp_path / "m", on_damage="skip")
    assert run.labels == ("m0", "m2")
    assert [(d.point_index, d.label, d.table) for d in run.damage] == [(1, "m1", "memory_segments")]
    assert run["m2"].allocator_scope_stats["all"].reserved_bytes == 2 * MIB


def test_fault7_damaged_stacks_cost_the_points_that_may_name_them(tmp_path: Path) -> None:
    """Frames and stacks are stored once, with the first point that saw them: when that
    file is damaged, the later points (which may name its stacks) are left out too."""
    memory_run(tmp_path / "m")
    frames = data_files(tmp_path / "m", "memory_frames")
    assert len(frames) == 1, "the fake allocator's frames are all seen at the first point"
    assert points_of(frames[0]) == range(1)
    flip_a_byte(frames[0])
    run = MemoryRun.load(tmp_path / "m", on_damage="skip")
    assert run.labels == ()
    assert [(d.point_index, d.label) for d in run.damage] == [(0, "m0"), (1, "m1"), (2, "m2")]
    assert "may name stacks stored with damaged point 0" in run.damage[2].problem


def test_fault7_a_left_out_point_still_lends_its_intact_stacks(tmp_path: Path) -> None:
    """The first point left out for another table: its intact stacks still serve the rest."""
    memory_run(tmp_path / "n")
    flip_a_byte(part_of(tmp_path / "n", "memory_segments", 0))
    run = MemoryRun.load(tmp_path / "n", on_damage="skip")
    assert run.labels == ("m1", "m2")
    assert [(d.point_index, d.table) for d in run.damage] == [(0, "memory_segments")]
    block = thaw(run["m2"].raw_snapshot())["segments"][0]["blocks"][0]
    assert block["frames"] == [{"filename": "model.py", "line": 10, "name": "forward"}]


def test_fault7_tcgd_validate(tmp_path: Path, capsys) -> None:
    job = tmp_path / "job"
    record(job, "a", **PER_POINT)
    b = record(job, "b", **PER_POINT)
    capsys.readouterr()
    assert main(["validate", str(job)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [
        f"ok       {job} (run '{name}', rank 0) ({POINTS_PER_RUN} points)" for name in "ab"
    ]
    assert out[-1] == "2 runs checked: 2 intact, 0 damaged (0 problems)"

    truncated = part_of_run(job, "observations", 0, b.run_id)
    truncated.write_bytes(truncated.read_bytes()[:10])
    flipped = part_of_run(job, "points", 2, b.run_id)
    flip_a_byte(flipped)
    assert main(["validate", str(job)]) == 2
    out = capsys.readouterr().out.splitlines()
    damaged = [line for line in out if line.startswith("DAMAGED")]
    assert len(damaged) == 2
    assert any(str(truncated) in line and "truncated" in line for line in damaged)
    assert any(str(flipped) in line and "bytes differ" in line for line in damaged)
    assert out[0].startswith(f"ok       {job} (run 'a', rank 0)")
    assert out[-1] == "2 runs checked: 1 intact, 1 damaged (2 problems)"

    # A root that is not one, or a version 1 run: exit 2 with the reason.
    assert main(["validate", str(tmp_path / "nothing-here")]) == 2
    assert "is not a job root" in capsys.readouterr().err
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "run.json").write_text("{}")
    assert main(["validate", str(tmp_path / "v1")]) == 2
    assert "storage version 1" in capsys.readouterr().err


def test_fault7_validate_checks_the_runs_row_too(tmp_path: Path, capsys) -> None:
    root = tmp_path / "run"
    record(root, "r")
    (row,) = data_files(root, "runs")
    data = bytearray(row.read_bytes())
    data[0] ^= 0xFF  # the leading magic, which Parquet readers do not read
    row.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["validate", str(root)]) == 2
    captured = capsys.readouterr()
    assert str(row) in captured.out + captured.err


def test_fault7_query_over_a_root_skips_a_damaged_run(tmp_path: Path, capsys) -> None:
    job = tmp_path / "job"
    record(job, "a")
    b = record(job, "b")
    flip_a_byte(part_of_run(job, "observations", 0, b.run_id))
    capsys.readouterr()
    sql = "SELECT DISTINCT point_label FROM observations ORDER BY 1"
    assert main(["query", sql, str(job), "--json"]) == 0
    captured = capsys.readouterr()
    assert [r["point_label"] for r in json.loads(captured.out)] == [
        f"a-{k}" for k in range(POINTS_PER_RUN)
    ]
    assert f"warning: skipping {job} (run 'b', rank 0)" in captured.err
    assert main(["query", sql, str(job), "--strict"]) == 2
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
