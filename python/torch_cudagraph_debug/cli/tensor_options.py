"""What the `tcgd tensor` commands share: comparison and mapping flags, run selection, point
keys and label pairing, the progress line, exit statuses, and how a comparison is printed
and written (``_finish``). `tcgd compile` reuses the comparison flags."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.cli._exit import (
    EXIT_FOR_STATUS,
)


def _comparison_options(parser: argparse.ArgumentParser) -> None:
    # Defaults and choices are the engine's (TensorComparisonOptions and its enumerations),
    # written once in Rust.
    default = _native.TensorComparisonOptions()
    choices = _native.comparison_literals()
    group = parser.add_argument_group("comparison")
    group.add_argument("--mode", choices=choices["ComparisonMode"], default=default.mode)
    group.add_argument(
        "--rtol", type=float, default=default.rtol, help=f"relative tolerance ({default.rtol})"
    )
    group.add_argument(
        "--atol", type=float, default=default.atol, help=f"absolute tolerance ({default.atol})"
    )
    group.add_argument("--equal-nan", action="store_true", help="NaN matches NaN")
    # Each policy: its flag, and a shorthand for its one value other than the default.
    for policy, alias, shorthand, meaning in (
        ("dtype", "DTypePolicy", "--promote-dtypes", "compare the values of different dtypes"),
        ("layout", "LayoutPolicy", "--ignore-layout", "do not compare strides"),
    ):
        fallback = getattr(default, f"{policy}_policy")
        (other,) = (c for c in choices[alias] if c != fallback)
        group.add_argument(f"--{policy}-policy", choices=choices[alias], default=fallback)
        group.add_argument(
            shorthand,
            dest=f"{policy}_policy",
            action="store_const",
            const=other,
            help=f"{meaning} (same as --{policy}-policy {other})",
        )
    output = parser.add_argument_group("output")
    output.add_argument(
        "--limit",
        type=int,
        default=default.limit,
        help=f"rows per table in the text report ({default.limit})",
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


# The comparison options the flags set. Each option has the flag of its name: rtol ->
# --rtol, dtype_policy -> --dtype-policy (its value is args.dtype_policy).
_OPTIONS = ("mode", "rtol", "atol", "equal_nan", "dtype_policy", "layout_policy", "limit")


def _options(args: argparse.Namespace) -> Any:
    from torch_cudagraph_debug.errors import InvalidInputError
    from torch_cudagraph_debug.tensor_debug import TensorComparisonOptions

    try:
        return TensorComparisonOptions(**{option: getattr(args, option) for option in _OPTIONS})
    except InvalidInputError as error:
        option = getattr(error, "option", None)
        if option is None:
            raise
        flag = "--" + option.replace("_", "-")
        raise InvalidInputError(f"{flag} {error.reason}") from None  # type: ignore[attr-defined]


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
