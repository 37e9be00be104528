"""Work on snapshots after they were taken: the reference design's home of the TensorBoard
exporter (implemented in ``tensor_debug.tensorboard``)."""

from __future__ import annotations

from torch_cudagraph_debug.tensor_debug.tensorboard import export_snapshots_to_tensorboard

__all__ = ["export_snapshots_to_tensorboard"]
