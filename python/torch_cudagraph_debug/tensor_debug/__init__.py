"""Tensor debug: record intermediate tensors and compare executions.

Names and semantics follow the reference design's public API (see ``docs/tensor-debug.md``).
"""

from __future__ import annotations

from torch_cudagraph_debug.tensor_debug.probe import (
    CheckAction,
    CheckFailure,
    CheckStatus,
    PrintAction,
    RecordAction,
    TensorProbe,
    TensorProbeSnapshot,
)
from torch_cudagraph_debug.tensor_debug.recorder import TensorRecorder
from torch_cudagraph_debug.tensor_debug.run import (
    TensorObservation,
    TensorPoint,
    TensorRun,
    TensorSite,
    TensorSummary,
)

__all__ = [
    "CheckAction",
    "CheckFailure",
    "CheckStatus",
    "PrintAction",
    "RecordAction",
    "TensorObservation",
    "TensorPoint",
    "TensorProbe",
    "TensorProbeSnapshot",
    "TensorRecorder",
    "TensorRun",
    "TensorSite",
    "TensorSummary",
]
