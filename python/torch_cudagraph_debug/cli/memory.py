"""`tcgd memory ...` commands (alias `tcgd-memory`): summaries, timelines, point and phase
comparisons of memory runs, multi-rank group summaries and group phase comparisons, and the
import of `_dump_snapshot` pickles into a run.

The reference design's forms are accepted as they are (`compare-points BUNDLE [BUNDLE]
--reference-point P --candidate-point P`, `compare-phases BASELINE CANDIDATE
--baseline-start P ...`), next to this package's positional forms.

Exit codes: 0 when the report is produced, 2 on error."""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import sys
from collections.abc import Callable
from typing import Any

from torch_cudagraph_debug.cli._exit import EXIT_OK
from torch_cudagraph_debug.cli._flags import point_operands, run_flags
from torch_cudagraph_debug.cli._subcommands import (
    Command,
    add_table,
    arg,
    commands,
    files_of,
    group_dirs_of,
    job_roots,
    roots_of,
)
from torch_cudagraph_debug.cli.memory_lifetimes import LIFETIMES_COMMAND
from torch_cudagraph_debug.cli.memory_options import (
    _attribution,
    _emit,
    _endpoint_flags,
    _format,
    _group_output_flags,
    _invalid,
    _load,
    _load_candidate,
    _mapping_flags,
    _mappings,
    _output_flags,
    _point,
    _point_key,
    _pool,
    _Progress,
)

# The job root holding the run, for the commands that read one run.
_RUN = arg("run", metavar="root", help="job root holding the memory run")


def add_commands(parser: argparse.ArgumentParser) -> None:
    """Adds this domain's subcommands; each sets `handler(args) -> exit code`."""
    table = (
        Command(
            "summary",
            _summary,
            "each point's allocator state as a report tree",
            (
                _RUN,
                run_flags,
                arg("--point", action="append", default=[], help="only these points (repeatable)"),
                _output_flags,
            ),
            check=roots_of("run"),
        ),
        Command(
            "timeline",
            _timeline,
            "every point with its change since the previous one",
            (_RUN, run_flags, functools.partial(_output_flags, tree=False)),
            check=roots_of("run"),
        ),
        Command(
            "compare-points",
            _compare_points,
            "compare two points (of one run or of two)",
            (
                functools.partial(
                    point_operands,
                    metavar="ROOT",
                    help="ROOT REF CAND, or REFERENCE_BUNDLE [CANDIDATE_BUNDLE] with "
                    "--reference-point and --candidate-point",
                    sides=("reference", "candidate"),
                    point_metavar="POINT",
                    point_help="{side} point label or index",
                ),
                _mapping_flags,
                _output_flags,
            ),
            description="ROOT REF CAND, or the reference form REFERENCE_BUNDLE "
            "[CANDIDATE_BUNDLE] --reference-point P --candidate-point P.",
            check=job_roots(_operand_roots(3, ("reference_point", "candidate_point"))),
        ),
        Command(
            "compare-phases",
            _compare_phases,
            "compare a baseline phase (two points) with a candidate phase",
            (
                arg(
                    "operands",
                    nargs="+",
                    metavar="ROOT",
                    help="ROOT START END CAND_START CAND_END, or BASELINE_BUNDLE "
                    "CANDIDATE_BUNDLE with the four endpoint flags",
                ),
                _endpoint_flags,
                _mapping_flags,
                functools.partial(_output_flags, tree=False),
            ),
            check=job_roots(_operand_roots(5, _PHASE_FLAGS)),
        ),
        Command(
            "export-viz",
            _export_viz,
            "write one point as a pickle PyTorch's memory viewer opens",
            (
                _RUN,
                arg("point", help="point label (or index)"),
                arg("path", help="pickle file to write (replaced when it exists)"),
                run_flags,
            ),
            check=roots_of("run"),
        ),
        Command(
            "group-summary",
            _group_summary,
            "the memory runs of a multi-rank job: per-rank points and cross-rank extrema",
            (
                arg("group", metavar="GROUP_DIR", help="job root (or directory of job roots)"),
                _group_output_flags,
            ),
            check=group_dirs_of("group"),
        ),
        Command(
            "compare-run-group-phases",
            _compare_run_group_phases,
            "compare a baseline group's phase with a candidate group's, rank by rank",
            (
                arg("baseline", metavar="BASELINE_GROUP"),
                arg("candidate", metavar="CANDIDATE_GROUP"),
                functools.partial(_endpoint_flags, required=True),
                arg(
                    "--pool-map",
                    action="append",
                    default=[],
                    metavar="RANK@D:A,B=D:C,E",
                    help="pair a baseline pool of a rank with a candidate pool (repeatable)",
                ),
                arg(
                    "--device-map",
                    action="append",
                    default=[],
                    metavar="RANK@B=C",
                    help="pair baseline device B of a rank with candidate device C (repeatable)",
                ),
                functools.partial(_group_output_flags, phases=True),
            ),
            check=group_dirs_of("baseline", "candidate"),
        ),
        Command(
            "import",
            _import,
            "import torch.cuda.memory._dump_snapshot pickles as the points of a new run",
            (
                arg("snapshots", nargs="+", help="pickle files, in the order they were taken"),
                arg("--run", required=True, metavar="ROOT", help="job root the new run goes into"),
                arg("--name", default="import", help="run name (default import)"),
                arg(
                    "--label",
                    action="append",
                    default=[],
                    help="point label per file, in order (default: file names)",
                ),
                arg(
                    "--overwrite",
                    action="store_true",
                    help="replace the run already in DIR (its files only; other files are kept)",
                ),
                arg("--json", action="store_true", help="print what was imported as JSON"),
            ),
            check=files_of("snapshots", what="snapshot"),
        ),
        LIFETIMES_COMMAND,
    )
    add_table(commands(parser, help="what to report, compare or import"), table)


# ---------------------------------------------------------------------- handlers


def _stat(stats: Any, name: str) -> int:
    """A stats value by its reference name (``allocated_bytes``) or its short one."""
    value = getattr(stats, f"{name}_bytes", None)
    return int(getattr(stats, name) if value is None else value)


def _run_summary_text(run: Any) -> str:
    """The reference summary: completion and rank identity, then per point its counts and
    allocator-wide totals."""
    state = "complete" if run.complete else "INCOMPLETE"
    lines = [
        f"memory run '{run.name}' at {run.path}: {len(run.points)} points, {state}",
        f"  rank {run.rank} of world size {run.world_size}, group id {run.group_id}",
    ]
    for point in run.points:
        scopes = point.allocator_scope_stats["all"]
        lines.append(
            f"  [{point.index}] {point.label}: {len(point.observations)} observations, "
            f"{len(point.pool_stats)} pools; allocated {_stat(scopes, 'allocated')} B, "
            f"reserved {_stat(scopes, 'reserved')} B, active {_stat(scopes, 'active')} B, "
            f"requested {_stat(scopes, 'requested')} B"
        )
    return "\n".join(lines) + "\n"


def _summary(args: argparse.Namespace) -> int:
    run = _load(args)
    tree = bool(args.point) or args.depth != "stream" or args.only_changed
    if not tree and _format(args) == "text" and not args.output:
        # The reference form: one line per point. --point, --depth, --format and --output
        # give the per-point state tree.
        print(_run_summary_text(run), end="")
        return EXIT_OK
    points = [_point(run, p) for p in args.point] if args.point else list(run.points)
    if not points:
        raise _invalid(f"run '{args.run}' has no points")
    from torch_cudagraph_debug.memory_debug._rendered import MemoryStateReport

    return _emit(args, MemoryStateReport(points), "memory-summary")


def _timeline(args: argparse.Namespace) -> int:
    run = _load(args)
    with _Progress("timeline"):
        result = run.timeline(attribution=_attribution(args))
    return _emit(args, result, "memory-timeline", tree=False)


def _operands(args: argparse.Namespace, legacy: int, flags: tuple[str, ...]) -> list[str] | None:
    """The reference form's bundles (None for this package's positional form)."""
    given = [f for f in flags if getattr(args, f) is not None]
    if not given and len(args.operands) == legacy:
        return None
    missing = [f"--{f.replace('_', '-')}" for f in flags if getattr(args, f) is None]
    if missing:
        raise _invalid(
            f"{args.command} takes ROOT and {legacy - 1} points, or one or two bundles with "
            f"{', '.join('--' + f.replace('_', '-') for f in flags)}; missing {', '.join(missing)}"
        )
    if len(args.operands) > 2:
        raise _invalid(
            f"{args.command} with {', '.join(missing or given)} takes one or two bundles, got "
            f"{len(args.operands)} operands"
        )
    return list(args.operands)


def _operand_roots(
    legacy: int, flags: tuple[str, ...]
) -> Callable[[argparse.Namespace], list[str]]:
    """The job roots of `compare-points` / `compare-phases`, either form: ROOT and points
    (and --candidate-run), or the reference form's bundles."""

    def pick(args: argparse.Namespace) -> list[str]:
        bundles = _operands(args, legacy, flags)
        roots = [args.operands[0]] if bundles is None else bundles
        return roots if args.candidate_run is None else [*roots, args.candidate_run]

    return pick


_PHASE_FLAGS = ("baseline_start", "baseline_end", "candidate_start", "candidate_end")


def _reference_runs(args: argparse.Namespace, bundles: list[str]) -> tuple[Any, Any]:
    from torch_cudagraph_debug.memory_debug import MemoryRun

    args.run = bundles[0]
    run = _load(args)
    if len(bundles) == 1:
        if args.pool_map or args.device_map:
            raise _invalid(
                "--pool-map and --device-map pair pools and devices of independent runs; give "
                "a CANDIDATE_BUNDLE, or leave them out for two points of one run"
            )
        return run, _load_candidate(args, run)
    name = args.candidate_name if args.candidate_name is not None else args.name
    rank = args.candidate_rank if args.candidate_rank is not None else args.rank
    return run, MemoryRun.load(bundles[1], name=name, rank=rank)


def _compare_points(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug.memory_debug import compare_points

    bundles = _operands(args, 3, ("reference_point", "candidate_point"))
    if bundles is None:
        args.run, reference, candidate = args.operands
        run = _load(args)
        other = _load_candidate(args, run)
    else:
        run, other = _reference_runs(args, bundles)
        reference, candidate = args.reference_point, args.candidate_point
    pools, devices = _mappings(args)
    with _Progress("compare-points"):
        result = compare_points(
            _point(run, reference),
            _point(other, candidate),
            pool_mapping=pools,
            device_mapping=devices,
            attribution=_attribution(args),
        )
    return _emit(args, result, "memory-compare-points")


def _compare_phases(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug.memory_debug import compare_phases

    flags = _PHASE_FLAGS
    bundles = _operands(args, 5, flags)
    if bundles is None:
        args.run, *points = args.operands
        run = _load(args)
        other = _load_candidate(args, run)
    else:
        run, other = _reference_runs(args, bundles)
        points = [getattr(args, f) for f in flags]
    pools, devices = _mappings(args)
    if (args.events or args.lifetimes) and run.run_id != other.run_id:
        from torch_cudagraph_debug.errors import CrossRunError

        raise CrossRunError(
            "event and lifetime attribution compare allocator history, which only exists "
            "inside one run; leave out --events/--lifetimes for independent runs"
        )
    extra: dict[str, Any] = {}
    attribution = _attribution(args)
    # Phase attribution is passed on once the API takes it; until then the flags are
    # checked here (events and lifetimes have no identity across runs).
    if attribution is not None and "attribution" in inspect.signature(compare_phases).parameters:
        extra["attribution"] = attribution
    with _Progress("compare-phases"):
        result = compare_phases(
            run.between(_point(run, points[0]).label, _point(run, points[1]).label),
            other.between(_point(other, points[2]).label, _point(other, points[3]).label),
            pool_mapping=pools,
            device_mapping=devices,
            **extra,
        )
    return _emit(args, result, "memory-compare-phases", tree=False)


def _export_viz(args: argparse.Namespace) -> int:
    run = _load(args)
    point = _point(run, args.point)
    path = point.export_memory_viz(args.path)
    print(f"wrote {path} (point {point.index} '{point.label}'): open it at pytorch.org/memory_viz")
    return 0


# ---------------------------------------------------------------------- run groups


def _group_emit(args: argparse.Namespace, result: Any, text: str) -> int:
    """Prints the report (text or --json); with --output also writes report.* and the
    group CSVs."""
    if args.output:
        kwargs: dict[str, Any] = {"overwrite": args.overwrite}
        if hasattr(args, "only_changed"):
            kwargs["include_unchanged"] = not args.only_changed
        for path in result.write(args.output, **kwargs).values():
            print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(text, end="")
    return EXIT_OK


def _load_group(root: str) -> Any:
    from torch_cudagraph_debug.memory_debug import MemoryRunGroup

    return MemoryRunGroup.load(root)


def _group_summary(args: argparse.Namespace) -> int:
    with _Progress("group-summary"):
        group = _load_group(args.group)
        summary = group.summary()
    return _group_emit(args, summary, summary.to_text())


def _rank_qualified(item: str, flag: str, shape: str) -> tuple[int, str]:
    rank, sep, rest = item.partition("@")
    if not sep or not rank.strip().isdigit():
        raise _invalid(f"{flag} '{item}' is not {shape} (the rank comes first: 0@...)")
    return int(rank), rest


def _group_mappings(
    args: argparse.Namespace,
) -> tuple[dict[int, dict[Any, Any]], dict[int, dict[int, int]]]:
    from torch_cudagraph_debug.memory_debug import MemoryPoolKey

    pools: dict[int, dict[Any, Any]] = {}
    for item in args.pool_map:
        rank, rest = _rank_qualified(item, "--pool-map", "RANK@D:A,B=D:C,E")
        left, sep, right = rest.partition("=")
        if not sep:
            raise _invalid(f"--pool-map '{item}' is not RANK@D:A,B=D:C,E")
        b, c = _pool(left), _pool(right)
        pools.setdefault(rank, {})[MemoryPoolKey(b[0], b[1])] = MemoryPoolKey(c[0], c[1])
    devices: dict[int, dict[int, int]] = {}
    for item in args.device_map:
        rank, rest = _rank_qualified(item, "--device-map", "RANK@B=C")
        left, sep, right = rest.partition("=")
        try:
            if not sep:
                raise ValueError
            devices.setdefault(rank, {})[int(left)] = int(right)
        except ValueError:
            raise _invalid(f"--device-map '{item}' is not RANK@B=C (for example 0@0=1)") from None
    return pools, devices


def _compare_run_group_phases(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug.memory_debug import compare_run_group_phases

    pools, devices = _group_mappings(args)
    for flag in ("limit", "stack_depth"):
        if getattr(args, flag) < 1:
            raise _invalid(f"--{flag.replace('_', '-')} must be 1 or more")
    with _Progress("compare-run-group-phases"):
        baseline = _load_group(args.baseline)
        candidate = _load_group(args.candidate)
        result = compare_run_group_phases(
            baseline,
            candidate,
            baseline_start=_point_key(args.baseline_start),
            baseline_end=_point_key(args.baseline_end),
            candidate_start=_point_key(args.candidate_start),
            candidate_end=_point_key(args.candidate_end),
            pool_mappings=pools,
            device_mappings=devices,
            attribution=_attribution(args),
        )
    text = result.to_text(
        include_unchanged=not args.only_changed, limit=args.limit, stack_depth=args.stack_depth
    )
    return _group_emit(args, result, text)


def _import(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug.memory_debug import import_snapshots

    run = import_snapshots(
        args.snapshots,
        run_dir=args.run,
        name=args.name,
        labels=args.label or None,
        overwrite=args.overwrite,
    )
    rows = []
    for point in run.points:
        scopes = point.allocator_scope_stats
        status = sorted({d.history_status for d in point.device_readings.values()})
        rows.append(
            {
                "index": point.index,
                "label": point.label,
                "source_path": point.source_path,
                "reserved": scopes["all"].reserved_bytes,
                "private_reserved": scopes["private"].reserved_bytes,
                "history": status,
                "warnings": list(point.warnings),
            }
        )
    if args.json:
        print(json.dumps({"run": run.path, "run_id": run.run_id, "points": rows}, indent=2))
    else:
        print(f"imported {len(rows)} snapshot(s) into memory run '{run.path}'")
        for r in rows:
            print(
                f"  [{r['index']}] {r['label']}: reserved {r['reserved']} B "
                f"(private pools {r['private_reserved']} B), history {', '.join(r['history'])}"
            )
    return EXIT_OK
