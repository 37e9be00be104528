"""What the `tcgd memory` commands share: their flags, loading runs and points, pool and
device mappings, attribution options, how a report is printed and written (``_emit``), and
the progress line of a long analysis."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any

from torch_cudagraph_debug._native import MemoryDisplayOptions
from torch_cudagraph_debug.cli._exit import EXIT_OK
from torch_cudagraph_debug.cli._flags import run_flags


def _attribution_flags(p: argparse.ArgumentParser) -> None:
    """The attribution requests and their display bounds (read by ``_attribution``)."""
    att = p.add_argument_group("attribution (needs allocator history)")
    att.add_argument("--stacks", action="store_true", help="attribute growth to allocation stacks")
    att.add_argument("--events", action="store_true", help="attribute growth to allocator events")
    att.add_argument("--lifetimes", action="store_true", help="track allocation lifetimes")
    shown = MemoryDisplayOptions()
    att.add_argument(
        "--stack-depth",
        type=int,
        default=shown.stack_depth,
        help=f"frames shown per stack ({shown.stack_depth})",
    )
    att.add_argument(
        "--limit",
        type=int,
        default=shown.limit,
        help=f"rows shown per attribution table ({shown.limit})",
    )


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
    _attribution_flags(p)


def _mapping_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--candidate-run",
        metavar="ROOT",
        help="the job root of the candidate's run when it is another root (default: ROOT)",
    )
    run_flags(p, candidate="candidate run")
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


def _endpoint_flags(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    group = p.add_argument_group("phase endpoints")
    for side in ("baseline", "candidate"):
        for end in ("start", "end"):
            group.add_argument(
                f"--{side}-{end}",
                metavar="POINT",
                required=required,
                help=f"{side} phase {end} point (label or index)",
            )


def _group_output_flags(p: argparse.ArgumentParser, *, phases: bool = False) -> None:
    out = p.add_argument_group("report")
    out.add_argument("--json", action="store_true", help="print the JSON report to stdout")
    out.add_argument(
        "--output", metavar="DIR", help="also write report.txt/.json/.html and the CSVs to DIR"
    )
    out.add_argument("--overwrite", action="store_true", help="replace report files in --output")
    if phases:
        out.add_argument(
            "--only-changed", action="store_true", help="leave out rows with no change or gap"
        )
        _attribution_flags(p)


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


def _point_key(text: str) -> str | int:
    """A point as given on the command line: an integer is a position, anything else a
    label."""
    return int(text) if text.lstrip("-").isdigit() else text


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
    # The whole report: the tree and, when requested, its attribution sections.
    print(
        result._full(_format(args), kwargs["include_unchanged"], kwargs.get("depth", "stream")),
        end="",
    )
    for warning in getattr(result, "_notes", []):
        print(f"tcgd: note: {warning}", file=sys.stderr)
    return EXIT_OK


class _Progress:
    """Elapsed time on stderr for an analysis that takes more than a second, only when
    stderr is a terminal (redirected output stays clean). Redrawn in place; erased when
    the analysis ends."""

    DELAY = 1.0

    def __init__(self, what: str):
        self.what = what
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False

    def _loop(self) -> None:
        start = time.monotonic()
        if self._done.wait(self.DELAY):
            return
        frames = "|/-\\"
        tick = 0
        while not self._done.is_set():
            elapsed = time.monotonic() - start
            sys.stderr.write(f"\r{frames[tick % 4]} {self.what}: {elapsed:5.1f}s")
            sys.stderr.flush()
            self._drawn = True
            tick += 1
            self._done.wait(0.2)

    def __enter__(self) -> _Progress:
        if sys.stderr.isatty():
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            if self._drawn:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
