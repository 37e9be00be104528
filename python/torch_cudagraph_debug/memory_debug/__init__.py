"""Memory debug: allocator states (every pool, graph-private pools included), recorded,
decomposed and compared. See ``docs/memory-debug.md``.

- ``MemoryProbe`` takes snapshots for a local question; ``MemoryRecorder`` records a run
  of named points into Parquet; ``import_snapshots`` turns existing
  ``torch.cuda.memory._dump_snapshot`` files into a run.
- ``compare_snapshots`` / ``compare_points`` / ``compare_phases`` and ``run.timeline()``
  explain where memory went, as text, JSON, CSV or HTML reports.
"""

from __future__ import annotations

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
    DeviceMemory,
    MemoryDebugWarning,
    MemoryObservation,
    MemoryPoolKey,
    MemoryStats,
)
from torch_cudagraph_debug.memory_debug.attribution import (
    AllocationStackCoverage,
    AllocationStackDelta,
    AllocationStackSummary,
    AllocatorEventSummary,
    MemoryAttributionStatus,
    MemoryEvidenceStatus,
)
from torch_cudagraph_debug.memory_debug.compare import (
    MemoryAttributionOptions,
    MemoryComparison,
    MemoryDisplayOptions,
    MemoryPhaseComparison,
    MemoryStateReport,
    MemoryTimeline,
    compare_phases,
    compare_points,
    compare_snapshots,
)
from torch_cudagraph_debug.memory_debug.probe import MemoryProbe, MemoryProbeSnapshot
from torch_cudagraph_debug.memory_debug.recorder import MemoryRecorder, import_snapshots
from torch_cudagraph_debug.memory_debug.run import MemoryPhaseRange, MemoryPoint, MemoryRun

__all__ = [
    "DEFAULT_POOL",
    "AllocationStackCoverage",
    "AllocationStackDelta",
    "AllocationStackSummary",
    "AllocatorEventSummary",
    "DeviceMemory",
    "MemoryAttributionOptions",
    "MemoryAttributionStatus",
    "MemoryBundleError",
    "MemoryComparison",
    "MemoryDebugError",
    "MemoryDebugWarning",
    "MemoryDisplayOptions",
    "MemoryEvidenceStatus",
    "MemoryHistoryBoundaryError",
    "MemoryHistoryDisabledError",
    "MemoryHistoryError",
    "MemoryHistoryTruncatedError",
    "MemoryObservation",
    "MemoryOwnershipError",
    "MemoryPhaseComparison",
    "MemoryPhaseRange",
    "MemoryPoint",
    "MemoryPoolKey",
    "MemoryProbe",
    "MemoryProbeSnapshot",
    "MemoryReconciliationError",
    "MemoryRecorder",
    "MemoryRun",
    "MemoryStateReport",
    "MemoryStats",
    "MemoryTimeline",
    "compare_phases",
    "compare_points",
    "compare_snapshots",
    "import_snapshots",
]
