"""Job roots are plain Parquet under Delta logs: DuckDB and pandas read them without this
package (docs/storage.md, "Layout")."""

from __future__ import annotations

import textwrap

import duckdb
import pandas as pd
import pytest
import torch
from processes import python_stdout
from torch_cudagraph_debug.tensor_debug import TensorRecorder, TensorRun


@pytest.fixture
def job(tmp_path):
    """Two ranks of one job, three points each, in one job root."""
    for rank in (0, 1):
        with TensorRecorder(name="job", run_dir=tmp_path, rank=rank, world_size=2) as rec:
            for step in range(3):
                with rec.record_point(f"step{step}", metadata={"step": step}):
                    rec.observe(torch.full((4, 4), float(step + 10 * rank)), name="h")
                    rec.observe(torch.tensor([step, rank], dtype=torch.int64), name="ids")
    return tmp_path


def test_duckdb_reads_one_rank_directly(job):
    rows = duckdb.sql(
        f"""SELECT point_label, name, numel, mean, std, dtype, shape
            FROM read_parquet('{job}/observations/rank=1/*.parquet')
            WHERE name = 'h' ORDER BY point_index"""
    ).fetchall()
    assert rows == [
        ("step0", "h", 16, 10.0, 0.0, "float32", [4, 4]),
        ("step1", "h", 16, 11.0, 0.0, "float32", [4, 4]),
        ("step2", "h", 16, 12.0, 0.0, "float32", [4, 4]),
    ]


def test_duckdb_sees_every_rank_of_a_job_with_hive_partitioning(job):
    rows = duckdb.sql(
        f"""SELECT rank, count(*) AS n, max(mean) AS top
            FROM read_parquet('{job}/observations/*/*.parquet', hive_partitioning=true)
            WHERE name = 'h' GROUP BY rank ORDER BY rank"""
    ).fetchall()
    assert rows == [(0, 3, 2.0), (1, 3, 12.0)]
    runs = duckdb.sql(
        f"""SELECT rank, name, complete, point_count, format_version
            FROM read_parquet('{job}/runs/*/*.parquet', hive_partitioning=true)
            ORDER BY rank"""
    ).fetchall()
    assert runs == [(0, "job", True, 3, 2), (1, "job", True, 3, 2)]


def test_duckdb_joins_points_and_reassembles_payload_bytes(job):
    # Rows of one run are told apart from the other runs of the root by run_id.
    (meta, digest) = duckdb.sql(
        f"""SELECT p.metadata, o.digest
            FROM read_parquet('{job}/observations/rank=0/*.parquet') o
            JOIN read_parquet('{job}/points/rank=0/*.parquet') p
              USING (run_id, point_index)
            WHERE o.name = 'ids' AND p.label = 'step2'"""
    ).fetchall()[0]
    assert meta == '{"step": 2}'
    chunks = duckdb.sql(
        f"""SELECT data FROM read_parquet('{job}/payloads/rank=0/*.parquet')
            WHERE digest = '{digest}' ORDER BY chunk_index"""
    ).fetchall()
    data = b"".join(c[0] for c in chunks)
    assert torch.frombuffer(bytearray(data), dtype=torch.int64).tolist() == [2, 0]


def test_pandas_reads_a_table_and_our_to_pandas_agrees(job):
    # pyarrow's dataset discovery skips `_delta_log` and turns `rank=` into a column.
    df = pd.read_parquet(job / "observations")
    h = df[(df["name"] == "h") & (df["rank"] == 1)].sort_values("point_index")
    assert h["mean"].tolist() == [10.0, 11.0, 12.0]
    assert h["l2"].tolist() == pytest.approx([40.0, 44.0, 48.0])
    mine = TensorRun.load(job, name="job", rank=1).to_pandas()
    assert mine[mine["name"] == "h"]["mean"].tolist() == [10.0, 11.0, 12.0]
    # The files hold no rank column: the path carries it, and a loaded run is one rank.
    assert set(df.columns) - {"rank"} == set(mine.columns)


def test_a_process_without_our_package_reads_the_run(job):
    # No import of torch_cudagraph_debug in the child: the files alone carry the data.
    code = textwrap.dedent(
        f"""
        import sys, duckdb
        assert "torch_cudagraph_debug" not in sys.modules
        n = duckdb.sql("SELECT count(*) FROM read_parquet('{job}/points/rank=0/*.parquet')")
        print(n.fetchall()[0][0])
        """
    )
    assert python_stdout(code).strip() == "3"
