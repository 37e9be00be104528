"""`tcgd tensor ...` commands (also `tcgd-tensor ...`), and the top-level `tcgd query`.

Comparisons print the native text report (or, with ``--json``, the complete JSON report).
Under `tcgd tensor` they exit 0 on match, 1 on mismatch, 3 when inconclusive; under
`tcgd-tensor`, 0 on match and 1 on mismatch or inconclusive, as the reference design's
command does. Errors exit 2 either way (see ``docs/cli.md``).

Both spellings of the reference design's commands are accepted: `compare-points REF [CAND]
--reference-point L --candidate-point L` as well as `compare-points ROOT REF_POINT
CAND_POINT`, `--output` as well as `--report`, `--promote-dtypes` as well as
`--dtype-policy promote`, and so on; each alias sets the same option as its twin.

The flags and helpers the commands share are in ``tensor_options``; the run-level commands
(`tcgd query`, `validate`, `compact`) in ``runs``.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Sequence
from typing import Any

from torch_cudagraph_debug.cli._exit import (
    EXIT_FOR_STATUS,
    EXIT_MISMATCH,
    EXIT_OK,
)
from torch_cudagraph_debug.cli._flags import point_operands, run_flags
from torch_cudagraph_debug.cli._subcommands import (
    Adder,
    Command,
    add_table,
    arg,
    job_roots,
    roots_of,
    tensor_group_dirs_of,
)
from torch_cudagraph_debug.cli._subcommands import commands as subcommands
from torch_cudagraph_debug.cli.tensor_options import (
    Labels,
    _chosen,
    _comparison_options,
    _finish,
    _load_run,
    _mapping,
    _mapping_options,
    _options,
    _point,
    _progress,
    _run_arg,
)


# ------------------------------------------------------------------------ commands
def _summary(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug.tensor_debug import TensorRun

    run = TensorRun.load(args.run, name=args.name, rank=args.rank)
    points = [_point(run, args.point)] if args.point else list(run.points)
    if args.json:
        print(
            json.dumps(
                {
                    "run": {
                        "path": run.path,
                        "run_id": run.run_id,
                        "name": run.name,
                        "execution": run.execution,
                        "rank": run.rank,
                        "world_size": run.world_size,
                        "complete": run.complete,
                        "created_at": str(run.created_at),
                        "finished_at": None if run.finished_at is None else str(run.finished_at),
                        "points": len(run.points),
                        "default_payload": run.default_payload,
                    },
                    "points": [
                        {
                            "index": p.index,
                            "label": p.label,
                            "replay_index": p.replay_index,
                            "metadata": p.metadata,
                            "observation_count": len(p.observations),
                            "full_payloads": _payloads(p, "full"),
                            "summary_payloads": _payloads(p, "summary"),
                            "observations": [
                                {
                                    "order": o.order,
                                    "name": o.name,
                                    "invocation_index": o.invocation_index,
                                    "dtype": str(o.dtype).removeprefix("torch."),
                                    "shape": list(o.shape),
                                    "payload": o.payload,
                                    "digest": o.digest,
                                    "summary": o.summary.to_dict(),
                                }
                                for o in p.observations
                            ],
                        }
                        for p in points
                    ],
                },
                allow_nan=False,
                default=str,
            )
        )
        return EXIT_OK
    state = "complete" if run.complete else "INCOMPLETE"
    print(f"run '{run.name}' ({run.execution}, rank {run.rank} of {run.world_size}, {state})")
    print(f"  path: {run.path}")
    print(f"  id:   {run.run_id}; created {run.created_at}")
    print(f"  {len(run.points)} points; default payload {run.default_payload}")
    for p in points:
        # A point is identified as the reference design's summary identifies it: by its
        # replay index when it has one, else by the kind of execution that recorded it.
        at = run.execution if p.replay_index is None else f"replay {p.replay_index}"
        n = len(p.observations)
        print(
            f"\npoint #{p.index} '{p.label}' ({at}): {n} observation{'s' if n != 1 else ''} "
            f"({_payloads(p, 'full')} full, {_payloads(p, 'summary')} summary)"
        )
        rows = [
            ("observation", "dtype", "shape", "payload", "mean", "std", "min", "max", "nan", "inf")
        ]
        for o in p.observations[: args.limit]:
            s = o.summary
            rows.append(
                (
                    f"{o.name}[{o.invocation_index}]",
                    str(o.dtype).removeprefix("torch."),
                    str(list(o.shape)),
                    o.payload,
                    _g(s.mean),
                    _g(s.std),
                    _g(s.min),
                    _g(s.max),
                    str(s.nan_count),
                    str(s.pos_inf_count + s.neg_inf_count),
                )
            )
        _table(rows)
        if len(p.observations) > args.limit:
            print(f"  ... {len(p.observations) - args.limit} more (--limit, or --json for all)")
    return EXIT_OK


def _payloads(point: Any, kind: str) -> int:
    """How many of the point's observations stored this payload kind."""
    return sum(1 for o in point.observations if o.payload == kind)


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _table_lines(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _table(rows: Sequence[Sequence[str]]) -> None:
    for line in _table_lines(rows):
        print(line)


def _point_roots(args: argparse.Namespace) -> tuple[str, str, str | None, str | None]:
    """The reference root, reference point, candidate root (None: the reference's) and
    candidate point, from either spelling of `compare-points` / `compare-point-series`:
    the reference design's `REF [CAND] --reference-point L [--candidate-point L]`, or
    `ROOT REF_POINT [CAND_POINT | SERIES_ROOT]`."""
    from torch_cudagraph_debug.errors import InvalidInputError

    series = args.series
    command = "compare-point-series" if series else "compare-points"
    ops = list(args.operands)
    cand_point = getattr(args, "candidate_point", None)
    if args.reference_point is not None or cand_point is not None:
        if args.reference_point is None or (cand_point is None and not series):
            raise InvalidInputError(
                f"{command} needs --reference-point LABEL"
                + ("" if series else " and --candidate-point LABEL")
            )
        if len(ops) > 2:
            raise InvalidInputError(
                f"{command} with --reference-point takes REFERENCE [CANDIDATE], got "
                f"{len(ops)} paths: {ops}"
            )
        ref_root, ref_point = ops[0], args.reference_point
        cand_root = ops[1] if len(ops) == 2 else None
    else:
        wanted = (2, 3) if series else (3,)
        if len(ops) not in wanted:
            spelled = (
                "REFERENCE [CANDIDATE] --reference-point LABEL, or ROOT REF_POINT [SERIES_ROOT]"
                if series
                else "REFERENCE [CANDIDATE] --reference-point LABEL --candidate-point LABEL, "
                "or ROOT REF_POINT CAND_POINT"
            )
            raise InvalidInputError(f"{command} takes {spelled}; got {ops}")
        ref_root, ref_point = ops[0], ops[1]
        cand_root = None
        if series:
            cand_root = ops[2] if len(ops) == 3 else None
        else:
            cand_point = ops[2]
    # `--candidate-run ROOT2` is this CLI's older spelling of the second path.
    extra = getattr(args, "candidate_run", None)
    if extra is not None:
        if cand_root is not None and cand_root != extra:
            raise InvalidInputError(
                f"the candidate is given twice: {cand_root!r} and --candidate-run {extra!r}"
            )
        cand_root = extra
    return ref_root, ref_point, cand_root, cand_point


def _point_command_roots(args: argparse.Namespace) -> list[str]:
    """The job roots of `compare-points` and `compare-point-series`, either spelling."""
    ref_root, _, cand_root, _ = _point_roots(args)
    return [ref_root] if cand_root is None else [ref_root, cand_root]


def _compare_points(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug.tensor_debug import compare_points

    ref_root, ref_point, cand_root, cand_point = _point_roots(args)
    assert cand_point is not None
    ref_run = _load_run(ref_root, *_chosen(args))
    cand = _chosen(args, "candidate")
    if cand_root is None and cand == _chosen(args):
        cand_run = ref_run
    else:
        cand_run = _load_run(cand_root or ref_root, *cand)
    result = compare_points(
        _point(ref_run, ref_point),
        _point(cand_run, cand_point),
        options=_options(args),
        progress=_progress(args),
    )
    return _finish(result, args)


def _compare_runs(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug.tensor_debug import compare_runs

    ref, cand = _chosen(args), _chosen(args, "candidate")

    # Loaded only for --point-map, and once: the labels and the verdict both need it.
    @functools.cache
    def sides() -> tuple[Labels, Labels]:
        ref_run = _load_run(args.reference, *ref)
        cand_run = _load_run(args.candidate, *cand)
        return (tuple(ref_run.labels), ref_run.complete), (
            tuple(cand_run.labels),
            cand_run.complete,
        )

    mapping, unpaired = _mapping(args, sides)
    result = compare_runs(
        _run_arg(args.reference, *ref),
        _run_arg(args.candidate, *cand),
        point_mapping=mapping,
        options=_options(args),
        progress=_progress(args),
    )
    return _finish(result, args, unpaired, sides)


def _compare_point_series(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug.tensor_debug import compare_point_series

    ref_root, ref_point, series_root, _ = _point_roots(args)
    ref_run = _load_run(ref_root, *_chosen(args))
    cand = _chosen(args, "candidate")
    if series_root is None and cand == _chosen(args):
        series: Any = ref_run
    else:
        series = _run_arg(series_root or ref_root, *cand)
    result = compare_point_series(
        _point(ref_run, ref_point),
        series,
        options=_options(args),
        progress=_progress(args),
    )
    return _finish(result, args)


def _load_group(root: str, name: str | None) -> Any:
    import warnings

    from torch_cudagraph_debug.tensor_debug import TensorRunGroup

    with warnings.catch_warnings():
        # The summary and the comparison report the group's warnings themselves.
        warnings.simplefilter("ignore")
        return TensorRunGroup.load(root, name=name)


def _group_summary_text(group: Any, root: str) -> str:
    state = "complete" if group.complete else "INCOMPLETE"
    lines = [
        f"run group '{group.name}' at {root}: {len(group.members)} of "
        f"{group.world_size} ranks, {len(group.labels)} points, {state}"
    ]
    rows = [("rank", "points", "complete", "path")]
    rows += [(str(m.rank), str(len(m.labels)), str(m.complete), m.path) for m in group.members]
    lines += _table_lines(rows)
    lines += [f"warning: {w}" for w in group.warnings]
    return "\n".join(lines) + "\n"


def _group_summary(args: argparse.Namespace) -> int:
    group = _load_group(args.root, args.name)
    summary = group.summary()
    text = _group_summary_text(group, args.root)
    if args.output:
        summary.write(args.output, overwrite=args.overwrite)
    if args.json:
        print(json.dumps(summary.to_dict()))
        return EXIT_OK
    print(text, end="")
    return EXIT_OK


def _compare_run_groups(args: argparse.Namespace) -> int:
    import warnings

    from torch_cudagraph_debug.tensor_debug import compare_run_groups

    cand_name = args.candidate_name if args.candidate_name is not None else args.name
    ref_group = _load_group(args.reference, args.name)
    cand_group = _load_group(args.candidate, cand_name)

    def sides() -> tuple[Labels, Labels]:
        return (tuple(ref_group.labels), ref_group.complete), (
            tuple(cand_group.labels),
            cand_group.complete,
        )

    mapping, unpaired = _mapping(args, sides)
    with warnings.catch_warnings():
        # Group warnings are part of the report.
        warnings.simplefilter("ignore")
        result = compare_run_groups(
            ref_group,
            cand_group,
            point_mapping=mapping,
            options=_options(args),
            progress=_progress(args),
        )
    return _finish(result, args, unpaired, sides)


# The CLI spells the kinds with dashes, as its flags are spelled; the API with underscores.
_ANOMALY_KINDS = {"nan": "nan", "inf": "inf", "nonfinite": "nonfinite", "abs-max": "abs_max"}


def _site_text(hit: Any) -> str:
    """`name[invocation]`, then what a compile pass knows of it: module, op, graph, node."""
    site, parts = hit.site, []
    if site is not None:
        parts = [p for p in (site.module_path, site.aten_op) if p]
        if site.graph_kind:
            parts.append(f"{site.graph_kind} graph")
        if site.node_name:
            parts.append(f"node {site.node_name}")
    detail = f" ({', '.join(parts)})" if parts else ""
    return f"{hit.name}[{hit.invocation_index}]{detail}"


def _counts_text(hit: Any) -> str:
    s = hit.summary
    extremes = "no finite values" if s.min is None else f"finite min {_g(s.min)}, max {_g(s.max)}"
    return f"nan {s.nan_count}, +inf {s.pos_inf_count}, -inf {s.neg_inf_count}; {extremes}"


def _first_anomaly(args: argparse.Namespace) -> int:
    """Exit 0 when no observation is anomalous, 1 when one is (it is printed)."""
    from torch_cudagraph_debug import _native
    from torch_cudagraph_debug.errors import InvalidInputError

    if args.threshold is not None and args.kind != "abs-max":
        raise InvalidInputError(f"--threshold applies to --kind abs-max only, not {args.kind}")
    if args.kind == "abs-max" and args.threshold is None:
        raise InvalidInputError("--kind abs-max needs --threshold X (the magnitude to exceed)")
    # The native reader alone: the search reads the summary columns, so no Python object
    # per observation is built.
    reader = _native.RunReader(args.root, "raise", args.name, args.rank, "tensor")
    found = _native.first_anomaly(reader, _ANOMALY_KINDS[args.kind], args.threshold, args.site)
    if args.json:
        if found is None:
            asked = {"kind": _ANOMALY_KINDS[args.kind], "threshold": args.threshold}
            print(json.dumps({"found": False, **asked, "site_filter": args.site}))
        else:
            print(json.dumps({"found": True, **found.to_dict()}))
        return EXIT_OK if found is None else EXIT_MISMATCH
    rule = args.kind if args.threshold is None else f"{args.kind} > {_g(args.threshold)}"
    where = "" if args.site is None else f" among sites matching {args.site!r}"
    if found is None:
        print(f"no anomaly ({rule}){where} in {reader.path}")
        return EXIT_OK
    replay = "-" if found.replay_index is None else str(found.replay_index)
    print(f"first anomaly ({rule}){where} in {reader.path}")
    print(f"  replay:  {replay}")
    print(f"  point:   #{found.point_index} '{found.label}'")
    print(f"  site:    {_site_text(found)}, order {found.order}")
    print(f"  values:  {_counts_text(found)}")
    print(f"  scanned: {found.scanned} observations up to it, in execution order")
    others = found.sites[1:]
    at = "point" if found.replay_index is None else "replay"
    if not others:
        print(f"  no other site hit at this {at}")
        return EXIT_MISMATCH
    print(f"  {len(others)} other site{'s' if len(others) != 1 else ''} hit at this {at}:")
    for site in others:
        point = "" if site.point_index == found.point_index else f"point #{site.point_index}, "
        print(f"    {point}order {site.order}: {_site_text(site)}: {_counts_text(site)}")
    return EXIT_MISMATCH


# Both point commands name their points the same way.
_point_operands = functools.partial(
    point_operands,
    metavar="PATH_OR_POINT",
    point_metavar="LABEL",
    point_help="{side} point (label, or #index)",
)


def _sides(what: str) -> tuple[Adder, Adder]:
    """The reference and candidate job roots of a command comparing two runs or groups."""
    return (
        arg("reference", help=f"job root of the reference {what}"),
        arg("candidate", help=f"job root of the candidate {what} (may be the same root)"),
    )


def add_commands(
    parser: argparse.ArgumentParser, *, exit_codes: dict[str, int] | None = None
) -> None:
    """Adds this domain's subcommands; each sets `handler(args) -> exit code`.
    `exit_codes` maps a comparison's status to the exit code (`tcgd tensor`'s by default;
    `tcgd-tensor` passes the reference design's)."""
    table = (
        Command(
            "summary",
            _summary,
            "a run's points and observation summaries",
            (
                arg("run", metavar="root", help="job root holding the run"),
                run_flags,
                arg("--point", help="only this point (label, or #index)"),
                arg("--limit", type=int, default=20, help="observations shown per point (20)"),
                arg("--json", action="store_true", help="print everything as JSON"),
            ),
            description="Print a run's execution and completion state, its point count and "
            "default payload, then per point its observation count (full and summary-only "
            "payloads), its replay index (or the execution that recorded it) and a table of "
            "its observations.",
            check=roots_of("run"),
        ),
        Command(
            "compare-points",
            _compare_points,
            "compare two points, of one run or two",
            (
                functools.partial(
                    _point_operands,
                    help="REFERENCE [CANDIDATE] with --reference-point/--candidate-point, or "
                    "ROOT REF_POINT CAND_POINT",
                    sides=("reference", "candidate"),
                ),
                arg(
                    "--candidate-run",
                    metavar="ROOT",
                    help="job root of the candidate point's run (default: the reference's)",
                ),
                functools.partial(run_flags, candidate="candidate point's run"),
                _comparison_options,
            ),
            description="Compare two points. REFERENCE and CANDIDATE are job roots (CANDIDATE "
            "left out: the reference's run); the points are named by --reference-point and "
            "--candidate-point. The second form names the points as arguments.",
            usage="%(prog)s REFERENCE [CANDIDATE] --reference-point LABEL --candidate-point "
            "LABEL [options]\n       %(prog)s ROOT REF_POINT CAND_POINT [--candidate-run ROOT2] "
            "[options]",
            defaults={"series": False},
            check=job_roots(_point_command_roots),
        ),
        Command(
            "compare-runs",
            _compare_runs,
            "compare two runs point by point",
            (
                *_sides("run"),
                functools.partial(run_flags, candidate="candidate run"),
                _mapping_options,
                _comparison_options,
            ),
            check=roots_of("reference", "candidate"),
        ),
        Command(
            "compare-point-series",
            _compare_point_series,
            "compare one point against every point of a run: the first diverging replay",
            (
                functools.partial(
                    _point_operands,
                    help="REFERENCE [CANDIDATE] with --reference-point, or ROOT REF_POINT "
                    "[SERIES_ROOT]",
                    sides=("reference",),
                ),
                functools.partial(run_flags, candidate="series run"),
                _comparison_options,
            ),
            description="Compare the point --reference-point of REFERENCE with every point of "
            "CANDIDATE's run, in order (CANDIDATE left out: the reference's run). The second "
            "form names the point as an argument.",
            usage="%(prog)s REFERENCE [CANDIDATE] --reference-point LABEL [options]\n"
            "       %(prog)s ROOT REF_POINT [SERIES_ROOT] [options]",
            defaults={"series": True},
            check=job_roots(_point_command_roots),
        ),
        Command(
            "group-summary",
            _group_summary,
            "the runs of a multi-rank job, one per rank",
            (
                arg("root", help="job root holding one run per rank"),
                arg("--name", help="the runs of this name, when the root holds several names"),
                arg("--json", action="store_true", help="print the group as JSON"),
                arg(
                    "--output",
                    metavar="DIR",
                    help="also write summary.txt/.json/.html and rank_points.csv into DIR",
                ),
                arg(
                    "--overwrite",
                    action="store_true",
                    help="replace the summary files in a non-empty DIR",
                ),
            ),
            check=tensor_group_dirs_of("root"),
        ),
        Command(
            "compare-run-groups",
            _compare_run_groups,
            "compare two multi-rank jobs rank by rank",
            (
                *_sides("group"),
                arg("--name", help="the reference group's run name, when the root holds several"),
                arg(
                    "--candidate-name",
                    metavar="NAME",
                    help="the candidate group's run name (default: --name)",
                ),
                _mapping_options,
                _comparison_options,
            ),
            check=tensor_group_dirs_of("reference", "candidate"),
        ),
        Command(
            "first-anomaly",
            _first_anomaly,
            "the first replay and site where a value held NaN, Inf or a large magnitude",
            (
                arg("root", help="job root holding the run"),
                run_flags,
                arg(
                    "--kind",
                    choices=tuple(_ANOMALY_KINDS),
                    default="nonfinite",
                    help="nan, inf (either sign), nonfinite (nan or inf; the default), or "
                    "abs-max (a finite |value| over --threshold, or an infinity)",
                ),
                arg("--threshold", type=float, help="the magnitude abs-max looks for"),
                arg(
                    "--site",
                    metavar="GLOB",
                    help="only observations whose name, module path, node name or site id "
                    "matches (a glob such as 'layers.*', or an exact name)",
                ),
                arg("--json", action="store_true", help="print the answer as one JSON object"),
            ),
            description="Search a tensor run's observations in execution order (replay, "
            "point, order within the point) for the first NaN, infinity or magnitude over a "
            "threshold. Exit 0 when there is none, 1 when one is found (printed with the other "
            "sites that hit at the same replay), 2 on an error.",
            check=roots_of("root"),
        ),
    )
    commands = subcommands(parser, help="what to summarise or compare")
    add_table(commands, table)
    # Every subcommand carries the table: defaults set on the parent parser would be
    # overwritten by the namespace a subparser fills.
    codes = dict(EXIT_FOR_STATUS if exit_codes is None else exit_codes)
    for sub in commands.choices.values():
        sub.set_defaults(exit_codes=codes)
