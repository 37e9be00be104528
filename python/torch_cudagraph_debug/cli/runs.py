"""Run-level commands: `tcgd query` (SQL over the job roots' tables), `tcgd validate` (every
file of every run checked) and `tcgd compact`."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

from torch_cudagraph_debug.cli._exit import (
    EXIT_ERROR,
    EXIT_OK,
)
from torch_cudagraph_debug.cli._subcommands import Command, arg
from torch_cudagraph_debug.cli.tensor import _table

# The job roots `query` and `validate` read.
_ROOTS = arg("runs", nargs="+", metavar="root", help="job roots (every run in each)")


def _runs_in(roots: list[str]) -> list[dict[str, Any]]:
    """Every run of the given job roots: its root, name, rank and kind (the root's runs
    table, read natively)."""
    from torch_cudagraph_debug import _native

    found = []
    for root in roots:
        for row in _native.list_runs(root).to_pylist():
            found.append({"root": root, **row})
    return found


def _describe_run(run: dict[str, Any]) -> str:
    return f"{run['root']} (run '{run['name']}', rank {run['rank']})"


def _tables_named(sql: str) -> list[str]:
    """The run tables a query names: only those are read (a query of `observations` does
    not read every payload byte of every run)."""
    from torch_cudagraph_debug import _native

    return [
        table
        for table in _native.RunReader.table_names()
        if re.search(rf"\b{table}\b", sql, flags=re.IGNORECASE)
    ]


def _query(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug import _native
    from torch_cudagraph_debug.errors import (
        InvalidInputError,
        MissingDependencyError,
        RunNotFoundError,
        StorageError,
    )

    try:
        import duckdb
        import pyarrow as pa
    except ImportError as e:
        raise MissingDependencyError(f"tcgd query needs duckdb: pip install duckdb ({e})") from None

    wanted = _tables_named(args.sql)
    runs: list[Any] = []
    tables: dict[str, list[Any]] = {table: [] for table in wanted}
    skipped: list[StorageError] = []
    for run in _runs_in(args.runs):
        # Runs are read by our reader and handed to DuckDB as Arrow tables, never as
        # paths: DuckDB's read_parquet treats `[`, `*` and `?` in a directory name as a
        # glob (a root at `exp[1]` would answer with the rows of `exp1`). The reader also
        # reads only committed files, each checked against its digest.
        try:
            reader = _native.RunReader(run["root"], "raise", run["name"], run["rank"], run["kind"])
            loaded = {
                table: reader.table(table)
                for table in wanted
                if table != "runs" and table in reader.table_names_of_run()
            }
            row = reader.run_table()
        except StorageError as error:
            if args.strict:
                raise
            print(
                f"tcgd: warning: skipping {_describe_run(run)}: {error} (--strict: fail instead)",
                file=sys.stderr,
            )
            skipped.append(error)
            continue
        # The files carry no rank (the `rank=` partition of their path does): each row
        # gets its run's rank as the last column, where hive-partitioned reads put it.
        runs.append(_with_rank(row, run["rank"]))
        for table, batch in loaded.items():
            tables[table].append(_with_rank(batch, run["rank"]))
    if not runs:
        if skipped:
            # Every run was skipped: there is nothing to answer from.
            raise skipped[0]
        roots = ", ".join(repr(root) for root in args.runs)
        raise RunNotFoundError(
            f"{roots} {'holds' if len(args.runs) == 1 else 'hold'} no runs yet: there is "
            "nothing to query; record a run into it first"
        )
    con = duckdb.connect()
    con.register("runs", pa.concat_tables(runs))
    for table, parts in tables.items():
        if table != "runs" and parts:
            con.register(table, pa.concat_tables(parts))
    try:
        relation = con.sql(args.sql)
        if relation is None:  # a statement without a result (CREATE, SET, ...)
            return EXIT_OK
        # DuckDB 2 renamed arrow() to to_arrow_table().
        fetch = getattr(relation, "to_arrow_table", None) or relation.arrow
        result = fetch()
    except duckdb.Error as e:
        raise InvalidInputError(f"query failed: {e}") from None
    rows = result.to_pylist()
    if args.json:
        print(json.dumps(rows, default=_json_value))
        return EXIT_OK
    names = result.column_names
    shown = rows[: args.limit]
    table = [tuple(names)] + [tuple(_cell(r[n]) for n in names) for r in shown]
    _table(table)
    if len(rows) > len(shown):
        print(f"  ... {len(rows) - len(shown)} more rows (--limit, or --json for all)")
    return EXIT_OK


def _with_rank(batch: Any, rank: int) -> Any:
    import pyarrow as pa

    table = pa.Table.from_batches([batch])
    return table.append_column("rank", pa.array([rank] * table.num_rows, pa.int64()))


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


QUERY_COMMAND = Command(
    "query",
    _query,
    "SQL (DuckDB) over runs: tables runs, points, observations, payloads",
    (
        arg(
            "sql",
            help='the query, e.g. "SELECT name, max(abs(mean)) FROM observations GROUP BY name"',
        ),
        _ROOTS,
        arg("--json", action="store_true", help="print the rows as a JSON list"),
        arg("--limit", type=int, default=100, help="rows shown in the table (100)"),
        arg(
            "--strict",
            action="store_true",
            help="fail (exit 2) on a damaged run instead of skipping it with a warning",
        ),
    ),
)
"""`tcgd query "<SQL>" RUN...`: DuckDB over the committed rows of the given runs (or of
every run under a job directory), as tables `runs`, `points`, `observations`, `payloads`
(and the memory tables of memory runs). A run that cannot be read is skipped with a
warning, or fails the query with `--strict`."""


# ---------------------------------------------------------------------------- validate
def _validate(args: argparse.Namespace) -> int:
    """Checks every file of every run: one line per run that is intact, one line per
    problem of a damaged one; exit 0 when all are intact, 2 otherwise."""
    from torch_cudagraph_debug import _native
    from torch_cudagraph_debug.errors import StorageError

    checked = damaged = problems = 0
    for run in _runs_in(args.runs):
        checked += 1
        where_run = _describe_run(run)
        try:
            # "skip" reads past damaged files, so every problem of the run is listed, not
            # only the first.
            reader = _native.RunReader(run["root"], "skip", run["name"], run["rank"], run["kind"])
            issues = [(os.fspath(where), problem) for where, problem in reader.validate()]
            points = reader.manifest().point_count
        except StorageError as error:
            # The table logs themselves: nothing of the run can be checked past them.
            issues = [(where_run, str(error))]
        if not issues:
            print(f"ok       {where_run} ({points} points)")
            continue
        damaged += 1
        problems += len(issues)
        for where, problem in issues:
            print(f"DAMAGED  {where}: {problem}")
    print(
        f"{checked} run{'s' if checked != 1 else ''} checked: {checked - damaged} intact, "
        f"{damaged} damaged ({problems} problem{'s' if problems != 1 else ''})"
    )
    return EXIT_OK if damaged == 0 else EXIT_ERROR


VALIDATE_COMMAND = Command(
    "validate",
    _validate,
    "check every file of runs; exit 0 when intact, 2 when damage is found",
    (_ROOTS,),
    description="Check every file and payload digest of every run of the given job roots. "
    "Prints one line per intact run and one line per problem; exits 0 when every run is "
    "intact, 2 otherwise.",
)
"""`tcgd validate ROOT...`: every file and payload digest of every tensor and memory run of
the given job roots."""


# ---------------------------------------------------------------------------- compact
def _compact(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug import _native
    from torch_cudagraph_debug.errors import CorruptRunError

    damaged: list[str] = []
    for root in args.roots:
        if args.log_retention is not None:
            _native.set_log_retention(root, args.log_retention)
        report = _native.compact_root(root)
        print(
            f"{root}: {report['runs_compacted']} runs compacted "
            f"({report['runs_in_use']} in use, left alone): {report['files_before']} files -> "
            f"{report['files_after']}; {report['uncommitted_removed']} files of uncommitted "
            f"points removed, {report['orphans_deleted']} stray files deleted, "
            f"{report['log_files_removed']} expired log files removed"
        )
        # A damaged run is left exactly as it was (every file of a run is checked before
        # its first commit); the others were compacted all the same.
        damaged.extend(f"{root} {skipped}" for skipped in report["runs_skipped"])
    if damaged:
        roots = " ".join(args.roots)
        raise CorruptRunError(
            f"{len(damaged)} damaged run{'s' if len(damaged) != 1 else ''} left as "
            f"{'they were' if len(damaged) != 1 else 'it was'}, not compacted: "
            f"{'; '.join(damaged)}; `tcgd validate {roots}` lists every damaged file"
        )
    return EXIT_OK


COMPACT_COMMAND = Command(
    "compact",
    _compact,
    "rewrite small files of finished runs into large ones; delete crash leftovers",
    (
        arg("roots", nargs="+", metavar="root", help="job roots"),
        arg(
            "--log-retention",
            metavar="INTERVAL",
            help="first set how long the roots' Delta log files are kept once a newer "
            "checkpoint covers them (the tables' delta.logRetentionDuration, e.g. "
            "'interval 1 day'; default of new roots: 'interval 10 minutes')",
        ),
    ),
    description="Rewrite the small files of every run no writer holds into files of about "
    "256 MiB (one commit per table, so readers never see a mix), remove rows of points that "
    "never committed, delete files that crashed writers left outside the tables' logs, and "
    "remove expired Delta log files. A damaged run is left as it was; the command then "
    "exits 2.",
)
"""`tcgd compact ROOT... [--log-retention INTERVAL]`: rewrites the small files of every
finished run into files of the target size, one commit per table, deletes what crashed
writers left outside the tables' logs and removes expired log files. Runs still being
written are left alone, damaged runs as they were (exit 2)."""
