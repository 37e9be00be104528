"""Job roots on disk after a newcomer's first hour: compaction that changes nothing it
cannot finish, refused imports that leave nothing behind, `tcgd query` on a root without
runs, damaged Delta logs, config errors that name the key, claims that are cleaned up, and
Delta logs that stay small (docs/storage.md, "Log cleanup").

Damaged runs are recorded with one file per point (`compact=False`, `commit_interval=0`)
and damaged through the layout's file names (tests/storage_files.py)."""

from __future__ import annotations

import os
import pickle
import textwrap
from pathlib import Path

import pytest
import torch
from storage_files import data_files, part_of
from test_memory_support import DATA
from torch_cudagraph_debug import _native, set_log_retention
from torch_cudagraph_debug.cli import main
from torch_cudagraph_debug.errors import (
    ConfigError,
    CorruptRunError,
    InvalidInputError,
    RunNotFoundError,
    UnsafePickleError,
)
from torch_cudagraph_debug.memory_debug import import_snapshots
from torch_cudagraph_debug.tensor_debug import TensorRecorder, TensorRun

PER_POINT = {"compact": False, "commit_interval": 0}
TABLES = ("runs", "points", "observations", "payloads")


def record(root: Path, name: str, points: int, rank: int = 0, **kwargs: object) -> TensorRun:
    with TensorRecorder(name=name, run_dir=root, rank=rank, world_size=4, **kwargs) as rec:
        for k in range(points):
            with rec.record_point(f"{name}-{k}"):
                rec.observe(torch.full((64,), float(k)), name="x")
    assert rec.result is not None
    return rec.result


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("tcgd: error: "), stderr
    return lines[0]


def log_files(root: Path, table: str) -> list[str]:
    """The versioned files of the table's Delta log (commits and checkpoints)."""
    return sorted(p.name for p in (root / table / "_delta_log").iterdir() if p.name[:20].isdigit())


def tree(root: Path) -> dict[str, int]:
    """Every file under ``root`` with its size."""
    return {
        os.fspath(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()
    }


# ------------------------------------------------------- compact on a damaged run


def test_compact_leaves_a_damaged_run_as_it_was_and_exits_2(tmp_path: Path, capsys) -> None:
    root = tmp_path / "job"
    record(root, "damaged", 3, **PER_POINT)
    record(root, "intact", 3, rank=1, **PER_POINT)
    truncated = part_of(root, "observations", 2)
    truncated.write_bytes(truncated.read_bytes()[:-1])
    before = {p: p.read_bytes() for p in data_files(root, "points")}
    assert len(before) == 3
    capsys.readouterr()

    assert main(["compact", str(root)]) == 2
    out, err = capsys.readouterr()
    assert out.startswith(f"{root}: 1 runs compacted (0 in use, left alone)"), out
    line = one_error_line(err)
    assert line.startswith(
        f"tcgd: error: 1 damaged run left as it was, not compacted: {root} run 'damaged' (rank 0): "
    ), line
    assert truncated.name in line and "truncated" in line and "tcgd validate" in line
    # Not one file of the damaged run was rewritten or retired: its points table holds
    # the three files of its three points, as recorded.
    assert {p: p.read_bytes() for p in data_files(root, "points")} == before
    assert len(data_files(root, "observations")) == 3
    # The intact run (rank 1) was compacted into one file per table.
    assert [len(data_files(root, t, rank=1)) for t in ("points", "observations")] == [1, 1]
    assert TensorRun.load(root, name="intact", rank=1).labels == (
        "intact-0",
        "intact-1",
        "intact-2",
    )
    # The damage is still there for `tcgd validate` to list.
    assert main(["validate", str(root)]) == 2
    assert truncated.name in capsys.readouterr().out


# ------------------------------------------- refused imports and roots without runs


def test_a_refused_pickle_import_leaves_nothing_behind(tmp_path: Path, capsys) -> None:
    good = os.path.join(DATA, "memory_default_before.pickle")
    evil = tmp_path / "evil.pickle"
    evil.write_bytes(pickle.dumps({"x": print}, protocol=4))
    root = tmp_path / "jobs" / "imported"
    # The API: the second file is refused after the first was read.
    with pytest.raises(UnsafePickleError, match="GLOBAL"):
        import_snapshots([good, evil], run_dir=root, labels=["a", "b"])
    assert not root.exists()
    # The command line, into a root that other runs already use: the root is unchanged.
    existing = tmp_path / "existing"
    record(existing, "kept", 1)
    before = tree(existing)
    capsys.readouterr()
    assert main(["memory", "import", good, str(evil), "--run", str(existing)]) == 2
    assert "GLOBAL" in one_error_line(capsys.readouterr().err)
    assert tree(existing) == before
    assert main(["memory", "import", str(evil), "--run", str(root)]) == 2
    capsys.readouterr()
    assert not root.exists()
    # What is importable still imports.
    assert import_snapshots([good], run_dir=root, labels=["a"]).labels == ("a",)


def test_query_on_a_root_without_runs_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    root = tmp_path / "empty"
    # A root whose only run was removed again: its tables exist, it holds no run.
    rec = TensorRecorder(name="gone", run_dir=root)
    rec._writer.discard()
    assert (root / "runs" / "_delta_log").is_dir()
    assert _native.list_runs(str(root)).num_rows == 0
    capsys.readouterr()
    assert main(["query", "select 1", str(root)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line == (
        f"tcgd: error: {str(root)!r} holds no runs yet: there is nothing to query; record a "
        "run into it first"
    )
    # Every run skipped as damaged: the first one's error, one line.
    damaged = tmp_path / "damaged"
    record(damaged, "d", 2, **PER_POINT)
    part = part_of(damaged, "points", 1)
    part.write_bytes(part.read_bytes()[:-1])
    assert main(["query", "select count(*) from points", str(damaged)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("tcgd: warning: skipping") and len(err) == 2, err
    assert err[1].startswith("tcgd: error: ") and part.name in err[1]


# --------------------------------------------------------------- damaged logs


def test_a_damaged_log_is_not_suggested_to_skip(tmp_path: Path) -> None:
    root = tmp_path / "job"
    record(root, "run", 2, **PER_POINT)
    commit = sorted((root / "observations" / "_delta_log").glob("*.json"))[-1]
    commit.write_text("{not json")
    for mode in ("raise", "skip"):
        with pytest.raises(CorruptRunError) as caught:
            TensorRun.load(root, on_damage=mode)
        message = str(caught.value)
        assert f"the Delta log '{root / 'observations' / '_delta_log'}' cannot be read" in (
            message
        ), message
        assert 'not even with on_damage="skip"' in message, message
        assert "load the run with on_damage" not in message, message
    # A damaged data file still suggests skip, and skip still works there.
    other = tmp_path / "other"
    record(other, "run", 2, **PER_POINT)
    part = part_of(other, "observations", 1)
    part.write_bytes(part.read_bytes()[:-1])
    with pytest.raises(CorruptRunError, match='load the run with on_damage="skip"'):
        TensorRun.load(other)
    assert TensorRun.load(other, on_damage="skip").labels == ("run-0",)


# ---------------------------------------------------------------- config keys


def test_a_value_of_the_wrong_type_names_its_key(tmp_path: Path) -> None:
    config = tmp_path / "wrongtype.toml"
    config.write_text(
        textwrap.dedent(
            """\
            version = 1

            [[select]]
            ops = ["aten.mm"]
            limit = 2
            every = "two"
            """
        )
    )
    with pytest.raises(ConfigError) as caught:
        _native.ProbeConfig.load(config)
    message = str(caught.value)
    assert message.endswith(
        'wrongtype.toml:6: select[0].every: invalid type: string "two", expected i64'
    ), message


# --------------------------------------------------------------------- claims


def test_a_finished_run_leaves_no_claim_directory(tmp_path: Path) -> None:
    root = tmp_path / "job"
    record(root, "a", 1)
    assert not (root / "_claims").exists()
    # Two runs at once: the first to end leaves the other's claim alone.
    first = TensorRecorder(name="b", run_dir=root)
    second = TensorRecorder(name="c", run_dir=root)
    assert len(list((root / "_claims").iterdir())) == 2
    first.finish()
    (claim,) = (root / "_claims").iterdir()
    assert (claim / ".tcgd-writer.lock").is_file()
    second.finish()
    assert not (root / "_claims").exists()
    # A run closed by an error, and a compaction (which claims each run), clean up too.
    with pytest.raises(RuntimeError), TensorRecorder(name="d", run_dir=root) as rec:
        with rec.record_point("p"):
            rec.observe(torch.ones(2), name="x")
        raise RuntimeError("stop")
    assert main(["compact", str(root)]) == 0
    assert not (root / "_claims").exists()


# ------------------------------------------------------------------ log cleanup


def test_the_default_retention_is_written_and_keeps_a_fresh_log(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    root = tmp_path / "job"
    record(root, "a", 120, **PER_POINT)
    for table in TABLES:
        configuration = DeltaTable(str(root / table)).metadata().configuration
        assert configuration["delta.logRetentionDuration"] == "interval 10 minutes", table
    # Every commit is younger than 10 minutes: nothing was removed. `points` took a commit
    # per point after its creation, plus its checkpoint at version 100.
    assert log_files(root, "points")[:2] == [
        "00000000000000000000.json",
        "00000000000000000001.json",
    ]
    assert "00000000000000000100.checkpoint.parquet" in log_files(root, "points")


def test_a_four_rank_job_keeps_a_small_log(tmp_path: Path, capsys) -> None:
    """The job of the issue (4 ranks x 100 points, a commit per point) with a retention of
    zero: each table keeps its newest checkpoint and the commits after it, and reads the
    same rows through the log as through a plain glob."""
    from deltalake import DeltaTable

    root = tmp_path / "job"
    record(root, "warmup", 1)
    assert set_log_retention(root, "interval 0 seconds") == 4
    assert set_log_retention(root, "interval 0 seconds") == 0, "already set: no commit"
    for rank in range(4):
        record(root, "job", 100, rank=rank, commit_interval=0)
    for table in TABLES:
        names = log_files(root, table)
        versions = [int(n[:20]) for n in names]
        checkpoints = [v for v, n in zip(versions, names, strict=True) if "checkpoint" in n]
        newest = DeltaTable(str(root / table)).version()
        if table == "runs":
            # 5 runs: a row each at the start and the end, no checkpoint, nothing removed.
            assert checkpoints == [] and versions[0] == 0 and newest < 100
            continue
        # Kept: the newest checkpoint and every version after it, nothing before it.
        assert checkpoints == [max(checkpoints)] and min(versions) == max(checkpoints)
        commits = sorted(int(n[:20]) for n in names if n.endswith(".json"))
        assert commits == list(range(max(checkpoints), newest + 1)), (table, names)
        assert len(names) <= 101, (table, len(names))
    # Each rank's 100 points, read through the log and through the rank glob alike.
    points = DeltaTable(str(root / "points")).to_pyarrow_table()
    assert points.num_rows == 401
    import pyarrow.dataset as ds

    globbed = ds.dataset(
        [str(p) for p in (root / "points").glob("rank=*/*.parquet")], format="parquet"
    ).to_table()
    assert globbed.num_rows == 401
    for rank in range(4):
        assert TensorRun.load(root, name="job", rank=rank).labels[-1] == "job-99"
    # Compaction removes what expired since (nothing is left to remove right away).
    capsys.readouterr()
    assert main(["compact", str(root)]) == 0
    assert "expired log files removed" in capsys.readouterr().out


def test_compact_sets_the_retention_and_removes_expired_log_files(tmp_path: Path, capsys) -> None:
    root = tmp_path / "job"
    record(root, "a", 150, commit_interval=0)
    points_before = log_files(root, "points")
    assert len(points_before) == 153, "152 commits and the checkpoint at 100"
    capsys.readouterr()
    assert main(["compact", str(root), "--log-retention", "interval 1 week"]) == 0
    assert "0 expired log files removed" in capsys.readouterr().out
    assert log_files(root, "points")[0] == "00000000000000000000.json"
    assert main(["compact", str(root), "--log-retention", "interval 0 seconds"]) == 0
    out = capsys.readouterr().out
    removed = int(out.split("stray files deleted, ")[1].split(" expired")[0])
    assert removed >= 100, out
    after = log_files(root, "points")
    assert after[0] == "00000000000000000100.checkpoint.parquet", after[:3]
    assert TensorRun.load(root).labels[-1] == "a-149"
    # A value that is not an interval: one line, exit 2, nothing changed.
    assert main(["compact", str(root), "--log-retention", "2 days"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "'2 days' is not a Delta interval" in line and "interval <n> <unit>" in line
    with pytest.raises(InvalidInputError):
        set_log_retention(root, "interval 1 month")
    with pytest.raises(RunNotFoundError):
        set_log_retention(tmp_path / "nowhere", "interval 1 day")


def test_a_table_created_later_takes_the_roots_retention(tmp_path: Path) -> None:
    from deltalake import DeltaTable
    from test_memory_support import MIB, FakeAllocator
    from torch_cudagraph_debug.memory_debug import MemoryRecorder

    root = tmp_path / "job"
    record(root, "a", 1)
    set_log_retention(root, "interval 3 days")
    alloc = FakeAllocator()
    alloc.alloc(alloc.segment(2 * MIB), 4096)
    with MemoryRecorder(name="m", run_dir=root, _source=alloc) as rec:
        rec.record_point("p")
    configuration = DeltaTable(str(root / "memory_stats")).metadata().configuration
    assert configuration["delta.logRetentionDuration"] == "interval 3 days"


def test_the_globs_docs_storage_md_names(tmp_path: Path) -> None:
    """docs/storage.md, "Globs and engines that read `_delta_log/` as data": once a table
    has a checkpoint, `rank=*/*.parquet` and the readers that skip `_` names see the rows,
    the other globs see the checkpoint's rows too or fail."""
    import duckdb
    import pandas as pd
    import polars as pl
    import pyarrow.dataset as ds

    root = tmp_path / "job"
    record(root, "a", 105, **PER_POINT)
    obs = root / "observations"
    assert "00000000000000000100.checkpoint.parquet" in log_files(root, "observations")

    def duckdb_rows(glob: str) -> int:
        return duckdb.sql(f"select count(*) from read_parquet('{obs}/{glob}')").fetchall()[0][0]

    assert duckdb_rows("rank=*/*.parquet") == 105
    # The checkpoint's rows (log actions) counted as rows of the table, without an error.
    assert duckdb_rows("*/*.parquet") > 105
    assert duckdb_rows("**/*.parquet") == duckdb_rows("*/*.parquet")
    assert ds.dataset(str(obs), format="parquet", partitioning="hive").count_rows() == 105
    assert len(pd.read_parquet(obs)) == 105
    assert pl.scan_parquet(f"{obs}/rank=*/*.parquet").select(pl.len()).collect().item() == 105
    with pytest.raises(Exception, match="different file extensions"):
        pl.scan_parquet(str(obs)).collect()
    with pytest.raises(Exception, match="schema"):
        pl.scan_parquet(f"{obs}/**/*.parquet").collect()
    assert sorted(p.name for p in obs.rglob("*.parquet") if "_delta_log" in p.parts) == [
        "00000000000000000100.checkpoint.parquet"
    ]
