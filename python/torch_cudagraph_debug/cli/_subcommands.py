"""The subcommand table every `tcgd` domain builds its commands on (its own module, so that
the domains and the entry point all import it without importing each other)."""

from __future__ import annotations

import argparse


def commands(parser: argparse.ArgumentParser, *, help: str) -> argparse._SubParsersAction:
    """The subcommands of `parser`, named `command` as the docs name them. Without one,
    `parser` prints a one-line error naming the choices (exit 2)."""
    subparsers = parser.add_subparsers(
        title="commands", dest="command", metavar="command", help=help
    )

    def missing(args: argparse.Namespace) -> int:
        # `choices` holds every subcommand added by the time the command line is parsed.
        names = ", ".join(subparsers.choices)
        parser.error(f"a command is required: one of {names}")

    parser.set_defaults(handler=missing)
    return subparsers
