"""Comparing snapshots, points, runs and run groups.

The native engine does the work (alignment, element-wise metrics, status, report content)
and owns the options and results: ``TensorComparisonOptions`` and every result class are
frozen native classes, checked and built once in Rust. This module only turns the
Python-side inputs (points, snapshots, runs, groups) into the engine's arguments.
``docs/comparison.md`` states every rule.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, cast, overload

from torch_cudagraph_debug import _native
from torch_cudagraph_debug._native import (
    ComparisonCounts,
    ComparisonIssue,
    ComparisonMetrics,
    ComparisonSubject,
    FirstMismatch,
    ObservationSide,
    ObservationSite,
    PointInfo,
    SeriesDivergence,
    SeriesPointRef,
    TensorComparisonOptions,
    TensorComparisonResult,
    TensorObservationComparison,
    TensorPointComparison,
    TensorPointSeriesComparison,
    TensorRankRunComparison,
    TensorRunComparison,
    TensorRunGroupComparison,
    TensorSnapshotComparison,
    TensorValueSummary,
)
from torch_cudagraph_debug._points import Run
from torch_cudagraph_debug._torch_bridge import host_bytes
from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.memory_debug import compare as _memory
from torch_cudagraph_debug.memory_debug.compare import (
    MemoryPointComparison,
    MemorySnapshotComparison,
)
from torch_cudagraph_debug.memory_debug.options import MemoryAttributionOptions
from torch_cudagraph_debug.memory_debug.probe import MemoryProbeSnapshot
from torch_cudagraph_debug.memory_debug.run import MemoryPoint
from torch_cudagraph_debug.tensor_debug.observations import (
    TensorObservation,
    TensorPoint,
    observation_layout,
)
from torch_cudagraph_debug.tensor_debug.snapshot import TensorProbeSnapshot

__all__ = [
    "ComparisonCounts",
    "ComparisonIssue",
    "ComparisonMetrics",
    "ComparisonMode",
    "ComparisonStatus",
    "ComparisonSubject",
    "DTypePolicy",
    "FirstMismatch",
    "LayoutPolicy",
    "ObservationComparison",
    "ObservationComparisonKind",
    "ObservationSide",
    "ObservationSite",
    "PointComparison",
    "PointInfo",
    "RankComparison",
    "SeriesDivergence",
    "SeriesPointRef",
    "TensorComparison",
    "TensorComparisonOptions",
    "TensorComparisonResult",
    "TensorObservationComparison",
    "TensorPointComparison",
    "TensorPointSeriesComparison",
    "TensorRankRunComparison",
    "TensorRunComparison",
    "TensorRunGroupComparison",
    "TensorSnapshotComparison",
    "TensorValueSummary",
    "compare_point_series",
    "compare_points",
    "compare_runs",
    "compare_snapshots",
]

# The reference design's enumerations, as the string literals the native classes take and
# report. The engine defines the names (``_native.comparison_literals()``); a test keeps
# these in step with it.
ComparisonMode = Literal["allclose", "exact"]
ComparisonStatus = Literal["match", "inconclusive", "mismatch"]
DTypePolicy = Literal["strict", "promote"]
LayoutPolicy = Literal["strict", "ignore"]
ObservationComparisonKind = Literal[
    "reference_only", "candidate_only", "metadata", "digest", "values", "summary"
]

# Names this package used before it took the reference design's: the same classes.
ObservationComparison = TensorObservationComparison
PointComparison = TensorPointComparison
RankComparison = TensorRankRunComparison
TensorComparison = TensorPointComparison | TensorSnapshotComparison

ProgressCallback = Callable[[int, int, str], None]
PointKey = str | int
PointMapping = (
    Literal["label", "index"]
    | Mapping[PointKey, PointKey]
    | Sequence[tuple[PointKey, PointKey]]
    | None
)
RunLike = Run[TensorPoint] | str | os.PathLike


# ---------------------------------------------------------------------- inputs
Observed = TensorPoint | TensorProbeSnapshot


def _observation_args(o: TensorObservation) -> dict[str, Any]:
    return {
        **observation_layout(o),
        "digest": o.digest,
        "summary": o.summary,
        "site": o.site,
    }


def _loader(observations: Sequence[TensorObservation], private_copy: bool) -> Callable[[int], Any]:
    """Payload bytes on request, as ``(owner, (address, length))``. The engine reads the
    memory without the GIL, so it gets a tensor nobody else holds: run payloads are rebuilt
    fresh by ``tensor()``; snapshot values are copied first."""

    def load(index: int) -> tuple[Any, tuple[int, int]]:
        tensor = observations[index].tensor().contiguous()
        if private_copy:
            tensor = tensor.clone()
        return tensor, host_bytes(tensor)

    return load


def _set_args(observed: Observed, what: str) -> dict[str, Any]:
    if isinstance(observed, TensorProbeSnapshot):
        subject = ComparisonSubject(
            "snapshot",
            name=observed.probe_name,
            detail=f"snapshot {observed.snapshot_index}, replay {observed.replay_index}",
        )
        point = PointInfo(
            replay_index=observed.replay_index,
            snapshot_index=observed.snapshot_index,
            timestamp=observed.timestamp.isoformat(),
        )
        private = True
    elif isinstance(observed, TensorPoint):
        detail = f"point {observed.index}"
        if observed.replay_index is not None:
            detail += f", replay {observed.replay_index}"
        subject = ComparisonSubject("point", name=observed.label, detail=detail)
        point = PointInfo(
            label=observed.label,
            index=observed.index,
            replay_index=observed.replay_index,
            timestamp=observed.timestamp.isoformat() if observed.timestamp else None,
        )
        private = False
    else:
        raise InvalidInputError(
            f"{what} must be a TensorPoint or a TensorProbeSnapshot, got {type(observed).__name__}"
        )
    observations = list(observed.observations)
    return {
        "subject": subject,
        "point": point,
        "observations": [_observation_args(o) for o in observations],
        "loader": _loader(observations, private),
    }


def _run_path(run: RunLike, what: str) -> str | tuple[str, str, int | None]:
    """How the native side finds a run: a loaded run by its root, name and rank; a path
    is a job root holding one tensor run."""
    # Any loaded run (a ``TensorRun``): the native side checks that it is a tensor run.
    if isinstance(run, Run):
        return run.address
    if isinstance(run, str | os.PathLike):
        return os.fspath(run)
    raise InvalidInputError(f"{what} must be a TensorRun or a job root, got {type(run).__name__}")


def _mapping(point_mapping: PointMapping) -> Any:
    if point_mapping is None or isinstance(point_mapping, str):
        return point_mapping
    if isinstance(point_mapping, Mapping):
        return list(point_mapping.items())
    if isinstance(point_mapping, Iterable):
        pairs = list(point_mapping)
        for pair in pairs:
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise InvalidInputError(
                    f"point_mapping pairs must be (reference, candidate), got {pair!r}"
                )
        return [tuple(p) for p in pairs]
    raise InvalidInputError(f"point_mapping cannot be {point_mapping!r}")


def _compare_sets(
    kind: str,
    expected: type[Observed],
    ref: Observed,
    cand: Observed,
    options: TensorComparisonOptions | None,
    progress: ProgressCallback | None,
) -> Any:
    """Compares two observation sets of one kind (``expected``: snapshots or points)."""
    for what, observed in (("reference", ref), ("candidate", cand)):
        if not isinstance(observed, expected):
            raise InvalidInputError(
                f"{what} must be a {expected.__name__}, got {type(observed).__name__}"
            )
    return _native.compare_sets(
        kind, _set_args(ref, "reference"), _set_args(cand, "candidate"), options, progress
    )


# ------------------------------------------------------------------------ functions
# The reference design's ``tensor_debug`` namespace also answers ``compare_snapshots`` and
# ``compare_points`` for memory snapshots and points (its member data gives them the memory
# keywords), so both kinds of program work here: memory states go to ``memory_debug``,
# whose comparison they are, and each kind's keywords are refused for the other kind.
_MemoryState = MemoryProbeSnapshot | MemoryPoint


def _is_memory_comparison(
    function: str,
    reference: Any,
    candidate: Any,
    tensor_keywords: dict[str, Any],
    memory_keywords: dict[str, Any],
) -> bool:
    """Whether ``function(reference, candidate, ...)`` compares memory states (else tensor
    ones); a mix of kinds, or a keyword of the other kind, is an ``InvalidInputError``."""
    memory = isinstance(reference, _MemoryState)
    if memory != isinstance(candidate, _MemoryState):
        raise InvalidInputError(
            f"{function}(): reference is a {type(reference).__name__} and candidate a "
            f"{type(candidate).__name__}; compare tensor snapshots or points with tensor "
            "ones, memory snapshots or points with memory ones"
        )
    foreign, kind, instead = (
        (tensor_keywords, "tensor", "pool_mapping=, device_mapping= or attribution=")
        if memory
        else (memory_keywords, "memory", "options=TensorComparisonOptions(...)")
    )
    for keyword, value in foreign.items():
        if value is not None:
            raise InvalidInputError(
                f"{function}({keyword}=...) applies to {kind} snapshots and points only, and "
                f"these are {'memory' if memory else 'tensor'} ones "
                f"({type(reference).__name__}); they take {instead}"
            )
    return memory


@overload
def compare_snapshots(
    reference: TensorProbeSnapshot,
    candidate: TensorProbeSnapshot,
    *,
    options: TensorComparisonOptions | None = None,
    progress: ProgressCallback | None = None,
) -> TensorSnapshotComparison: ...
@overload
def compare_snapshots(
    reference: _MemoryState,
    candidate: _MemoryState,
    *,
    pool_mapping: Mapping[Any, Any] | None = None,
    device_mapping: Mapping[int, int] | None = None,
    attribution: MemoryAttributionOptions | None = None,
) -> MemorySnapshotComparison | MemoryPointComparison: ...
def compare_snapshots(
    reference: TensorProbeSnapshot | _MemoryState,
    candidate: TensorProbeSnapshot | _MemoryState,
    *,
    options: TensorComparisonOptions | None = None,
    progress: ProgressCallback | None = None,
    pool_mapping: Mapping[Any, Any] | None = None,
    device_mapping: Mapping[int, int] | None = None,
    attribution: MemoryAttributionOptions | None = None,
) -> TensorSnapshotComparison | MemorySnapshotComparison | MemoryPointComparison:
    """Compares two probe snapshots observation by observation (reference order, then
    candidate-only keys). The snapshots may come from different probes.

    Memory snapshots or points (``MemoryProbeSnapshot``, ``MemoryPoint``) are compared by
    ``memory_debug.compare_snapshots`` with ``pool_mapping``, ``device_mapping`` and
    ``attribution``; those three apply to memory states only, ``options`` and
    ``progress`` to tensor snapshots only."""
    if _is_memory_comparison(
        "compare_snapshots",
        reference,
        candidate,
        {"options": options, "progress": progress},
        {
            "pool_mapping": pool_mapping,
            "device_mapping": device_mapping,
            "attribution": attribution,
        },
    ):
        return _memory.compare_snapshots(
            reference,
            candidate,
            pool_mapping=pool_mapping,
            device_mapping=device_mapping,
            attribution=attribution,
        )
    native = _compare_sets(
        "snapshots", TensorProbeSnapshot, reference, candidate, options, progress
    )
    return cast(TensorSnapshotComparison, native)


@overload
def compare_points(
    reference: TensorPoint,
    candidate: TensorPoint,
    *,
    options: TensorComparisonOptions | None = None,
    progress: ProgressCallback | None = None,
) -> TensorPointComparison: ...
@overload
def compare_points(
    reference: _MemoryState,
    candidate: _MemoryState,
    *,
    pool_mapping: Mapping[Any, Any] | None = None,
    device_mapping: Mapping[int, int] | None = None,
    attribution: MemoryAttributionOptions | None = None,
) -> MemoryPointComparison: ...
def compare_points(
    reference: TensorPoint | _MemoryState,
    candidate: TensorPoint | _MemoryState,
    *,
    options: TensorComparisonOptions | None = None,
    progress: ProgressCallback | None = None,
    pool_mapping: Mapping[Any, Any] | None = None,
    device_mapping: Mapping[int, int] | None = None,
    attribution: MemoryAttributionOptions | None = None,
) -> TensorPointComparison | MemoryPointComparison:
    """Compares two points (of one run or of two runs) observation by observation
    (reference order, then candidate-only keys).

    Memory points (or snapshots) are compared by ``memory_debug.compare_points``, with
    the keywords ``compare_snapshots`` describes."""
    if _is_memory_comparison(
        "compare_points",
        reference,
        candidate,
        {"options": options, "progress": progress},
        {
            "pool_mapping": pool_mapping,
            "device_mapping": device_mapping,
            "attribution": attribution,
        },
    ):
        return _memory.compare_points(
            reference,
            candidate,
            pool_mapping=pool_mapping,
            device_mapping=device_mapping,
            attribution=attribution,
        )
    native = _compare_sets("points", TensorPoint, reference, candidate, options, progress)
    return cast(TensorPointComparison, native)


def compare_runs(
    reference: RunLike,
    candidate: RunLike,
    *,
    point_mapping: PointMapping = None,
    options: TensorComparisonOptions | None = None,
    progress: ProgressCallback | None = None,
    names: Iterable[str] | None = None,
) -> TensorRunComparison:
    """Compares two runs point by point; the engine reads payloads from the job roots.

    ``point_mapping``: ``None`` or ``"label"`` pairs points with equal labels (one-sided
    labels are reported); ``"index"`` pairs them by position; a mapping (or pairs) of
    reference to candidate labels or indices compares exactly those points. ``names``:
    compare only the observations of these names (on both sides)."""
    return _native.compare_runs(
        _run_path(reference, "reference"),
        _run_path(candidate, "candidate"),
        options,
        _mapping(point_mapping),
        progress,
        None if names is None else list(names),
    )


def compare_point_series(
    reference: Observed,
    candidates: RunLike,
    *,
    options: TensorComparisonOptions | None = None,
    progress: ProgressCallback | None = None,
) -> TensorPointSeriesComparison:
    """Compares one reference point (or snapshot) against every point of the run
    ``candidates`` (a ``TensorRun`` or a job root holding one tensor run) in order: drift
    across replays, and for each observation the first point at which it diverged.
    The result's ``candidate_run`` is ``candidates`` when it is a ``TensorRun`` (``None``
    for a job root)."""
    return _native.compare_point_series(
        _set_args(reference, "reference"),
        _run_path(candidates, "candidates"),
        options,
        progress,
        candidates if isinstance(candidates, Run) else None,
    )
