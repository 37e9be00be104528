"""Flags the `tcgd tensor` and `tcgd memory` commands declare alike: choosing runs in a job
root, and the reference design's operand form (positional operands, or paths with the
points named by flags)."""

from __future__ import annotations

import argparse


def run_flags(parser: argparse.ArgumentParser, *, candidate: str | None = None) -> None:
    """--name / --rank choose a run in a job root holding several (eager and compiled
    runs, or the ranks of a job); with ``candidate`` (what the other side is called),
    --candidate-name / --candidate-rank choose the other side's, defaulting to them."""
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


def point_operands(
    parser: argparse.ArgumentParser,
    *,
    metavar: str,
    help: str,
    sides: tuple[str, ...],
    point_metavar: str,
    point_help: str,
) -> None:
    """The operands of a command that takes the reference design's form too: its
    positional operands, and a ``--{side}-point`` flag per side (``point_help`` is
    formatted with the side)."""
    parser.add_argument("operands", nargs="+", metavar=metavar, help=help)
    for side in sides:
        parser.add_argument(
            f"--{side}-point", metavar=point_metavar, help=point_help.format(side=side)
        )
