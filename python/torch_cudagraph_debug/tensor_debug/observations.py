"""The data of a tensor point: observations, their keys, sites and value summaries,
and ``TensorPoint`` itself. Runs (``run.py``) and comparisons (``compare.py``) build on
these; nothing here depends on either."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from torch_cudagraph_debug import _native
from torch_cudagraph_debug._torch_bridge import dtype_name
from torch_cudagraph_debug.errors import (
    PayloadUnavailableError,
)


class TensorObservationKey(NamedTuple):
    """The stable identity of an observation across runs and snapshots: its name and its
    invocation index (0, 1, ... per name). A tuple, so ``("x", 0)`` and
    ``TensorObservationKey("x", 0)`` are the same key in every lookup."""

    name: str
    invocation_index: int


# The value summary of an observation is the native ``TensorValueSummary`` (field names as
# the reference design's: ``finite_count``, ``nan_count``, ``pos_inf_count``, ...);
# ``TensorSummary`` is the name it had before, kept for imports.
TensorSummary = _native.TensorValueSummary


# Where a value came from when a compile pass placed the probe: the native ``TensorSite``,
# frozen, made with its attributes as keywords (or in ``SITE_COLUMNS`` order).
TensorSite = _native.TensorSite

# The site columns of a run's observations table: every ``TensorSite`` attribute, in order.
SITE_COLUMNS = _native.SITE_COLUMNS


def site_columns(site: dict[str, Any] | None) -> dict[str, Any]:
    """The site columns of one observation from a compile pass's site dict (``None``, or
    a missing key, for a hand-placed observation)."""
    site = site or {}
    return {column: site.get(column) for column in SITE_COLUMNS}


@dataclass(frozen=True)
class TensorObservation:
    order: int
    name: str
    invocation_index: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    source_device: str
    nbytes: int
    payload: str
    digest: str | None
    summary: _native.TensorValueSummary
    site: TensorSite | None
    # How to produce the value: from a run's payloads, or a snapshot's host copy.
    _load: Callable[[], torch.Tensor] | None = field(default=None, repr=False, compare=False)

    @property
    def key(self) -> TensorObservationKey:
        return TensorObservationKey(self.name, self.invocation_index)

    def tensor(self) -> torch.Tensor:
        """The recorded value as a contiguous CPU tensor; its bytes are checked against the
        digest first. Raises ``PayloadUnavailableError`` for a summary-only observation."""
        if self.payload != "full" or self._load is None:
            raise PayloadUnavailableError(
                f"observation '{self.name}' (invocation {self.invocation_index}) was recorded "
                f"with payload='{self.payload}': only its summary was stored; record with "
                "payload='full' to keep the values"
            )
        return self._load()


def observation_layout(o: TensorObservation) -> dict[str, Any]:
    """An observation's identity, layout and payload kind as JSON-ready values: what a
    snapshot's descriptor and the comparison engine's arguments start with."""
    return {
        "order": o.order,
        "name": o.name,
        "invocation_index": o.invocation_index,
        "shape": list(o.shape),
        "stride": list(o.stride),
        "dtype": dtype_name(o.dtype),
        "source_device": o.source_device,
        "payload": o.payload,
    }


class ObservationSet:
    """Lookup by identity over ``observations``, shared by points and probe snapshots."""

    observations: tuple[TensorObservation, ...]

    def _describe(self) -> str:
        raise NotImplementedError

    @property
    def by_key(self) -> dict[TensorObservationKey, TensorObservation]:
        return {o.key: o for o in self.observations}

    def observation(self, name: str, invocation_index: int = 0) -> TensorObservation:
        try:
            return self.by_key[(name, invocation_index)]
        except KeyError:
            raise KeyError(
                f"{self._describe()} has no observation ({name!r}, {invocation_index}); "
                f"keys: {sorted(self.by_key)}"
            ) from None

    def tensor(self, name: str, invocation_index: int = 0) -> torch.Tensor:
        return self.observation(name, invocation_index).tensor()


@dataclass(frozen=True)
class TensorPoint(ObservationSet):
    index: int
    label: str
    timestamp: _dt.datetime
    metadata: dict[str, Any]
    replay_index: int | None
    observations: tuple[TensorObservation, ...]
    # The run the point was read from (its run id), for ownership checks.
    _run_id: str | None = field(default=None, repr=False, compare=False)

    def _describe(self) -> str:
        return f"point {self.label!r}"
