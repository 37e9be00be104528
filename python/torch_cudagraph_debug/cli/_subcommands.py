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


Check = Callable[[argparse.Namespace], None]
"""Checks the paths a command reads, from its parsed arguments (see `check_paths`)."""

CHECK_DEST = "_check_paths"
"""Where a command's `Check` sits in its parsed arguments."""


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, `handler(args) -> exit code`, one-line help and argument
    steps (in the order `--help` lists them), the parser's own texts, the defaults it
    sets next to the handler, and the check of the paths it reads (run before the handler,
    see `check_paths`)."""

    name: str
    handler: Callable[[argparse.Namespace], int]
    help: str
    arguments: tuple[Adder, ...] = ()
    description: str | None = None
    usage: str | None = None
    epilog: str | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)
    check: Check | None = None


def check_paths(args: argparse.Namespace) -> None:
    """Runs the command's check of its paths. Done before the handler because most
    handlers import torch first, which costs seconds and most of a gigabyte: a mistyped
    path must fail at once, with the same typed error the command would raise later."""
    check: Check | None = getattr(args, CHECK_DEST, None)
    if check is not None:
        check(args)


def _given(args: argparse.Namespace, dests: tuple[str, ...]) -> list[str]:
    """The paths held by these arguments (each a path, a list of them, or None)."""
    found: list[str] = []
    for dest in dests:
        value = getattr(args, dest)
        found += [] if value is None else [value] if isinstance(value, str) else list(value)
    return list(dict.fromkeys(found))


def job_roots(pick: Callable[[argparse.Namespace], Iterable[str]]) -> Check:
    """Each path `pick` names is a job root: the core's `RunNotFoundError` ("'x' is not a
    job root of torch-cudagraph-debug: it does not exist; ...") otherwise."""

    def check(args: argparse.Namespace) -> None:
        from torch_cudagraph_debug import _native

        for root in dict.fromkeys(pick(args)):
            _native.list_runs(root)

    return check


def roots_of(*dests: str) -> Check:
    """The arguments `dests` hold job roots (see `job_roots`)."""
    return job_roots(lambda args: _given(args, dests))


def tensor_group_dirs_of(*dests: str) -> Check:
    """The arguments `dests` hold tensor run groups: job roots, or directories whose
    direct children are job roots (one per rank, as `TensorRunGroup.load` reads them)."""

    def check(args: argparse.Namespace) -> None:
        import os

        from torch_cudagraph_debug import _native

        def is_root(path: str) -> bool:
            return os.path.isdir(os.path.join(path, "runs", "_delta_log"))

        for root in _given(args, dests):
            children: list[str] = []
            if os.path.isdir(root) and not is_root(root):
                entries = sorted(os.listdir(root))
                children = [os.path.join(root, e) for e in entries]
                children = [c for c in children if is_root(c)]
            for path in children or [root]:
                _native.list_runs(path)

    return check


def group_dirs_of(*dests: str) -> Check:
    """The arguments `dests` hold memory run groups: job roots, or directories of them."""

    def check(args: argparse.Namespace) -> None:
        from torch_cudagraph_debug import _native

        for root in _given(args, dests):
            _native.MemoryRunGroup.discover(root)

    return check


def files_of(*dests: str, what: str) -> Check:
    """The arguments `dests` hold files to read (`what` names them in the error)."""

    def check(args: argparse.Namespace) -> None:
        import os

        from torch_cudagraph_debug.errors import InvalidInputError

        for path in _given(args, dests):
            if not os.path.isfile(path):
                where = "is a directory" if os.path.isdir(path) else "does not exist"
                raise InvalidInputError(
                    f"{what} {path!r} {where} (working directory {os.getcwd()})"
                )

    return check


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
        parser.set_defaults(
            handler=command.handler, **{CHECK_DEST: command.check}, **command.defaults
        )
