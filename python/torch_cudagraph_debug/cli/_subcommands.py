"""The subcommand table every `tcgd` domain builds its commands on (its own module, so that
the domains and the entry point all import it without importing each other)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Adder = Callable[[argparse.ArgumentParser], object]
"""One step of a command's argument list: adds arguments (or a group of them) to its
parser."""


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


def arg(*flags: str, **options: Any) -> Adder:
    """One `add_argument` call, as a step of a command's argument list."""
    return lambda parser: parser.add_argument(*flags, **options)


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, `handler(args) -> exit code`, one-line help and argument
    steps (in the order `--help` lists them), the parser's own texts, and the defaults it
    sets next to the handler."""

    name: str
    handler: Callable[[argparse.Namespace], int]
    help: str
    arguments: tuple[Adder, ...] = ()
    description: str | None = None
    usage: str | None = None
    epilog: str | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)


def add_table(subparsers: argparse._SubParsersAction, table: Iterable[Command]) -> None:
    """Adds every command of `table` to `subparsers`, in order."""
    for command in table:
        parser = subparsers.add_parser(
            command.name,
            help=command.help,
            description=command.description,
            usage=command.usage,
            epilog=command.epilog,
        )
        for add in command.arguments:
            add(parser)
        parser.set_defaults(handler=command.handler, **command.defaults)
