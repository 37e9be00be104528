"""Facts about the process a run is recorded in: rank, world size, provenance."""

from __future__ import annotations

import os
import platform
import sys

import torch

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import InvalidInputError


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidInputError(
            f"environment variable {name}={value!r} is not an integer"
        ) from None


def _distributed() -> tuple[int | None, int | None]:
    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None, None


def detect_rank(rank: int | None, world_size: int | None) -> tuple[int | None, int | None]:
    """Explicit values win; then ``RANK`` / ``WORLD_SIZE``; then an initialised
    ``torch.distributed``. A single process reports rank 0 of world size 1."""
    dist_rank, dist_world = _distributed()
    if rank is None:
        rank = _env_int("RANK")
    if rank is None:
        rank = dist_rank
    if world_size is None:
        world_size = _env_int("WORLD_SIZE")
    if world_size is None:
        world_size = dist_world
    if rank is None and world_size is None:
        return 0, 1
    if rank is not None and world_size is not None and not 0 <= rank < world_size:
        raise InvalidInputError(f"rank {rank} is outside world size {world_size}")
    return rank, world_size


def provenance(devices: list[torch.device] | None = None) -> dict[str, object]:
    """What produced a run: versions, platform, and the CUDA devices used."""
    facts: dict[str, object] = {
        "producer": "torch-cudagraph-debug",
        "producer_version": _native.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "hostname": platform.node(),
        "pid": os.getpid(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
    }
    if torch.cuda.is_available():
        indices = sorted({d.index or 0 for d in devices or [] if d.type == "cuda"}) or [
            torch.cuda.current_device()
        ]
        described = []
        for index in indices:
            props = torch.cuda.get_device_properties(index)
            described.append(
                {
                    "index": index,
                    "name": props.name,
                    "capability": f"{props.major}.{props.minor}",
                    "total_memory": props.total_memory,
                    "uuid": str(getattr(props, "uuid", "")),
                }
            )
        facts["devices"] = described
    return facts
