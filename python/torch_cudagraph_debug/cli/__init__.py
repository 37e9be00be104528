"""The ``tcgd`` command line: ``tcgd tensor ...``, ``tcgd memory ...``, ``tcgd query``,
``tcgd validate``, ``tcgd compact``, ``tcgd explain``, ``tcgd differential``, ``tcgd why``.

``tcgd-tensor`` and ``tcgd-memory`` are aliases for the two domains. Exit codes (see
``docs/cli.md``): 0 match (or report produced), 1 mismatch, 3 inconclusive, 2 error, 130
interrupted, 141 standard output closed early; ``tcgd-tensor`` keeps the reference design's
statuses, where inconclusive is 1 like a mismatch.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from torch_cudagraph_debug.cli._exit import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OUTPUT_CLOSED,
    REFERENCE_EXIT_FOR_STATUS,
)
from torch_cudagraph_debug.cli._subcommands import add_table, check_paths, commands

DEBUG_VARIABLE = "TCGD_DEBUG"

_DESCRIPTION = (
    "A debugger for PyTorch CUDA Graphs: summarise and compare tensor runs and allocator "
    "memory runs, query runs with SQL, and see what the probe pass selects."
)
_EPILOG = (
    "exit codes: 0 match (or report printed), 1 mismatch, 3 inconclusive, 2 error, "
    f"130 interrupted, 141 output closed early. Errors are one line on stderr; set "
    f"{DEBUG_VARIABLE}=1 to see the traceback of an unexpected one."
)


# `tcgd-tensor` answers with the reference design's statuses: inconclusive is 1, like a
# mismatch (`tcgd tensor` says 3).
_TENSOR_EPILOG = (
    "exit codes: 0 match (or report printed), 1 mismatch or inconclusive, 2 error, "
    f"130 interrupted, 141 output closed early. Errors are one line on stderr; set "
    f"{DEBUG_VARIABLE}=1 to see the traceback of an unexpected one."
)


def _version() -> str:
    from torch_cudagraph_debug import __version__

    return __version__


class _Parser(argparse.ArgumentParser):
    """A usage error is one line on stderr, like every other error (exit 2): the full usage
    is one `--help` away, and a block of usage text would bury the line that matters.
    Subcommand parsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # argparse hands the arguments a subcommand does not know back up to the top-level
        # parser, whose error would name `tcgd --help`. A subcommand's parser gets every
        # argument after the subcommand's name, so what it leaves over is its own error,
        # raised here so that the message names its usage.
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def _add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s (torch-cudagraph-debug) {_version()}",
        help="print the package version and exit",
    )


def _parser() -> argparse.ArgumentParser:
    from torch_cudagraph_debug.cli import compile, memory, runs, tensor

    parser = _Parser(prog="tcgd", description=_DESCRIPTION, epilog=_EPILOG)
    _add_version(parser)
    domains = commands(parser, help="the domain or tool")
    tensor.add_commands(
        domains.add_parser(
            "tensor",
            help="tensor runs: summaries, comparisons",
            description="Summarise tensor runs and compare their points.",
        )
    )
    memory.add_commands(
        domains.add_parser(
            "memory",
            help="allocator memory: summaries, comparisons",
            description="Report on memory runs, compare points and phases, import "
            "allocator snapshot pickles.",
        )
    )
    tools = (
        compile.EXPLAIN_COMMAND,
        compile.DIFFERENTIAL_COMMAND,
        compile.WHY_COMMAND,
        runs.QUERY_COMMAND,
        runs.VALIDATE_COMMAND,
        runs.COMPACT_COMMAND,
    )
    add_table(domains, tools)
    return parser


def _debugging() -> bool:
    """`TCGD_DEBUG=1` (any value but empty or 0) shows tracebacks."""
    return os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")


def _one_line(text: str) -> str:
    """Error text on one line: messages from other libraries (DuckDB, the OS) may span
    several."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def _close_stdout() -> None:
    """After the reader of stdout went away (`tcgd ... | head`): point the descriptor at
    devnull, so the interpreter's final flush of what is still buffered cannot fail and
    print "Exception ignored" on stderr."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        # A stdout without a descriptor (captured in-process): nothing will flush to a pipe.
        pass


def _run(make_parser: Callable[[], argparse.ArgumentParser], argv: Sequence[str] | None) -> int:
    """Runs the chosen command: every failure becomes one line on stderr and an exit code;
    nothing reaches the user as a traceback unless TCGD_DEBUG=1 asks for it. (argparse's
    own usage errors exit 2 through SystemExit, which passes through.)"""
    from torch_cudagraph_debug.errors import TcgdError

    try:
        args = make_parser().parse_args(argv)
        check_paths(args)
        handler: Callable[[argparse.Namespace], int] = args.handler
        code = int(handler(args))
        # Flushed here so that a closed pipe is seen now, not at interpreter exit.
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _close_stdout()
        return EXIT_OUTPUT_CLOSED
    except KeyboardInterrupt:
        print("tcgd: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:  # the CLI's last line of defence: no traceback for users
        # The package's own errors say what to do; anything else is named by its type,
        # with the way to see its traceback.
        message = _one_line(str(error))
        if not isinstance(error, TcgdError):
            message = f"{type(error).__name__}: {message or '(no message)'}"
            if not _debugging():
                message += f" (set {DEBUG_VARIABLE}=1 to see the traceback)"
        if _debugging():
            traceback.print_exc()
        print(f"tcgd: error: {message}", file=sys.stderr)
        return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    return _run(_parser, argv)


def _alias_parser(
    prog: str,
    description: str,
    epilog: str,
    add_commands: Callable[[argparse.ArgumentParser], None],
) -> argparse.ArgumentParser:
    """The parser of a domain's own command (`tcgd-tensor`, `tcgd-memory`)."""
    parser = _Parser(prog=prog, description=description, epilog=epilog)
    _add_version(parser)
    add_commands(parser)
    return parser


def _tensor_parser() -> argparse.ArgumentParser:
    from torch_cudagraph_debug.cli import tensor

    return _alias_parser(
        "tcgd-tensor",
        "Summarise tensor runs and compare their points (tcgd tensor, with the reference "
        "design's exit codes).",
        _TENSOR_EPILOG,
        functools.partial(tensor.add_commands, exit_codes=REFERENCE_EXIT_FOR_STATUS),
    )


def _memory_parser() -> argparse.ArgumentParser:
    from torch_cudagraph_debug.cli import memory

    return _alias_parser(
        "tcgd-memory",
        "Report on memory runs, compare points and phases, import allocator snapshot "
        "pickles (alias of tcgd memory).",
        _EPILOG,
        memory.add_commands,
    )


def tensor_main(argv: Sequence[str] | None = None) -> int:
    return _run(_tensor_parser, argv)


def memory_main(argv: Sequence[str] | None = None) -> int:
    return _run(_memory_parser, argv)
