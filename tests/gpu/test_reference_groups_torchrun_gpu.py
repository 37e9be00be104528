"""The reference documents' two-rank examples over groups that two ranks recorded under
``torchrun --nproc-per-node=2`` on the GPU machine (``reference_group_worker.py``): the
tensor group comparison of ``tensor_debug.md``, the memory group summary and phase
comparison of ``memory_debug.md``, and the group commands of both CLI examples.

With one GPU both ranks record on it. The memory example maps rank 0's candidate to
device 1 (``device_mappings={0: {0: 1}}``, ``MemoryPoolKey(1, (0, 4))``); on one GPU the
candidate is on device 0, so those two literals read device 0 there, nothing else of the
block changes."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import reference_docs
import torch
from test_reference_docs import (
    Example,
    check_memory_groups,
    check_tensor_groups,
    domain,
    names,
    run_command,
    run_example,
)

pytestmark = pytest.mark.gpu

WORKER = Path(__file__).with_name("reference_group_worker.py")
TENSOR_GROUPS = ("tensor_debug.md", "64bfe269ef")
MEMORY_GROUPS = ("memory_debug.md", "233e861225")
CLI_BLOCKS = (("tensor_debug.md", "ab1f615b59"), ("memory_debug.md", "fd45ea2bae"))


def block(key: tuple[str, str]) -> reference_docs.Block:
    missing = reference_docs.missing_reason()
    if missing is not None:
        pytest.fail(missing)  # the GPU suite runs with the documents beside it
    found = [b for b in reference_docs.all_blocks() if b.key == key]
    assert len(found) == 1, key
    return found[0]


@pytest.fixture(scope="module")
def job(tmp_path_factory: Any) -> Path:
    root = tmp_path_factory.mktemp("torchrun-job")
    for part in ("tensor", "memory-baseline", "memory-candidate"):
        done = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
             str(WORKER), "--part", part],
            cwd=root, capture_output=True, text=True, timeout=300, check=False,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )  # fmt: skip
        assert done.returncode == 0, f"{part}:\n{done.stdout}\n{done.stderr[-4000:]}"
        for rank in (0, 1):
            assert f"rank {rank} of 2" in done.stdout, done.stdout
    return root


def test_tensor_group_example(job: Path, capsys: Any) -> None:
    example = Example(lambda _: names(), check_tensor_groups)
    run_example(block(TENSOR_GROUPS), example, job, capsys)
    from torch_cudagraph_debug.tensor_debug import TensorRunGroup

    # The ranks' identities came from torchrun's environment, not from arguments.
    for directory, execution in (("eager-group", "eager"), ("cuda-graph-group", "cuda_graph")):
        group = TensorRunGroup.load(str(job / directory))
        assert group.ranks == (0, 1) and group.world_size == 2 and group.execution == execution


def one_gpu_text(text: str) -> str:
    """The memory example as it runs where rank 0's candidate could not be on device 1."""
    if torch.cuda.device_count() > 1:
        return text
    replaced = text.replace("device_mappings={0: {0: 1}}", "device_mappings={0: {0: 0}}")
    replaced = replaced.replace("MemoryPoolKey(1, (0, 4))", "MemoryPoolKey(0, (0, 4))")
    assert replaced.count("{0: {0: 0}}") == 1 and "MemoryPoolKey(0, (0, 4))" in replaced
    return replaced


def test_memory_group_example(job: Path, capsys: Any) -> None:
    original = block(MEMORY_GROUPS)
    runnable = dataclasses.replace(original, text=one_gpu_text(original.text))
    found: dict[str, Any] = {}

    def setup(_: Path) -> dict[str, Any]:
        found.update(domain("memory_debug"))
        return found

    run_example(runnable, Example(setup, check_memory_groups), job, capsys)
    # Real allocator states: the candidate's capture output (24 MiB, pool (0, 4)) is
    # 8 MiB larger than the baseline's (16 MiB, pool (0, 1)), on both ranks alike.
    text = found["group_phase"].to_text()
    assert "change gap: min +8.00 MiB (rank 0,1), max +8.00 MiB (rank 0,1), spread 0 B" in text
    assert found["baseline_group"].ranks == (0, 1) == found["candidate_group"].ranks


def test_cli_group_commands(job: Path, tmp_path: Path) -> None:
    # A directory of its own: the Python examples above wrote their reports into the
    # job directory under the names these commands use.
    for group in ("eager-group", "cg-group", "baseline", "candidate"):
        shutil.copytree(job / group, tmp_path / group)
    commands = [
        argv
        for key in CLI_BLOCKS
        for argv in reference_docs.commands(block(key))
        if argv[1].startswith(("group-", "compare-run-group"))
    ]
    assert len(commands) == 4, commands
    for argv in commands:
        ran = run_command(argv, tmp_path)
        assert ran.returncode == 0, (argv, ran.stdout, ran.stderr)
        written = tmp_path / argv[argv.index("--output") + 1]
        assert written.is_dir() and any(written.iterdir()), argv
