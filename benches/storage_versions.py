"""Storage version 1 against version 2: recording back-to-back points, files left on disk,
and what engines pay to query the result.

Both versions run in the same invocation, each in its own subprocess of this interpreter:
version 1 from the previous release's wheel (unzipped into a temp dir placed first on
``PYTHONPATH``), version 2 from the installed package. Measured for each:

1. **Host cost per point**: ``--points`` points back to back, each with ``--observations``
   ``observe`` calls over small CPU float32 tensors (``payload="summary"``), recorded by a
   ``TensorRecorder`` created before the clock starts. Per point = wall time of the loop
   including ``finish()`` / points, and the same without ``finish()``. Median of
   ``--reps`` runs, each into a fresh directory after a short warm-up run.
2. **Files**: ``*.parquet`` and all files under the directory tree after the last point
   (before ``finish()``) and after ``finish()``, for one rank alone in its root; and for
   the whole query data set.
3. **Queries**: ``--ranks`` ranks of ``--points`` points each (version 1:
   ``root/rank=<r>/``; version 2: every rank's run in one job root), queried with a
   per-name aggregate over the observations by DuckDB, polars and Spark ``local[2]``
   (plain Parquet globs; no Delta reader). Median of ``--query-reps``; the engines must
   agree with each other and across versions, and count every observation once.

Run from the repository root in the project's virtualenv:

    python benches/storage_versions.py [--json results.json] [--no-spark]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

V1_WHEEL = Path(
    "/work/main/.whl/v1/torch_cudagraph_debug-0.1.0-cp310-abi3-manylinux_2_35_x86_64.whl"
)
V1_BUILD_HINT = (
    "build it from the last version 1 commit: git worktree add /tmp/v1 ee1ed01 && "
    "cd /tmp/v1 && maturin build --release -o <dir>, then pass --v1-wheel <dir>/<wheel>"
)
RUN_NAME = "eager"
QUERY_SQL = (
    "SELECT name, count(*) AS n, avg(mean) AS avg_mean, max(max) AS max_max, "
    "sum(nan_count) AS nans FROM observations GROUP BY name ORDER BY name"
)


class BenchError(RuntimeError):
    """The benchmark could not run or measured something inconsistent."""


# ----------------------------------------------------------------------------- workers
# The worker half runs inside the subprocess whose ``torch_cudagraph_debug`` is the
# version under test; it imports the package only there.


def file_counts(root: Path) -> dict[str, int]:
    # The recorder's writer thread may rename or delete files while the tree is walked;
    # a file gone before its stat is not counted.
    counts = {"parquet": 0, "all": 0, "bytes": 0}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            try:
                size = os.stat(os.path.join(dirpath, name)).st_size
            except FileNotFoundError:
                continue
            counts["all"] += 1
            counts["bytes"] += size
            counts["parquet"] += name.endswith(".parquet")
    return counts


def make_tensors(count: int, numel: int):
    import torch

    g = torch.Generator().manual_seed(0)
    return [torch.randn(numel, generator=g) for _ in range(count)]


def new_recorder(args: argparse.Namespace, root: Path, rank: int):
    from torch_cudagraph_debug.tensor_debug import TensorRecorder

    kwargs = {}
    if args.commit_interval is not None:
        # Version 1 has no group commit, so only version 2 takes the keyword.
        kwargs["commit_interval"] = args.commit_interval
    return TensorRecorder(
        name=RUN_NAME,
        run_dir=root,
        rank=rank,
        world_size=args.world_size,
        payload="summary",
        **kwargs,
    )


def record_points(recorder, tensors, points: int) -> None:
    for p in range(points):
        with recorder.record_point(f"step{p}"):
            for j, t in enumerate(tensors):
                recorder.observe(t, name=f"layer{j}")


def time_store(root: Path, observations: int, numel: int, points: int) -> dict:
    """The store's own cost per point, without the recorder's per-observe Python: points
    of `observations` summaries computed elsewhere (as device summaries are), handed to the
    native writer back to back, until finish (close) returns. The same call exists in both
    versions."""
    import uuid

    from torch_cudagraph_debug import _native

    fields = {
        "run_id": uuid.uuid4().hex,
        "name": "store",
        "kind": "tensor",
        "execution": "cuda_graph",
        "rank": 0,
        "group_id": None,
        "world_size": 1,
        "provenance": {},
        "run_metadata": {},
    }
    # The header is a native RunHeader now; the older version took its JSON text.
    if hasattr(_native, "RunHeader"):
        run_id, name, kind, execution = (
            fields.pop(k) for k in ("run_id", "name", "kind", "execution")
        )
        header = _native.RunHeader(run_id, name, kind, execution, **fields)
    else:
        header = json.dumps(fields)
    summary = (numel, numel, 0, 0, 0, 0, -1.0, 1.0, 0.0, 0.5, float(numel) ** 0.5)
    rows = [
        {
            "order": j,
            "name": f"layer{j}",
            "invocation_index": 0,
            "dtype": "float32",
            "shape": [numel],
            "stride": [1],
            "source_device": "cuda:0",
            "payload": "summary",
            "data": None,
            "owner": None,
            "summary": summary,
            "site_id": None,
            "graph_kind": None,
            "node_name": None,
            "aten_op": None,
            "module_path": None,
            "source_location": None,
            "compile_id": None,
            "materialized_by_probe": None,
        }
        for j in range(observations)
    ]
    writer = _native.RunWriter(str(root), header, "bench", False)
    start = time.perf_counter()
    for p in range(points):
        writer.commit_point(f"step{p}", "{}", p, None, rows)
    loop_end = time.perf_counter()
    writer.close(True)
    end = time.perf_counter()
    return {"loop_s": loop_end - start, "total_s": end - start}


def worker(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="storage_versions.py _worker")
    parser.add_argument("--version", choices=["v1", "v2"], required=True)
    parser.add_argument("--v1-dir", type=Path, required=True)
    parser.add_argument("--v2-path", type=Path, default=None)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--points", type=int, required=True)
    parser.add_argument("--observations", type=int, required=True)
    parser.add_argument("--numel", type=int, required=True)
    parser.add_argument("--reps", type=int, required=True)
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--commit-interval", type=float, default=None)
    args = parser.parse_args(argv)

    import torch_cudagraph_debug as tcgd

    # A stale PYTHONPATH or a missing editable install would silently time the wrong
    # version; the package's location says which one was imported.
    package = Path(tcgd.__file__).resolve()
    from_v1 = package.is_relative_to(args.v1_dir.resolve())
    wrong_v2 = args.v2_path is not None and not package.is_relative_to(args.v2_path.resolve())
    if from_v1 != (args.version == "v1") or (args.version == "v2" and wrong_v2):
        raise BenchError(f"{args.version} worker imported torch_cudagraph_debug from {package}")

    tensors = make_tensors(args.observations, args.numel)
    warm = new_recorder(args, args.work / "warmup", 0)
    record_points(warm, tensors, 5)
    warm.finish()

    runs = []
    for rep in range(args.reps):
        recorder = new_recorder(args, args.work / f"timed-{rep}", 0)
        start = time.perf_counter()
        record_points(recorder, tensors, args.points)
        loop_end = time.perf_counter()
        recorder.finish()
        end = time.perf_counter()
        runs.append({"loop_s": loop_end - start, "total_s": end - start})
    store_runs = [
        time_store(args.work / f"store-{rep}", args.observations, args.numel, args.points)
        for rep in range(args.reps)
    ]

    # The query data set; rank 0 goes first, alone in the root, and its files are counted
    # there (outside any timed run: walking the tree would disturb the timing).
    query_root = args.work / "query"
    files = {}
    for rank in range(args.ranks):
        recorder = new_recorder(args, query_root, rank)
        record_points(recorder, tensors, args.points)
        if rank == 0:
            files["one_rank_before_finish"] = file_counts(query_root)
        recorder.finish()
        if rank == 0:
            files["one_rank_after_finish"] = file_counts(query_root)
    files["query_set"] = file_counts(query_root)

    print(
        json.dumps(
            {
                "package_version": tcgd.__version__,
                "package_file": tcgd.__file__,
                "runs": runs,
                "store_runs": store_runs,
                "files": files,
                "query_root": str(query_root),
            }
        )
    )


# ----------------------------------------------------------------------------- queries


def observation_glob(version: str, root: Path) -> str:
    if version == "v1":
        return f"{root}/rank=*/observations/*.parquet"
    return f"{root}/observations/rank=*/*.parquet"


def normalise(rows) -> list[tuple]:
    """(name, n, avg_mean, max_max, nans) rows in plain Python types, sorted by name."""
    return sorted((str(r[0]), int(r[1]), float(r[2]), float(r[3]), int(r[4])) for r in rows)


def same_answer(a: list[tuple], b: list[tuple]) -> bool:
    # Engines sum the means in different orders, so the averages may differ in the last
    # bits; everything else must be equal.
    return len(a) == len(b) and all(
        x[0] == y[0]
        and x[1] == y[1]
        and math.isclose(x[2], y[2], rel_tol=1e-9, abs_tol=1e-12)
        and x[3] == y[3]
        and x[4] == y[4]
        for x, y in zip(a, b, strict=True)
    )


def query_duckdb(version: str, root: Path) -> list[tuple]:
    import duckdb

    # Version 1 files carry `rank` themselves (int64) and in the path: read it from the
    # files only. Version 2 has it in the path only: read it as a hive partition.
    hive = "true" if version == "v2" else "false"
    glob = observation_glob(version, root)
    con = duckdb.connect()
    try:
        sql = QUERY_SQL.replace(
            "FROM observations", f"FROM read_parquet('{glob}', hive_partitioning={hive})"
        )
        return con.execute(sql).fetchall()
    finally:
        con.close()


def query_polars(version: str, root: Path) -> list[tuple]:
    import polars as pl

    frame = pl.scan_parquet(observation_glob(version, root), hive_partitioning=version == "v2")
    out = (
        frame.group_by("name")
        .agg(
            pl.len().alias("n"),
            pl.col("mean").mean().alias("avg_mean"),
            pl.col("max").max().alias("max_max"),
            pl.col("nan_count").sum().alias("nans"),
        )
        .sort("name")
        .collect()
    )
    return out.rows()


def spark_session():
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("tcgd-storage-versions")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def query_spark(session, version: str, root: Path) -> list[tuple]:
    # Version 2: the table directory, whose `rank=` partitions Spark discovers (it skips
    # `_delta_log`, `_`-prefixed). Version 1: a glob, since three tables share each rank.
    path = observation_glob(version, root) if version == "v1" else f"{root}/observations"
    session.read.parquet(path).createOrReplaceTempView("observations")
    return [tuple(r) for r in session.sql(QUERY_SQL).collect()]


def timed_median(reps: int, fn) -> tuple[float, list[float], object]:
    times, result = [], None
    for _ in range(reps):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, result


# ----------------------------------------------------------------------------- driver


def unpack_v1(wheel: Path, into: Path) -> Path:
    if not wheel.is_file():
        raise BenchError(f"version 1 wheel not found at {wheel}; {V1_BUILD_HINT}")
    target = into / "v1-site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target)
    # zipfile drops permission bits; the extension module only needs to be readable.
    return target


def run_worker(version: str, v1_dir: Path, work: Path, args: argparse.Namespace) -> dict:
    env = dict(os.environ)
    first = v1_dir if version == "v1" else args.v2_path
    if first is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(first), env.get("PYTHONPATH", "")) if p)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "_worker",
        f"--version={version}",
        f"--v1-dir={v1_dir}",
        f"--work={work}",
        f"--points={args.points}",
        f"--observations={args.observations}",
        f"--numel={args.numel}",
        f"--reps={args.reps}",
        f"--ranks={args.ranks}",
        f"--world-size={args.ranks}",
    ]
    if version == "v2" and args.commit_interval is not None:
        cmd.append(f"--commit-interval={args.commit_interval}")
    if version == "v2" and args.v2_path is not None:
        cmd.append(f"--v2-path={args.v2_path}")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BenchError(f"{version} worker failed (exit {proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summarise_writes(result: dict, points: int) -> dict:
    total = statistics.median(r["total_s"] for r in result["runs"])
    loop = statistics.median(r["loop_s"] for r in result["runs"])
    store = statistics.median(r["total_s"] for r in result["store_runs"])
    store_loop = statistics.median(r["loop_s"] for r in result["store_runs"])
    return {
        "us_per_point": total / points * 1e6,
        "us_per_point_without_finish": loop / points * 1e6,
        "reps_us_per_point": [r["total_s"] / points * 1e6 for r in result["runs"]],
        "store_us_per_point": store / points * 1e6,
        "store_us_per_point_without_finish": store_loop / points * 1e6,
        "reps_store_us_per_point": [r["total_s"] / points * 1e6 for r in result["store_runs"]],
    }


def check_answer(answer: list[tuple], expected_n: int, names: int, what: str) -> None:
    counts = [row[1] for row in answer]
    if len(answer) != names or any(n != expected_n for n in counts):
        raise BenchError(
            f"{what}: expected {names} names with {expected_n} observations each, got "
            f"{[(row[0], row[1]) for row in answer]} (a file counted twice or missing?)"
        )


def ratio(v2: float | None, v1: float | None) -> str:
    if v1 is None or v2 is None or v1 == 0:
        return "n/a"
    return f"{v2 / v1:.3f}"


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        worker(sys.argv[2:])
        return

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--v1-wheel", type=Path, default=V1_WHEEL, help="version 1 wheel")
    parser.add_argument(
        "--v2-path",
        type=Path,
        default=None,
        help="directory holding a version 2 torch_cudagraph_debug (with its built _native) "
        "to put first on PYTHONPATH (default: the installed package)",
    )
    parser.add_argument("--points", type=int, default=500, help="points per run")
    parser.add_argument("--observations", type=int, default=10, help="observations per point")
    parser.add_argument("--numel", type=int, default=4096, help="float32 elements per tensor")
    parser.add_argument("--reps", type=int, default=3, help="timed write runs, median taken")
    parser.add_argument("--ranks", type=int, default=8, help="ranks in the query data set")
    parser.add_argument("--query-reps", type=int, default=5, help="query repetitions")
    parser.add_argument("--spark-reps", type=int, default=3, help="Spark query repetitions")
    parser.add_argument("--no-spark", action="store_true", help="skip Spark (prints n/a)")
    parser.add_argument(
        "--commit-interval",
        type=float,
        default=None,
        help="version 2 recorder's commit_interval in seconds (default: its own)",
    )
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: tmp)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    for name in ("points", "observations", "numel", "reps", "ranks", "query_reps", "spark_reps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")

    import duckdb
    import pyarrow as pa
    import torch

    try:
        import polars as pl
    except ImportError:
        pl = None
    spark_version = None
    if not args.no_spark:
        try:
            import pyspark

            spark_version = pyspark.__version__
        except ImportError:
            print("pyspark is not installed: Spark figures are n/a")

    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "pyarrow": pa.__version__,
        "duckdb": duckdb.__version__,
        "polars": pl.__version__ if pl else None,
        "pyspark": spark_version or ("skipped" if args.no_spark else "missing"),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "load_average": os.getloadavg()[0],
    }
    print(", ".join(f"{k} {v}" for k, v in env.items()))
    print(
        f"{args.points} points x {args.observations} observations of {args.numel} float32 "
        f"(payload='summary'); write median of {args.reps}; queries over {args.ranks} ranks, "
        f"median of {args.query_reps} (Spark {args.spark_reps if spark_version else 'n/a'})"
    )

    results: dict = {"env": env, "params": {k: str(v) for k, v in vars(args).items()}}
    with tempfile.TemporaryDirectory(prefix="tcgd-versions-", dir=args.dir) as tmp:
        tmp_path = Path(tmp)
        v1_dir = unpack_v1(args.v1_wheel, tmp_path)
        raw = {}
        for version in ("v1", "v2"):
            started = time.perf_counter()
            raw[version] = run_worker(version, v1_dir, tmp_path / version, args)
            if version == "v2" and not (Path(raw["v2"]["query_root"]) / "observations").is_dir():
                raise BenchError(
                    "the installed package wrote no observations/ table, so it is not "
                    "storage version 2; rebuild it (maturin develop --release)"
                )
            print(
                f"{version}: torch_cudagraph_debug {raw[version]['package_version']} from "
                f"{raw[version]['package_file']}; wrote in {time.perf_counter() - started:.1f} s",
                flush=True,
            )

        expected_n = args.ranks * args.points
        answers: dict[str, list[tuple]] = {}
        queries: dict[str, dict[str, float | None]] = {"v1": {}, "v2": {}}
        for version in ("v1", "v2"):
            root = Path(raw[version]["query_root"])
            engines = [("duckdb", lambda v=version, r=root: query_duckdb(v, r))]
            if pl is not None:
                engines.append(("polars", lambda v=version, r=root: query_polars(v, r)))
            for engine, fn in engines:
                fn()  # warm the page cache and the engine's lazy imports
                median, times, answer = timed_median(args.query_reps, fn)
                answers[f"{version} {engine}"] = normalise(answer)
                queries[version][engine] = median
                queries[version][f"{engine}_times"] = times
        spark = None
        if spark_version is not None:
            started = time.perf_counter()
            spark = spark_session()
            results["spark_startup_s"] = time.perf_counter() - started
        try:
            for version in ("v1", "v2"):
                if spark is None:
                    queries[version]["spark"] = None
                    continue
                root = Path(raw[version]["query_root"])
                query_spark(spark, version, root)  # warm the JVM's code paths too
                median, times, answer = timed_median(
                    args.spark_reps, lambda v=version, r=root: query_spark(spark, v, r)
                )
                answers[f"{version} spark"] = normalise(answer)
                queries[version]["spark"] = median
                queries[version]["spark_times"] = times
        finally:
            if spark is not None:
                spark.stop()

    for what, answer in answers.items():
        check_answer(answer, expected_n, args.observations, what)
    reference_key = next(iter(answers))
    for what, answer in answers.items():
        if not same_answer(answer, answers[reference_key]):
            raise BenchError(f"{what} answered {answer}, {reference_key} {answers[reference_key]}")

    writes = {v: summarise_writes(raw[v], args.points) for v in ("v1", "v2")}
    files = {v: raw[v]["files"] for v in ("v1", "v2")}
    results.update({"writes": writes, "files": files, "queries": queries})

    rows = [
        (label, writes["v1"][key], writes["v2"][key], ".1f")
        for label, key in (
            ("store: us per point (summaries handed over), incl. finish()", "store_us_per_point"),
            ("store: us per point, excl. finish()", "store_us_per_point_without_finish"),
            ("recorder (observe on CPU tensors): us per point, incl. finish()", "us_per_point"),
            ("recorder: us per point, excl. finish()", "us_per_point_without_finish"),
        )
    ]
    for stage, label in (
        ("one_rank_before_finish", "1 rank, before finish()"),
        ("one_rank_after_finish", "1 rank, after finish()"),
        ("query_set", f"{args.ranks} ranks, finished"),
    ):
        for kind in ("parquet", "all"):
            rows.append(
                (
                    f"{'.parquet' if kind == 'parquet' else 'all'} files, {label}",
                    files["v1"][stage][kind],
                    files["v2"][stage][kind],
                    "d",
                )
            )
        rows.append(
            (
                f"MB on disk, {label}",
                files["v1"][stage]["bytes"] / 1e6,
                files["v2"][stage]["bytes"] / 1e6,
                ".2f",
            )
        )
    for engine, label in (("duckdb", "DuckDB"), ("polars", "polars"), ("spark", "Spark local[2]")):
        rows.append(
            (
                f"{label} query s ({args.ranks} x {args.points} points)",
                queries["v1"].get(engine),
                queries["v2"].get(engine),
                ".3f",
            )
        )
    print()
    print("| measure | v1 | v2 | v2/v1 |")
    print("| --- | --- | --- | --- |")
    for label, v1, v2, spec in rows:
        print(f"| {label} | {fmt(v1, spec)} | {fmt(v2, spec)} | {ratio(v2, v1)} |")
    target = writes["v2"]["store_us_per_point"]
    print(
        f"\nv2 store cost per point {target:.1f} us incl. finish() "
        f"({args.observations} summary observations); target <= 50 us: ",
        end="",
    )
    print("met" if target <= 50 else "not met")
    if "spark_startup_s" in results:
        print(f"Spark session start (not in the query times): {results['spark_startup_s']:.1f} s")

    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"results written to {args.json}")


if __name__ == "__main__":
    try:
        main()
    except BenchError as err:
        sys.exit(f"storage_versions.py: {err}")
