"""Crash safety of a tensor run (docs/storage.md, "Promises"): a recording process killed
with SIGKILL at any moment leaves a job root whose tables load and hold a prefix of the
points, every point that was durable (``flush()`` returned, or a ``commit_interval`` passed)
among them, with their exact values; through the Delta logs every table holds that prefix
(plus, before ``tcgd compact``, at most the rows of the group whose ``points`` rows were
not committed yet); no half-written file is ever visible. Also the two ordinary endings:
``finish()`` and an exception."""

from __future__ import annotations

import inspect
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import torch
from storage_files import data_files, logged_files, points_of
from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import RunNotFoundError
from torch_cudagraph_debug.tensor_debug import TensorRun

KILLS = 24
SEED = 20240611
# A child that neither reports progress nor dies within this many seconds is hung.
WATCHDOG_S = 60.0
TABLES = ("payloads", "observations", "points")
# Short, so that kills land in every phase of a group commit; the timer commits groups
# that no flush() asked for.
COMMIT_INTERVAL = 0.05


def point_values(i):
    """The (name, tensor) pairs observed at point ``i``, in order: a pure function of ``i``,
    so the parent can recompute what the child wrote. Runs inside the child too (its source
    is copied into the child's script), hence no annotations that need imports."""

    def gen(name):
        return torch.Generator().manual_seed(zlib.crc32(f"{i}/{name}".encode()))

    return [
        # 1 to 4 MiB of incompressible float32: large enough that kills land inside the
        # generation, the digesting or the part writes.
        ("big", torch.randn((1 + i % 4) << 18, generator=gen("big"))),
        ("act", torch.randn(64, 256, generator=gen("act")).to(torch.bfloat16)),
        ("idx", torch.randint(-(2**40), 2**40, (1000,), generator=gen("idx"))),
        ("mask", torch.rand(4096, generator=gen("mask")) > 0.5),
        ("h", torch.randn(3, 5, 7, generator=gen("h"), dtype=torch.float64)),
        # The same value at every point and twice per point: its payload is stored once
        # per run, so a kill must not lose a payload that later points only reference.
        ("bias", torch.full((1024,), 0.5)),
        ("bias", torch.full((1024,), 0.5)),
        ("loss", torch.tensor(i / 3.0)),
        ("empty", torch.empty(0, 3, dtype=torch.float16)),
    ]


CHILD_MAIN = """
def record(recorder, i):
    label = f"p{i}"
    with recorder.record_point(label, metadata={"i": i}):
        for name, value in point_values(i):
            recorder.observe(value, name=name)
            if MODE == "raise" and i == 2 and name == "act":
                raise RuntimeError("boom inside p2")
    # Every other point waits for durability: the label is printed once the group holding
    # it is committed, so every label printed must survive a kill. The points between
    # are committed by the interval timer (or by the next flush).
    if MODE != "endless" or i % 2 == 1:
        recorder.flush()
        print(label, flush=True)


from torch_cudagraph_debug.tensor_debug import TensorRecorder

if MODE == "endless":
    recorder = TensorRecorder(name="crash", run_dir=RUN_DIR, commit_interval=INTERVAL)
    print("ready", flush=True)
    i = 0
    while True:
        record(recorder, i)
        i += 1
elif MODE == "wait":
    # Points handed over, then idle for several intervals: the timer must commit them.
    recorder = TensorRecorder(name="crash", run_dir=RUN_DIR, commit_interval=INTERVAL)
    for i in range(3):
        with recorder.record_point(f"p{i}", metadata={"i": i}):
            for name, value in point_values(i):
                recorder.observe(value, name=name)
    time.sleep(10 * INTERVAL)
    print("waited", flush=True)
    time.sleep(60)
else:
    with TensorRecorder(name="crash", run_dir=RUN_DIR) as recorder:
        for i in range(3):
            record(recorder, i)
    print("finished", flush=True)
"""


def write_child_script(tmp_path: Path) -> Path:
    script = tmp_path / "crash_child.py"
    script.write_text(
        "import sys\nimport time\nimport zlib\n\nimport torch\n\n"
        "RUN_DIR, MODE = sys.argv[1], sys.argv[2]\n"
        f"INTERVAL = {COMMIT_INTERVAL}\n\n\n" + inspect.getsource(point_values) + CHILD_MAIN
    )
    return script


def start_child(script: Path, run_dir: Path, mode: str) -> tuple[subprocess.Popen, Path]:
    stderr_path = run_dir.with_name(run_dir.name + ".stderr")
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(script), str(run_dir), mode],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    return proc, stderr_path


def expected_keys(i: int) -> list[tuple[str, int]]:
    seen: dict[str, int] = {}
    keys = []
    for name, _ in point_values(i):
        keys.append((name, seen.get(name, 0)))
        seen[name] = seen.get(name, 0) + 1
    return keys


def _logged_points(root: Path, table: str) -> list[int]:
    """The point indices of ``table``'s rows, read through its Delta log only (the files
    the log lists, each read with pyarrow): what any Delta reader sees."""
    files = sorted(logged_files(root, table))
    if not files:
        return []
    rows = pq.read_table([root / table / f for f in files], columns=["point_index"])
    return sorted(set(rows.column("point_index").to_pylist()))


def check_run(run_dir: Path, *, complete: bool) -> int:
    """Asserts everything a reader may rely on after the writer stopped; returns the number
    of points in the run."""
    run = TensorRun.load(run_dir)
    assert run.complete is complete
    k = len(run)
    assert run.labels == tuple(f"p{i}" for i in range(k))
    for i, point in enumerate(run):
        assert point.index == i
        assert point.metadata == {"i": i}
        assert [o.key for o in point.observations] == expected_keys(i)
        for obs, (name, value) in zip(point.observations, point_values(i), strict=True):
            got = obs.tensor()
            assert got.dtype == value.dtype, (i, name)
            assert got.shape == value.shape, (i, name)
            assert torch.equal(got, value), (i, name)
            assert obs.nbytes == value.numel() * value.element_size()
    assert run.validate() == []

    # Through the logs: `points` holds exactly the prefix; a table committed before it in
    # a group may also hold the rows of that group's points (a kill between the two
    # commits), never anything else.
    assert _logged_points(run_dir, "points") == list(range(k))
    observed = _logged_points(run_dir, "observations")
    assert observed[:k] == list(range(k)), observed
    assert observed == list(range(len(observed))), observed
    for table in TABLES:
        logged = logged_files(run_dir, table)
        on_disk = {f"rank=0/{p.name}" for p in data_files(run_dir, table)}
        assert logged <= on_disk, (table, logged - on_disk)
        # A file a glob sees but no log lists can only be the group in flight: moved into
        # its table, killed before its commit.
        for stray in on_disk - logged:
            assert points_of(run_dir / table / stray)[0] >= k, (table, stray)
        # Files are written under _staging/ and only moved in whole: every file in a
        # table reads as Parquet.
        for path in data_files(run_dir, table):
            pq.read_metadata(path)
    if k:
        # The shared value is stored once however many points referenced it.
        bias = {o.digest for p in run for o in p.observations if o.name == "bias"}
        assert len(bias) == 1
        payload_files = [
            run_dir / "payloads" / f for f in sorted(logged_files(run_dir, "payloads"))
        ]
        digests = pq.read_table(payload_files, columns=["digest"]).column("digest").to_pylist()
        assert digests.count(bias.pop()) == 1

    # `tcgd compact` tidies what the kill left: afterwards every table holds exactly the
    # prefix through its log, and a plain glob sees exactly the logged files.
    if not complete:
        _native.compact_root(str(run_dir))
        assert _logged_points(run_dir, "points") == list(range(k))
        assert _logged_points(run_dir, "observations") == list(range(k))
        for table in TABLES:
            on_disk = {f"rank=0/{p.name}" for p in data_files(run_dir, table)}
            assert logged_files(run_dir, table) == on_disk, table
        assert len(TensorRun.load(run_dir)) == k
        if k:
            glob = (run_dir / "points" / "*" / "*.parquet").as_posix()
            with duckdb.connect() as con:
                labels = [
                    r[0]
                    for r in con.sql(
                        f"SELECT label FROM read_parquet('{glob}') ORDER BY point_index"
                    ).fetchall()
                ]
            assert labels == [f"p{i}" for i in range(k)]
    return k


@dataclass(frozen=True)
class Kill:
    """Kill ``delay`` seconds after the child printed ``anchor`` ("ready": the recorder
    exists and p0 starts; "pN": point N is committed and N+1 starts)."""

    anchor: str
    delay: float


def kill_plan() -> list[Kill]:
    rng = random.Random(SEED)
    # A point takes tens of milliseconds or more here, so a kill within 2 ms of "ready"
    # lands before p0 is committed; after an anchor "pN" the run holds at least N+1
    # points. Delays after an anchor span a few points: mid-generation, mid-digest,
    # mid-part-write and mid-publish all get their share.
    plan = [Kill("ready", rng.uniform(0.0, 0.002)) for _ in range(6)]
    plan += [Kill("ready", rng.uniform(0.0, 0.4)) for _ in range(6)]
    # Anchors are the durable (odd) points.
    plan += [Kill(f"p{rng.choice((1, 3, 5))}", rng.uniform(0.0, 0.15)) for _ in range(KILLS - 12)]
    rng.shuffle(plan)
    return plan


def kill_child(script: Path, run_dir: Path, kill: Kill) -> list[str]:
    """Runs an endless recording child, SIGKILLs it as planned and returns the labels it
    reported committed."""
    proc, stderr_path = start_child(script, run_dir, "endless")
    # readline() below would block forever on a hung child; killing it ends the stream.
    watchdog = threading.Timer(WATCHDOG_S, proc.kill)
    watchdog.start()
    try:
        lines = []
        while True:
            line = proc.stdout.readline()
            assert line, (
                f"child ended before '{kill.anchor}' (rc={proc.poll()}): " + stderr_path.read_text()
            )
            lines.append(line.strip())
            if lines[-1] == kill.anchor:
                break
        time.sleep(kill.delay)
        proc.send_signal(signal.SIGKILL)
        rc = proc.wait()
        lines += [line.strip() for line in proc.stdout.read().splitlines()]
        proc.stdout.close()
    finally:
        watchdog.cancel()
    assert rc == -signal.SIGKILL, (rc, stderr_path.read_text())
    assert lines[0] == "ready", lines
    return lines[1:]


def test_sigkill_at_random_moments_leaves_a_loadable_prefix(tmp_path: Path) -> None:
    script = write_child_script(tmp_path)
    counts = []
    for n, kill in enumerate(kill_plan()):
        run_dir = tmp_path / f"run-{n:02d}"
        reported = kill_child(script, run_dir, kill)
        assert reported == [f"p{i}" for i in range(1, 2 * len(reported), 2)], reported
        try:
            k = check_run(run_dir, complete=False)
        except Exception as e:
            listing = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*"))
            raise AssertionError(
                f"kill {n} ({kill}) left a bad run at {run_dir}: {e!r}; files: {listing}"
            ) from e
        # Every point the child saw durable is there (and the ones before it).
        durable = 2 * len(reported)
        assert k >= durable, (kill, reported, k)
        counts.append(k)
        # The next runs need the disk more than a passing run's files.
        shutil.rmtree(run_dir)
    assert counts.count(0) >= 1, counts
    assert sum(k >= 2 for k in counts) >= 1, counts


def test_points_left_waiting_are_committed_by_the_interval(tmp_path: Path) -> None:
    """No flush(): the writer's timer commits the group within commit_interval, so a kill
    after the process sat idle loses nothing."""
    script = write_child_script(tmp_path)
    run_dir = tmp_path / "run"
    proc, stderr_path = start_child(script, run_dir, "wait")
    watchdog = threading.Timer(WATCHDOG_S, proc.kill)
    watchdog.start()
    try:
        assert proc.stdout.readline().strip() == "waited", stderr_path.read_text()
        # Only the writer's timer can commit these points (nothing flushes). Ten intervals
        # are plenty on an idle machine; on a loaded one the group commit itself (about
        # 10 MiB digested and written) can outlast them, so wait for the points to become
        # visible, up to the watchdog, before the kill.
        deadline = time.monotonic() + WATCHDOG_S / 2
        while visible_points(run_dir) < 3 and time.monotonic() < deadline:
            time.sleep(COMMIT_INTERVAL)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    finally:
        watchdog.cancel()
    assert check_run(run_dir, complete=False) == 3


def visible_points(run_dir: Path) -> int:
    """How many points a reader sees in the run now (0 before its first commit)."""
    try:
        return len(TensorRun.load(run_dir))
    except RunNotFoundError:
        return 0


def test_finish_marks_the_run_complete(tmp_path: Path) -> None:
    script = write_child_script(tmp_path)
    run_dir = tmp_path / "run"
    proc, stderr_path = start_child(script, run_dir, "finish")
    out, _ = proc.communicate(timeout=WATCHDOG_S)
    assert proc.returncode == 0, stderr_path.read_text()
    assert out.split() == ["p0", "p1", "p2", "finished"]
    assert check_run(run_dir, complete=True) == 3
    assert TensorRun.load(run_dir).finished_at is not None
    # finish() compacted the run: one file per table, and the log lists exactly it.
    for table in (*TABLES, "runs"):
        assert len(data_files(run_dir, table)) == 1, table
        assert logged_files(run_dir, table) == {f"rank=0/{data_files(run_dir, table)[0].name}"}


def test_exception_out_of_the_recorder_keeps_the_committed_points(tmp_path: Path) -> None:
    script = write_child_script(tmp_path)
    run_dir = tmp_path / "run"
    proc, stderr_path = start_child(script, run_dir, "raise")
    out, _ = proc.communicate(timeout=WATCHDOG_S)
    stderr = stderr_path.read_text()
    assert proc.returncode == 1, stderr
    # The exception left the `with` block untouched and ended the interpreter.
    assert "RuntimeError: boom inside p2" in stderr.splitlines()[-1]
    assert out.split() == ["p0", "p1"]
    # p2 was open when it raised: discarded, not half committed.
    assert check_run(run_dir, complete=False) == 2
    assert TensorRun.load(run_dir).finished_at is not None
