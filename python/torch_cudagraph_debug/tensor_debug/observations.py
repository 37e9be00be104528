"""The data of a tensor point: observations, their keys, sites and value summaries,
and ``TensorPoint`` itself. Runs (``run.py``) and comparisons (``compare.py``) build on
these; nothing here depends on either."""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from torch_cudagraph_debug import _native
from torch_cudagraph_debug._torch_bridge import dtype_from_name, dtype_name
from torch_cudagraph_debug.errors import (
    PayloadUnavailableError,
)


class TensorObservationKey(NamedTuple):
    """The stable identity of an observation across runs and snapshots: its name and its
    invocation index (0, 1, ... per name). A tuple, so ``("x", 0)`` and
    ``TensorObservationKey("x", 0)`` are the same key in every lookup."""

    name: str
    invocation_index: int

    @property
    def label(self) -> str:
        """``name[invocation_index]``, e.g. ``"encoder[0]"``: how every text, HTML and CSV
        report of this package names an observation."""
        return f"{self.name}[{self.invocation_index}]"


# The value summary of an observation is the native ``TensorValueSummary`` (field names as
# the reference design's: ``finite_count``, ``nan_count``, ``pos_inf_count``, ...);
# ``TensorSummary`` is the name it had before, kept for imports.
TensorSummary = _native.TensorValueSummary


# Where a value came from when a compile pass placed the probe: the native ``TensorSite``,
# frozen, made with its attributes as keywords (or in ``SITE_COLUMNS`` order).
TensorSite = _native.TensorSite

# The site columns of a run's observations table: every ``TensorSite`` attribute, in order.
SITE_COLUMNS: tuple[str, ...] = tuple(_native.SITE_COLUMNS)


@dataclass(frozen=True)
class TensorObservation:
    """One recorded tensor: its place (``order`` in the point or snapshot, ``name`` and
    ``invocation_index``), its layout (``shape``, ``stride`` in elements, ``dtype``,
    ``source_device``), ``nbytes`` of its values, ``payload`` (``"full"``: the values were
    kept; ``"summary"``: only ``summary`` was), ``digest`` (``blake3:<hex>`` of the
    contiguous bytes, as the store keeps it) and ``site`` (where a compile pass placed the
    probe; ``None`` for a hand-placed one)."""

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

    @classmethod
    def recorded(
        cls,
        record: _native.RecordedObservation,
        load: Callable[[], torch.Tensor] | None,
    ) -> TensorObservation:
        """The observation a run's store read (``RunReader.tensor_points``): its fields
        under the same names, the dtype as a ``torch.dtype``, and ``load`` to read its
        values."""
        return cls(
            order=record.order,
            name=record.name,
            invocation_index=record.invocation_index,
            shape=tuple(record.shape),
            stride=tuple(record.stride),
            dtype=dtype_from_name(record.dtype),
            source_device=record.source_device,
            nbytes=record.nbytes,
            payload=record.payload,
            digest=record.digest,
            summary=record.summary,
            site=record.site,
            _load=load,
        )

    @property
    def key(self) -> TensorObservationKey:
        return TensorObservationKey(self.name, self.invocation_index)

    @property
    def has_payload(self) -> bool:
        """Whether the values were kept, so ``tensor()`` can give them (``payload ==
        "full"``); ``False`` for a summary-only observation. A value stored in a part a
        damaged run left out still raises when read."""
        return self.payload == "full" and self._load is not None

    @functools.cached_property
    def sha256(self) -> str | None:
        """SHA-256 (lowercase hex) of the value's contiguous bytes, as the reference
        design's bundles name blobs; ``None`` when the values were not kept
        (``has_payload`` is false). The store itself keys payloads by ``digest``
        (blake3), so the first read loads the value (checked against ``digest``) and
        hashes it; later reads reuse the result."""
        if not self.has_payload:
            return None
        value = self.tensor()
        flat = value.contiguous().reshape(-1).view(torch.uint8)
        return hashlib.sha256(flat.numpy()).hexdigest()

    def descriptor(self) -> dict[str, Any]:
        """The observation without its values, as JSON-ready data: identity, layout,
        payload kind, ``nbytes``, ``digest``, ``sha256`` (see there: computing it reads a
        full payload once) and the value summary."""
        return {
            **observation_layout(self),
            "nbytes": self.nbytes,
            "digest": self.digest,
            "sha256": self.sha256,
            "summary": self.summary.to_dict(),
        }

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
    """One recorded point of a run: its position ``index``, ``label``, ``timestamp``,
    user ``metadata``, the graph ``replay_index`` it read (``None`` for an eager point),
    its ``observations`` in order, and ``run_id``, the run it belongs to (``None`` for a
    point not read from a run), which ``TensorRun.point`` checks ownership with."""

    index: int
    label: str
    timestamp: _dt.datetime
    metadata: dict[str, Any]
    replay_index: int | None
    observations: tuple[TensorObservation, ...]
    # Last and defaulted, unlike the reference's field order, so points made by keyword
    # without a run stay valid.
    run_id: str | None = None

    def _describe(self) -> str:
        return f"point {self.label!r}"

    def descriptor(self) -> dict[str, Any]:
        """The point without its values, as JSON-ready data: ``run_id``, ``index``,
        ``label``, ``timestamp`` (ISO 8601), ``metadata``, ``replay_index`` and each
        observation's ``descriptor()``."""
        timestamp = self.timestamp
        return {
            "run_id": self.run_id,
            "index": self.index,
            "label": self.label,
            "timestamp": timestamp.isoformat() if timestamp is not None else None,
            "metadata": self.metadata,
            "replay_index": self.replay_index,
            "observations": [o.descriptor() for o in self.observations],
        }
