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


def _is_job_root(path: str) -> bool:
    return os.path.isdir(os.path.join(path, "runs", "_delta_log"))


def _child_job_roots(path: str) -> list[str]:
    """The direct child directories of ``path`` that are job roots, sorted by name; none
    when ``path`` is a job root itself (or is no directory)."""
    if not os.path.isdir(path) or _is_job_root(path):
        return []
    children = (os.path.join(path, entry) for entry in sorted(os.listdir(path)))
    return [child for child in children if _is_job_root(child)]


class TensorRunGroup:
    """One run per rank, with the same name and label sequence.

    A rank whose labels are a prefix of the others' (a crashed rank) and ranks below the
    world size with no run are warnings (``warnings`` keeps them, and each is issued once
    with :func:`warnings.warn`); ranks that disagree on the name or the labels are an
    error. ``group[rank]`` is that rank's ``TensorRun``, loaded on first use."""

    def __init__(
        self,
        info: _native.RunGroupInfo,
        *,
        root: str | None = None,
        runs: Iterable[TensorRun] = (),
        cache_tensors: bool = False,
    ):
        # The native group is kept as loaded: comparisons and the summary use it as it is.
        self._info = info
        self._root = root if root is not None else info.root
        self._cache_tensors = cache_tensors
        self._identities: dict[str, tuple[str, str | None]] | None = None
        self._runs: dict[int, TensorRun] = {}
        for run in runs:
            # Runs given to ``from_runs`` are the group's own: ``group[rank]`` returns them.
            self._runs[run.rank] = run  # type: ignore[index]
        for message in self.warnings:
            warnings.warn(f"run group '{self.name}': {message}", stacklevel=3)

    @classmethod
    def load(
        cls,
        root: str | os.PathLike[str],
        *,
        name: str | None = None,
        cache_tensors: bool = False,
    ) -> TensorRunGroup:
        """The tensor runs named ``name`` in the job root ``root``, one per rank. ``name``
        may be left out when the root's tensor runs share one name. ``cache_tensors`` is
        handed to each rank's ``TensorRun.load`` (see there): ``True`` keeps each value
        read, ``False`` (default) reads it again on every ``tensor()`` call.

        A ``root`` that is no job root itself but whose direct child directories are (one
        directory per rank, as ``bundle_dir=<root>/rank-0.tcgd-tensor`` writes them) loads
        the runs of those children, with ``root`` reported as the group's root."""
        if not isinstance(cache_tensors, bool):
            raise InvalidInputError(f"cache_tensors must be a bool, got {cache_tensors!r}")
        path = os.fspath(root)
        children = _child_job_roots(path)
        if children:
            info = _native.run_group(runs=[(child, name, None) for child in children])
            return cls(info, root=path, cache_tensors=cache_tensors)
        info = _native.run_group(root=path, name=name)
        return cls(info, cache_tensors=cache_tensors)

    @classmethod
    def from_runs(
        cls,
        runs: Iterable[TensorRun | str | os.PathLike[str]],
        *,
        root: str | os.PathLike[str] | None = None,
    ) -> TensorRunGroup:
        """A group of the given runs (each rank once), wherever they are stored: loaded
        runs (``group[rank]`` then returns the very object) or job roots holding one tensor
        run each. ``root``: the directory to report as the group's ``root`` (the runs are
        not looked for there; ``None`` by default, as the runs may live anywhere)."""
        addresses: list[Any] = []
        loaded: list[TensorRun] = []
        for run in runs:
            if isinstance(run, TensorRun):
                addresses.append(run.address)
                loaded.append(run)
            elif isinstance(run, str | os.PathLike):
                addresses.append(os.fspath(run))
            else:
                raise InvalidInputError(
                    f"from_runs takes TensorRun objects or job roots, got {type(run).__name__}"
                )
        if root is not None and not isinstance(root, str | os.PathLike):
            raise InvalidInputError(f"root must be a path or None, got {type(root).__name__}")
        info = _native.run_group(runs=addresses)
        return cls(info, root=None if root is None else os.fspath(root), runs=loaded)

    def _native_group(self) -> _native.RunGroupInfo:
        return self._info

    # ------------------------------------------------ what the native group decided
    @property
    def name(self) -> str:
        """The name every run of the group shares."""
        return self._info.name

    @property
    def root(self) -> str | None:
        """The job root the group was loaded from, or the ``root`` given to
        ``from_runs`` (``None`` when none was)."""
        return self._root

    @property
    def world_size(self) -> int:
        """The largest world size a rank declares (at least the highest rank + 1)."""
        return self._info.world_size

    @property
    def members(self) -> tuple[TensorRunGroupMember, ...]:
        """By rank, ascending: rank, path (the job root), name, run id, complete, world
        size, labels and points, without loading the runs."""
        return self._info.members

    @property
    def missing_ranks(self) -> tuple[int, ...]:
        """Ranks below ``world_size`` that have no run."""
        return self._info.missing_ranks

    @property
    def warnings(self) -> tuple[str, ...]:
        """What is wrong with the group but does not stop it: crashed (shorter) ranks,
        missing ranks, ranks declaring different world sizes."""
        return self._info.warnings

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(m.rank for m in self.members)

    @property
    def complete(self) -> bool:
        """Every rank below the world size has a run, and every run finished (decided
        natively, as comparisons of the group report it)."""
        return self._info.complete

    @property
    def labels(self) -> tuple[str, ...]:
        """The longest label sequence of any rank (the others are prefixes of it)."""
        return max((m.labels for m in self.members), key=len, default=())

    @property
    def point_labels(self) -> tuple[str, ...]:
        """The group's point labels, in order: ``labels`` under the reference design's
        name."""
        return self.labels

    # ------------------------------------------------ what the runs' manifests say
    def _identity(self) -> dict[str, tuple[str, str | None]]:
        """``run_id -> (execution, group_id)`` of every member, from the runs table of
        each member's job root (no run is loaded)."""
        if self._identities is None:
            found: dict[str, tuple[str, str | None]] = {}
            for path in dict.fromkeys(m.path for m in self.members):
                rows = _native.list_runs(path).to_pydict()
                for run_id, execution, group_id in zip(
                    rows["run_id"], rows["execution"], rows["group_id"], strict=True
                ):
                    found[run_id] = (execution, group_id)
            self._identities = {m.run_id: found[m.run_id] for m in self.members}
        return self._identities

    def _shared(self, what: str, values: dict[int, Any]) -> Any:
        distinct = set(values.values())
        if len(distinct) > 1:
            by_rank = ", ".join(f"rank {rank}: {value!r}" for rank, value in values.items())
            raise InvalidInputError(
                f"the runs of group '{self.name}' must share one {what}, and they do not "
                f"({by_rank}); group the runs of one {what} (TensorRunGroup.from_runs)"
            )
        return next(iter(distinct), None)

    @property
    def execution(self) -> str:
        """The execution (``"eager"``, ``"cuda_graph"``, ...) every run of the group
        recorded. Runs of different executions raise ``InvalidInputError`` here: they are
        not one group."""
        identity = self._identity()
        return self._shared("execution", {m.rank: identity[m.run_id][0] for m in self.members})

    @property
    def group_id(self) -> str | None:
        """The group id the runs declare (``TensorRecorder(group_id=...)``), ``None`` when
        none does; runs declaring different ids raise ``InvalidInputError`` here. A run
        declaring none beside ones that do is accepted."""
        identity = self._identity()
        declared = {m.rank: identity[m.run_id][1] for m in self.members}
        return self._shared(
            "group id", {rank: gid for rank, gid in declared.items() if gid is not None}
        )

    # ------------------------------------------------ the runs
    def run(self, rank: int) -> TensorRun:
        """The run of ``rank``, loaded on first use."""
        if rank not in self._runs:
            member = next((m for m in self.members if m.rank == rank), None)
            if member is None:
                raise KeyError(f"run group '{self.name}' has no run for rank {rank}")
            self._runs[rank] = TensorRun.load(
                member.path,
                name=member.name,
                rank=member.rank,
                cache_tensors=self._cache_tensors,
            )
        return self._runs[rank]

    @property
    def runs(self) -> tuple[TensorRun, ...]:
        """Every rank's run, by rank ascending (each loaded on first use, then kept)."""
        return tuple(self.run(m.rank) for m in self.members)

    def __getitem__(self, rank: int) -> TensorRun:
        return self.run(rank)

    def __len__(self) -> int:
        return len(self.members)

    def __iter__(self) -> Iterator[TensorRun]:
        return (self.run(m.rank) for m in self.members)

    def descriptor(self) -> dict[str, Any]:
        """The group without its runs' contents, as JSON-ready data: ``name``, ``root``,
        ``execution``, ``group_id``, ``world_size``, ``ranks``, ``missing_ranks``,
        ``complete``, ``point_labels``, ``warnings``, and per member its ``rank``,
        ``path``, ``name``, ``run_id``, ``complete``, ``world_size`` and ``point_count``."""
        return {
            "name": self.name,
            "root": self.root,
            "execution": self.execution,
            "group_id": self.group_id,
            "world_size": self.world_size,
            "ranks": list(self.ranks),
            "missing_ranks": list(self.missing_ranks),
            "complete": self.complete,
            "point_labels": list(self.point_labels),
            "warnings": list(self.warnings),
            "members": [
                {
                    "rank": m.rank,
                    "path": m.path,
                    "name": m.name,
                    "run_id": m.run_id,
                    "complete": m.complete,
                    "world_size": m.world_size,
                    "point_count": len(m.labels),
                }
                for m in self.members
            ],
        }

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
    reference: TensorRunGroup | str | os.PathLike[str],
    candidate: TensorRunGroup | str | os.PathLike[str],
    *,
    point_mapping: PointMapping = None,
    options: TensorComparisonOptions | None = None,
    progress: ProgressCallback | None = None,
) -> TensorRunGroupComparison:
    """Compares two run groups rank by rank (``TensorRunGroup`` objects or job
    directories, loaded as ``TensorRunGroup.load`` loads them). A rank missing on either
    side makes the comparison inconclusive. The result holds both groups
    (``reference_group``, ``candidate_group``)."""

    def side(group: Any, what: str) -> TensorRunGroup:
        if isinstance(group, TensorRunGroup):
            # Compared as loaded, not loaded again.
            return group
        if isinstance(group, str | os.PathLike):
            return TensorRunGroup.load(group)
        raise InvalidInputError(
            f"{what} must be a TensorRunGroup or a job directory, got {type(group).__name__}"
        )

    reference_group, candidate_group = side(reference, "reference"), side(candidate, "candidate")
    return _native.compare_run_groups(
        reference_group._native_group(),
        candidate_group._native_group(),
        options,
        _mapping(point_mapping),
        progress,
        (reference_group, candidate_group),
    )
