"""What tensor and memory runs share: point lookup by label or position, and the run's
manifest fields."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from torch_cudagraph_debug.errors import MissingDependencyError, PointNotFoundError

if TYPE_CHECKING:
    from torch_cudagraph_debug import _native

# Labels named in a lookup error at most: a run can have thousands of points.
_LABELS_SHOWN = 10


class _Labelled(Protocol):
    label: str


P = TypeVar("P", bound=_Labelled)


class PointSequence(Generic[P]):
    """``run["label"]``, ``run[i]``, ``run.point(...)``, ``len``, iteration, ``labels``.
    Subclasses set ``name``, ``points`` and call ``_index_points()``."""

    name: str
    points: tuple[P, ...]

    def _index_points(self) -> None:
        self._by_label = {p.label: p for p in self.points}

    def __len__(self) -> int:
        return len(self.points)

    def __iter__(self) -> Iterator[P]:
        return iter(self.points)

    def __getitem__(self, key: str | int) -> P:
        if isinstance(key, str):
            if key in self._by_label:
                return self._by_label[key]
            raise PointNotFoundError(f"run '{self.name}' has no point '{key}'; {self._holds()}")
        try:
            return self.points[key]
        except IndexError:
            raise PointNotFoundError(
                f"run '{self.name}' has no point [{key}]: positions run from 0 to "
                f"{len(self.points) - 1} (or -{len(self.points)} to -1); {self._holds()}"
                if self.points
                else f"run '{self.name}' has no point [{key}]: it has no points"
            ) from None

    def _holds(self) -> str:
        """How many points the run has and (the first of) their labels, for messages."""
        labels = list(self._by_label)
        shown = ", ".join(repr(label) for label in labels[:_LABELS_SHOWN])
        more = f", ... ({len(labels) - _LABELS_SHOWN} more)" if len(labels) > _LABELS_SHOWN else ""
        return f"it has {len(labels)} point{'s' if len(labels) != 1 else ''}: {shown}{more}"

    def point(self, key: str | int) -> P:
        return self[key]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(p.label for p in self.points)


def parse_time(value: str | None) -> _dt.datetime | None:
    """A manifest or table timestamp (RFC 3339, ``Z`` for UTC) as an aware datetime."""
    return None if value is None else _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


OnDamage = Literal["raise", "skip"]


@dataclass(frozen=True)
class RunDamage:
    """Something a run loaded with ``on_damage="skip"`` left out: the damaged file, its
    table, the point it cost (its label when that point's ``points`` part is intact) and
    what is wrong."""

    path: str
    table: str
    point_index: int | None
    label: str | None
    problem: str

    @classmethod
    def from_native(cls, d: dict[str, Any]) -> RunDamage:
        return cls(
            path=str(d["path"]),
            table=d["table"],
            point_index=d["point_index"],
            label=d["label"],
            problem=d["problem"],
        )


class Run(PointSequence[P]):
    """A run's identity and state, as its row of the root's ``runs`` table records them.
    ``path`` is the job root the run lives in; ``name`` and ``rank`` pick it there."""

    #: What loading with ``on_damage="skip"`` left out; empty for an intact run.
    damage: tuple[RunDamage, ...] = ()

    path: str
    run_id: str
    execution: str
    rank: int | None
    group_id: str | None
    world_size: int | None
    created_at: _dt.datetime | None
    finished_at: _dt.datetime | None
    complete: bool
    format_version: int
    provenance: dict[str, Any]
    run_metadata: dict[str, Any]

    def to_arrow(self) -> Any:
        raise NotImplementedError

    def to_pandas(self) -> Any:
        """``to_arrow()`` as a pandas DataFrame. pandas is not a dependency of this package:
        without it this raises ``MissingDependencyError`` saying what to install."""
        try:
            import pandas  # noqa: F401
        except ImportError as error:
            raise MissingDependencyError(
                f"{type(self).__name__}.to_pandas() needs pandas, which is not installed "
                f"({error}): pip install pandas; to_arrow() gives the same rows as a pyarrow "
                "Table without it"
            ) from None
        return self.to_arrow().to_pandas()

    def _read_manifest(
        self, manifest: _native.RunManifest, path: str, damage: list[dict[str, Any]]
    ) -> None:
        """The manifest's fields, and what the reader left out (``damage``)."""
        self.path = path
        self.damage = tuple(RunDamage.from_native(d) for d in damage)
        self.run_id = manifest.run_id
        self.name = manifest.name
        self.execution = manifest.execution
        self.rank = manifest.rank
        self.group_id = manifest.group_id
        self.world_size = manifest.world_size
        self.created_at = parse_time(manifest.created_at)
        self.finished_at = parse_time(manifest.finished_at)
        self.complete = manifest.complete
        self.format_version = manifest.format_version
        self.provenance = manifest.provenance
        self.run_metadata = manifest.run_metadata

    @property
    def address(self) -> tuple[str, str, int | None]:
        """``(root, name, rank)``: how to find this run again in its job root."""
        return (self.path, self.name, self.rank)
