"""Two (or more) processes of one job at once, each a rank of the world: what the run-group
tests record with, on one GPU or none."""

from __future__ import annotations

import os
import subprocess
import sys


def run_ranks(script: str, args_per_rank: list[list[str]], timeout: float = 300) -> None:
    """Runs ``python -c script ARGS`` once per rank, all at once, with ``RANK`` and
    ``WORLD_SIZE`` set; fails with the rank's stderr when one does not exit 0."""
    world = len(args_per_rank)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, *args],
            env=dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world)),
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank, args in enumerate(args_per_rank)
    ]
    for rank, proc in enumerate(procs):
        _, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, f"rank {rank}: {err}"
