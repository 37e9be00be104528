"""Phase comparisons: how a baseline and a candidate phase (two points of one run each)
changed, and how far apart they were at the start and at the end, with the identity
``end_gap = start_gap + candidate_change - baseline_change`` checked on every row."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.memory_debug._model import from_native
from torch_cudagraph_debug.memory_debug._rendered import Depth, _Rendered
from torch_cudagraph_debug.memory_debug.compare import (
    MemoryPointComparison,
    _compare_states,
    _mappings,
)
from torch_cudagraph_debug.memory_debug.options import MemoryAttributionOptions

if TYPE_CHECKING:
    from torch_cudagraph_debug.memory_debug.run import MemoryRange

# The rows of a phase comparison (native classes).
MemoryPhaseComponents = _native.MemoryPhaseComponents
MemoryAllocatorScopePhaseDecomposition = _native.MemoryAllocatorScopePhaseDecomposition
MemoryPoolPhaseDecomposition = _native.MemoryPoolPhaseDecomposition
MemoryDevicePhaseDecomposition = _native.MemoryDevicePhaseDecomposition


def _gap(
    reference: Any,
    candidate: Any,
    pool_mapping: Mapping[Any, Any] | None,
    device_mapping: Mapping[int, int] | None,
    attribution: MemoryAttributionOptions | None = None,
) -> MemoryPointComparison:
    """The comparison of two phase endpoints. A phase's mappings name pools and devices of
    any endpoint, so each gap keeps the pairs whose two ends exist at its own points."""
    pools, devices = _mappings(reference, candidate, pool_mapping, device_mapping)
    present = (
        {(k.device_index, tuple(k.pool_id)) for k in reference.pool_stats},
        {(k.device_index, tuple(k.pool_id)) for k in candidate.pool_stats},
    )
    kept_pools = {r: c for r, c in pools if r in present[0] and c in present[1]}
    kept_devices = {r: c for r, c in devices if r in reference.devices and c in candidate.devices}
    return _compare_states(
        reference, candidate, kept_pools, kept_devices, attribution, MemoryPointComparison
    )


class MemoryPhaseComparison(_Rendered):
    """Baseline change, candidate change, start gap and end gap per scope, device and
    pool; every row checks ``end_gap = start_gap + candidate_change - baseline_change``.

    ``baseline_change`` / ``candidate_change`` / ``start_gap`` / ``end_gap`` are the four
    ordinary comparisons the equation is made of; ``allocator_scope_decomposition``,
    ``pool_decomposition`` and ``device_decomposition`` hold one row per phase metric."""

    identity_failures: int = from_native(
        doc="Rows whose identity does not hold (0 unless something is wrong)."
    )
    warnings: tuple[str, ...] = from_native(tuple)

    def __init__(
        self,
        native: _native.MemoryPhaseComparison,
        baseline: MemoryRange | None = None,
        candidate: MemoryRange | None = None,
        pool_mapping: Mapping[Any, Any] | None = None,
        device_mapping: Mapping[int, int] | None = None,
        attribution: MemoryAttributionOptions | None = None,
    ):
        self._native = native
        self.baseline = baseline
        self.candidate = candidate
        self._options = attribution
        self._legs: tuple[MemoryPointComparison | None, ...] = (None, None, None, None)
        if baseline is not None and candidate is not None:
            # With attribution the two changes carry it (events included: they are inside
            # one run) and the gaps carry stack attribution only.
            wanted = attribution is not None and (
                attribution.stacks or attribution.events or attribution.lifetimes
            )
            change = attribution if wanted else None
            gap = (
                dataclasses.replace(attribution, events=False, lifetimes=False) if wanted else None
            )
            gap = gap if gap is not None and gap.stacks else None
            self._legs = (
                baseline.compare(attribution=change),
                candidate.compare(attribution=change),
                _gap(baseline.start, candidate.start, pool_mapping, device_mapping, gap),
                _gap(baseline.end, candidate.end, pool_mapping, device_mapping, gap),
            )
            self._attributions = [leg._attribution for leg in self._legs if leg._attribution]

    @property
    def baseline_name(self) -> str | None:
        """The name of the run the baseline phase belongs to."""
        return None if self.baseline is None else self.baseline.run.name

    @property
    def candidate_name(self) -> str | None:
        """The name of the run the candidate phase belongs to."""
        return None if self.candidate is None else self.candidate.run.name

    @property
    def baseline_change(self) -> MemoryPointComparison | None:
        """The baseline phase's own comparison, start point to end point of its run."""
        return self._legs[0]

    @property
    def candidate_change(self) -> MemoryPointComparison | None:
        """The candidate phase's own comparison, start point to end point of its run."""
        return self._legs[1]

    @property
    def start_gap(self) -> MemoryPointComparison | None:
        """Baseline start against candidate start (across runs: stacks, no events)."""
        return self._legs[2]

    @property
    def end_gap(self) -> MemoryPointComparison | None:
        """Baseline end against candidate end (across runs: stacks, no events)."""
        return self._legs[3]

    # The rows, built natively once; the native getters make new objects on every call,
    # so each tuple is kept.

    @functools.cached_property
    def allocator_scope_decomposition(self) -> tuple[MemoryAllocatorScopePhaseDecomposition, ...]:
        """One equation per scope (``all``, ``default``, ``private``) and phase metric."""
        return self._native.allocator_scope_decomposition

    @functools.cached_property
    def pool_decomposition(self) -> tuple[MemoryPoolPhaseDecomposition, ...]:
        """One equation per matched pool and phase metric (a pool missing at a phase
        endpoint counts as empty there)."""
        return self._native.pool_decomposition

    @functools.cached_property
    def device_decomposition(self) -> tuple[MemoryDevicePhaseDecomposition, ...]:
        """One equation per device pair and metric: allocator metrics, and the CUDA
        Runtime ones (``used_bytes``, ...) whose terms are ``None`` without samples."""
        return self._native.device_decomposition

    # Flat rows, the lines of the decomposition CSV files: identity, then the terms
    # (``baseline_change_bytes``, ``candidate_change_bytes``, ``start_gap_bytes``,
    # ``end_gap_bytes``, ``change_gap_bytes``) and ``identity_holds``.
    # ``include_unchanged=False`` keeps the rows with a known term that is not zero.

    def allocator_scope_decomposition_rows(
        self, *, include_unchanged: bool = True
    ) -> list[dict[str, Any]]:
        """``allocator_scope_decomposition`` as flat dicts (``scope``, ``metric``, terms)."""
        rows = self.allocator_scope_decomposition
        return [r.to_row() for r in rows if include_unchanged or r.changed]

    def pool_decomposition_rows(self, *, include_unchanged: bool = True) -> list[dict[str, Any]]:
        """``pool_decomposition`` as flat dicts (both pools' device and id, ``metric``,
        terms)."""
        rows = self.pool_decomposition
        return [r.to_row() for r in rows if include_unchanged or r.changed]

    def device_decomposition_rows(self, *, include_unchanged: bool = True) -> list[dict[str, Any]]:
        """``device_decomposition`` as flat dicts (``baseline_device_index``,
        ``candidate_device_index``, ``metric``, terms)."""
        rows = self.device_decomposition
        return [r.to_row() for r in rows if include_unchanged or r.changed]

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.report_tree()["rows"]

    def _render(self, format: str, include_unchanged: bool, depth: Depth) -> str:
        return self._native.render(format, include_unchanged)

    def to_dict(self) -> dict[str, Any]:
        legs = ("baseline_change", "candidate_change", "start_gap", "end_gap")
        return {
            "kind": "MemoryPhaseComparison",
            "baseline_name": self.baseline_name,
            "candidate_name": self.candidate_name,
            "display_stack_depth": self.display_stack_depth,
            "display_limit": self.display_limit,
            **{
                leg: None if getattr(self, leg) is None else getattr(self, leg).to_dict()
                for leg in legs
            },
            **self._native.rows_dict(),
            "warnings": list(self.warnings),
        }

    def _csv_files(self) -> dict[str, str]:
        files = dict(self._native.csv_files())
        if self.end_gap is not None:
            files.update(self.end_gap._native.end_gap_csv_files())
        return files


def compare_phases(
    baseline: MemoryRange,
    candidate: MemoryRange,
    *,
    pool_mapping: Mapping[Any, Any] | None = None,
    device_mapping: Mapping[int, int] | None = None,
    attribution: MemoryAttributionOptions | None = None,
) -> MemoryPhaseComparison:
    """Compares two phases (``run.between(a, b)``), of one run or of two."""
    pools, devices = _mappings(baseline.start, candidate.start, pool_mapping, device_mapping)
    native = _native.compare_phases(
        baseline.start._state,
        baseline.end._state,
        candidate.start._state,
        candidate.end._state,
        pool_mapping=pools,
        device_mapping=devices,
    )
    return MemoryPhaseComparison(
        native, baseline, candidate, pool_mapping, device_mapping, attribution
    )
