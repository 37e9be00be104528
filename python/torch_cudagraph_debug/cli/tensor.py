"""`tcgd tensor ...` commands."""

from __future__ import annotations

import argparse


def add_commands(parser: argparse.ArgumentParser) -> None:
    """Adds this domain's subcommands; each sets `handler(args) -> exit code`."""
    parser.add_subparsers(dest="command", required=True)
