"""Crash safety of a tensor run (storage spec, "Promises"): a recording process killed with
SIGKILL at any moment leaves a run that loads, says ``complete=False``, holds exactly the
points committed before the kill with their exact values, and shows no half-written file
to a Parquet reader. Also the two ordinary endings: ``finish()`` and an exception."""

from __future__ import annotations

import inspect
import json
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
from torch_cudagraph_debug.tensor_debug import TensorRun

KILLS = 24
SEED = 20240611
# A child that neither reports progress nor dies within this many seconds is hung.
WATCHDOG_S = 60.0
TABLES = ("payloads", "observations", "points")


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
    # Printed only once the point is durable (the writer thread committed it): every
    # label printed must survive a kill.
    recorder.flush()
    print(label, flush=True)


from torch_cudagraph_debug.tensor_debug import TensorRecorder

if MODE == "endless":
    recorder = TensorRecorder(name="crash", run_dir=RUN_DIR)
    print("ready", flush=True)
    i = 0
    while True:
        record(recorder, i)
        i += 1
else:
    with TensorRecorder(name="crash", run_dir=RUN_DIR) as recorder:
        for i in range(3):
            record(recorder, i)
    print("finished", flush=True)
"""


def write_child_script(tmp_path: Path) -> Path:
    script = tmp_path / "crash_child.py"
    script.write_text(
        "import sys\nimport zlib\n\nimport torch\n\n"
        "RUN_DIR, MODE = sys.argv[1], sys.argv[2]\n\n\n"
        + inspect.getsource(point_values)
        + CHILD_MAIN
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

    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["point_count"] == k
    listed = {p["path"] for p in manifest["parts"]}
    for table in TABLES:
        committed = {f"{table}/part-{n:06d}.parquet" for n in range(1, k + 1)}
        # Every point writes all three parts here ("big" is new at every point).
        assert {p for p in listed if p.startswith(table + "/")} == committed
        names = {p.name for p in (run_dir / table).iterdir()}
        visible = {n for n in names if n.endswith(".parquet")}
        # The only part that may exist unlisted is the one of the point in flight (killed
        # between its rename and the manifest replace); anything else must be hidden.
        in_flight = f"part-{k + 1:06d}.parquet"
        assert visible - {p.split("/")[1] for p in committed} <= {in_flight}, visible
        assert all(n.startswith(".") and n.endswith(".tmp") for n in names - visible), names

    # A Parquet reader globbing the run never meets a half-written file.
    for part in run_dir.glob("*/*.parquet"):
        table = pq.read_table(part)
        rel = part.relative_to(run_dir).as_posix()
        if rel in listed:
            rows = next(p["rows"] for p in manifest["parts"] if p["path"] == rel)
            assert table.num_rows == rows, rel
    # run.parquet is replaced before run.json, so it may already count the point in flight.
    run_table = pq.read_table(run_dir / "run.parquet").to_pylist()
    assert len(run_table) == 1
    assert run_table[0]["point_count"] in (k, k + 1)
    assert run_table[0]["complete"] is complete

    if k:
        # The shared value is stored once however many points referenced it.
        bias = {o.digest for p in run for o in p.observations if o.name == "bias"}
        assert len(bias) == 1
        payload_parts = [run_dir / p for p in sorted(listed) if p.startswith("payloads/")]
        digests = pq.read_table(payload_parts, columns=["digest"]).column("digest").to_pylist()
        assert digests.count(bias.pop()) == 1
    if any((run_dir / "points").glob("*.parquet")):
        glob = (run_dir / "points" / "*.parquet").as_posix()
        with duckdb.connect() as con:
            labels = [
                r[0]
                for r in con.sql(
                    f"SELECT label FROM read_parquet('{glob}') ORDER BY point_index"
                ).fetchall()
            ]
        assert labels in ([f"p{i}" for i in range(k)], [f"p{i}" for i in range(k + 1)])
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
    plan += [Kill(f"p{rng.randrange(3)}", rng.uniform(0.0, 0.15)) for _ in range(KILLS - 12)]
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
        assert reported == [f"p{i}" for i in range(len(reported))]
        try:
            k = check_run(run_dir, complete=False)
        except Exception as e:
            listing = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*"))
            raise AssertionError(
                f"kill {n} ({kill}) left a bad run at {run_dir}: {e!r}; files: {listing}"
            ) from e
        # Every point the child saw committed is there; at most the one in flight is too.
        assert len(reported) <= k <= len(reported) + 1, (kill, reported, k)
        counts.append(k)
        # The next runs need the disk more than a passing run's files.
        shutil.rmtree(run_dir)
    assert counts.count(0) >= 1, counts
    assert sum(k >= 2 for k in counts) >= 1, counts


def test_finish_marks_the_run_complete(tmp_path: Path) -> None:
    script = write_child_script(tmp_path)
    run_dir = tmp_path / "run"
    proc, stderr_path = start_child(script, run_dir, "finish")
    out, _ = proc.communicate(timeout=WATCHDOG_S)
    assert proc.returncode == 0, stderr_path.read_text()
    assert out.split() == ["p0", "p1", "p2", "finished"]
    assert check_run(run_dir, complete=True) == 3
    assert TensorRun.load(run_dir).finished_at is not None


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
