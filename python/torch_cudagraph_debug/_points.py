"""What tensor and memory runs share: point lookup by label or position, and the run's
manifest fields."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from typing import Any, Generic, Protocol, TypeVar


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
            try:
                return self._by_label[key]
            except KeyError:
                raise KeyError(
                    f"run '{self.name}' has no point '{key}'; labels: {list(self._by_label)}"
                ) from None
        return self.points[key]

    def point(self, key: str | int) -> P:
        return self[key]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(p.label for p in self.points)


def parse_time(value: str | None) -> _dt.datetime | None:
    """A manifest or table timestamp (RFC 3339, ``Z`` for UTC) as an aware datetime."""
    return None if value is None else _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


class Run(PointSequence[P]):
    """A run's identity and state, as its manifest (``run.json``) records them."""

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

    def _read_manifest(self, manifest: dict[str, Any], path: str) -> None:
        self.path = path
        self.run_id = manifest["run_id"]
        self.name = manifest["name"]
        self.execution = manifest["execution"]
        self.rank = manifest["rank"]
        self.group_id = manifest["group_id"]
        self.world_size = manifest["world_size"]
        self.created_at = parse_time(manifest["created_at"])
        self.finished_at = parse_time(manifest["finished_at"])
        self.complete = manifest["complete"]
        self.format_version = manifest["format_version"]
        self.provenance = manifest.get("provenance") or {}
        self.run_metadata = manifest.get("run_metadata") or {}
