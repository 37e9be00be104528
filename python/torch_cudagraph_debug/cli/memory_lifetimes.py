"""`tcgd memory allocation-lifetimes` (alias `tcgd-memory allocation-lifetimes`): the
allocation cohorts of a run, replayed from its stored allocator history.

Exit codes: 0 when the report is produced, 2 on error (history disabled, truncated or
without boundary, history contradicting the states, a bad argument)."""

from __future__ import annotations

import argparse
import sys

from torch_cudagraph_debug._native import MemoryDisplayOptions
from torch_cudagraph_debug.cli._exit import EXIT_OK
from torch_cudagraph_debug.cli._flags import run_flags
from torch_cudagraph_debug.cli._subcommands import Command, arg, roots_of
from torch_cudagraph_debug.cli.memory_options import _point_key, _Progress

# A lifetime report's display defaults, as the core declares them.
_SHOWN = MemoryDisplayOptions.for_lifetimes()


def _allocation_lifetimes(args: argparse.Namespace) -> int:
    import json

    from torch_cudagraph_debug.memory_debug import (
        MemoryDisplayOptions,
        MemoryLifetimeOptions,
        MemoryLifetimeSelection,
        MemoryRun,
    )

    if args.active_at is not None:
        selection = MemoryLifetimeSelection.active_at(_point_key(args.active_at))
    elif args.born_between is not None:
        start, end = args.born_between
        selection = MemoryLifetimeSelection.born_between(_point_key(start), _point_key(end))
    else:
        selection = MemoryLifetimeSelection.all()
    options = MemoryLifetimeOptions(
        display=MemoryDisplayOptions(stack_depth=args.stack_depth, limit=args.limit)
    )
    through = None if args.through is None else _point_key(args.through)
    with _Progress("allocation-lifetimes"):
        run = MemoryRun.load(args.run, name=args.name, rank=args.rank)
        result = run.lifetimes(selection, through=through, options=options)
    if args.output:
        for path in result.write(args.output, overwrite=args.overwrite).values():
            print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result.to_text(), end="")
    for warning in result.warnings:
        print(f"tcgd: note: {warning}", file=sys.stderr)
    return EXIT_OK


def _selection_flags(p: argparse.ArgumentParser) -> None:
    """Which generations to keep (all of them when neither flag is given)."""
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--active-at", metavar="POINT", help="keep generations not reusable at this point"
    )
    which.add_argument(
        "--born-between",
        nargs=2,
        metavar=("START", "END"),
        help="keep generations allocated in (START, END]",
    )


LIFETIMES_COMMAND = Command(
    "allocation-lifetimes",
    _allocation_lifetimes,
    "allocation cohorts (born, released, still held) from the stored history",
    (
        arg("run", metavar="BUNDLE", help="job root holding the memory run"),
        run_flags,
        _selection_flags,
        arg("--through", metavar="POINT", help="last analysed point (default: the last)"),
        arg(
            "--stack-depth",
            type=int,
            default=_SHOWN.stack_depth,
            help=f"frames shown per stack ({_SHOWN.stack_depth})",
        ),
        arg(
            "--limit",
            type=int,
            default=_SHOWN.limit,
            help=f"cohorts shown in text and HTML ({_SHOWN.limit})",
        ),
        arg("--output", metavar="DIR", help="also write report.* and the CSV files here"),
        arg("--overwrite", action="store_true", help="replace a report already in DIR"),
        arg("--json", action="store_true", help="print JSON instead of text"),
    ),
    description="Replays the run's allocator history and groups allocation generations "
    "into cohorts by device, pool and complete allocation stack. Needs complete event "
    "history over the analysed points.",
    check=roots_of("run"),
)
"""`allocation-lifetimes`, one of the memory subcommands."""
