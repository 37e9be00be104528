"""torch-cudagraph-debug: a debugger for PyTorch CUDA Graphs.

- :mod:`torch_cudagraph_debug.tensor_debug`: record intermediate tensors, compare runs.
- Runs are Arrow/Parquet directories (see ``docs/storage.md``), readable without this
  package by DuckDB, pandas or polars.
"""

from __future__ import annotations

import os

from torch_cudagraph_debug import errors
from torch_cudagraph_debug._json_types import FrozenJSONValue, JSONScalar, JSONValue

try:
    from torch_cudagraph_debug._native import FORMAT_VERSION, __version__, check_error_classes
except ImportError as _error:
    # Every part of the package runs on the compiled core; say so in the package's own
    # terms instead of a bare loader error.
    raise errors.NativeExtensionUnavailableError(
        "the compiled core torch_cudagraph_debug._native cannot be loaded "
        f"({_error}); install a wheel built for this platform and Python, or build the "
        "package from source (maturin develop)"
    ) from _error

# The core raises the errors module's classes: a broken install fails here, naming a
# missing one, instead of when the first error is raised.
check_error_classes()
CudaGraphDebugError = errors.CudaGraphDebugError
NativeExtensionUnavailableError = errors.NativeExtensionUnavailableError


def set_log_retention(root: str | os.PathLike[str], retention: str) -> int:
    """Sets how long the Delta log files of the job root ``root`` are kept once a newer
    checkpoint covers them: the ``delta.logRetentionDuration`` property of every table, a
    Delta interval such as ``"interval 1 day"`` (tables created later take the same).
    Recorders' ``finish()`` and ``tcgd compact`` remove the expired ones (see "Log
    cleanup" in ``docs/storage.md``). Returns how many tables changed."""
    from torch_cudagraph_debug import _native

    return _native.set_log_retention(os.fspath(root), retention)


__all__ = [
    "FORMAT_VERSION",
    "CudaGraphDebugError",
    "FrozenJSONValue",
    "JSONScalar",
    "JSONValue",
    "NativeExtensionUnavailableError",
    "__version__",
    "errors",
    "set_log_retention",
]
