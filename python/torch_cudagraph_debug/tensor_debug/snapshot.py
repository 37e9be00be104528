"""What reading a ``TensorProbe`` returns: snapshots of its observations and the state
of its checks."""

from __future__ import annotations

import datetime as _dt
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.tensor_debug.observations import (
    ObservationSet,
    TensorObservation,
    TensorObservationKey,
)


@dataclass(frozen=True)
class CheckFailure:
    replay_index: int
    name: str
    invocation_index: int
    element: tuple[int, ...]
    actual: str
    expected: str


@dataclass(frozen=True)
class TensorCheckStatus:
    """The sticky state of a probe's checks. ``ok`` until the first mismatch; then
    ``replay_index``, ``order`` (global capture order), ``name`` and
    ``invocation_index`` say where it was and ``message`` describes it. A status without
    a mismatch has ``replay_index=0``, ``order=-1``, ``name=None`` and
    ``invocation_index=-1``. Beyond the reference design: ``evaluations`` and
    ``failures`` count every check so far, and ``first_failure`` has the element and
    both values."""

    ok: bool
    message: str
    replay_index: int
    order: int
    name: str | None
    invocation_index: int
    evaluations: int = 0
    failures: int = 0
    first_failure: CheckFailure | None = None

    @property
    def key(self) -> TensorObservationKey | None:
        """The mismatching observation's key; ``None`` while ``ok``."""
        if self.name is None:
            return None
        return TensorObservationKey(self.name, self.invocation_index)


#: The earlier name of ``TensorCheckStatus``.
CheckStatus = TensorCheckStatus


class EpochTime(float):
    """Seconds since the epoch, as a ``float``. ``isoformat()`` and ``timestamp()`` are
    there too, so code written for a ``datetime`` keeps working."""

    def timestamp(self) -> float:
        return float(self)

    def isoformat(self) -> str:
        return self.datetime().isoformat()

    def datetime(self) -> _dt.datetime:
        return _dt.datetime.fromtimestamp(float(self), _dt.timezone.utc)


@dataclass(frozen=True)
class TensorProbeSnapshot(ObservationSet):
    """Every observation of a probe as of one moment (after a replay, or eagerly).

    ``probe_id`` is the probe's ownership token (``TensorProbe.compare`` checks it);
    ``eager_overwrites`` holds ``(name, count)`` for an eager snapshot: how many times
    each name's one slot was re-sampled in place (empty for a captured probe)."""

    probe_id: str
    probe_name: str
    snapshot_index: int
    replay_index: int
    timestamp: float
    observations: tuple[TensorObservation, ...]
    eager_overwrites: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.timestamp, EpochTime):
            object.__setattr__(self, "timestamp", EpochTime(self.timestamp))
        pairs = tuple((name, count) for name, count in self.eager_overwrites)
        object.__setattr__(self, "eager_overwrites", pairs)
        if not pairs:
            return
        if self.replay_index != 0:
            raise InvalidInputError(
                "eager_overwrites belong to an eager snapshot (replay_index 0); this one "
                f"is of replay {self.replay_index}"
            )
        names = [name for name, _ in pairs]
        if len(set(names)) != len(names):
            raise InvalidInputError(f"eager_overwrites names a name twice: {names}")
        for name, count in pairs:
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise InvalidInputError(
                    f"eager_overwrites[{name!r}] must be an integer >= 0, got {count!r}"
                )
            invocations = [o.invocation_index for o in self.observations if o.name == name]
            if invocations != [0]:
                raise InvalidInputError(
                    f"eager_overwrites names {name!r}, which must have exactly one "
                    f"observation, of invocation 0, in the snapshot; it has {invocations}"
                )

    def _describe(self) -> str:
        return f"snapshot {self.snapshot_index} of probe {self.probe_name!r}"

    @property
    def eager_overwrite_counts(self) -> Mapping[str, int]:
        """``eager_overwrites`` as a read-only mapping from name to count."""
        return types.MappingProxyType(dict(self.eager_overwrites))

    @property
    def overwrite_counts(self) -> dict[tuple[str, int], int]:
        """The earlier form of ``eager_overwrites``, keyed by ``(name, 0)``."""
        return {(name, 0): count for name, count in self.eager_overwrites}

    def observation(self, name: str | None = None, invocation_index: int = 0) -> TensorObservation:
        """The observation ``(name, invocation_index)``; ``name`` defaults to the probe's."""
        return super().observation(self.probe_name if name is None else name, invocation_index)

    def tensor(self, name: str | None = None, invocation_index: int = 0) -> torch.Tensor:
        """A CPU copy of the observation's value; ``name`` defaults to the probe's."""
        return self.observation(name, invocation_index).tensor()

    def descriptor(self) -> dict[str, Any]:
        """The snapshot's identity and every observation's metadata and summary (no
        values), as JSON-ready data."""
        return {
            "probe_id": self.probe_id,
            "probe_name": self.probe_name,
            "snapshot_index": self.snapshot_index,
            "replay_index": self.replay_index,
            "timestamp": float(self.timestamp),
            "eager_overwrites": [list(pair) for pair in self.eager_overwrites],
            "observations": [o.descriptor() for o in self.observations],
        }
