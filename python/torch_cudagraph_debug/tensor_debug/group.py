"""``TensorRunGroup``: the runs of one multi-process job, one per rank.

Finding and checking the members is native (``docs/comparison.md``, Run groups); this
class holds the result and loads each rank's run on request."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

from torch_cudagraph_debug import _native
from torch_cudagraph_debug._native import (
    TensorRankPointSummary,
    TensorRunGroupMember,
    TensorRunGroupSummary,
)
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.tensor_debug.compare import (
    PointMapping,
    ProgressCallback,
    TensorComparisonOptions,
    TensorRunGroupComparison,
    _mapping,
)
from torch_cudagraph_debug.tensor_debug.run import TensorRun

__all__ = [
    "TensorRankPointSummary",
    "TensorRunGroup",
    "TensorRunGroupMember",
    "TensorRunGroupSummary",
    "compare_run_groups",
]


class TensorRunGroup:
    """One run per rank, with the same name and label sequence.

    A rank whose labels are a prefix of the others' (a crashed rank) and ranks below the
    world size with no run are warnings (``warnings`` keeps them, and each is issued once
    with :func:`warnings.warn`); ranks that disagree on the name or the labels are an
    error."""

    def __init__(
        self, info: _native.RunGroupInfo, root: str | None, name: str | None, runs: list[Any]
    ):
        # The native group is kept as loaded: comparisons and the summary use it as it is.
        self._info = info
        self._root = root
        self._name = name
        self._addresses = runs
        self.name: str = info.name
        self.root: str | None = info.root
        self.world_size: int = info.world_size
        #: By rank, ascending: rank, path (the job root), name, run id, complete, world
        #: size, labels and points.
        self.members: tuple[TensorRunGroupMember, ...] = info.members
        self.missing_ranks: tuple[int, ...] = info.missing_ranks
        self._complete: bool = info.complete
        self.warnings: tuple[str, ...] = info.warnings
        self._runs: dict[int, TensorRun] = {}
        for message in self.warnings:
            warnings.warn(f"run group '{self.name}': {message}", stacklevel=3)

    @classmethod
    def load(cls, root: str | os.PathLike[str], *, name: str | None = None) -> TensorRunGroup:
        """The tensor runs named ``name`` in the job root ``root``, one per rank. ``name``
        may be left out when the root's tensor runs share one name."""
        path = os.fspath(root)
        return cls(_native.run_group(root=path, name=name), path, name, [])

    @classmethod
    def from_runs(cls, runs: Iterable[TensorRun | str | os.PathLike[str]]) -> TensorRunGroup:
        """A group of the given runs (each rank once), wherever they are stored."""
        addresses: list[Any] = []
        for run in runs:
            if isinstance(run, TensorRun):
                addresses.append(run.address)
            elif isinstance(run, str | os.PathLike):
                addresses.append(os.fspath(run))
            else:
                raise InvalidInputError(
                    f"from_runs takes TensorRun objects or job roots, got {type(run).__name__}"
                )
        return cls(_native.run_group(runs=addresses), None, None, addresses)

    def _native_group(self) -> _native.RunGroupInfo:
        return self._info

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(m.rank for m in self.members)

    @property
    def complete(self) -> bool:
        """Every rank below the world size has a run, and every run finished (decided
        natively, as comparisons of the group report it)."""
        return self._complete

    @property
    def labels(self) -> tuple[str, ...]:
        """The longest label sequence of any rank (the others are prefixes of it)."""
        return max((m.labels for m in self.members), key=len, default=())

    def run(self, rank: int) -> TensorRun:
        """The run of ``rank``, loaded on first use."""
        if rank not in self._runs:
            member = next((m for m in self.members if m.rank == rank), None)
            if member is None:
                raise KeyError(f"run group '{self.name}' has no run for rank {rank}")
            self._runs[rank] = TensorRun.load(member.path, name=member.name, rank=member.rank)
        return self._runs[rank]

    def __getitem__(self, rank: int) -> TensorRun:
        return self.run(rank)

    def __len__(self) -> int:
        return len(self.members)

    def __iter__(self) -> Iterator[TensorRun]:
        return (self.run(m.rank) for m in self.members)

    def summary(self) -> TensorRunGroupSummary:
        """The group at a glance: a ``TensorRunGroupSummary`` with this group, one
        ``TensorRankPointSummary`` per rank and point (observation count, full and
        summary-only payloads) and the warnings; ``to_text()``, ``to_dict()``, ``to_html()``
        and ``write(directory)`` (summary.txt/.json/.html and ``rank_points.csv``)."""
        return self._info.summary(self)

    def __repr__(self) -> str:
        return (
            f"TensorRunGroup(name={self.name!r}, ranks={list(self.ranks)}, "
            f"world_size={self.world_size}, complete={self.complete})"
        )


def compare_run_groups(
    ref_group: Any,
    cand_group: Any,
    *,
    point_mapping: PointMapping = None,
    options: TensorComparisonOptions | None = None,
    progress: ProgressCallback | None = None,
) -> TensorRunGroupComparison:
    """Compares two run groups rank by rank (``TensorRunGroup`` objects or job
    directories). A rank missing on either side makes the comparison inconclusive."""

    def side(group: Any, what: str) -> _native.RunGroupInfo | tuple[str, None, list[Any]]:
        if isinstance(group, TensorRunGroup):
            # Compared as loaded, not loaded again.
            return group._native_group()
        if isinstance(group, str | os.PathLike):
            return os.fspath(group), None, []
        raise InvalidInputError(
            f"{what} must be a TensorRunGroup or a job directory, got {type(group).__name__}"
        )

    return _native.compare_run_groups(
        side(ref_group, "ref_group"),
        side(cand_group, "cand_group"),
        options,
        _mapping(point_mapping),
        progress,
    )
