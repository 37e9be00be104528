"""Multi-rank run groups: the memory runs of one distributed job, one per rank, checked to
belong together (``MemoryRunGroup``), summarised across ranks and compared phase by phase
rank by rank (``compare_run_group_phases``). The checks, the summary and the comparison
are native; this module opens the runs and passes arguments."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import CrossRunError, InvalidInputError
from torch_cudagraph_debug.memory_debug._model import from_native
from torch_cudagraph_debug.memory_debug.compare import _pool_key
from torch_cudagraph_debug.memory_debug.options import MemoryAttributionOptions
from torch_cudagraph_debug.memory_debug.run import MemoryRun


class MemoryRunGroup:
    """One memory run per rank of a job. ``group[rank]`` is that rank's ``MemoryRun``.

    Checked when made: ranks are unique and known, the runs share one name, group id and
    world size, and record one ordered label sequence. A rank whose run did not finish
    may stop early (its labels a prefix of the longest: a crashed rank), which is a
    warning; a finished run with fewer points, or labels out of order, is an error.
    Missing declared ranks, provenance and run-metadata differences are warnings."""

    name: str = from_native()
    root: str | None = from_native(lambda root: None if root is None else os.fspath(root))
    group_id: str | None = from_native()
    world_size: int | None = from_native()
    ranks: tuple[int, ...] = from_native(tuple)
    missing_ranks: tuple[int, ...] = from_native(
        tuple, doc="Ranks below the declared world size that have no run."
    )
    complete: bool = from_native(doc="Every declared rank has a run, and every run finished.")
    labels: tuple[str, ...] = from_native(
        tuple, doc="The group's point labels (those of its longest rank)."
    )
    warnings: tuple[str, ...] = from_native(tuple)

    @property
    def runs(self) -> tuple[MemoryRun, ...]:
        """Every rank's run, in rank order."""
        return tuple(self)

    @property
    def point_labels(self) -> tuple[str, ...]:
        """``labels``: the group's point labels, those of its longest rank (a crashed
        rank's labels are a prefix of them)."""
        return self.labels

    def __init__(self, runs: Iterable[MemoryRun], native: _native.MemoryRunGroup):
        self._runs = {run.rank: run for run in runs}
        self._native = native

    @classmethod
    def load(cls, root: str | os.PathLike[str], *, cache_snapshots: bool = False) -> MemoryRunGroup:
        """Every memory run in the job root ``root`` (each rank's run under
        ``rank=<r>/``) and in each direct child directory that is a job root.

        Each point's allocator state is rebuilt when a run is opened and stays with the
        run; allocator history is read from disk on each request and never cached, so
        ``cache_snapshots`` changes nothing yet (it is accepted for the reference API)."""
        del cache_snapshots
        found = _native.MemoryRunGroup.discover(os.fspath(root))
        runs = [MemoryRun.load(path, name=name, rank=rank) for path, name, rank in found]
        return cls._build(runs, os.fspath(root))

    @classmethod
    def from_runs(
        cls, runs: Iterable[MemoryRun], *, root: str | os.PathLike[str] | None = None
    ) -> MemoryRunGroup:
        """A group of runs already loaded (of any job roots)."""
        runs = list(runs)
        for run in runs:
            if not isinstance(run, MemoryRun):
                raise InvalidInputError(
                    f"a memory run group holds MemoryRun objects, got {type(run).__name__}"
                )
        return cls._build(runs, None if root is None else os.fspath(root))

    @classmethod
    def _build(cls, runs: list[MemoryRun], root: str | None) -> MemoryRunGroup:
        native = _native.MemoryRunGroup([(run.path, run._reader) for run in runs], root)
        return cls(runs, native)

    def __len__(self) -> int:
        return len(self._runs)

    def __iter__(self) -> Iterator[MemoryRun]:
        return iter(self._runs[rank] for rank in self.ranks)

    def __getitem__(self, rank: int) -> MemoryRun:
        try:
            return self._runs[rank]
        except KeyError:
            raise KeyError(f"group '{self.name}' has no rank {rank}; ranks: {self.ranks}") from None

    def descriptor(self) -> dict[str, Any]:
        """Name, root, group id, world size, ranks, missing ranks, completeness, labels and
        each member's identity, as the reports hold them."""
        return self._native.descriptor()

    def summary(self) -> _native.MemoryRunGroupSummary:
        return self._native.summary()

    def __repr__(self) -> str:
        return (
            f"MemoryRunGroup(name={self.name!r}, ranks={self.ranks}, "
            f"missing_ranks={self.missing_ranks}, complete={self.complete})"
        )


def _rank_mappings(
    what: str, mappings: Mapping[int, Mapping[Any, Any]] | None
) -> dict[int, Mapping[Any, Any]]:
    out = {}
    for rank, mapping in (mappings or {}).items():
        if not isinstance(rank, int) or isinstance(rank, bool):
            raise InvalidInputError(f"{what} is keyed by rank (an int), got {rank!r}")
        if not isinstance(mapping, Mapping):
            raise InvalidInputError(
                f"{what}[{rank}] must be a mapping, got {type(mapping).__name__}"
            )
        out[rank] = mapping
    return out


def _devices(group: MemoryRunGroup, rank: int) -> tuple[int, ...]:
    if rank not in group.ranks:
        return ()
    devices: set[int] = set()
    for point in group[rank].points:
        devices.update(point.devices)
    return tuple(sorted(devices))


def compare_run_group_phases(
    baseline: MemoryRunGroup,
    candidate: MemoryRunGroup,
    *,
    baseline_start: str | int,
    baseline_end: str | int,
    candidate_start: str | int,
    candidate_end: str | int,
    pool_mappings: Mapping[int, Mapping[Any, Any]] | None = None,
    device_mappings: Mapping[int, Mapping[int, int]] | None = None,
    attribution: MemoryAttributionOptions | None = None,
) -> _native.MemoryRunGroupPhaseComparison:
    """The baseline group's phase ``baseline_start -> baseline_end`` against the
    candidate group's, for every rank both groups have: each rank's four-point equations
    per scope, pool and device, and every scope term's extrema across ranks (never a sum).

    ``pool_mappings`` and ``device_mappings`` are keyed by rank: allocator pools and CUDA
    devices are named independently by each rank. A rank whose incomplete run stopped
    before an endpoint is skipped with a warning; a complete run without the endpoint,
    or no rank holding the whole phase, is an error."""
    for what, group in (("baseline", baseline), ("candidate", candidate)):
        if not isinstance(group, MemoryRunGroup):
            raise InvalidInputError(f"{what} must be a MemoryRunGroup, got {type(group).__name__}")
    if attribution is not None and (attribution.events or attribution.lifetimes):
        same = set(baseline.ranks) & set(candidate.ranks)
        if any(baseline[r].run_id != candidate[r].run_id for r in same):
            raise CrossRunError(
                "event and lifetime attribution compare allocator history, which only exists "
                "inside one run; the two groups' runs are independent"
            )
    pools: dict[int, list[Any]] = {}
    for rank, mapping in _rank_mappings("pool_mappings", pool_mappings).items():
        pools[rank] = [
            (
                _pool_key(b, _devices(baseline, rank), f"rank {rank} baseline"),
                _pool_key(c, _devices(candidate, rank), f"rank {rank} candidate"),
            )
            for b, c in mapping.items()
        ]
    devices = {
        rank: [(int(b), int(c)) for b, c in mapping.items()]
        for rank, mapping in _rank_mappings("device_mappings", device_mappings).items()
    }
    return _native.compare_run_group_phases(
        baseline._native,
        candidate._native,
        baseline_start=baseline_start,
        baseline_end=baseline_end,
        candidate_start=candidate_start,
        candidate_end=candidate_end,
        pool_mappings=pools,
        device_mappings=devices,
    )
