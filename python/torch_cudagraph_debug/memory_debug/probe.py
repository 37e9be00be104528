"""``MemoryProbe``: allocator snapshots for a local question, with no run and no
persistence."""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import InvalidInputError, MemoryOwnershipError
from torch_cudagraph_debug.memory_debug._model import _StateView, descriptor_of
from torch_cudagraph_debug.memory_debug._source import (
    Devices,
    LiveAllocator,
    SnapshotSource,
    device_args,
    emit,
)
from torch_cudagraph_debug.memory_debug.compare import (
    MemorySnapshotComparison,
    compare_snapshots,
)
from torch_cudagraph_debug.memory_debug.options import MemoryAttributionOptions


class MemoryProbeSnapshot(_StateView):
    """One allocator state taken by a probe (or built from a saved snapshot)."""

    #: Which probe took this snapshot (a random hex id; for a snapshot built from a
    #: dict or a pickle, the id made for it).
    probe_id: str
    #: When the snapshot was taken (seconds since the epoch, ``time.time()``).
    timestamp: float
    #: The allocator metadata marker this snapshot was cut at (``""`` when the history
    #: did not record it, so the boundary is the snapshot's trace end).
    boundary_marker: str

    def __init__(
        self,
        state: _native.MemoryState,
        raw: dict[str, Any] | None = None,
        timestamp: float | None = None,
    ):
        self._state = state
        self._torch_snapshot = raw
        self._history: list[_native.MemoryState] | None = None
        identity = state.identity()
        self.name: str = identity["name"]
        self.label: str = identity["label"]
        self.index: int = identity["index"]
        origin: str = identity["origin"]
        self.probe_id = origin.split(":", 1)[1] if ":" in origin else origin
        self.timestamp = time.time() if timestamp is None else timestamp
        self.boundary_marker = identity["marker"] or ""

    @property
    def probe_name(self) -> str:
        return self.name

    @property
    def snapshot_index(self) -> int:
        """Probe-local order of this snapshot."""
        return self.index

    def descriptor(self) -> dict[str, Any]:
        """Who took this snapshot and when (JSON-ready)."""
        names = (
            "probe_id",
            "probe_name",
            "snapshot_index",
            "label",
            "timestamp",
            "boundary_marker",
            "devices",
        )
        return descriptor_of(self, "probe_snapshot", names)

    @classmethod
    def from_snapshot(
        cls,
        snapshot: dict[str, Any],
        *,
        name: str = "snapshot",
        label: str | None = None,
        mem_get_info: Any = None,
        probe_memory: tuple[int, int] | None = None,
    ) -> MemoryProbeSnapshot:
        """A snapshot from a ``torch.cuda.memory._snapshot()`` dict taken elsewhere.
        ``mem_get_info`` is ``(free, total)`` of device 0 or ``{device: (free, total)}``;
        without it CUDA used and the residual are unavailable. Snapshots built this way
        are independent of each other (their lifecycle is ``unavailable``); use a
        ``MemoryProbe`` or a run for related snapshots."""
        ingestor = _native.MemoryIngestor(f"dict:{uuid.uuid4().hex}", name)
        state = ingestor.ingest(
            snapshot,
            label=label,
            marker=None,
            devices=None,
            device_memory=device_args(mem_get_info, probe_memory),
            source="dict",
            synchronized=False,
            during_capture=False,
            torch_version=None,
        )
        emit(state.warnings, f"snapshot {name!r}")
        return cls(state, snapshot)

    @classmethod
    def from_pickle(
        cls,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        label: str | None = None,
        mem_get_info: Any = None,
    ) -> MemoryProbeSnapshot:
        """A snapshot from a ``torch.cuda.memory._dump_snapshot`` file, read by a parser
        that never executes code (a pickle that would is refused with
        ``UnsafePickleError``)."""
        path = os.fspath(path)
        stem = os.path.splitext(os.path.basename(path))[0]
        state = _native.memory_state_from_pickle(
            path,
            origin=f"file:{uuid.uuid4().hex}",
            name=name or stem,
            label=label or stem,
            device_memory=device_args(mem_get_info),
        )
        emit(state.warnings, f"snapshot {path!r}")
        return cls(state)

    def _raw(self) -> dict[str, Any]:
        # torch's own dict when this object was built from one, otherwise one rebuilt in
        # torch's shape (history: the entries this snapshot stored).
        if self._torch_snapshot is not None:
            return self._torch_snapshot
        return self._state.raw_snapshot()

    def __repr__(self) -> str:
        return (
            f"MemoryProbeSnapshot(name={self.name!r}, label={self.label!r}, "
            f"observations={len(self.observations)})"
        )


class MemoryProbe:
    """Takes allocator snapshots of this process for a local question.

    ``devices``: ``None`` (the current device and every device the snapshot mentions), an
    index, a sequence, or ``"all"``. ``synchronize`` waits for the devices before each
    snapshot so that finished work is freed; during a CUDA graph capture a snapshot is
    still allowed, unsynchronised, with a warning. Live snapshots need CUDA
    (``CudaUnavailableError`` otherwise). Allocator history is never switched on or off
    here: it is the application's choice (``torch.cuda.memory._record_memory_history``).
    """

    def __init__(
        self,
        name: str = "memory",
        *,
        devices: Devices = None,
        synchronize: bool = True,
        _source: SnapshotSource | None = None,
    ):
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"name must be a non-empty string, got {name!r}")
        self.name = name
        self.synchronize = bool(synchronize)
        self._allocator = LiveAllocator(_source, devices)
        self._id = uuid.uuid4().hex
        self._ingestor = _native.MemoryIngestor(f"probe:{self._id}", name)
        self._count = 0
        # Every snapshot's state, in order: event attribution between two snapshots reads
        # the history windows of the snapshots after the first up to the second.
        self._states: list[_native.MemoryState] = []

    @property
    def devices(self) -> tuple[int, ...] | None:
        """The devices chosen at construction, sorted (every visible device for
        ``"all"``); ``None`` when none were chosen, so that each snapshot covers the
        current device and every device its allocator state mentions."""
        chosen = self._allocator.devices
        return None if chosen is None else tuple(chosen)

    def snapshot(
        self, *, label: str | None = None, synchronize: bool | None = None
    ) -> MemoryProbeSnapshot:
        """Takes one snapshot. Each snapshot stores only the allocator history entries new
        since the previous snapshot of this probe."""
        sync = self.synchronize if synchronize is None else bool(synchronize)
        label = label if label is not None else f"snapshot-{self._count}"
        marker = f"tcgd:probe:{self._id}:{self._count}"
        taken = self._allocator.take(sync, marker)
        state = self._ingestor.ingest(taken.snapshot, label=label, **taken.ingest_args())
        self._count += 1
        self._states.append(state)
        emit(state.warnings, f"{self.name}@{label}")
        snapshot = MemoryProbeSnapshot(state, taken.snapshot)
        snapshot._history = self._states
        return snapshot

    def compare(
        self,
        reference: MemoryProbeSnapshot,
        candidate: MemoryProbeSnapshot,
        attribution: MemoryAttributionOptions | None = None,
    ) -> MemorySnapshotComparison:
        """Compares two snapshots of this probe: address lifecycle included. A snapshot of
        another probe raises ``MemoryOwnershipError`` (compare those with
        ``compare_snapshots``)."""
        for what, snapshot in (("reference", reference), ("candidate", candidate)):
            if getattr(snapshot, "probe_id", None) != self._id:
                raise MemoryOwnershipError(
                    f"the {what} snapshot was not taken by probe {self.name!r}; compare "
                    "snapshots of independent probes with compare_snapshots()"
                )
        return compare_snapshots(reference, candidate, attribution=attribution)

    def __repr__(self) -> str:
        return f"MemoryProbe(name={self.name!r}, snapshots={self._count})"
