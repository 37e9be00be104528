"""Storage version 2 (docs/storage.md): job roots of Delta tables that many processes append
to at once, group commit by interval, compaction that readers never see half done, and the
schema every engine reads."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from processes import start_when_ready
from storage_files import data_files, logged_files
from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import RunNotFoundError, UnsupportedFormatError
from torch_cudagraph_debug.tensor_debug import TensorRecorder, TensorRun, TensorRunGroup

WRITERS = 8
POINTS = 40

WRITER_SCRIPT = """
import sys, time
from pathlib import Path
import torch
from torch_cudagraph_debug.tensor_debug import TensorRecorder

root, rank, go = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
recorder = TensorRecorder(
    name="job", run_dir=root, rank=rank, world_size=WRITERS, payload="summary",
    commit_interval=0.005,
)
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
for p in range(POINTS):
    with recorder.record_point(f"step{p}"):
        recorder.observe(torch.full((16,), float(rank * 1000 + p)), name="x")
    # Commit often, so the ranks' commits interleave in every table's log.
    if p % 4 == 3:
        recorder.flush()
recorder.finish()
print("done", flush=True)
"""


def test_eight_processes_append_to_one_root_at_once(tmp_path: Path) -> None:
    root = tmp_path / "job"
    script = tmp_path / "writer.py"
    script.write_text(f"WRITERS = {WRITERS}\nPOINTS = {POINTS}\n" + WRITER_SCRIPT)
    go = tmp_path / "go"
    procs = start_when_ready(
        [[sys.executable, str(script), str(root), str(rank), str(go)] for rank in range(WRITERS)]
    )
    go.touch()
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert out.strip() == "done"

    group = TensorRunGroup.load(root)
    assert group.ranks == tuple(range(WRITERS))
    assert group.complete
    for rank in range(WRITERS):
        run = group.run(rank)
        assert run.labels == tuple(f"step{p}" for p in range(POINTS))
        means = [point.observations[0].summary.mean for point in run]
        assert means == [float(rank * 1000 + p) for p in range(POINTS)]
    # Every rank committed many times into the same logs, with no lock server: each
    # table's log has one version per commit of every rank, none lost or doubled.
    points_log = sorted((root / "points" / "_delta_log").glob("*.json"))
    assert len(points_log) > 2 * WRITERS
    versions = [int(p.stem) for p in points_log]
    assert versions == list(range(len(versions)))
    # After finish() each rank's run is one file per table, and the log says so.
    for table in ("points", "observations", "runs"):
        for rank in range(WRITERS):
            files = data_files(root, table, rank)
            assert len(files) == 1, (table, rank, files)
        assert len(logged_files(root, table)) == WRITERS


def test_the_interval_commits_points_nobody_flushed(tmp_path: Path) -> None:
    recorder = TensorRecorder(name="live", run_dir=tmp_path, payload="summary", commit_interval=0.2)
    for p in range(3):
        with recorder.record_point(f"p{p}"):
            recorder.observe(torch.arange(4.0) + p, name="x")
    # Waiting for the group: nothing committed yet.
    assert logged_files(tmp_path, "points") == set()
    deadline = time.monotonic() + 10
    while not logged_files(tmp_path, "points") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(logged_files(tmp_path, "points")) == 1
    # Another process (here: a reader) sees the three points while the run is recorded.
    live = TensorRun.load(tmp_path)
    assert live.labels == ("p0", "p1", "p2")
    assert live.complete is False
    run = recorder.finish()
    assert run.complete and len(run) == 3


def _record_many_files(root: Path, points: int) -> None:
    recorder = TensorRecorder(
        name="small-files", run_dir=root, payload="full", commit_interval=0, compact=False
    )
    for p in range(points):
        with recorder.record_point(f"p{p}"):
            recorder.observe(torch.full((8,), float(p)), name="x")
    recorder.finish()


def test_a_reader_during_compaction_sees_one_version(tmp_path: Path) -> None:
    deltalake = pytest.importorskip("deltalake")
    points = 120
    _record_many_files(tmp_path, points)
    assert len(data_files(tmp_path, "observations")) == points
    expected_sum = float(sum(range(points)) * 8)

    seen: list[tuple[int, float]] = []
    delta_rows: list[int] = []
    stale: list[BaseException] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def read_while_compacting() -> None:
        while not stop.is_set():
            try:
                run = TensorRun.load(tmp_path)
                seen.append((len(run), sum(p.observations[0].summary.mean * 8 for p in run)))
            except BaseException as error:
                failures.append(error)
                return
            # Another Delta reader: it reads one version, never a mix; a version whose
            # files a finished compaction already deleted is an error for it (it reads
            # again), never a wrong answer.
            try:
                table = deltalake.DeltaTable(str(tmp_path / "observations"))
                delta_rows.append(table.to_pyarrow_table().num_rows)
            except FileNotFoundError as error:
                stale.append(error)

    reader = threading.Thread(target=read_while_compacting)
    reader.start()
    time.sleep(0.2)
    report = _native.compact_root(str(tmp_path))
    time.sleep(0.2)
    stop.set()
    reader.join(timeout=60)
    assert not failures, failures
    assert len(seen) >= 2
    assert all(s == (points, expected_sum) for s in seen), set(seen)
    assert all(n == points for n in delta_rows), set(delta_rows)
    after = deltalake.DeltaTable(str(tmp_path / "observations")).to_pyarrow_table()
    assert after.num_rows == points
    assert report["runs_compacted"] == 1
    assert report["files_after"] < report["files_before"]
    for table in ("points", "observations", "payloads"):
        files = data_files(tmp_path, table)
        assert len(files) == 1, (table, len(files))
        assert logged_files(tmp_path, table) == {f"rank=0/{files[0].name}"}
    # The compacted run reads the same values back, payloads included.
    run = TensorRun.load(tmp_path)
    assert [p.observations[0].tensor()[0].item() for p in run] == [float(p) for p in range(points)]
    assert run.validate() == []


def test_runs_share_a_root_and_are_chosen_by_name(tmp_path: Path) -> None:
    for name, offset in (("eager", 0.0), ("compiled", 1.0)):
        with TensorRecorder(name=name, run_dir=tmp_path) as recorder:
            with recorder.record_point("step"):
                recorder.observe(torch.ones(3) + offset, name="y")
    with pytest.raises(RunNotFoundError, match="2 runs match"):
        TensorRun.load(tmp_path)
    eager = TensorRun.load(tmp_path, name="eager")
    compiled = TensorRun.load(tmp_path, name="compiled")
    assert eager["step"].observations[0].tensor().tolist() == [1.0, 1.0, 1.0]
    assert compiled["step"].observations[0].tensor().tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RunNotFoundError, match="'compiled' \\(rank 0"):
        TensorRun.load(tmp_path, name="nope")
    runs = _native.list_runs(str(tmp_path)).to_pylist()
    assert sorted((r["name"], r["rank"], r["complete"]) for r in runs) == [
        ("compiled", 0, True),
        ("eager", 0, True),
    ]


def test_a_version_one_run_says_what_it_is(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"schema": "torch-cudagraph-debug/run"}))
    with pytest.raises(UnsupportedFormatError, match="storage version 1"):
        TensorRun.load(tmp_path)
    with pytest.raises(UnsupportedFormatError, match="storage version 1"):
        TensorRecorder(name="new", run_dir=tmp_path)


def test_schema_every_engine_reads(tmp_path: Path) -> None:
    with TensorRecorder(name="s", run_dir=tmp_path, run_metadata={"k": 1}) as recorder:
        with recorder.record_point("p", metadata={"step": 3}):
            recorder.observe(torch.ones(2, 3), name="w")
    observations = pq.ParquetFile(data_files(tmp_path, "observations")[0])
    arrow = observations.schema_arrow
    # List children are named as the Parquet spec says; no reserved word as a column; the
    # rank is only in the path.
    assert arrow.field("shape").type.value_field.name == "element"
    assert "order" not in arrow.names and "ordinal" in arrow.names
    assert "rank" not in arrow.names and "run_id" in arrow.names
    metadata = observations.metadata.metadata
    assert metadata[b"tcgd.format_version"] == b"2"
    assert metadata[b"tcgd.table"] == b"observations"
    # JSON text columns carry Parquet's JSON logical type.
    points = pq.ParquetFile(data_files(tmp_path, "points")[0])
    column = points.schema.column(points.schema_arrow.get_field_index("metadata"))
    assert str(column.logical_type) == "JSON"
    runs = pq.ParquetFile(data_files(tmp_path, "runs")[0])
    for name in ("provenance", "run_metadata"):
        column = runs.schema.column(runs.schema_arrow.get_field_index(name))
        assert str(column.logical_type) == "JSON"
    payloads = pq.ParquetFile(data_files(tmp_path, "payloads")[0]).schema_arrow
    assert payloads.names[:2] == ["run_id", "digest"]
    # The layout version is in every table's Delta metadata too.
    first = (tmp_path / "observations" / "_delta_log" / "00000000000000000000.json").read_text()
    meta = next(json.loads(line)["metaData"] for line in first.splitlines() if "metaData" in line)
    assert meta["configuration"]["tcgd.format_version"] == "2"
    assert meta["partitionColumns"] == ["rank"]
