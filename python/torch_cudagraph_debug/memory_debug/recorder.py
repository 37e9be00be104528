"""``MemoryRecorder``: a complete experiment, recorded point by point into a Parquet run;
and the import of existing ``_dump_snapshot`` pickles into a run."""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from torch_cudagraph_debug import _native
from torch_cudagraph_debug._environment import detect_rank, provenance
from torch_cudagraph_debug._recorder import PRODUCER, RunRecorder, json_text, run_root
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.memory_debug._owners import (
    OwnerRow,
    PeakRow,
    collect_pool_owners,
    read_peaks,
)
from torch_cudagraph_debug.memory_debug._source import (
    Devices,
    LiveAllocator,
    SnapshotSource,
    device_args,
    emit,
)
from torch_cudagraph_debug.memory_debug.run import MemoryPoint, MemoryRun


def _header(
    name: str,
    execution: str,
    rank: int | None,
    group_id: str | None,
    world_size: int | None,
    run_metadata: dict[str, Any],
    facts: dict[str, Any],
) -> tuple[str, _native.RunHeader]:
    run_id = uuid.uuid4().hex
    header = _native.RunHeader(
        run_id,
        name,
        "memory",
        execution,
        rank=rank,
        group_id=group_id,
        world_size=world_size,
        provenance=facts,
        run_metadata=run_metadata,
    )
    return run_id, header


class MemoryRecorder(RunRecorder[MemoryRun]):
    """Records allocator states into a run of a job root (points committed in groups).

    Each point stores the full allocator state (segments, blocks, statistics per device,
    pool and stream, device-wide memory) and only the history entries new since the
    previous point. A marker string is set as the allocator metadata while each snapshot
    is taken (the previous metadata is restored), so the history is cut exactly at
    points. Live points need CUDA (``CudaUnavailableError`` otherwise).
    ``overwrite=True`` replaces a run of the same name and rank already in ``run_dir``
    (its rows only; see ``docs/storage.md``).

    Each point also stores who owns each private pool (Graph Trees managers, pools named
    with ``name_pool``) and the ``torch.cuda.memory_stats()`` peaks per device;
    ``reset_peaks=True`` resets the peaks at every point, so each point's peaks are
    exactly those since the previous one."""

    _writer: _native.MemoryRunWriter

    def __init__(
        self,
        *,
        name: str = "memory",
        run_dir: str | os.PathLike[str] | None = None,
        bundle_dir: str | os.PathLike[str] | None = None,
        devices: Devices = None,
        rank: int | None = None,
        synchronize: bool = True,
        group_id: str | None = None,
        world_size: int | None = None,
        run_metadata: dict[str, Any] | None = None,
        overwrite: bool = False,
        commit_interval: float = 1.0,
        compact: bool = True,
        reset_peaks: bool = False,
        _source: SnapshotSource | None = None,
    ):
        root = run_root(name, run_dir, bundle_dir)
        self._allocator = LiveAllocator(_source, devices, check=True)
        self.name = name
        self.synchronize = bool(synchronize)
        self.reset_peaks = bool(reset_peaks)
        self.rank, self.world_size = detect_rank(rank, world_size)
        self.group_id = group_id
        if root is None:
            root = tempfile.mkdtemp(prefix=f"tcgd-memory-{name}-")
        path = os.fspath(root)
        facts = provenance() if _source is None else {"producer": "torch-cudagraph-debug"}
        self.run_id, header = _header(
            name, "live", self.rank, group_id, self.world_size, dict(run_metadata or {}), facts
        )
        writer = _native.MemoryRunWriter(
            path, header, PRODUCER, overwrite, commit_interval, compact
        )
        self._start(writer, str(writer.path))
        self._points: list[MemoryPoint] = []

    @property
    def devices(self) -> tuple[int, ...] | None:
        """The devices chosen at construction, sorted (every visible device for
        ``"all"``); ``None`` when none were chosen, so that each point covers the
        current device and every device its allocator state mentions."""
        chosen = self._allocator.devices
        return None if chosen is None else tuple(chosen)

    def record_point(
        self,
        label: str,
        *,
        metadata: dict[str, Any] | None = None,
        synchronize: bool | None = None,
    ) -> MemoryPoint:
        """Takes a snapshot as the next point and returns it.

        The point's state is built before this returns; its Parquet parts are written and
        fsynced on the recorder's writer thread, so the caller does not wait for the disk.
        ``flush()`` (or ``finish()``) returns once every point is durable; a failed
        background commit is raised by the next call."""
        self._check_open("record_point")
        self._check_new_label(label)
        metadata_json = json_text("metadata", dict(metadata or {}))
        sync = self.synchronize if synchronize is None else bool(synchronize)
        index = self._writer.point_count
        taken = self._allocator.take(sync, f"tcgd:{self.run_id}:{index}")
        owners, peaks = point_extras(self._allocator.source, taken, self.reset_peaks, index)
        state = self._writer.record(
            taken.snapshot,
            label=label,
            metadata_json=metadata_json,
            pool_owners=owners,
            peaks=peaks,
            **taken.ingest_args(),
        )
        emit(state.warnings, f"{self.name}@{label}")
        return self._as_point(state, metadata)

    def _as_point(self, state: _native.MemoryState, metadata: dict[str, Any] | None) -> MemoryPoint:
        point = MemoryPoint(state, _LivePoints(self.path, self.flush), None, dict(metadata or {}))
        self._points.append(point)
        return point

    def _load(self) -> MemoryRun:
        return MemoryRun.load(self.path, name=self.name, rank=self.rank or 0)


def point_extras(
    source: SnapshotSource, taken: Any, reset_peaks: bool, index: int
) -> tuple[list[OwnerRow], list[PeakRow] | None]:
    """The pool owners and peaks stored with a point (read after its snapshot)."""
    trees = getattr(source, "graph_trees", None)
    owners = collect_pool_owners(trees() if trees else None, source.torch_version)
    devices = [row[0] for row in taken.device_memory]
    # During a capture nothing is read that could synchronise or reset.
    peaks = (
        None
        if taken.during_capture
        else read_peaks(
            source, devices, reset=reset_peaks, since_previous=reset_peaks and index > 0
        )
    )
    return owners, peaks


class _LivePoints:
    """What a point returned by ``record_point`` needs of the run it belongs to: the run
    is flushed and reopened when a raw snapshot is asked for, so recorded points stay
    readable while recording goes on."""

    def __init__(self, path: str, flush: Callable[[], None]):
        self._path = path
        self._flush = flush

    def raw_snapshot(self, point_index: int) -> dict[str, Any]:
        self._flush()
        return _native.MemoryRunReader(self._path).raw_snapshot(point_index)

    def export_memory_viz(self, point_index: int, path: str) -> None:
        self._flush()
        _native.MemoryRunReader(self._path).export_memory_viz(point_index, path)

    def native_reader(self) -> _native.MemoryRunReader:
        """The run as committed so far (event attribution reads its stored windows)."""
        self._flush()
        return _native.MemoryRunReader(self._path)


def import_snapshots(
    paths: Sequence[str | os.PathLike[str]],
    *,
    run_dir: str | os.PathLike[str],
    name: str = "import",
    labels: Sequence[str] | None = None,
    mem_get_info: Sequence[Any] | None = None,
    run_metadata: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> MemoryRun:
    """Imports ``torch.cuda.memory._dump_snapshot`` pickles, in order, as the points of a
    new memory run. Files are read by a parser that never executes code. Snapshots of
    one process share its allocator history: each point stores only the entries new since
    the previous file. ``mem_get_info``: per file, ``None`` or ``(free, total)`` of device
    0 or ``{device: (free, total)}``, when known.

    The import is all or nothing: every file is read and checked before anything is
    written (so each is read twice), and a file that cannot be imported leaves nothing in
    ``run_dir``; should writing fail later (a full disk), the run is removed again, so a
    retry does not meet a half-imported run. ``overwrite=True`` replaces a run already in
    ``run_dir``."""
    files = [os.fspath(p) for p in paths]
    if not files:
        raise InvalidInputError("import_snapshots needs at least one snapshot file")
    labels = (
        list(labels)
        if labels is not None
        else [os.path.splitext(os.path.basename(p))[0] for p in files]
    )
    if len(labels) != len(files):
        raise InvalidInputError(f"{len(files)} files but {len(labels)} labels")
    if len(set(labels)) != len(labels):
        raise InvalidInputError(f"labels must be unique, got {labels}; pass labels=...")
    readings = list(mem_get_info) if mem_get_info is not None else [None] * len(files)
    if len(readings) != len(files):
        raise InvalidInputError(f"{len(files)} files but {len(readings)} mem_get_info readings")
    rank, world_size = detect_rank(None, None)
    facts = {"producer": "torch-cudagraph-debug", "imported_from": files}
    _, header = _header(name, "import", rank, None, world_size, dict(run_metadata or {}), facts)
    device_readings = [device_args(reading) for reading in readings]
    # Every file is read and checked before the run is created: a file that cannot be
    # imported leaves nothing in run_dir (not even the tables of a new job root).
    _native.check_snapshot_import(files, device_readings)
    writer = _native.MemoryRunWriter(os.fspath(run_dir), header, PRODUCER, overwrite)
    try:
        for path, label, reading in zip(files, labels, device_readings, strict=True):
            state = writer.import_pickle(
                path,
                label=label,
                metadata_json=json_text("metadata", {"source_path": path}),
                device_memory=reading,
            )
            emit(state.warnings, f"{name}@{label}")
    except BaseException:
        # The import's own error is the one to report; a run that cannot be removed
        # either is refused by the retry with a message naming it.
        with contextlib.suppress(Exception):
            writer.discard()
        raise
    writer.close(True)
    return MemoryRun.load(run_dir, name=name, rank=rank or 0)
