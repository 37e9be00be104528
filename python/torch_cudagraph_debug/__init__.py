"""torch-cudagraph-debug: a debugger for PyTorch CUDA Graphs.

- :mod:`torch_cudagraph_debug.tensor_debug`: record intermediate tensors, compare runs.
- Runs are Arrow/Parquet directories (see ``docs/storage.md``), readable without this
  package by DuckDB, pandas or polars.
"""

from __future__ import annotations

from torch_cudagraph_debug import errors
from torch_cudagraph_debug._native import FORMAT_VERSION, __version__

__all__ = ["FORMAT_VERSION", "__version__", "errors"]
