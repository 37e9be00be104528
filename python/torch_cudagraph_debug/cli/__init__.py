"""The ``tcgd`` command line: ``tcgd tensor ...``, ``tcgd memory ...``, ``tcgd query``,
``tcgd validate``, ``tcgd explain``, ``tcgd differential``.

``tcgd-tensor`` and ``tcgd-memory`` are aliases for the two domains. Exit codes: 0 match
(or report produced), 1 mismatch, 3 inconclusive, 2 error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

EXIT_OK, EXIT_MISMATCH, EXIT_ERROR, EXIT_INCONCLUSIVE = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    from torch_cudagraph_debug.cli import compile, memory, tensor

    parser = argparse.ArgumentParser(prog="tcgd", description=__doc__.splitlines()[0])
    domains = parser.add_subparsers(dest="domain", required=True)
    tensor.add_commands(domains.add_parser("tensor", help="tensor runs: summaries, comparisons"))
    memory.add_commands(
        domains.add_parser("memory", help="allocator memory: summaries, comparisons")
    )
    compile.add_explain_command(domains)
    compile.add_differential_command(domains)
    tensor.add_query_command(domains)
    tensor.add_validate_command(domains)
    return parser


def _run(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    from torch_cudagraph_debug.errors import TcgdError

    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except TcgdError as error:
        print(f"tcgd: error: {error}", file=sys.stderr)
        return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    return _run(_parser(), argv)


def tensor_main(argv: Sequence[str] | None = None) -> int:
    from torch_cudagraph_debug.cli import tensor

    parser = argparse.ArgumentParser(prog="tcgd-tensor")
    tensor.add_commands(parser)
    return _run(parser, argv)


def memory_main(argv: Sequence[str] | None = None) -> int:
    from torch_cudagraph_debug.cli import memory

    parser = argparse.ArgumentParser(prog="tcgd-memory")
    memory.add_commands(parser)
    return _run(parser, argv)
