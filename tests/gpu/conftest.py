"""Every test in this folder needs a CUDA device: it carries the `gpu` marker (so the CPU
suite deselects it) and is skipped where CUDA is unavailable (a skip the GPU suite counts
as a failure, with --fail-on-skip)."""

from __future__ import annotations

import pytest
import torch


def pytest_itemcollected(item: pytest.Item) -> None:
    item.add_marker(pytest.mark.gpu)
    item.add_marker(pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))
