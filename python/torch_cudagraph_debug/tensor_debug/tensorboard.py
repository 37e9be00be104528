"""TensorBoard export of recorded values: summary statistics as scalars, and (on request)
value histograms, one step per point or snapshot."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from typing import Any

import torch

from torch_cudagraph_debug.errors import InvalidInputError, MissingDependencyError
from torch_cudagraph_debug.tensor_debug.probe import TensorProbeSnapshot
from torch_cudagraph_debug.tensor_debug.run import TensorObservation, TensorPoint, TensorRun

Source = TensorRun | TensorPoint | TensorProbeSnapshot | Iterable[TensorProbeSnapshot]

# Summary fields written as scalars; None values (no finite element) are skipped.
SCALAR_FIELDS = ("mean", "std", "min", "max", "l2", "nan", "posinf", "neginf", "zero", "finite")


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


def _steps(source: Source) -> list[tuple[int, float | None, tuple[TensorObservation, ...]]]:
    """(step, wall time, observations) per point or snapshot."""
    if isinstance(source, TensorRun):
        return [(p.index, p.timestamp.timestamp(), p.observations) for p in source.points]
    if isinstance(source, TensorPoint):
        return [(source.index, source.timestamp.timestamp(), source.observations)]
    if isinstance(source, TensorProbeSnapshot):
        source = [source]
    if isinstance(source, Iterable) and not isinstance(source, str | bytes):
        steps = []
        for snapshot in source:
            if not isinstance(snapshot, TensorProbeSnapshot):
                raise InvalidInputError(
                    "export_to_tensorboard takes a TensorRun, a TensorPoint, or snapshots; "
                    f"got a sequence holding {type(snapshot).__name__}"
                )
            steps.append(
                (snapshot.replay_index, snapshot.timestamp.timestamp(), snapshot.observations)
            )
        return steps
    raise InvalidInputError(
        "export_to_tensorboard takes a TensorRun, a TensorPoint, or snapshots; got "
        f"{type(source).__name__}"
    )


def export_to_tensorboard(
    source: Source,
    log_dir: str | os.PathLike[str],
    *,
    histograms: bool = False,
    tag_prefix: str = "",
) -> str:
    """Writes TensorBoard event files into ``log_dir`` and returns its path.

    Scalars: for every observation ``name[invocation]`` and summary field (``mean``,
    ``std``, ``min``, ``max``, ``l2`` and the element counts ``nan``, ``posinf``,
    ``neginf``, ``zero``, ``finite``), tag ``{tag_prefix}{name}[{invocation}]/{field}``.
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
    skipped: set[str] = set()
    try:
        for step, wall_time, observations in steps:
            for o in observations:
                tag = f"{tag_prefix}{o.name}[{o.invocation_index}]"
                for field in SCALAR_FIELDS:
                    value = getattr(o.summary, field)
                    if value is not None:
                        writer.add_scalar(f"{tag}/{field}", float(value), step, walltime=wall_time)
                if not histograms:
                    continue
                if o.payload != "full":
                    skipped.add(tag)
                    continue
                values = _histogram_values(o)
                if values is not None:
                    writer.add_histogram(tag, values, step, walltime=wall_time)
        writer.flush()
    finally:
        writer.close()
    if skipped:
        warnings.warn(
            f"no histogram for summary-only observations: {sorted(skipped)}", stacklevel=2
        )
    return path
