"""`tcgd memory ...` commands (alias `tcgd-memory`): summaries, timelines, point and phase
comparisons of memory runs, and the import of `_dump_snapshot` pickles into a run.

Exit codes: 0 when the report is produced, 2 on error."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from torch_cudagraph_debug.cli._exit import EXIT_OK


def _output_flags(p: argparse.ArgumentParser, *, tree: bool = True) -> None:
    out = p.add_argument_group("report")
    out.add_argument("--json", action="store_true", help="print the JSON report to stdout")
    out.add_argument(
        "--format",
        choices=("text", "json", "csv", "html"),
        default="text",
        help="format printed to stdout (default text; --json is --format json)",
    )
    out.add_argument(
        "--only-changed",
        action="store_true",
        help="prune rows whose values did not change (parents of changed rows stay)",
    )
    if tree:
        out.add_argument(
            "--depth",
            choices=("device", "pool", "stream"),
            default="stream",
            help="how deep the report tree goes (default stream)",
        )
    out.add_argument("--output", metavar="DIR", help="also write the report in every format to DIR")
    out.add_argument("--overwrite", action="store_true", help="replace report files in --output")
    att = p.add_argument_group("attribution (needs allocator history)")
    att.add_argument("--stacks", action="store_true", help="attribute growth to allocation stacks")
    att.add_argument("--events", action="store_true", help="attribute growth to allocator events")
    att.add_argument("--lifetimes", action="store_true", help="track allocation lifetimes")
    att.add_argument("--stack-depth", type=int, default=2, help="frames shown per stack")
    att.add_argument("--limit", type=int, default=20, help="rows shown per attribution table")


def _run_flags(p: argparse.ArgumentParser, *, candidate: bool = False) -> None:
    """--name / --rank choose the run in a job root holding several; the candidate's
    default to them."""
    group = p.add_argument_group("choosing runs in a job root")
    group.add_argument("--name", help="the run of this name, when the root holds several names")
    group.add_argument(
        "--rank", type=int, help="the run of this rank, when the root holds several ranks"
    )
    if candidate:
        group.add_argument(
            "--candidate-name", metavar="NAME", help="the candidate run's name (default: --name)"
        )
        group.add_argument(
            "--candidate-rank",
            type=int,
            metavar="RANK",
            help="the candidate run's rank (default: --rank)",
        )


def _mapping_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--candidate-run",
        metavar="ROOT",
        help="the job root of the candidate's run when it is another root (default: ROOT)",
    )
    _run_flags(p, candidate=True)
    p.add_argument(
        "--pool-map",
        action="append",
        default=[],
        metavar="D:A,B=D:C,E",
        help="pair reference pool (A, B) of device D with a candidate pool; private pools of "
        "independent runs pair only this way (repeatable)",
    )
    p.add_argument(
        "--device-map",
        action="append",
        default=[],
        metavar="R=C",
        help="pair reference device R with candidate device C (repeatable)",
    )


def add_commands(parser: argparse.ArgumentParser) -> None:
    """Adds this domain's subcommands; each sets `handler(args) -> exit code`."""
    from torch_cudagraph_debug.cli import commands

    sub = commands(parser, help="what to report, compare or import")

    p = sub.add_parser("summary", help="each point's allocator state as a report tree")
    p.add_argument("run", metavar="root", help="job root holding the memory run")
    _run_flags(p)
    p.add_argument("--point", action="append", default=[], help="only these points (repeatable)")
    _output_flags(p)
    p.set_defaults(handler=_summary)

    p = sub.add_parser("timeline", help="every point with its change since the previous one")
    p.add_argument("run", metavar="root", help="job root holding the memory run")
    _run_flags(p)
    _output_flags(p, tree=False)
    p.set_defaults(handler=_timeline)

    p = sub.add_parser("compare-points", help="compare two points (of one run or of two)")
    p.add_argument("run", metavar="root", help="job root of the reference point's run")
    p.add_argument("reference", help="reference point label (or index)")
    p.add_argument("candidate", help="candidate point label (or index)")
    _mapping_flags(p)
    _output_flags(p)
    p.set_defaults(handler=_compare_points)

    p = sub.add_parser(
        "compare-phases",
        help="compare a baseline phase (two points) with a candidate phase",
    )
    p.add_argument("run", metavar="root", help="job root of the baseline's run")
    p.add_argument("start", help="baseline start point")
    p.add_argument("end", help="baseline end point")
    p.add_argument("candidate_start", help="candidate start point")
    p.add_argument("candidate_end", help="candidate end point")
    _mapping_flags(p)
    _output_flags(p, tree=False)
    p.set_defaults(handler=_compare_phases)

    p = sub.add_parser(
        "export-viz",
        help="write one point as a pickle PyTorch's memory viewer opens",
    )
    p.add_argument("run", metavar="root", help="job root holding the memory run")
    p.add_argument("point", help="point label (or index)")
    p.add_argument("path", help="pickle file to write (replaced when it exists)")
    _run_flags(p)
    p.set_defaults(handler=_export_viz)

    p = sub.add_parser(
        "import",
        help="import torch.cuda.memory._dump_snapshot pickles as the points of a new run",
    )
    p.add_argument("snapshots", nargs="+", help="pickle files, in the order they were taken")
    p.add_argument("--run", required=True, metavar="ROOT", help="job root the new run goes into")
    p.add_argument("--name", default="import", help="run name (default import)")
    p.add_argument(
        "--label",
        action="append",
        default=[],
        help="point label per file, in order (default: file names)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run already in DIR (its files only; other files are kept)",
    )
    p.add_argument("--json", action="store_true", help="print what was imported as JSON")
    p.set_defaults(handler=_import)

    from torch_cudagraph_debug.cli.memory_lifetimes import add_lifetimes_command

    add_lifetimes_command(sub, _run_flags)


# ---------------------------------------------------------------------- helpers


def _invalid(message: str) -> Exception:
    from torch_cudagraph_debug.errors import InvalidInputError

    return InvalidInputError(message)


def _format(args: argparse.Namespace) -> str:
    return "json" if args.json else args.format


def _attribution(args: argparse.Namespace) -> Any:
    from torch_cudagraph_debug.memory_debug import (
        MemoryAttributionOptions,
        MemoryDisplayOptions,
    )

    if not (args.stacks or args.events or args.lifetimes):
        return None
    return MemoryAttributionOptions(
        stacks=args.stacks,
        events=args.events,
        lifetimes=args.lifetimes,
        display=MemoryDisplayOptions(stack_depth=args.stack_depth, limit=args.limit),
    )


def _load(args: argparse.Namespace) -> Any:
    from torch_cudagraph_debug.memory_debug import MemoryRun

    return MemoryRun.load(args.run, name=args.name, rank=args.rank)


def _load_candidate(args: argparse.Namespace, run: Any) -> Any:
    """The candidate's run: the reference's unless another root, name or rank is given."""
    from torch_cudagraph_debug.memory_debug import MemoryRun

    name = args.candidate_name if args.candidate_name is not None else args.name
    rank = args.candidate_rank if args.candidate_rank is not None else args.rank
    if args.candidate_run is None and (name, rank) == (args.name, args.rank):
        return run
    return MemoryRun.load(args.candidate_run or args.run, name=name, rank=rank)


def _point(run: Any, key: str) -> Any:
    if key in run.labels:
        return run[key]
    if key.lstrip("-").isdigit() and -len(run) <= int(key) < len(run):
        return run[int(key)]
    raise _invalid(f"run '{run.path}' has no point '{key}'; labels: {list(run.labels)}")


def _pool(text: str) -> tuple[int, tuple[int, int]]:
    device, _, pool = text.partition(":")
    a, _, b = pool.partition(",")
    try:
        return int(device), (int(a), int(b))
    except ValueError:
        raise _invalid(f"pool '{text}' is not DEVICE:A,B (for example 0:1,0)") from None


def _mappings(args: argparse.Namespace) -> tuple[dict[Any, Any], dict[int, int]]:
    from torch_cudagraph_debug.memory_debug import MemoryPoolKey

    pools = {}
    for item in args.pool_map:
        left, sep, right = item.partition("=")
        if not sep:
            raise _invalid(f"--pool-map '{item}' is not D:A,B=D:C,E")
        r, c = _pool(left), _pool(right)
        pools[MemoryPoolKey(r[0], r[1])] = MemoryPoolKey(c[0], c[1])
    devices = {}
    for item in args.device_map:
        left, sep, right = item.partition("=")
        try:
            devices[int(left)] = int(right)
        except ValueError:
            raise _invalid(f"--device-map '{item}' is not R=C (for example 0=1)") from None
        if not sep:
            raise _invalid(f"--device-map '{item}' is not R=C")
    return pools, devices


def _emit(args: argparse.Namespace, result: Any, name: str, tree: bool = True) -> int:
    """Prints the report in the chosen format; writes every format to --output."""
    kwargs: dict[str, Any] = {"include_unchanged": not args.only_changed}
    if tree:
        kwargs["depth"] = args.depth
    if args.output:
        paths = result.save(args.output, name=name, overwrite=args.overwrite, **kwargs)
        for path in paths:
            print(f"wrote {path}", file=sys.stderr)
    print(
        result._render(_format(args), kwargs["include_unchanged"], kwargs.get("depth", "stream")),
        end="",
    )
    for warning in getattr(result, "_notes", []):
        print(f"tcgd: note: {warning}", file=sys.stderr)
    return EXIT_OK


# ---------------------------------------------------------------------- handlers


def _summary(args: argparse.Namespace) -> int:
    run = _load(args)
    points = [_point(run, p) for p in args.point] if args.point else list(run.points)
    if not points:
        raise _invalid(f"run '{args.run}' has no points")
    from torch_cudagraph_debug.memory_debug.compare import MemoryStateReport

    return _emit(args, MemoryStateReport(points), "memory-summary")


def _timeline(args: argparse.Namespace) -> int:
    run = _load(args)
    return _emit(args, run.timeline(attribution=_attribution(args)), "memory-timeline", tree=False)


def _compare_points(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug.memory_debug import compare_points

    run = _load(args)
    other = _load_candidate(args, run)
    pools, devices = _mappings(args)
    result = compare_points(
        _point(run, args.reference),
        _point(other, args.candidate),
        pool_mapping=pools,
        device_mapping=devices,
        attribution=_attribution(args),
    )
    return _emit(args, result, "memory-compare-points")


def _compare_phases(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug.memory_debug import compare_phases

    run = _load(args)
    other = _load_candidate(args, run)
    pools, devices = _mappings(args)
    result = compare_phases(
        run.between(_point(run, args.start).label, _point(run, args.end).label),
        other.between(
            _point(other, args.candidate_start).label, _point(other, args.candidate_end).label
        ),
        pool_mapping=pools,
        device_mapping=devices,
    )
    return _emit(args, result, "memory-compare-phases", tree=False)


def _export_viz(args: argparse.Namespace) -> int:
    run = _load(args)
    point = _point(run, args.point)
    path = point.export_memory_viz(args.path)
    print(f"wrote {path} (point {point.index} '{point.label}'): open it at pytorch.org/memory_viz")
    return 0


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
