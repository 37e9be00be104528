"""TensorBoard export of recorded values: summary statistics as scalars, and (on request)
value histograms, one step per point or snapshot.

Two entry points share one writer loop: ``export_to_tensorboard`` (a run, a point or
snapshots, into a log directory it opens) and the reference design's
``export_snapshots_to_tensorboard`` (snapshots, into a writer the caller owns)."""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from torch_cudagraph_debug.errors import InvalidInputError, MissingDependencyError
from torch_cudagraph_debug.tensor_debug.run import TensorObservation, TensorPoint, TensorRun
from torch_cudagraph_debug.tensor_debug.snapshot import TensorProbeSnapshot

Source = TensorRun | TensorPoint | TensorProbeSnapshot | Iterable[TensorProbeSnapshot]

# The TensorValueSummary fields written as scalars, each under its own name; None values
# (no finite element) are skipped. export_to_tensorboard writes these:
SCALAR_FIELDS = (
    "mean",
    "std",
    "min",
    "max",
    "l2_norm",
    "nan_count",
    "pos_inf_count",
    "neg_inf_count",
    "zero_count",
    "finite_count",
)
# and export_snapshots_to_tensorboard these:
SNAPSHOT_SCALARS = ("numel", "mean", "std", "min", "max", "l2_norm")


@dataclass(frozen=True)
class _Entry:
    """One step's worth of values: a point or a snapshot."""

    step: int
    wall_time: float | None
    observations: tuple[TensorObservation, ...]


def _writer(log_dir: str) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:
        raise MissingDependencyError(
            f"TensorBoard export needs the tensorboard package: pip install tensorboard ({e})"
        ) from None
    return SummaryWriter(log_dir=log_dir)


def _histogram_values(observation: TensorObservation) -> torch.Tensor | None:
    """Finite values as float64 (complex by magnitude), or None when there are none."""
    value = observation.tensor().reshape(-1)
    if value.is_complex():
        value = value.abs()
    value = value.to(torch.float64)
    value = value[torch.isfinite(value)]
    return value if value.numel() else None


def _steps(source: Source) -> list[_Entry]:
    """One entry per point or snapshot."""
    if isinstance(source, TensorRun):
        return [_Entry(p.index, p.timestamp.timestamp(), p.observations) for p in source.points]
    if isinstance(source, TensorPoint):
        return [_Entry(source.index, source.timestamp.timestamp(), source.observations)]
    if isinstance(source, TensorProbeSnapshot):
        source = [source]
    if isinstance(source, Iterable) and not isinstance(source, str | bytes):
        return _snapshot_entries(
            source,
            lambda snapshot: snapshot.replay_index,
            "export_to_tensorboard takes a TensorRun, a TensorPoint, or snapshots; got a "
            "sequence holding",
        )
    raise InvalidInputError(
        "export_to_tensorboard takes a TensorRun, a TensorPoint, or snapshots; got "
        f"{type(source).__name__}"
    )


def _snapshot_entries(
    snapshots: Iterable[object], step: Callable[[TensorProbeSnapshot], int], refusal: str
) -> list[_Entry]:
    """One entry per snapshot, at ``step(snapshot)``; anything else in ``snapshots`` is
    refused with ``refusal`` followed by its type."""
    entries = []
    for snapshot in snapshots:
        if not isinstance(snapshot, TensorProbeSnapshot):
            raise InvalidInputError(f"{refusal} {type(snapshot).__name__}")
        entries.append(_Entry(step(snapshot), float(snapshot.timestamp), snapshot.observations))
    return entries


def export_to_tensorboard(
    source: Source,
    log_dir: str | os.PathLike[str],
    *,
    histograms: bool = False,
    tag_prefix: str = "",
) -> str:
    """Writes TensorBoard event files into ``log_dir`` and returns its path.

    Scalars: for every observation ``name[invocation]`` and summary field (``mean``,
    ``std``, ``min``, ``max``, ``l2_norm`` and the element counts ``nan_count``,
    ``pos_inf_count``, ``neg_inf_count``, ``zero_count``, ``finite_count``), tag
    ``{tag_prefix}{name}[{invocation}]/{field}``.
    The step is the point index for runs and points, the replay index for snapshots; the
    wall time is the point's (snapshot's) timestamp. With ``histograms=True`` the finite
    values of each full-payload observation are also written as a histogram, tag
    ``{tag_prefix}{name}[{invocation}]`` (summary-only observations have no values and are
    skipped with a warning)."""
    if not isinstance(histograms, bool):
        raise InvalidInputError(f"histograms must be a bool, got {histograms!r}")
    steps = _steps(source)
    path = os.fspath(log_dir)
    writer = _writer(path)
    try:
        skipped = _write(
            writer,
            steps,
            tag=lambda o, _: f"{tag_prefix}{o.name}[{o.invocation_index}]",
            scalars=SCALAR_FIELDS,
            histograms=histograms,
        )
        writer.flush()
    finally:
        writer.close()
    _warn_skipped(skipped)
    return path


def _write(
    writer: Any,
    entries: list[_Entry],
    *,
    tag: Callable[[TensorObservation, Counter[str]], str],
    scalars: tuple[str, ...],
    histograms: bool,
) -> set[str]:
    """Writes every entry's observations: scalars ``{tag}/{field}`` for each summary
    field of ``scalars`` whose value is not None, and with ``histograms`` the
    finite values under ``{tag}``. ``tag`` gets the observation and how many
    observations of each name the entry has. Returns the tags of summary-only
    observations that got no histogram."""
    skipped: set[str] = set()
    for entry in entries:
        per_name = Counter(o.name for o in entry.observations)
        for o in entry.observations:
            base = tag(o, per_name)
            for field in scalars:
                value = getattr(o.summary, field)
                if value is not None:
                    writer.add_scalar(
                        f"{base}/{field}", float(value), entry.step, walltime=entry.wall_time
                    )
            if not histograms:
                continue
            if o.payload != "full":
                skipped.add(base)
                continue
            values = _histogram_values(o)
            if values is not None:
                writer.add_histogram(base, values, entry.step, walltime=entry.wall_time)
    return skipped


def _warn_skipped(skipped: set[str]) -> None:
    if skipped:
        warnings.warn(
            f"no histogram for summary-only observations: {sorted(skipped)}", stacklevel=3
        )


def export_snapshots_to_tensorboard(
    writer: Any,
    snapshots: Iterable[TensorProbeSnapshot] | TensorProbeSnapshot,
    *,
    tag_prefix: str = "",
    step: int | Callable[[TensorProbeSnapshot], int] | None = None,
    write_scalars: bool = True,
    write_histograms: bool = False,
) -> None:
    """Writes probe snapshots through ``writer``, any object with TensorBoard's
    ``add_scalar`` / ``add_histogram`` (a ``SummaryWriter``, say). Nothing is imported,
    flushed or closed here: the writer, and waiting for the replay before taking the
    snapshot, are the caller's.

    Every observation of every snapshot is written under ``{tag_prefix}{name}``; a name
    observed more than once in a snapshot gets ``/invocation_{i}`` appended for each of
    its invocations. Scalars (``write_scalars``): ``numel``, ``mean``, ``std``, ``min``,
    ``max`` and ``l2_norm`` (statistics of the finite values; one with no finite value
    is left out), tag ``{base}/{scalar}``. Histograms (``write_histograms``): the finite
    values, tag ``{base}``. The step is ``snapshot.replay_index`` unless ``step`` is an
    integer (every snapshot at that step) or a function of the snapshot; the wall time
    is the snapshot's ``timestamp``."""
    if isinstance(snapshots, TensorProbeSnapshot):
        snapshots = [snapshots]
    if isinstance(snapshots, str | bytes) or not isinstance(snapshots, Iterable):
        raise InvalidInputError(
            "export_snapshots_to_tensorboard takes an iterable of TensorProbeSnapshot, got "
            f"{type(snapshots).__name__}"
        )
    if not isinstance(tag_prefix, str):
        raise InvalidInputError(f"tag_prefix must be a string, got {tag_prefix!r}")
    for what, flag in (("write_scalars", write_scalars), ("write_histograms", write_histograms)):
        if not isinstance(flag, bool):
            raise InvalidInputError(f"{what} must be a bool, got {flag!r}")
    fixed_step = isinstance(step, int) and not isinstance(step, bool)
    if step is not None and not callable(step) and not fixed_step:
        raise InvalidInputError(
            f"step must be None, an integer or a function of the snapshot, got {step!r}"
        )
    entries = _snapshot_entries(
        snapshots,
        lambda snapshot: _snapshot_step(snapshot, step),
        "export_snapshots_to_tensorboard takes TensorProbeSnapshot objects, got",
    )

    def tag(o: TensorObservation, per_name: Counter[str]) -> str:
        base = f"{tag_prefix}{o.name}"
        return f"{base}/invocation_{o.invocation_index}" if per_name[o.name] > 1 else base

    skipped = _write(
        writer,
        entries,
        tag=tag,
        scalars=SNAPSHOT_SCALARS if write_scalars else (),
        histograms=write_histograms,
    )
    _warn_skipped(skipped)


def _snapshot_step(
    snapshot: TensorProbeSnapshot, step: int | Callable[[TensorProbeSnapshot], int] | None
) -> int:
    if step is None:
        return snapshot.replay_index
    if not callable(step):
        return step
    at = step(snapshot)
    if isinstance(at, bool) or not isinstance(at, int):
        raise InvalidInputError(
            f"the step function returned {at!r} for snapshot {snapshot.snapshot_index}; it "
            "must return an integer"
        )
    return at
