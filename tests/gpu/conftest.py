"""Every test in this folder needs a CUDA device: it carries the `gpu` marker (so the CPU
suite deselects it) and is skipped where CUDA is unavailable (a skip the GPU suite counts
as a failure, with --fail-on-skip)."""

from __future__ import annotations

import pytest
import torch


def pytest_itemcollected(item: pytest.Item) -> None:
    item.add_marker(pytest.mark.gpu)
    item.add_marker(pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))


@pytest.fixture
def allocator_history():
    """The caching allocator records its history (every action, Python stacks, 100k
    entries) for the test, from an emptied cache; recording is switched off after it."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.memory._record_memory_history(
        enabled="all", context="all", stacks="python", max_entries=100_000
    )
    yield
    torch.cuda.memory._record_memory_history(enabled=None)
