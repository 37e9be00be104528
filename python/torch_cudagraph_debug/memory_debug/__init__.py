"""Memory debug: allocator states (every pool, graph-private pools included), recorded,
decomposed and compared. See ``docs/memory-debug.md``.

- ``MemoryProbe`` takes snapshots for a local question; ``MemoryRecorder`` records a run
  of named points into Parquet; ``import_snapshots`` turns existing
  ``torch.cuda.memory._dump_snapshot`` files into a run.
- ``compare_snapshots`` / ``compare_points`` / ``compare_phases`` and ``run.timeline()``
  explain where memory went, as text, JSON, CSV or HTML reports.

Deprecated names kept for existing code: ``MemoryComparison`` (the shared base of
``MemorySnapshotComparison`` and ``MemoryPointComparison``), ``MemoryPhaseRange``
(``MemoryRange``), ``DeviceMemory`` (``DeviceMemoryReading``), and the ``MemoryStats``
attributes without their ``_bytes`` suffix (``reserved`` ...), which warn.
"""

from __future__ import annotations

from torch_cudagraph_debug._native import (
    AllocationCohort,
    AllocationStackCoverage,
    AllocationStackDelta,
    AllocationStackSummary,
    AllocatorEventSummary,
    CohortBirth,
    CohortFreeCompletion,
    CohortFreeRequest,
    CohortPointState,
    CohortSizeBucket,
    CohortSizeOutcome,
    MemoryAttributionStatus,
    MemoryEvidenceStatus,
    MemoryMetricExtrema,
    MemoryRankDevicePhaseDecomposition,
    MemoryRankDevicePointState,
    MemoryRankPhaseDecomposition,
    MemoryRankPointAggregate,
    MemoryRankPointState,
    MemoryRankPoolPhaseDecomposition,
    MemoryRunGroupPhaseAggregate,
    MemoryRunGroupPhaseComparison,
    MemoryRunGroupSummary,
)
from torch_cudagraph_debug.errors import (
    MemoryBundleError,
    MemoryDebugError,
    MemoryHistoryBoundaryError,
    MemoryHistoryDisabledError,
    MemoryHistoryError,
    MemoryHistoryTruncatedError,
    MemoryOwnershipError,
    MemoryReconciliationError,
)
from torch_cudagraph_debug.memory_debug._model import (
    DEFAULT_POOL,
    AllocatorScope,
    DeviceMatchKind,
    DeviceMemory,
    DeviceMemoryMetric,
    DeviceMemoryReading,
    DeviceMemorySample,
    MatchKind,
    MemoryDebugWarning,
    MemoryObservation,
    MemoryObservationKey,
    MemoryPoolKey,
    MemoryStatMetric,
    MemoryStats,
    MemoryStatsDelta,
    PhaseMetric,
    PoolId,
    StreamId,
)
from torch_cudagraph_debug.memory_debug._owners import name_pool
from torch_cudagraph_debug.memory_debug._rendered import MemoryStateReport
from torch_cudagraph_debug.memory_debug.compare import (
    MemoryAllocatorScopeComparison,
    MemoryComparison,
    MemoryDeviceComparison,
    MemoryLifecycleDelta,
    MemoryObservationComparison,
    MemoryPointComparison,
    MemoryPoolComparison,
    MemorySnapshotComparison,
    compare_points,
    compare_snapshots,
)
from torch_cudagraph_debug.memory_debug.group import (
    MemoryRunGroup,
    compare_run_group_phases,
)
from torch_cudagraph_debug.memory_debug.lifetimes import (
    MemoryAllocationLifetimeAnalysis,
    MemoryLifetimeOptions,
    MemoryLifetimeSelection,
)
from torch_cudagraph_debug.memory_debug.options import (
    MemoryAttributionOptions,
    MemoryDisplayOptions,
)
from torch_cudagraph_debug.memory_debug.phases import (
    MemoryAllocatorScopePhaseDecomposition,
    MemoryDevicePhaseDecomposition,
    MemoryPhaseComparison,
    MemoryPhaseComponents,
    MemoryPoolPhaseDecomposition,
    compare_phases,
)
from torch_cudagraph_debug.memory_debug.probe import MemoryProbe, MemoryProbeSnapshot
from torch_cudagraph_debug.memory_debug.recorder import MemoryRecorder, import_snapshots
from torch_cudagraph_debug.memory_debug.run import (
    MemoryPhaseRange,
    MemoryPoint,
    MemoryRange,
    MemoryRun,
)
from torch_cudagraph_debug.memory_debug.timeline import (
    MemoryAllocatorScopeTimelineEntry,
    MemoryDeviceTimelineEntry,
    MemoryObservationTimelineEntry,
    MemoryPoolTimelineEntry,
    MemoryTimeline,
)

__all__ = [
    "DEFAULT_POOL",
    "AllocationCohort",
    "AllocationStackCoverage",
    "AllocationStackDelta",
    "AllocationStackSummary",
    "AllocatorEventSummary",
    "AllocatorScope",
    "CohortBirth",
    "CohortFreeCompletion",
    "CohortFreeRequest",
    "CohortPointState",
    "CohortSizeBucket",
    "CohortSizeOutcome",
    "DeviceMatchKind",
    "DeviceMemory",
    "DeviceMemoryMetric",
    "DeviceMemoryReading",
    "DeviceMemorySample",
    "MatchKind",
    "MemoryAllocationLifetimeAnalysis",
    "MemoryAllocatorScopeComparison",
    "MemoryAllocatorScopePhaseDecomposition",
    "MemoryAllocatorScopeTimelineEntry",
    "MemoryAttributionOptions",
    "MemoryAttributionStatus",
    "MemoryBundleError",
    "MemoryComparison",
    "MemoryDebugError",
    "MemoryDebugWarning",
    "MemoryDeviceComparison",
    "MemoryDevicePhaseDecomposition",
    "MemoryDeviceTimelineEntry",
    "MemoryDisplayOptions",
    "MemoryEvidenceStatus",
    "MemoryHistoryBoundaryError",
    "MemoryHistoryDisabledError",
    "MemoryHistoryError",
    "MemoryHistoryTruncatedError",
    "MemoryLifecycleDelta",
    "MemoryLifetimeOptions",
    "MemoryLifetimeSelection",
    "MemoryMetricExtrema",
    "MemoryObservation",
    "MemoryObservationComparison",
    "MemoryObservationKey",
    "MemoryObservationTimelineEntry",
    "MemoryOwnershipError",
    "MemoryPhaseComparison",
    "MemoryPhaseComponents",
    "MemoryPhaseRange",
    "MemoryPoint",
    "MemoryPointComparison",
    "MemoryPoolComparison",
    "MemoryPoolKey",
    "MemoryPoolPhaseDecomposition",
    "MemoryPoolTimelineEntry",
    "MemoryProbe",
    "MemoryProbeSnapshot",
    "MemoryRange",
    "MemoryRankDevicePhaseDecomposition",
    "MemoryRankDevicePointState",
    "MemoryRankPhaseDecomposition",
    "MemoryRankPointAggregate",
    "MemoryRankPointState",
    "MemoryRankPoolPhaseDecomposition",
    "MemoryReconciliationError",
    "MemoryRecorder",
    "MemoryRun",
    "MemoryRunGroup",
    "MemoryRunGroupPhaseAggregate",
    "MemoryRunGroupPhaseComparison",
    "MemoryRunGroupSummary",
    "MemorySnapshotComparison",
    "MemoryStatMetric",
    "MemoryStateReport",
    "MemoryStats",
    "MemoryStatsDelta",
    "MemoryTimeline",
    "PhaseMetric",
    "PoolId",
    "StreamId",
    "compare_phases",
    "compare_points",
    "compare_run_group_phases",
    "compare_snapshots",
    "import_snapshots",
    "name_pool",
]
