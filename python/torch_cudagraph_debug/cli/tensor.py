"""`tcgd tensor ...` commands (also `tcgd-tensor ...`), and the top-level `tcgd query`.

Comparisons print the native text report (or, with ``--json``, the complete JSON report).
Under `tcgd tensor` they exit 0 on match, 1 on mismatch, 3 when inconclusive; under
`tcgd-tensor`, 0 on match and 1 on mismatch or inconclusive, as the reference design's
command does. Errors exit 2 either way (see ``docs/cli.md``).

Both spellings of the reference design's commands are accepted: `compare-points REF [CAND]
--reference-point L --candidate-point L` as well as `compare-points ROOT REF_POINT
CAND_POINT`, `--output` as well as `--report`, `--promote-dtypes` as well as
`--dtype-policy promote`, and so on; each alias sets the same option as its twin.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from torch_cudagraph_debug.cli._exit import (
    EXIT_ERROR,
    EXIT_FOR_STATUS,
    EXIT_MISMATCH,
    EXIT_OK,
)


# ------------------------------------------------------------------------ shared options
def _comparison_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("comparison")
    group.add_argument("--mode", choices=("allclose", "exact"), default="allclose")
    group.add_argument("--rtol", type=float, default=1e-5, help="relative tolerance (1e-5)")
    group.add_argument("--atol", type=float, default=1e-8, help="absolute tolerance (1e-8)")
    group.add_argument("--equal-nan", action="store_true", help="NaN matches NaN")
    group.add_argument("--dtype-policy", choices=("strict", "promote"), default="strict")
    group.add_argument(
        "--promote-dtypes",
        dest="dtype_policy",
        action="store_const",
        const="promote",
        help="compare the values of different dtypes (same as --dtype-policy promote)",
    )
    group.add_argument("--layout-policy", choices=("strict", "ignore"), default="strict")
    group.add_argument(
        "--ignore-layout",
        dest="layout_policy",
        action="store_const",
        const="ignore",
        help="do not compare strides (same as --layout-policy ignore)",
    )
    output = parser.add_argument_group("output")
    output.add_argument(
        "--limit", type=int, default=20, help="rows per table in the text report (20)"
    )
    output.add_argument(
        "--only-changed",
        action="store_true",
        help="leave matching rows out of the text and HTML reports (JSON and CSV stay complete)",
    )
    output.add_argument("--json", action="store_true", help="print the complete JSON report")
    output.add_argument(
        "--output",
        "--report",
        dest="report",
        metavar="DIR",
        help="also write report.txt/.json/.html and CSV tables into DIR",
    )
    output.add_argument(
        "--overwrite", action="store_true", help="replace the report files in a non-empty DIR"
    )
    output.add_argument(
        "--progress",
        action="store_true",
        help="show progress on stderr even when it is not a terminal",
    )


def _mapping_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("point pairing")
    pairing = group.add_mutually_exclusive_group()
    pairing.add_argument(
        "--point-map",
        action="append",
        metavar="REF=CAND",
        help="pair point REF of the reference with point CAND of the candidate; the other "
        "points still pair by label, and points left without a partner are reported; "
        "repeat for more pairs",
    )
    pairing.add_argument(
        "--map",
        action="append",
        metavar="REF=CAND",
        help="compare point REF of the reference with point CAND of the candidate (labels, "
        "or #index); repeat for more pairs; only these points are compared",
    )
    pairing.add_argument(
        "--by-index", action="store_true", help="pair points by position instead of label"
    )


def _options(args: argparse.Namespace) -> Any:
    from torch_cudagraph_debug.errors import InvalidInputError
    from torch_cudagraph_debug.tensor_debug import TensorComparisonOptions

    try:
        return TensorComparisonOptions(
            mode=args.mode,
            rtol=args.rtol,
            atol=args.atol,
            equal_nan=args.equal_nan,
            dtype_policy=args.dtype_policy,
            layout_policy=args.layout_policy,
            limit=args.limit,
        )
    except InvalidInputError as error:
        option = getattr(error, "option", None)
        if option is None:
            raise
        # Each option has the flag of its name: rtol -> --rtol, dtype_policy -> --dtype-policy.
        flag = "--" + option.replace("_", "-")
        raise InvalidInputError(f"{flag} {error.reason}") from None  # type: ignore[attr-defined]


def _run_options(parser: argparse.ArgumentParser, *, candidate: str | None = None) -> None:
    """--name / --rank choose a run in a job root holding several (eager and compiled
    runs, or the ranks of a job); --candidate-name / --candidate-rank the other side's."""
    group = parser.add_argument_group("choosing runs in a job root")
    group.add_argument("--name", help="the run of this name, when the root holds several names")
    group.add_argument(
        "--rank", type=int, help="the run of this rank, when the root holds several ranks"
    )
    if candidate is not None:
        group.add_argument(
            "--candidate-name", metavar="NAME", help=f"the {candidate}'s name (default: --name)"
        )
        group.add_argument(
            "--candidate-rank",
            type=int,
            metavar="RANK",
            help=f"the {candidate}'s rank (default: --rank)",
        )


def _chosen(args: argparse.Namespace, side: str = "") -> tuple[str | None, int | None]:
    """The name and rank given for one side; the candidate's default to the reference's."""
    name, rank = args.name, args.rank
    if side == "candidate":
        name = args.candidate_name if args.candidate_name is not None else name
        rank = args.candidate_rank if args.candidate_rank is not None else rank
    return name, rank


def _run_arg(root: str, name: str | None, rank: int | None) -> Any:
    """What a comparison takes: the root itself when it holds the run alone (the engine
    reads it without building Python objects), the loaded run when a choice is needed."""
    from torch_cudagraph_debug.tensor_debug import TensorRun

    if name is None and rank is None:
        return root
    return TensorRun.load(root, name=name, rank=rank)


def _load_run(root: str, name: str | None, rank: int | None) -> Any:
    from torch_cudagraph_debug.tensor_debug import TensorRun

    return TensorRun.load(root, name=name, rank=rank)


def _point_key(text: str) -> str | int:
    """`#3` is point index 3; anything else is a label."""
    if text.startswith("#") and text[1:].lstrip("-").isdigit():
        return int(text[1:])
    return text


def _pairs(items: Sequence[str], flag: str) -> list[tuple[str | int, str | int]]:
    from torch_cudagraph_debug.errors import InvalidInputError

    pairs = []
    for item in items:
        ref, sep, cand = item.partition("=")
        if not sep or not ref or not cand:
            raise InvalidInputError(f"{flag} takes REF=CAND, got {item!r}")
        pairs.append((_point_key(ref), _point_key(cand)))
    return pairs


# What `--point-map` needs of each side: its point labels in order, and whether it finished.
Labels = tuple[tuple[str, ...], bool]


def _mapping(
    args: argparse.Namespace, sides: Callable[[], tuple[Labels, Labels]] | None = None
) -> tuple[Any, dict[str, list[str]]]:
    """The `point_mapping` the comparison takes, and (for `--point-map`) the labels of
    each side that were left without a partner."""
    if args.by_index:
        return "index", {}
    if args.map:
        return _pairs(args.map, "--map"), {}
    if getattr(args, "point_map", None) and sides is not None:
        (ref_labels, _), (cand_labels, _) = sides()
        return _label_pairs(_pairs(args.point_map, "--point-map"), ref_labels, cand_labels)
    return None, {}


def _label_of(key: str | int, labels: Sequence[str], side: str) -> str:
    from torch_cudagraph_debug.errors import InvalidInputError

    if isinstance(key, int):
        if -len(labels) <= key < len(labels):
            return labels[key]
    elif key in labels:
        return key
    shown = f"#{key}" if isinstance(key, int) else repr(key)
    raise InvalidInputError(
        f"--point-map: the {side} run has no point {shown}; its labels are {list(labels)}"
    )


def _label_pairs(
    explicit: Sequence[tuple[str | int, str | int]],
    ref_labels: Sequence[str],
    cand_labels: Sequence[str],
) -> tuple[list[tuple[str, str]], dict[str, list[str]]]:
    """`--point-map` as the reference design means it: the given pairs, then every other
    label present on both sides paired with itself, in reference order. The comparison API
    compares exactly the pairs it is given, so the labels covered by neither are returned
    for the caller to report (they would otherwise go unnoticed)."""
    from torch_cudagraph_debug.errors import InvalidInputError

    mapped: dict[str, str] = {}
    for ref, cand in explicit:
        ref_label = _label_of(ref, ref_labels, "reference")
        cand_label = _label_of(cand, cand_labels, "candidate")
        if ref_label in mapped:
            raise InvalidInputError(f"--point-map pairs reference point {ref_label!r} twice")
        if cand_label in mapped.values():
            raise InvalidInputError(f"--point-map pairs candidate point {cand_label!r} twice")
        mapped[ref_label] = cand_label
    targets = set(mapped.values())
    cand_set = set(cand_labels)
    pairs: list[tuple[str, str]] = []
    ref_only: list[str] = []
    for label in ref_labels:
        if label in mapped:
            pairs.append((label, mapped[label]))
        elif label in cand_set and label not in targets:
            pairs.append((label, label))
        else:
            ref_only.append(label)
    paired = {cand for _, cand in pairs}
    cand_only = [label for label in cand_labels if label not in paired]
    unpaired = {
        side: labels
        for side, labels in (("reference", ref_only), ("candidate", cand_only))
        if labels
    }
    return pairs, unpaired


def _point(run: Any, key: str) -> Any:
    """A point of a run by label, or by `#index`."""
    from torch_cudagraph_debug.errors import InvalidInputError

    wanted = _point_key(key)
    try:
        return run[wanted]
    except (KeyError, IndexError):
        raise InvalidInputError(
            f"run '{run.name}' at {run.path} has no point {key!r}; labels: {list(run.labels)} "
            "(use #N for the N-th point)"
        ) from None


def _size(n: float) -> str:
    """Bytes as every report writes them (the native core owns the format)."""
    from torch_cudagraph_debug._native import format_bytes

    return format_bytes(int(n))


def _progress(args: argparse.Namespace) -> Callable[[int, int, str], None] | None:
    """A progress line on stderr, when it is a terminal or --progress asks for it."""
    if not (args.progress or sys.stderr.isatty()):
        return None
    started = time.monotonic()

    def show(done: int, total: int, current: str) -> None:
        if total == 0:
            return
        elapsed = time.monotonic() - started
        rate = done / elapsed if elapsed > 0 else 0.0
        line = (
            f"[tcgd] comparing {100 * done / total:5.1f}% ({_size(done)} of {_size(total)}, "
            f"{_size(rate)}/s) {current}"
        )
        end = "\n" if done >= total else ""
        print(f"\r{line[:120]:<120}", end=end, file=sys.stderr, flush=True)

    return show


def _exit_code(args: argparse.Namespace, status: str) -> int:
    """`tcgd-tensor` sets `exit_codes` to the reference design's statuses; `tcgd tensor`
    keeps its own (inconclusive is 3)."""
    codes: dict[str, int] = getattr(args, "exit_codes", EXIT_FOR_STATUS)
    return codes[status]


# Severity of a comparison's status, for combining it with what `--point-map` left unpaired.
_SEVERITY = {"match": 0, "inconclusive": 1, "mismatch": 2}


def _unpaired_status(
    unpaired: dict[str, list[str]], sides: Callable[[], tuple[Labels, Labels]] | None
) -> str | None:
    """What points without a partner make of a comparison: a mismatch, or inconclusive when
    only the run that lacks them stopped early (they may be its crash tail)."""
    if not unpaired or sides is None:
        return None
    (_, ref_complete), (_, cand_complete) = sides()
    lacking_complete = {"reference": cand_complete, "candidate": ref_complete}
    if all(not lacking_complete[side] for side in unpaired):
        return "inconclusive"
    return "mismatch"


def _finish(
    result: Any,
    args: argparse.Namespace,
    unpaired: dict[str, list[str]] | None = None,
    sides: Callable[[], tuple[Labels, Labels]] | None = None,
) -> int:
    include_unchanged = not args.only_changed
    if args.report:
        result.write(
            args.report,
            overwrite=args.overwrite,
            include_unchanged=include_unchanged,
            limit=args.limit,
        )
    if args.json:
        print(result.to_json())
    else:
        print(result.to_text(include_unchanged=include_unchanged, limit=args.limit), end="")
    status = result.status
    extra = _unpaired_status(unpaired or {}, sides)
    if extra is not None and unpaired:
        if _SEVERITY[extra] > _SEVERITY[status]:
            status = extra
        found = "; ".join(f"{side} only: {labels}" for side, labels in unpaired.items())
        # The comparison compared the pairs it was given; these points are part of the
        # verdict all the same, so they are named where the report is read.
        print(
            f"tcgd: warning: --point-map left points without a partner ({found}): not "
            f"compared, so the result is {status}",
            file=sys.stderr,
        )
        if not args.json:
            print(f"\npoints without a partner (--point-map; not compared): {found}")
            print(f"status with them: {status.upper() if status != 'match' else status}")
    return _exit_code(args, status)


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
                                    "summary": vars(o.summary),
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
                    str(s.nan),
                    str(s.posinf + s.neginf),
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


def _site_text(site: Any) -> str:
    """`name[invocation]`, then what a compile pass knows of it: module, op, graph, node."""
    parts = [p for p in (site.module_path, site.aten_op) if p]
    if site.graph_kind:
        parts.append(f"{site.graph_kind} graph")
    if site.node_name:
        parts.append(f"node {site.node_name}")
    detail = f" ({', '.join(parts)})" if parts else ""
    return f"{site.name}[{site.invocation_index}]{detail}"


def _counts_text(site: Any) -> str:
    extremes = (
        "no finite values" if site.min is None else f"finite min {_g(site.min)}, max {_g(site.max)}"
    )
    return f"nan {site.nan}, +inf {site.posinf}, -inf {site.neginf}; {extremes}"


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
            print(json.dumps({"found": True, **json.loads(found.to_json())}))
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


def add_commands(
    parser: argparse.ArgumentParser, *, exit_codes: dict[str, int] | None = None
) -> None:
    """Adds this domain's subcommands; each sets `handler(args) -> exit code`.
    `exit_codes` maps a comparison's status to the exit code (`tcgd tensor`'s by default;
    `tcgd-tensor` passes the reference design's)."""
    from torch_cudagraph_debug.cli import commands as subcommands

    commands = subcommands(parser, help="what to summarise or compare")

    p = commands.add_parser(
        "summary",
        help="a run's points and observation summaries",
        description="Print a run's execution and completion state, its point count and "
        "default payload, then per point its observation count (full and summary-only "
        "payloads), its replay index (or the execution that recorded it) and a table of "
        "its observations.",
    )
    p.add_argument("run", metavar="root", help="job root holding the run")
    _run_options(p)
    p.add_argument("--point", help="only this point (label, or #index)")
    p.add_argument("--limit", type=int, default=20, help="observations shown per point (20)")
    p.add_argument("--json", action="store_true", help="print everything as JSON")
    p.set_defaults(handler=_summary)

    p = commands.add_parser(
        "compare-points",
        help="compare two points, of one run or two",
        usage="%(prog)s REFERENCE [CANDIDATE] --reference-point LABEL --candidate-point LABEL"
        " [options]\n       %(prog)s ROOT REF_POINT CAND_POINT [--candidate-run ROOT2] "
        "[options]",
        description="Compare two points. REFERENCE and CANDIDATE are job roots (CANDIDATE "
        "left out: the reference's run); the points are named by --reference-point and "
        "--candidate-point. The second form names the points as arguments.",
    )
    p.add_argument(
        "operands",
        nargs="+",
        metavar="PATH_OR_POINT",
        help="REFERENCE [CANDIDATE] with --reference-point/--candidate-point, or ROOT "
        "REF_POINT CAND_POINT",
    )
    p.add_argument("--reference-point", metavar="LABEL", help="reference point (label, or #index)")
    p.add_argument("--candidate-point", metavar="LABEL", help="candidate point (label, or #index)")
    p.add_argument(
        "--candidate-run",
        metavar="ROOT",
        help="job root of the candidate point's run (default: the reference's)",
    )
    _run_options(p, candidate="candidate point's run")
    _comparison_options(p)
    p.set_defaults(handler=_compare_points, series=False)

    p = commands.add_parser("compare-runs", help="compare two runs point by point")
    p.add_argument("reference", help="job root of the reference run")
    p.add_argument("candidate", help="job root of the candidate run (may be the same root)")
    _run_options(p, candidate="candidate run")
    _mapping_options(p)
    _comparison_options(p)
    p.set_defaults(handler=_compare_runs)

    p = commands.add_parser(
        "compare-point-series",
        help="compare one point against every point of a run: the first diverging replay",
        usage="%(prog)s REFERENCE [CANDIDATE] --reference-point LABEL [options]\n"
        "       %(prog)s ROOT REF_POINT [SERIES_ROOT] [options]",
        description="Compare the point --reference-point of REFERENCE with every point of "
        "CANDIDATE's run, in order (CANDIDATE left out: the reference's run). The second "
        "form names the point as an argument.",
    )
    p.add_argument(
        "operands",
        nargs="+",
        metavar="PATH_OR_POINT",
        help="REFERENCE [CANDIDATE] with --reference-point, or ROOT REF_POINT [SERIES_ROOT]",
    )
    p.add_argument("--reference-point", metavar="LABEL", help="reference point (label, or #index)")
    _run_options(p, candidate="series run")
    _comparison_options(p)
    p.set_defaults(handler=_compare_point_series, series=True)

    p = commands.add_parser("group-summary", help="the runs of a multi-rank job, one per rank")
    p.add_argument("root", help="job root holding one run per rank")
    p.add_argument("--name", help="the runs of this name, when the root holds several names")
    p.add_argument("--json", action="store_true", help="print the group as JSON")
    p.add_argument(
        "--output",
        metavar="DIR",
        help="also write summary.txt/.json/.html and rank_points.csv into DIR",
    )
    p.add_argument(
        "--overwrite", action="store_true", help="replace the summary files in a non-empty DIR"
    )
    p.set_defaults(handler=_group_summary)

    p = commands.add_parser("compare-run-groups", help="compare two multi-rank jobs rank by rank")
    p.add_argument("reference", help="job root of the reference group")
    p.add_argument("candidate", help="job root of the candidate group (may be the same root)")
    p.add_argument("--name", help="the reference group's run name, when the root holds several")
    p.add_argument(
        "--candidate-name", metavar="NAME", help="the candidate group's run name (default: --name)"
    )
    _mapping_options(p)
    _comparison_options(p)
    p.set_defaults(handler=_compare_run_groups)

    p = commands.add_parser(
        "first-anomaly",
        help="the first replay and site where a value held NaN, Inf or a large magnitude",
        description="Search a tensor run's observations in execution order (replay, point, "
        "order within the point) for the first NaN, infinity or magnitude over a threshold. "
        "Exit 0 when there is none, 1 when one is found (printed with the other sites that "
        "hit at the same replay), 2 on an error.",
    )
    p.add_argument("root", help="job root holding the run")
    _run_options(p)
    p.add_argument(
        "--kind",
        choices=tuple(_ANOMALY_KINDS),
        default="nonfinite",
        help="nan, inf (either sign), nonfinite (nan or inf; the default), or abs-max "
        "(a finite |value| over --threshold, or an infinity)",
    )
    p.add_argument("--threshold", type=float, help="the magnitude abs-max looks for")
    p.add_argument(
        "--site",
        metavar="GLOB",
        help="only observations whose name, module path, node name or site id matches "
        "(a glob such as 'layers.*', or an exact name)",
    )
    p.add_argument("--json", action="store_true", help="print the answer as one JSON object")
    p.set_defaults(handler=_first_anomaly)

    # Every subcommand carries the table: defaults set on the parent parser would be
    # overwritten by the namespace a subparser fills.
    codes = dict(EXIT_FOR_STATUS if exit_codes is None else exit_codes)
    for sub in commands.choices.values():
        sub.set_defaults(exit_codes=codes)


# ---------------------------------------------------------------------------- query
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
        # Every run was skipped: there is nothing to answer from.
        raise skipped[0]
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


def add_query_command(subparsers: Any) -> None:
    """Adds `tcgd query "<SQL>" RUN...`: DuckDB over the committed rows of the given runs
    (or of every run under a job directory), as tables `runs`, `points`, `observations`,
    `payloads` (and the memory tables of memory runs). A run that cannot be read is
    skipped with a warning, or fails the query with `--strict`."""
    p = subparsers.add_parser(
        "query",
        help="SQL (DuckDB) over runs: tables runs, points, observations, payloads",
    )
    p.add_argument(
        "sql", help='the query, e.g. "SELECT name, max(abs(mean)) FROM observations GROUP BY name"'
    )
    p.add_argument("runs", nargs="+", metavar="root", help="job roots (every run in each)")
    p.add_argument("--json", action="store_true", help="print the rows as a JSON list")
    p.add_argument("--limit", type=int, default=100, help="rows shown in the table (100)")
    p.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 2) on a damaged run instead of skipping it with a warning",
    )
    p.set_defaults(handler=_query)


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
            points = json.loads(reader.manifest_json())["point_count"]
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


def add_validate_command(subparsers: Any) -> None:
    """Adds `tcgd validate ROOT...`: every file and payload digest of every tensor and
    memory run of the given job roots."""
    p = subparsers.add_parser(
        "validate",
        help="check every file of runs; exit 0 when intact, 2 when damage is found",
        description="Check every file and payload digest of every run of the given job "
        "roots. Prints one line per intact run and one line per problem; exits 0 when every "
        "run is intact, 2 otherwise.",
    )
    p.add_argument("runs", nargs="+", metavar="root", help="job roots (every run in each)")
    p.set_defaults(handler=_validate)


# ---------------------------------------------------------------------------- compact
def _compact(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug import _native

    for root in args.roots:
        report = _native.compact_root(root)
        print(
            f"{root}: {report['runs_compacted']} runs compacted "
            f"({report['runs_in_use']} in use, left alone): {report['files_before']} files -> "
            f"{report['files_after']}; {report['uncommitted_removed']} files of uncommitted "
            f"points removed, {report['orphans_deleted']} stray files deleted"
        )
        # A damaged run is left as it is (tcgd validate lists its problems); the others
        # were compacted all the same.
        for skipped in report["runs_skipped"]:
            print(f"tcgd: warning: {root}: not compacted: {skipped}", file=sys.stderr)
    return EXIT_OK


def add_compact_command(subparsers: Any) -> None:
    """Adds `tcgd compact ROOT...`: rewrites the small files of every finished run into
    files of the target size, one commit per table, and deletes what crashed writers
    left outside the tables' logs. Runs still being written are left alone."""
    p = subparsers.add_parser(
        "compact",
        help="rewrite small files of finished runs into large ones; delete crash leftovers",
        description="Rewrite the small files of every run no writer holds into files of "
        "about 256 MiB (one commit per table, so readers never see a mix), remove rows of "
        "points that never committed, and delete files that crashed writers left outside "
        "the tables' logs.",
    )
    p.add_argument("roots", nargs="+", metavar="root", help="job roots")
    p.set_defaults(handler=_compact)
