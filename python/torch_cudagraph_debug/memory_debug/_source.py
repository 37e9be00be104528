"""Where live snapshots come from: torch's private allocator interfaces, reached only here
and gated by what the installed torch has, so a torch release that renames one degrades
(a point says what it could not do) instead of crashing.

Tests feed the same machinery from a fake source with the same methods."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Union, cast

from torch_cudagraph_debug.errors import CudaUnavailableError, InvalidInputError
from torch_cudagraph_debug.memory_debug._model import MemoryDebugWarning

if TYPE_CHECKING:
    import torch

# One device: an index, "cuda" / "cuda:N", or a torch.device of type cuda.
Device = Union["torch.device", str, int]
Devices = Device | Sequence[Device] | None


class SnapshotSource(Protocol):
    """What a probe or recorder needs from the allocator."""

    torch_version: str | None

    def check_available(self) -> None: ...
    def current_device(self) -> int: ...
    def device_count(self) -> int: ...
    def capturing(self) -> bool: ...
    def synchronize(self, devices: Sequence[int]) -> None: ...
    def get_metadata(self) -> str | None: ...
    def set_metadata(self, value: str) -> None: ...
    def snapshot(self) -> dict[str, Any]: ...
    def mem_get_info(self, device: int) -> tuple[int, int] | None: ...
    def probe_memory(self) -> tuple[int, int]: ...


class TorchSource:
    """The live allocator of this process."""

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self.torch_version: str | None = torch.__version__
        memory = torch.cuda.memory
        self._get = getattr(memory, "_get_memory_metadata", None)
        self._set = getattr(memory, "_set_memory_metadata", None)
        self._snapshot = getattr(memory, "_snapshot", None)

    def check_available(self) -> None:
        if not self._torch.cuda.is_available():
            raise CudaUnavailableError(
                "live allocator snapshots need CUDA, and torch.cuda.is_available() is False; "
                "saved snapshots can still be analysed: see import_snapshots() and "
                "MemoryProbeSnapshot.from_snapshot()"
            )
        if self._snapshot is None:
            raise CudaUnavailableError(
                f"torch {self.torch_version} has no torch.cuda.memory._snapshot(); this "
                "torch is not supported for memory debugging"
            )

    def current_device(self) -> int:
        return int(self._torch.cuda.current_device())

    def device_count(self) -> int:
        return int(self._torch.cuda.device_count())

    def capturing(self) -> bool:
        return bool(self._torch.cuda.is_current_stream_capturing())

    def synchronize(self, devices: Sequence[int]) -> None:
        for device in devices:
            self._torch.cuda.synchronize(device)

    def get_metadata(self) -> str | None:
        return None if self._get is None else str(self._get())

    def set_metadata(self, value: str) -> None:
        if self._set is not None:
            self._set(value)

    def snapshot(self) -> dict[str, Any]:
        assert self._snapshot is not None
        return self._snapshot()

    def mem_get_info(self, device: int) -> tuple[int, int] | None:
        free, total = self._torch.cuda.mem_get_info(device)
        return int(free), int(total)

    def probe_memory(self) -> tuple[int, int]:
        from torch_cudagraph_debug import _native

        device, pinned = _native.probe_memory()
        return int(device), int(pinned)

    def memory_stats(self, device: int) -> dict[str, Any]:
        return dict(self._torch.cuda.memory_stats(device))

    def reset_peak_memory_stats(self, device: int) -> None:
        self._torch.cuda.reset_peak_memory_stats(device)

    def graph_trees(self) -> Any:
        from torch_cudagraph_debug.memory_debug._owners import graph_trees_module

        return graph_trees_module()


def device_index(device: Device, source: SnapshotSource) -> int:
    """The CUDA index of one device as users name it (the current one for ``"cuda"``);
    a CPU device is an ``InvalidInputError``: only CUDA devices have an allocator."""
    named = isinstance(device, int | str) or hasattr(device, "type")
    if isinstance(device, bool) or not named:
        raise InvalidInputError(f"a device is an int, 'cuda:N' or a torch.device, got {device!r}")
    if isinstance(device, int):
        return device
    import torch

    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise InvalidInputError(f"not a device: {device!r} ({error})") from None
    if resolved.type != "cuda":
        raise InvalidInputError(f"memory snapshots cover CUDA devices, got {device!r}")
    return source.current_device() if resolved.index is None else resolved.index


def resolve_devices(devices: Devices, source: SnapshotSource) -> list[int] | None:
    """``None``: every device the snapshot mentions plus the current one; ``"all"``: every
    visible device (its context is created if it had none); one device (an int, ``"cuda:N"``
    or a ``torch.device``) or a sequence of them: those."""
    if devices is None:
        return None
    if devices == "all":
        return list(range(source.device_count()))
    given: list[Device]
    if isinstance(devices, int | str) or hasattr(devices, "type"):
        given = [cast("Device", devices)]
    elif isinstance(devices, Sequence):
        given = list(devices)
    else:
        raise InvalidInputError(
            f"devices must be None, 'all', a device or a sequence of devices, got {devices!r}"
        )
    if not given:
        raise InvalidInputError("devices is an empty sequence")
    return sorted({device_index(d, source) for d in given})


class LiveAllocator:
    """The allocator a probe or a recorder snapshots (this process's, or a test's fake
    ``source``) and the devices its snapshots cover (``resolve_devices``). With ``check``
    the allocator must be available (``CudaUnavailableError`` first otherwise)."""

    def __init__(self, source: SnapshotSource | None, devices: Devices, *, check: bool = False):
        self.source: SnapshotSource = source if source is not None else TorchSource()
        if check:
            self.source.check_available()
        self.devices = resolve_devices(devices, self.source)

    def take(self, synchronize: bool, marker: str) -> Taken:
        return take(self.source, self.devices, synchronize, marker)


@dataclass
class Taken:
    """One live snapshot and what was read next to it."""

    snapshot: dict[str, Any]
    marker: str | None
    devices: list[int] | None
    device_memory: list[tuple[int, int | None, int | None, int | None, int | None]]
    synchronized: bool
    during_capture: bool
    torch_version: str | None = None

    def ingest_args(self) -> dict[str, Any]:
        """What the native ingestion takes besides the snapshot and its label."""
        return {
            "marker": self.marker,
            "devices": self.devices,
            "device_memory": self.device_memory,
            "source": "live",
            "synchronized": self.synchronized,
            "during_capture": self.during_capture,
            "torch_version": self.torch_version,
        }


@contextlib.contextmanager
def _marker(source: SnapshotSource, marker: str) -> Iterator[bool]:
    """Sets the allocator metadata to ``marker`` for the duration, then restores the
    previous value. Yields whether a marker API exists."""
    previous = source.get_metadata()
    if previous is None:
        yield False
        return
    source.set_metadata(marker)
    try:
        yield True
    finally:
        source.set_metadata(previous)


def take(
    source: SnapshotSource,
    devices: list[int] | None,
    synchronize: bool,
    marker: str,
) -> Taken:
    """Takes one snapshot: synchronise (unless capturing), snapshot under the marker, then
    read each device's free and total memory."""
    source.check_available()
    during_capture = source.capturing()
    wanted = devices if devices is not None else [source.current_device()]
    synchronized = False
    if during_capture:
        warnings.warn(
            "memory snapshot taken while a CUDA graph capture is under way: not "
            "synchronised, and torch.cuda.mem_get_info is not read (CUDA used unavailable)",
            MemoryDebugWarning,
            stacklevel=3,
        )
    elif synchronize:
        source.synchronize(wanted)
        synchronized = True
    with _marker(source, marker) as has_marker:
        snapshot = source.snapshot()
    mentioned = set(wanted)
    if devices is None:
        for segment in snapshot.get("segments", []) if isinstance(snapshot, dict) else []:
            if isinstance(segment, dict) and isinstance(segment.get("device"), int):
                mentioned.add(segment["device"])
    probe_device, probe_pinned = source.probe_memory()
    current = source.current_device()
    readings = []
    for device in sorted(mentioned):
        info = None if during_capture else source.mem_get_info(device)
        # The probe runtime counts its bytes per process, not per device: they are shown
        # under the current device, where probes are created.
        probe = (probe_device, probe_pinned) if device == current else (None, None)
        readings.append(
            (device, info[0] if info else None, info[1] if info else None, probe[0], probe[1])
        )
    return Taken(
        snapshot=snapshot,
        marker=marker if has_marker else None,
        devices=devices,
        device_memory=readings,
        synchronized=synchronized,
        during_capture=during_capture,
        torch_version=source.torch_version,
    )


def emit(messages: Sequence[str], where: str, stacklevel: int = 3) -> None:
    for message in messages:
        warnings.warn(f"{where}: {message}", MemoryDebugWarning, stacklevel=stacklevel)


def device_args(
    mem_get_info: Any, probe_memory: tuple[int, int] | None = None
) -> list[tuple[int, int | None, int | None, int | None, int | None]]:
    """Device readings given by hand: ``{device: (free, total)}`` or a single
    ``(free, total)`` for device 0."""
    if mem_get_info is None:
        return []
    if (
        isinstance(mem_get_info, tuple | list)
        and len(mem_get_info) == 2
        and all(isinstance(v, int) for v in mem_get_info)
    ):
        mem_get_info = {0: tuple(mem_get_info)}
    if not isinstance(mem_get_info, dict):
        raise InvalidInputError(
            f"mem_get_info must be (free, total) or {{device: (free, total)}}, got {mem_get_info!r}"
        )
    out = []
    for device, value in sorted(mem_get_info.items()):
        free, total = value
        probe = probe_memory if probe_memory is not None and device == min(mem_get_info) else None
        out.append(
            (
                int(device),
                int(free),
                int(total),
                probe[0] if probe else None,
                probe[1] if probe else None,
            )
        )
    return out
