"""Tensor debug: record intermediate tensors and compare executions.

Names and semantics follow the reference design's public API (see ``docs/tensor-debug.md``).
"""

from __future__ import annotations

from torch_cudagraph_debug._native import AnomalySite, FirstAnomaly
from torch_cudagraph_debug.errors import (
    TensorBundleError,
    TensorCheckError,
    TensorComparisonError,
    TensorDebugError,
    TensorOwnershipError,
    TensorPayloadUnavailableError,
)
from torch_cudagraph_debug.tensor_debug.actions import (
    CheckAction,
    PrintAction,
    RecordAction,
    TensorExpected,
    TensorExpectedValue,
)
from torch_cudagraph_debug.tensor_debug.compare import (
    ComparisonCounts,
    ComparisonIssue,
    ComparisonMetrics,
    FirstMismatch,
    ObservationComparison,
    ObservationSide,
    PointComparison,
    PointInfo,
    RankComparison,
    SeriesDivergence,
    SeriesPointRef,
    TensorComparison,
    TensorComparisonOptions,
    TensorComparisonResult,
    TensorPointSeriesComparison,
    TensorRunComparison,
    TensorRunGroupComparison,
    compare_point_series,
    compare_points,
    compare_run_groups,
    compare_runs,
    compare_snapshots,
)
from torch_cudagraph_debug.tensor_debug.group import TensorRunGroup, TensorRunGroupMember
from torch_cudagraph_debug.tensor_debug.probe import TensorProbe
from torch_cudagraph_debug.tensor_debug.recorder import TensorRecorder
from torch_cudagraph_debug.tensor_debug.run import (
    AnomalyKind,
    TensorObservation,
    TensorObservationKey,
    TensorPoint,
    TensorRun,
    TensorSite,
    TensorSummary,
)
from torch_cudagraph_debug.tensor_debug.snapshot import (
    CheckFailure,
    CheckStatus,
    TensorCheckStatus,
    TensorProbeSnapshot,
)
from torch_cudagraph_debug.tensor_debug.tensorboard import (
    export_snapshots_to_tensorboard,
    export_to_tensorboard,
)

__all__ = [
    "AnomalyKind",
    "AnomalySite",
    "CheckAction",
    "CheckFailure",
    "CheckStatus",
    "ComparisonCounts",
    "ComparisonIssue",
    "ComparisonMetrics",
    "FirstAnomaly",
    "FirstMismatch",
    "ObservationComparison",
    "ObservationSide",
    "PointComparison",
    "PointInfo",
    "PrintAction",
    "RankComparison",
    "RecordAction",
    "SeriesDivergence",
    "SeriesPointRef",
    "TensorBundleError",
    "TensorCheckError",
    "TensorCheckStatus",
    "TensorComparison",
    "TensorComparisonError",
    "TensorComparisonOptions",
    "TensorComparisonResult",
    "TensorDebugError",
    "TensorExpected",
    "TensorExpectedValue",
    "TensorObservation",
    "TensorObservationKey",
    "TensorOwnershipError",
    "TensorPayloadUnavailableError",
    "TensorPoint",
    "TensorPointSeriesComparison",
    "TensorProbe",
    "TensorProbeSnapshot",
    "TensorRecorder",
    "TensorRun",
    "TensorRunComparison",
    "TensorRunGroup",
    "TensorRunGroupComparison",
    "TensorRunGroupMember",
    "TensorSite",
    "TensorSummary",
    "compare_point_series",
    "compare_points",
    "compare_run_groups",
    "compare_runs",
    "compare_snapshots",
    "export_snapshots_to_tensorboard",
    "export_to_tensorboard",
]
