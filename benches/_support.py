"""What several benches share (imported by them; not a bench itself): timing replays of
a captured CUDA graph, and the fake allocator source the CPU memory benches feed a
``MemoryRecorder`` from, with the history entries it writes."""

from __future__ import annotations

import statistics
from typing import Any

MIB = 1024 * 1024


def replay_times(graph: Any, rounds: int, replays: int) -> tuple[float, float]:
    """Minimum and median microseconds per replay of ``graph`` over ``rounds`` rounds of
    ``replays`` replays each, timed with CUDA events."""
    import torch

    per_replay = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        per_replay.append(start.elapsed_time(end) * 1000.0 / replays)
    return min(per_replay), statistics.median(per_replay)


def trace_entry(
    action: str,
    addr: int,
    size: int,
    stream: int,
    time_us: int,
    metadata: str,
    frames: Any = None,
) -> dict[str, Any]:
    """One allocator history entry as ``torch.cuda.memory._snapshot()`` has it (torch
    2.11); ``frames`` only when the entry has a stack."""
    entry = {
        "action": action,
        "addr": addr,
        "size": size,
        "stream": stream,
        "time_us": time_us,
        "compile_context": "N/A",
        "user_metadata": metadata,
    }
    if frames is not None:
        entry["frames"] = frames
    return entry


class FakeSource:
    """What a ``MemoryRecorder`` asks of torch (``memory_debug._source.SnapshotSource``)
    for one device that never captures: subclasses give ``snapshot()``, and the
    allocator metadata lives in ``metadata``."""

    torch_version = "synthetic"
    metadata = ""
    free_bytes = 70 * 1024 * MIB
    total_bytes = 80 * 1024 * MIB

    def check_available(self) -> None:
        pass

    def current_device(self) -> int:
        return 0

    def device_count(self) -> int:
        return 1

    def capturing(self) -> bool:
        return False

    def synchronize(self, devices: list[int]) -> None:
        pass

    def get_metadata(self) -> str:
        return self.metadata

    def set_metadata(self, value: str) -> None:
        self.metadata = value

    def snapshot(self) -> dict[str, Any]:
        raise NotImplementedError

    def mem_get_info(self, device: int) -> tuple[int, int]:
        return (self.free_bytes, self.total_bytes)

    def probe_memory(self) -> tuple[int, int]:
        return (0, 0)
