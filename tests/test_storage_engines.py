"""A job root is readable by every engine users reach for, without our package.

One 8-rank job (8 recorders in this process, rank=0..7, world_size=8: the same files as 8
processes write, at a fraction of the start-up cost) holds 20 points x 4 observations per
rank with a single NaN at a known place. Each engine answers the two questions users ask
first, with its own query language: per site, how many rows, how many NaNs and the largest
value; and where the first NaN is (by point, then rank). Every answer must equal the one
computed here from the tensors, and every engine must see exactly the committed rows with
`rank` as an integer taken from the path.

Engines: deltalake, DuckDB (`read_parquet` with hive partitioning; `delta_scan` when the
extension can be had), polars (`scan_delta`, `scan_parquet`), pyarrow.dataset, pandas and
Spark `local[2]`. Spark reads plain Parquet: its Delta reader ships as jars that the test
machines cannot download."""

from __future__ import annotations

import functools
import shutil
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import torch
from torch_cudagraph_debug.tensor_debug import TensorRecorder

RANKS = 8
POINTS = 20
SITES = ("layer1.attn", "layer1.mlp", "layer2.attn", "layer2.mlp")
# The one non-finite value of the job: (rank, point_index, site name).
NAN_AT = (5, 7, "layer2.mlp")
ROWS = RANKS * POINTS * len(SITES)


def site_tensor(rank: int, point: int, site: int) -> torch.Tensor:
    """Values that differ by rank, point and site, so that a query that mixes them up
    (wrong group, wrong partition value) gets a different maximum."""
    values = torch.linspace(-1.0, 1.0, 16) * (site + 1) + rank * 0.5 + point * 0.01
    if (rank, point, SITES[site]) == NAN_AT:
        values[3] = float("nan")
    return values


@dataclass(frozen=True)
class SiteAggregate:
    rows: int
    nan_count: int
    max: float


@dataclass(frozen=True)
class EngineAnswer:
    rows: int
    rank_type: str  # the engine's own name for the type, for the failure message
    rank_is_integer: bool
    ranks: tuple[int, ...]
    per_site: dict[str, SiteAggregate]
    first_nan: tuple[int, int, str]


@functools.cache
def expected_answer() -> EngineAnswer:
    per_site = {}
    for s, name in enumerate(SITES):
        tensors = [site_tensor(r, p, s) for r in range(RANKS) for p in range(POINTS)]
        # The summary's max covers finite elements only.
        largest = max(float(t[t.isfinite()].max()) for t in tensors)
        nans = sum(int(t.isnan().sum()) for t in tensors)
        per_site[name] = SiteAggregate(rows=len(tensors), nan_count=nans, max=largest)
    return EngineAnswer(
        rows=ROWS,
        rank_type="integer",
        rank_is_integer=True,
        ranks=tuple(range(RANKS)),
        per_site=per_site,
        first_nan=NAN_AT,
    )


# This rank commits every point on its own, so that `finish()` has small files to compact
# (a remove + add commit): what plain Parquet readers see must follow that too.
COMMIT_EVERY_POINT_RANK = 5


def record_job(root: Path) -> None:
    for rank in range(RANKS):
        rec = TensorRecorder(
            name="eager",
            run_dir=root,
            rank=rank,
            world_size=RANKS,
            payload="summary",
            commit_interval=0.0 if rank == COMMIT_EVERY_POINT_RANK else 1.0,
        )
        for point in range(POINTS):
            with rec.record_point(f"step{point}"):
                for s, name in enumerate(SITES):
                    rec.observe(site_tensor(rank, point, s), name=name)
        rec.finish()


@pytest.fixture(scope="module")
def job_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("job")
    record_job(root)
    return root


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    """One session for the module: starting the JVM costs seconds."""
    with warnings.catch_warnings():
        # pyspark warns about pandas 3 on import; its pandas conversions are not used here.
        warnings.simplefilter("ignore", FutureWarning)
        from pyspark.sql import SparkSession

        session = (
            SparkSession.builder.master("local[2]")
            .appName("tcgd-storage-engines")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "1g")
            .getOrCreate()
        )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# --- one reader per engine: each aggregates with its own query language -----------------


def answer_from_arrow(table: pa.Table) -> EngineAnswer:
    rank_type = table.schema.field("rank").type
    grouped = table.group_by("name").aggregate(
        [("name", "count"), ("nan_count", "sum"), ("max", "max")]
    )
    per_site = {
        row["name"]: SiteAggregate(row["name_count"], row["nan_count_sum"], row["max_max"])
        for row in grouped.to_pylist()
    }
    with_nan = table.filter(pc.greater(table["nan_count"], 0)).sort_by(
        [("point_index", "ascending"), ("rank", "ascending")]
    )
    first = with_nan.slice(0, 1).to_pylist()[0]
    return EngineAnswer(
        rows=table.num_rows,
        rank_type=str(rank_type),
        rank_is_integer=pa.types.is_integer(rank_type),
        ranks=tuple(sorted(pc.unique(table["rank"]).to_pylist())),
        per_site=per_site,
        first_nan=(first["rank"], first["point_index"], first["name"]),
    )


def read_deltalake(observations: Path) -> EngineAnswer:
    from deltalake import DeltaTable

    return answer_from_arrow(DeltaTable(str(observations)).to_pyarrow_table())


def read_pyarrow_dataset(observations: Path) -> EngineAnswer:
    import pyarrow.dataset as ds

    dataset = ds.dataset(observations, format="parquet", partitioning="hive")
    return answer_from_arrow(dataset.to_table())


def read_pandas(observations: Path) -> EngineAnswer:
    import pandas as pd

    frame = pd.read_parquet(observations)
    # pandas turns a hive partition column into a categorical; its categories carry the
    # type. Sorting must use the values, not the order in which partitions were listed.
    rank = frame["rank"]
    categories = rank.cat.categories if isinstance(rank.dtype, pd.CategoricalDtype) else rank
    frame = frame.assign(rank=rank.astype(categories.dtype))
    grouped = frame.groupby("name", observed=True).agg(
        rows=("name", "size"), nan_count=("nan_count", "sum"), max=("max", "max")
    )
    per_site = {
        str(name): SiteAggregate(int(row["rows"]), int(row["nan_count"]), float(row["max"]))
        for name, row in grouped.iterrows()
    }
    first = frame[frame["nan_count"] > 0].sort_values(["point_index", "rank"]).iloc[0]
    return EngineAnswer(
        rows=len(frame),
        rank_type=f"{rank.dtype}[{categories.dtype}]",
        rank_is_integer=pd.api.types.is_integer_dtype(categories.dtype),
        ranks=tuple(sorted(int(r) for r in frame["rank"].unique())),
        per_site=per_site,
        first_nan=(int(first["rank"]), int(first["point_index"]), str(first["name"])),
    )


def answer_from_polars(frame: object) -> EngineAnswer:
    import polars as pl

    assert isinstance(frame, pl.LazyFrame)
    rank_type = frame.collect_schema()["rank"]
    grouped = (
        frame.group_by("name")
        .agg(
            pl.len().alias("rows"),
            pl.col("nan_count").sum(),
            pl.col("max").max(),
        )
        .collect()
    )
    per_site = {
        row["name"]: SiteAggregate(row["rows"], row["nan_count"], row["max"])
        for row in grouped.iter_rows(named=True)
    }
    first = (
        frame.filter(pl.col("nan_count") > 0)
        .sort("point_index", "rank")
        .select("rank", "point_index", "name")
        .head(1)
        .collect()
        .row(0)
    )
    return EngineAnswer(
        rows=frame.select(pl.len()).collect().item(),
        rank_type=str(rank_type),
        rank_is_integer=rank_type.is_integer(),
        ranks=tuple(frame.select(pl.col("rank").unique().sort()).collect()["rank"].to_list()),
        per_site=per_site,
        first_nan=first,
    )


def read_polars_delta(observations: Path) -> EngineAnswer:
    import polars as pl

    return answer_from_polars(pl.scan_delta(str(observations)))


def read_polars_parquet(observations: Path) -> EngineAnswer:
    import polars as pl

    # A glob, not the directory: polars refuses a directory that also holds the JSON
    # files of `_delta_log`. `rank=*` keeps the log's checkpoint Parquet files out too.
    glob = str(observations / "rank=*" / "*.parquet")
    return answer_from_polars(pl.scan_parquet(glob, hive_partitioning=True))


def answer_from_duckdb(source: str, parameter: str) -> EngineAnswer:
    import duckdb

    con = duckdb.connect()

    def query(sql: str) -> list[tuple]:
        return con.execute(sql.format(source=source), [parameter]).fetchall()

    [(rank_type,)] = query("SELECT DISTINCT typeof(rank) FROM {source}")
    per_site = {
        name: SiteAggregate(rows, nans, largest)
        for name, rows, nans, largest in query(
            "SELECT name, count(*), sum(nan_count)::BIGINT, max(max) FROM {source} GROUP BY name"
        )
    }
    [first] = query(
        "SELECT rank, point_index, name FROM {source} WHERE nan_count > 0 "
        "ORDER BY point_index, rank LIMIT 1"
    )
    [(rows,)] = query("SELECT count(*) FROM {source}")
    ranks = tuple(r for (r,) in query("SELECT DISTINCT rank FROM {source} ORDER BY rank"))
    return EngineAnswer(
        rows=rows,
        rank_type=rank_type,
        rank_is_integer=rank_type
        in {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"},
        ranks=ranks,
        per_site=per_site,
        first_nan=tuple(first),
    )


def read_duckdb_any_glob(observations: Path) -> EngineAnswer:
    # The glob a user types first: every Parquet file one level below the table. It also
    # matches a checkpoint in `_delta_log` (then DuckDB fails on a hive partition
    # mismatch), so the documented glob is the `rank=*` one below.
    return answer_from_duckdb(
        "read_parquet($1, hive_partitioning=true)", str(observations / "*" / "*.parquet")
    )


def read_duckdb_rank_glob(observations: Path) -> EngineAnswer:
    # The glob that stays right once `_delta_log` holds checkpoint Parquet files.
    return answer_from_duckdb(
        "read_parquet($1, hive_partitioning=true)", str(observations / "rank=*" / "*.parquet")
    )


def read_spark(observations: Path, spark: object) -> EngineAnswer:
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegralType

    # The table directory as a whole: Spark discovers `rank=<r>` and skips `_delta_log`.
    frame = spark.read.parquet(str(observations))  # type: ignore[attr-defined]
    rank_type = frame.schema["rank"].dataType
    grouped = frame.groupBy("name").agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum("nan_count").alias("nan_count"),
        F.max("max").alias("max"),
    )
    per_site = {
        row["name"]: SiteAggregate(row["rows"], row["nan_count"], row["max"])
        for row in grouped.collect()
    }
    first = (
        frame.where(F.col("nan_count") > 0)
        .orderBy("point_index", "rank")
        .select("rank", "point_index", "name")
        .first()
    )
    ranks = tuple(r["rank"] for r in frame.select("rank").distinct().orderBy("rank").collect())
    return EngineAnswer(
        rows=frame.count(),
        rank_type=rank_type.simpleString(),
        rank_is_integer=isinstance(rank_type, IntegralType),
        ranks=ranks,
        per_site=per_site,
        first_nan=(first["rank"], first["point_index"], first["name"]),
    )


READERS: dict[str, Callable[[Path], EngineAnswer]] = {
    "deltalake": read_deltalake,
    "duckdb-read_parquet-any": read_duckdb_any_glob,
    "duckdb-read_parquet-rank": read_duckdb_rank_glob,
    "polars-scan_delta": read_polars_delta,
    "polars-scan_parquet": read_polars_parquet,
    "pyarrow-dataset": read_pyarrow_dataset,
    "pandas": read_pandas,
}


def assert_answers_match(engine: str, got: EngineAnswer) -> None:
    want = expected_answer()
    assert got.rank_is_integer, f"{engine}: rank is {got.rank_type}, not an integer"
    assert got.ranks == want.ranks, f"{engine}: ranks"
    assert got.rows == want.rows, f"{engine}: saw {got.rows} rows, {want.rows} committed"
    assert got.per_site == want.per_site, f"{engine}: per-site aggregate"
    assert got.first_nan == want.first_nan, f"{engine}: first NaN"


# --- the tests --------------------------------------------------------------------------


def test_job_is_laid_out_as_one_delta_table_partitioned_by_rank(job_root: Path) -> None:
    from deltalake import DeltaTable

    observations = job_root / "observations"
    table = DeltaTable(str(observations))
    assert table.metadata().partition_columns == ["rank"]
    committed = sorted(Path(uri) for uri in table.file_uris())
    # A plain Parquet reader lists files, not the log: what it can see must be exactly
    # what the log commits (no staged, abandoned or compacted-away file left in place).
    on_disk = sorted(observations.glob("rank=*/*.parquet"))
    assert on_disk == committed
    assert {p.parent.name for p in on_disk} == {f"rank={r}" for r in range(RANKS)}
    # The rank that committed point by point was compacted: its small files are removed in
    # the log and gone from the disk, one file is left.
    removes = [
        line
        for entry in observations.joinpath("_delta_log").glob("*.json")
        for line in entry.read_text().splitlines()
        if line.startswith('{"remove"')
    ]
    assert len(removes) >= 2, "the per-point rank was not compacted"
    assert len(list(observations.glob(f"rank={COMMIT_EVERY_POINT_RANK}/*.parquet"))) == 1
    assert sum(pq.ParquetFile(p).metadata.num_rows for p in committed) == ROWS
    for path in committed:
        # `rank` lives in the path only: a copy inside the files is what made engines
        # disagree on its type.
        assert "rank" not in pq.read_schema(path).names, path


@pytest.mark.parametrize("engine", sorted(READERS))
def test_engine_gives_the_same_answers(engine: str, job_root: Path) -> None:
    assert_answers_match(engine, READERS[engine](job_root / "observations"))


def test_spark_reads_the_table_directory_as_plain_parquet(job_root: Path, spark: object) -> None:
    assert_answers_match("spark", read_spark(job_root / "observations", spark))


def test_duckdb_delta_scan_when_the_extension_can_be_had(job_root: Path) -> None:
    """`delta_scan` needs DuckDB's delta extension, downloaded on first use. Where it can
    be installed it must agree with the others; where it cannot (no network), the only
    acceptable failure is the download itself, and plain Parquet with hive partitioning is
    the DuckDB route that must work (checked by the read_parquet cases)."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions = false")
    try:
        try:
            con.execute("LOAD delta")
        except duckdb.IOException:
            con.execute("INSTALL delta")
            con.execute("LOAD delta")
    except duckdb.IOException as err:
        assert "delta" in str(err) and "download" in str(err).lower(), err
        fallback = read_duckdb_rank_glob(job_root / "observations")
        assert_answers_match("duckdb-read_parquet-rank", fallback)
        return
    assert_answers_match(
        "duckdb-delta_scan", answer_from_duckdb("delta_scan($1)", str(job_root / "observations"))
    )


def test_readers_stay_right_after_a_delta_checkpoint(
    job_root: Path, tmp_path: Path, spark: object
) -> None:
    """Delta writers add checkpoint Parquet files to `_delta_log` from time to time; a
    `rank=*` glob and the directory readers must not pick them up as data."""
    from deltalake import DeltaTable

    copy = tmp_path / "observations"
    shutil.copytree(job_root / "observations", copy)
    DeltaTable(str(copy)).create_checkpoint()
    assert any(copy.joinpath("_delta_log").glob("*.checkpoint.parquet"))
    for engine in (
        "deltalake",
        "duckdb-read_parquet-rank",
        "polars-scan_delta",
        "polars-scan_parquet",
        "pyarrow-dataset",
        "pandas",
    ):
        assert_answers_match(f"{engine} after a checkpoint", READERS[engine](copy))
    assert_answers_match("spark after a checkpoint", read_spark(copy, spark))
