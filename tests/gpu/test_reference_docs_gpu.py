"""The CUDA examples of the reference design's documents: the blocks that the table of
``tests/test_reference_docs.py`` marks ``gpu`` (a probe, a capture, a live recorder or
allocator history), run with the same extractor, setups and checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from reference_docs import Block
from test_reference_docs import Example, example_params, run_example


@pytest.mark.parametrize(("block", "example"), example_params(gpu=True))
def test_reference_example_gpu(block: Block, example: Example, tmp_path: Path, capsys: Any) -> None:
    run_example(block, example, tmp_path, capsys)
