"""Comparing snapshots, points, runs and run groups.

The native engine does the work (alignment, element-wise metrics, status, report content);
this module turns Python objects into its inputs and its results into typed objects.
``docs/comparison.md`` states every rule.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from torch_cudagraph_debug import _native
from torch_cudagraph_debug._torch_bridge import dtype_name, host_bytes
from torch_cudagraph_debug.errors import ComparisonFailedError, InvalidInputError
from torch_cudagraph_debug.tensor_debug.run import (
    TensorObservation,
    TensorPoint,
    TensorRun,
    TensorSite,
    TensorSummary,
)
from torch_cudagraph_debug.tensor_debug.snapshot import TensorProbeSnapshot

Status = Literal["match", "mismatch", "inconclusive"]
ProgressCallback = Callable[[int, int, str], None]
PointKey = str | int
PointMapping = (
    Literal["label", "index"]
    | Mapping[PointKey, PointKey]
    | Sequence[tuple[PointKey, PointKey]]
    | None
)
RunLike = TensorRun | str | os.PathLike


@dataclass(frozen=True)
class TensorComparisonOptions:
    """How values are compared.

    ``mode="allclose"``: an element matches when ``|candidate - reference| <= atol + rtol *
    |reference|`` (like ``torch.isclose(candidate, reference)``, evaluated in float64),
    infinities only equal themselves, NaN matches NaN only with ``equal_nan``.
    ``mode="exact"``: value equality like ``torch.equal`` (``-0.0 == 0.0``; NaN only with
    ``equal_nan``). Integers and bool always compare exactly.
    ``dtype_policy="strict"`` makes a dtype difference a metadata mismatch; ``"promote"``
    compares the values. ``layout_policy="strict"`` does the same for strides; ``"ignore"``
    does not compare them. ``limit`` caps the rows shown in text and HTML reports (JSON and
    CSV are always complete).

    Every value is checked when the options are made: tolerances must be finite numbers
    ``>= 0``, the policies one of their names, ``limit`` an integer ``>= 0``; anything else
    raises :class:`InvalidInputError` whose ``option`` attribute names the option.
    """

    mode: Literal["allclose", "exact"] = "allclose"
    rtol: float = 1e-5
    atol: float = 1e-8
    equal_nan: bool = False
    dtype_policy: Literal["strict", "promote"] = "strict"
    layout_policy: Literal["strict", "ignore"] = "strict"
    limit: int = 20

    def __post_init__(self) -> None:
        # Checked natively, once, here: a bad value fails when the options are made (an
        # InvalidInputError naming the option), not when a comparison first uses them.
        checked = _native.compare_options(
            self.mode,
            self.rtol,
            self.atol,
            self.equal_nan,
            self.dtype_policy,
            self.layout_policy,
            self.limit,
        )
        object.__setattr__(self, "_checked_json", checked)

    def _json(self) -> str:
        return self._checked_json  # type: ignore[attr-defined]


def _options(options: TensorComparisonOptions | None) -> str:
    if options is None:
        return TensorComparisonOptions()._json()
    if not isinstance(options, TensorComparisonOptions):
        raise InvalidInputError(f"options must be a TensorComparisonOptions, got {options!r}")
    return options._json()


# ------------------------------------------------------------------------ result types
def _float(value: Any) -> float | None:
    """JSON reports write non-finite floats as "nan", "inf", "-inf"."""
    if value is None:
        return None
    return float(value)


def _scalar(value: Any) -> int | float | complex:
    if isinstance(value, list):
        return complex(float(value[0]), float(value[1]))
    if isinstance(value, int):
        return value
    return float(value)


@dataclass(frozen=True)
class FirstMismatch:
    """The first element (row-major) that did not match, with both values."""

    index: int
    coordinate: tuple[int, ...]
    reference: int | float | complex
    candidate: int | float | complex


@dataclass(frozen=True)
class ComparisonMetrics:
    """Element-wise metrics of one observation pair. Error metrics cover the elements where
    both values are finite (``finite_pairs``); ``None`` when there is none."""

    compared_as: str
    total: int
    mismatch_count: int
    mismatch_fraction: float
    finite_pairs: int
    max_abs_error: float | None
    max_rel_error: float | None
    mean_abs_error: float | None
    first_mismatch: FirstMismatch | None
    cosine_similarity: float | None
    relative_l2_error: float | None
    max_ulp_distance: int | None
    nan_introduced: int
    inf_introduced: int

    @classmethod
    def _from(cls, d: Mapping[str, Any]) -> ComparisonMetrics:
        first = d["first_mismatch"]
        return cls(
            compared_as=d["compared_as"],
            total=d["total"],
            mismatch_count=d["mismatch_count"],
            mismatch_fraction=float(d["mismatch_fraction"]),
            finite_pairs=d["finite_pairs"],
            max_abs_error=_float(d["max_abs_error"]),
            max_rel_error=_float(d["max_rel_error"]),
            mean_abs_error=_float(d["mean_abs_error"]),
            first_mismatch=None
            if first is None
            else FirstMismatch(
                index=first["index"],
                coordinate=tuple(first["coordinate"]),
                reference=_scalar(first["reference"]),
                candidate=_scalar(first["candidate"]),
            ),
            cosine_similarity=_float(d["cosine_similarity"]),
            relative_l2_error=_float(d["relative_l2_error"]),
            max_ulp_distance=d["max_ulp_distance"],
            nan_introduced=d["nan_introduced"],
            inf_introduced=d["inf_introduced"],
        )


@dataclass(frozen=True)
class ObservationSide:
    """One side of a compared pair, as it was recorded."""

    order: int
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    source_device: str
    payload: str
    digest: str | None
    summary: TensorSummary | None
    site: TensorSite | None

    @classmethod
    def _from(cls, d: Mapping[str, Any] | None) -> ObservationSide | None:
        if d is None:
            return None
        s = d["summary"]
        return cls(
            order=d["order"],
            dtype=d["dtype"],
            shape=tuple(d["shape"]),
            stride=tuple(d["stride"]),
            source_device=d["source_device"],
            payload=d["payload"],
            digest=d["digest"],
            summary=None
            if s is None
            else TensorSummary(
                **{k: (_float(v) if k in _FLOAT_FIELDS else v) for k, v in s.items()}
            ),
            site=None if d["site"] is None else TensorSite(**d["site"]),
        )


_FLOAT_FIELDS = {"min", "max", "mean", "std", "l2"}


@dataclass(frozen=True)
class ObservationComparison:
    """The verdict on one ``(name, invocation_index)`` pair.

    ``kind``: ``reference_only``, ``candidate_only``, ``metadata``, ``digest``, ``values``
    or ``summary``: how the verdict was reached. ``reason`` says why in one sentence."""

    position: int
    name: str
    invocation_index: int
    status: Status
    kind: str
    reason: str
    reference: ObservationSide | None
    candidate: ObservationSide | None
    metrics: ComparisonMetrics | None

    @property
    def key(self) -> tuple[str, int]:
        return (self.name, self.invocation_index)

    @property
    def ok(self) -> bool:
        return self.status == "match"

    @classmethod
    def _from(cls, d: Mapping[str, Any]) -> ObservationComparison:
        return cls(
            position=d["position"],
            name=d["name"],
            invocation_index=d["invocation_index"],
            status=d["status"],
            kind=d["kind"],
            reason=d["reason"],
            reference=ObservationSide._from(d["reference"]),
            candidate=ObservationSide._from(d["candidate"]),
            metrics=None if d["metrics"] is None else ComparisonMetrics._from(d["metrics"]),
        )


@dataclass(frozen=True)
class PointInfo:
    """Which point (or snapshot) a side of a point comparison is."""

    label: str | None
    index: int | None
    replay_index: int | None
    snapshot_index: int | None
    timestamp: str | None

    @classmethod
    def _from(cls, d: Mapping[str, Any] | None) -> PointInfo | None:
        return None if d is None else cls(**d)


@dataclass(frozen=True)
class ComparisonCounts:
    total: int
    match: int
    mismatch: int
    inconclusive: int

    @classmethod
    def _from(cls, d: Mapping[str, Any]) -> ComparisonCounts:
        return cls(**d)


@dataclass(frozen=True)
class PointComparison:
    """One reference point against one candidate point; one side is ``None`` for a point
    recorded on the other side only."""

    position: int
    reference: PointInfo | None
    candidate: PointInfo | None
    status: Status
    reason: str | None
    counts: ComparisonCounts
    observations: tuple[ObservationComparison, ...]

    @property
    def by_key(self) -> dict[tuple[str, int], ObservationComparison]:
        return {o.key: o for o in self.observations}

    def observation(self, name: str, invocation_index: int = 0) -> ObservationComparison:
        try:
            return self.by_key[(name, invocation_index)]
        except KeyError:
            raise KeyError(
                f"no observation ({name!r}, {invocation_index}) in this point comparison; "
                f"keys: {sorted(self.by_key)}"
            ) from None

    @classmethod
    def _from(cls, d: Mapping[str, Any]) -> PointComparison:
        return cls(
            position=d["position"],
            reference=PointInfo._from(d["reference"]),
            candidate=PointInfo._from(d["candidate"]),
            status=d["status"],
            reason=d["reason"],
            counts=ComparisonCounts._from(d["counts"]),
            observations=tuple(ObservationComparison._from(o) for o in d["observations"]),
        )


@dataclass(frozen=True)
class ComparisonIssue:
    """The first problem in execution order. ``scope`` is ``observation`` (then
    ``observation`` is set), ``point`` (a point on one side only) or ``rank`` (a rank
    missing from a group)."""

    scope: str
    status: Status
    rank: int | None
    point: PointComparison | None
    observation: ObservationComparison | None
    description: str


@dataclass(frozen=True)
class SeriesPointRef:
    """A point of a series: its position in ``points`` and its identity in the run."""

    point: int
    label: str | None
    index: int | None
    replay_index: int | None


@dataclass(frozen=True)
class SeriesDivergence:
    """When one observation of the reference point stopped matching across the series."""

    name: str
    invocation_index: int
    status: Status
    first_mismatch: SeriesPointRef | None
    first_inconclusive: SeriesPointRef | None
    mismatched_points: int
    max_abs_error: float | None


@dataclass(frozen=True)
class RankComparison:
    """One rank of a run group comparison; ``points`` is empty for a missing rank."""

    rank: int
    status: Status
    reason: str | None
    points: tuple[PointComparison, ...]
    counts: ComparisonCounts | None


def _series_ref(d: Mapping[str, Any] | None) -> SeriesPointRef | None:
    return None if d is None else SeriesPointRef(**d)


class TensorComparisonResult:
    """What every comparison returns: ``status`` (``match`` / ``mismatch`` /
    ``inconclusive``; mismatch > inconclusive > match), ``ok``, ``conclusive``,
    ``first_issue``, ``worst_observation_comparisons()``, ``assert_ok()``, and reports:
    ``to_text()``, ``to_dict()``, ``to_html()``, ``write(directory)``."""

    def __init__(self, native: _native.Comparison):
        self._native = native
        self._data: dict[str, Any] = json.loads(native.to_json())
        d = self._data
        self.kind: str = d["kind"]
        self.status: Status = d["status"]
        self.ok: bool = d["ok"]
        self.conclusive: bool = d["conclusive"]
        self.options = TensorComparisonOptions(**d["options"])
        self.reference: dict[str, Any] = d["reference"]
        self.candidate: dict[str, Any] = d["candidate"]
        self.counts = ComparisonCounts._from(d["counts"])
        self.point_counts = ComparisonCounts._from(d["point_counts"])
        self.warnings: tuple[str, ...] = tuple(d["warnings"])
        self.points: tuple[PointComparison, ...] = tuple(
            PointComparison._from(p) for p in d["points"]
        )
        self.ranks: tuple[RankComparison, ...] = tuple(
            RankComparison(
                rank=r["rank"],
                status=r["status"],
                reason=r["reason"],
                points=tuple(
                    PointComparison._from(p) for p in (r["comparison"] or {}).get("points", ())
                ),
                counts=None
                if r["comparison"] is None
                else ComparisonCounts._from(r["comparison"]["counts"]),
            )
            for r in d["ranks"]
        )

    def _points_of(self, rank: int | None) -> tuple[PointComparison, ...]:
        if rank is None:
            return self.points
        for r in self.ranks:
            if r.rank == rank:
                return r.points
        return ()

    @property
    def observations(self) -> tuple[ObservationComparison, ...]:
        """Every observation comparison, in execution order (points, then ranks)."""
        out = [o for p in self.points for o in p.observations]
        out += [o for r in self.ranks for p in r.points for o in p.observations]
        return tuple(out)

    @property
    def first_issue(self) -> ComparisonIssue | None:
        issue = self._data["first_issue"]
        if issue is None:
            return None
        points = self._points_of(issue["rank"])
        point = points[issue["point"]] if issue["point"] is not None else None
        observation = (
            point.observations[issue["observation"]]
            if point is not None and issue["observation"] is not None
            else None
        )
        return ComparisonIssue(
            scope=issue["scope"],
            status=issue["status"],
            rank=issue["rank"],
            point=point,
            observation=observation,
            description=issue["description"],
        )

    def worst_observation_comparisons(self, n: int | None = None) -> list[ObservationComparison]:
        """The ``n`` worst observation comparisons (all when ``None``), worst first: by
        status, then the share of elements that differ (a missing or incomparable value
        counts as all of them), then the largest absolute and relative errors."""
        if n is not None and (not isinstance(n, int) or n < 0):
            raise InvalidInputError(f"n must be None or an integer >= 0, got {n!r}")
        return [self._points_of(rank)[p].observations[o] for rank, p, o in self._native.worst(n)]

    def assert_ok(self) -> None:
        """Raises ``ComparisonFailedError`` unless the status is ``match`` (an inconclusive
        comparison proves nothing, so it fails too)."""
        if self.ok:
            return
        issue = self.first_issue
        c = self.counts
        raise ComparisonFailedError(
            f"{self.kind.replace('_', ' ')} comparison: {self.status} ({c.mismatch} of "
            f"{c.total} observations mismatch, {c.inconclusive} inconclusive); first issue: "
            f"{issue.description if issue else 'none'}"
        )

    # ------------------------------------------------------------------ reports
    def to_text(self, limit: int | None = None) -> str:
        """The text report; ``limit`` (default: the options') caps rows per table."""
        return self._native.to_text(limit)

    def to_dict(self) -> dict[str, Any]:
        """The complete comparison (the content of report.json); non-finite floats are the
        strings ``"nan"``, ``"inf"``, ``"-inf"``."""
        return json.loads(self._native.to_json())

    def to_json(self) -> str:
        return self._native.to_json()

    def to_html(self, limit: int | None = None) -> str:
        """A standalone HTML report with charts (inline SVG, no script)."""
        return self._native.to_html(limit)

    def csv_tables(self) -> dict[str, str]:
        return dict(self._native.csv_tables())

    def write(
        self,
        directory: str | os.PathLike[str],
        overwrite: bool = False,
        *,
        limit: int | None = None,
    ) -> list[Path]:
        """Writes report.txt, report.json, report.html and the CSV tables into
        ``directory``. A directory that already holds anything needs ``overwrite=True``,
        which replaces only the files this method writes."""
        return [Path(p) for p in self._native.write(os.fspath(directory), overwrite, limit)]

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        c = self.counts
        return (
            f"{type(self).__name__}(status={self.status!r}, observations={c.total}, "
            f"mismatch={c.mismatch}, inconclusive={c.inconclusive})"
        )


class TensorComparison(TensorComparisonResult):
    """Two snapshots or two points compared."""

    @property
    def point(self) -> PointComparison:
        return self.points[0]

    def observation(self, name: str, invocation_index: int = 0) -> ObservationComparison:
        return self.point.observation(name, invocation_index)


class TensorRunComparison(TensorComparisonResult):
    """Two runs compared point by point."""

    def point(self, label: str) -> PointComparison:
        for p in self.points:
            side = p.reference or p.candidate
            if side is not None and side.label == label:
                return p
        raise KeyError(f"no compared point labelled {label!r}")


class TensorPointSeriesComparison(TensorComparisonResult):
    """A reference point against every point of a run: ``divergence`` says, per
    observation, at which point (and replay) it first stopped matching."""

    def __init__(self, native: _native.Comparison):
        super().__init__(native)
        series = self._data["series"] or {"first_divergence": None, "observations": []}
        self.first_divergence: SeriesPointRef | None = _series_ref(series["first_divergence"])
        self.divergence: tuple[SeriesDivergence, ...] = tuple(
            SeriesDivergence(
                name=d["name"],
                invocation_index=d["invocation_index"],
                status=d["status"],
                first_mismatch=_series_ref(d["first_mismatch"]),
                first_inconclusive=_series_ref(d["first_inconclusive"]),
                mismatched_points=d["mismatched_points"],
                max_abs_error=_float(d["max_abs_error"]),
            )
            for d in series["observations"]
        )

    def divergence_of(self, name: str, invocation_index: int = 0) -> SeriesDivergence:
        for d in self.divergence:
            if (d.name, d.invocation_index) == (name, invocation_index):
                return d
        raise KeyError(f"no observation ({name!r}, {invocation_index}) in this series")


class TensorRunGroupComparison(TensorComparisonResult):
    """Two run groups compared rank by rank; ``ranks`` holds each rank's points."""

    def rank(self, rank: int) -> RankComparison:
        for r in self.ranks:
            if r.rank == rank:
                return r
        raise KeyError(f"no rank {rank} in this comparison")


# ---------------------------------------------------------------------- inputs
Observed = TensorPoint | TensorProbeSnapshot


def _observation_args(o: TensorObservation) -> dict[str, Any]:
    s = o.summary
    site = o.site
    return {
        "order": o.order,
        "name": o.name,
        "invocation_index": o.invocation_index,
        "dtype": dtype_name(o.dtype),
        "shape": list(o.shape),
        "stride": list(o.stride),
        "source_device": o.source_device,
        "payload": o.payload,
        "digest": o.digest,
        "summary": (
            s.numel,
            s.finite,
            s.nan,
            s.posinf,
            s.neginf,
            s.zero,
            s.min,
            s.max,
            s.mean,
            s.std,
            s.l2,
        ),
        "site_id": site.site_id if site else None,
        "graph_kind": site.graph_kind if site else None,
        "node_name": site.node_name if site else None,
        "aten_op": site.aten_op if site else None,
        "module_path": site.module_path if site else None,
        "source_location": site.source_location if site else None,
        "compile_id": site.compile_id if site else None,
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
        subject = {
            "kind": "snapshot",
            "name": observed.probe_name,
            "detail": f"snapshot {observed.snapshot_index}, replay {observed.replay_index}",
        }
        point = {
            "label": None,
            "index": None,
            "replay_index": observed.replay_index,
            "snapshot_index": observed.snapshot_index,
            "timestamp": observed.timestamp.isoformat(),
        }
        private = True
    elif isinstance(observed, TensorPoint):
        detail = f"point {observed.index}"
        if observed.replay_index is not None:
            detail += f", replay {observed.replay_index}"
        subject = {"kind": "point", "name": observed.label, "detail": detail}
        point = {
            "label": observed.label,
            "index": observed.index,
            "replay_index": observed.replay_index,
            "snapshot_index": None,
            "timestamp": observed.timestamp.isoformat() if observed.timestamp else None,
        }
        private = False
    else:
        raise InvalidInputError(
            f"{what} must be a TensorPoint or a TensorProbeSnapshot, got {type(observed).__name__}"
        )
    for key in ("path", "run_id", "rank", "world_size", "complete", "points"):
        subject.setdefault(key, None)
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
    if isinstance(run, TensorRun):
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


# ------------------------------------------------------------------------ functions
def compare_snapshots(
    ref: TensorProbeSnapshot,
    cand: TensorProbeSnapshot,
    *,
    options: TensorComparisonOptions | None = None,
    progress: ProgressCallback | None = None,
) -> TensorComparison:
    """Compares two probe snapshots observation by observation."""
    for what, s in (("ref", ref), ("cand", cand)):
        if not isinstance(s, TensorProbeSnapshot):
            raise InvalidInputError(f"{what} must be a TensorProbeSnapshot, got {type(s).__name__}")
    native = _native.compare_sets(
        "snapshots", _set_args(ref, "ref"), _set_args(cand, "cand"), _options(options), progress
    )
    return TensorComparison(native)


def compare_points(
    ref: TensorPoint,
    cand: TensorPoint,
    *,
    options: TensorComparisonOptions | None = None,
    progress: ProgressCallback | None = None,
) -> TensorComparison:
    """Compares two points (of one run or of two runs) observation by observation."""
    for what, p in (("ref", ref), ("cand", cand)):
        if not isinstance(p, TensorPoint):
            raise InvalidInputError(f"{what} must be a TensorPoint, got {type(p).__name__}")
    native = _native.compare_sets(
        "points", _set_args(ref, "ref"), _set_args(cand, "cand"), _options(options), progress
    )
    return TensorComparison(native)


def compare_runs(
    ref: RunLike,
    cand: RunLike,
    *,
    point_mapping: PointMapping = None,
    options: TensorComparisonOptions | None = None,
    progress: ProgressCallback | None = None,
) -> TensorRunComparison:
    """Compares two runs point by point; the engine reads payloads from the job roots.

    ``point_mapping``: ``None`` or ``"label"`` pairs points with equal labels (one-sided
    labels are reported); ``"index"`` pairs them by position; a mapping (or pairs) of
    reference to candidate labels or indices compares exactly those points."""
    native = _native.compare_runs(
        _run_path(ref, "ref"),
        _run_path(cand, "cand"),
        _options(options),
        _mapping(point_mapping),
        progress,
    )
    return TensorRunComparison(native)


def compare_point_series(
    ref_point: Observed,
    run: RunLike,
    *,
    options: TensorComparisonOptions | None = None,
    progress: ProgressCallback | None = None,
) -> TensorPointSeriesComparison:
    """Compares one reference point (or snapshot) against every point of ``run`` in order:
    drift across replays, and for each observation the first point at which it diverged."""
    native = _native.compare_point_series(
        _set_args(ref_point, "ref_point"), _run_path(run, "run"), _options(options), progress
    )
    return TensorPointSeriesComparison(native)


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
    from torch_cudagraph_debug.tensor_debug.group import TensorRunGroup

    def side(group: Any, what: str) -> tuple[str | None, str | None, list[Any]]:
        if isinstance(group, TensorRunGroup):
            return group._native_args()
        if isinstance(group, str | os.PathLike):
            return os.fspath(group), None, []
        raise InvalidInputError(
            f"{what} must be a TensorRunGroup or a job directory, got {type(group).__name__}"
        )

    native = _native.compare_run_groups(
        side(ref_group, "ref_group"),
        side(cand_group, "cand_group"),
        _options(options),
        _mapping(point_mapping),
        progress,
    )
    return TensorRunGroupComparison(native)
