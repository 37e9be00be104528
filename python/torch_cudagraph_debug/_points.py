"""Point lookup shared by tensor and memory runs: by label or by position."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar


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
