"""Typed exceptions of torch-cudagraph-debug.

Every error the package raises derives from :class:`TcgdError`, and also from the builtin
exception a user would already catch for that kind of problem (``ValueError`` for bad
arguments, ``TypeError`` for a dtype, ``FileNotFoundError`` for a missing run, ...). The
native core raises these same classes.

The reference design's names fit into this hierarchy as bases, so an ``except`` written
for them catches what the reference says it catches: ``CudaGraphDebugError`` is
``TcgdError``; ``TensorDebugError`` is the base of the tensor domain's errors, with
``TensorCheckError``, ``TensorComparisonError``, ``TensorBundleError``,
``TensorOwnershipError`` and ``TensorPayloadUnavailableError`` under it;
``MemoryDebugError`` is the memory domain's, with ``MemoryBundleError``,
``MemoryOwnershipError``, ``MemoryHistoryError`` (``MemoryHistoryDisabledError``,
``MemoryHistoryBoundaryError``, ``MemoryHistoryTruncatedError``) and
``MemoryReconciliationError`` under it. A run on disk is a "bundle" of either domain, so
the storage errors derive from both bundle errors.
"""

from __future__ import annotations


class TcgdError(Exception):
    """Base class of every error raised by torch-cudagraph-debug."""


#: The reference design's name for the package-wide base class.
CudaGraphDebugError = TcgdError


class NativeExtensionUnavailableError(TcgdError, ImportError):
    """The compiled core (``torch_cudagraph_debug._native``) cannot be loaded: a wheel
    built for another platform or Python, or a source checkout that was never built. The
    message carries the loader's own error."""


class TensorDebugError(TcgdError):
    """Base class of the tensor domain's errors (probes, recorders, tensor runs and their
    comparison)."""


class MemoryDebugError(TcgdError):
    """Base class of the memory domain's errors (memory probes, recorders, runs and their
    analyses)."""


class MemoryBundleError(MemoryDebugError):
    """A memory run that is malformed, of an unsupported format, or unreadable."""


class MemoryHistoryError(MemoryDebugError, LookupError):
    """An analysis needs allocator history (``torch.cuda.memory._record_memory_history``)
    for an interval, and the history there is missing or incomplete. The application owns
    the history setting; this package never turns it on or off."""


class MemoryHistoryDisabledError(MemoryHistoryError):
    """No history on a device the analysis covers: recording was off, or the live blocks
    carry no stack frames."""


class MemoryHistoryBoundaryError(MemoryHistoryError):
    """A point's boundary marker could not be recorded (no allocator metadata API), so the
    history cannot be cut into that point's window."""


class MemoryHistoryTruncatedError(MemoryHistoryError):
    """The start marker of a window is not in the history: the ring overwrote it, or
    recording began after the window started (the two cannot always be told apart)."""


class MemoryReconciliationError(MemoryDebugError, RuntimeError):
    """Complete history contradicts the allocator state, or boundaries are out of order:
    overlapping collection, allocator activity between marker and snapshot, damaged
    input, or a defect here. The message summarises the contradictions by reason and
    device, with example addresses."""


class TensorBundleError(TensorDebugError):
    """A tensor run on disk that is malformed, of an unsupported format, or unreadable.
    The storage errors that describe such a run (``CorruptRunError``,
    ``UnsupportedFormatError``, ``StorageIOError``, ``RunNotFoundError``) derive from
    it."""


class TensorPayloadUnavailableError(TensorDebugError, LookupError):
    """Values asked of an observation that holds none (it was recorded as a summary)."""


class TensorComparisonError(TensorDebugError, AssertionError):
    """An offline comparison asserted to match that did not (``assert_ok()``)."""


class TcgdInternalError(TcgdError, RuntimeError):
    """A bug in the native core (a caught panic). Please report it with the message."""


class InvalidInputError(TcgdError, ValueError):
    """An argument or value that cannot be used as given; the message says which."""


class ScriptNotFoundError(InvalidInputError, FileNotFoundError):
    """A script or factory file given to ``tcgd explain`` / ``tcgd differential`` that does
    not exist; the message names the path."""


class UnsupportedDtypeError(TcgdError, TypeError):
    """A tensor dtype that cannot be recorded (quantized, packed sub-byte or bit types)."""


class NonContiguousTensorError(InvalidInputError, TensorDebugError):
    """A non-contiguous tensor was observed with ``non_contiguous="error"``."""


class RecorderStateError(TcgdError, RuntimeError):
    """A recorder or probe used out of order (after finish, nested points, ...)."""


class WrongDeviceError(InvalidInputError):
    """A tensor on another device than the probe or recorder is bound to."""


class ProbeClosedError(RecorderStateError, TensorDebugError):
    """A probe used after ``close()``."""


class SecondCaptureError(RecorderStateError, TensorDebugError):
    """A probe used in a second capture; a probe binds to one captured graph."""


class SynchronizeDuringCaptureError(RecorderStateError, TensorDebugError):
    """A snapshot or synchronising call while a CUDA graph capture is under way."""


class TensorOwnershipError(InvalidInputError, TensorDebugError):
    """A point or snapshot given to a run or probe that did not produce it (a point of
    another run to ``TensorRun.point``, a snapshot of another probe to
    ``TensorProbe.compare``)."""


class GradientNotTrackedError(InvalidInputError, TensorDebugError, RuntimeError):
    """``watch_grad(..., strict=True)`` on a tensor that does not require grad: no
    gradient will ever reach it. It is also a ``RuntimeError``, as the reference design
    documents."""


class NoObservationsError(RecorderStateError, TensorDebugError):
    """A probe query with nothing to return: no ``RecordAction`` is enabled, or no slot
    has been filled yet (the probe was never called where it does work)."""


class CaptureInvalidatedError(TcgdError, RuntimeError):
    """The capture on the current stream was invalidated by an earlier error."""


class CudaUnavailableError(TcgdError, RuntimeError):
    """CUDA work was asked for on a machine or build without a usable CUDA driver."""


class CudaDriverError(TcgdError, RuntimeError):
    """A CUDA driver call failed; the message names the call and the error."""


class CheckFailedError(TensorDebugError, AssertionError):
    """A ``CheckAction`` saw a value outside its tolerance (``assert_check_ok``)."""


class TensorCheckError(CheckFailedError):
    """The reference design's name for what ``assert_check_ok()`` raises: the sticky
    check state of a probe holds a mismatch."""


class ConfigError(TcgdError, ValueError):
    """A probe config that cannot be used; the message names the file, line and key."""


class StorageError(TcgdError, OSError):
    """A problem with a job root (the runs stored in a directory) on disk."""


class StorageIOError(StorageError, TensorBundleError, MemoryBundleError):
    """The operating system refused a read or write; the message names the file."""


class RunNotFoundError(StorageError, TensorBundleError, MemoryBundleError, FileNotFoundError):
    """The path is not a job root (it has no ``runs`` table), or it holds no run matching
    the name and rank asked for; the message lists the runs it holds."""


class RunExistsError(StorageError, FileExistsError):
    """A new run was asked for under a name and rank that a run of the job root already has,
    or that another recorder is writing now."""


class CorruptRunError(StorageError, TensorBundleError, MemoryBundleError):
    """A damaged, truncated, missing or malformed file of a run; the message names it."""


class DigestMismatchError(CorruptRunError):
    """Payload bytes that do not match their content digest."""


class PayloadMissingError(CorruptRunError):
    """An observation refers to payload bytes that the run does not hold."""


class UnsupportedFormatError(StorageError, TensorBundleError, MemoryBundleError):
    """A table written by a newer version of the package (upgrade to read it), or a run of
    storage version 1 (a directory with a ``run.json``), which this version does not read."""


class UnsafePathError(CorruptRunError):
    """A table log that names a file outside its table, or a data file that is not a
    regular file (a symbolic link); it is refused unread."""


class PointNotFoundError(TcgdError, KeyError, IndexError):
    """A point asked of a run by a label it does not have or a position past its end. It is
    both a ``KeyError`` (labels) and an ``IndexError`` (positions), so code written for
    either keeps working; the message says how many points the run has and their labels."""

    def __str__(self) -> str:
        # KeyError would print the message quoted, as it prints a missing key.
        return Exception.__str__(self)


class PayloadUnavailableError(TensorPayloadUnavailableError):
    """The observation was recorded as a summary only; its values were never stored."""


class ComparisonFailedError(TensorComparisonError):
    """``assert_ok()`` on a comparison that did not match (mismatch or inconclusive)."""


class ReportExistsError(StorageError, FileExistsError):
    """A report directory that already holds files; pass ``overwrite=True`` to replace the
    report files (other files are kept)."""


class MissingDependencyError(TcgdError, ImportError):
    """An optional package a feature needs (tensorboard, duckdb) is not installed."""


class SnapshotFormatError(MemoryDebugError, ValueError):
    """An allocator snapshot (a ``torch.cuda.memory._snapshot()`` dict or a
    ``_dump_snapshot`` pickle) that lacks a required field, has one of the wrong type, or
    contradicts itself; the message names the field and the torch version."""


class UnsafePickleError(SnapshotFormatError):
    """A pickle that would execute code when loaded; it is refused unread."""


class CrossRunError(InvalidInputError, MemoryDebugError):
    """An analysis that only means something inside one run (events, lifetimes, phase
    ranges) was asked across independent runs."""


class MemoryOwnershipError(InvalidInputError, MemoryDebugError):
    """A memory point used with a run that did not record it (or a snapshot with a probe
    that did not take it)."""


class FeatureUnavailableError(TcgdError, NotImplementedError):
    """A part of the reference design's API that this release does not provide yet."""


__all__ = [
    "CaptureInvalidatedError",
    "CheckFailedError",
    "ComparisonFailedError",
    "ConfigError",
    "CorruptRunError",
    "CrossRunError",
    "CudaDriverError",
    "CudaGraphDebugError",
    "CudaUnavailableError",
    "DigestMismatchError",
    "FeatureUnavailableError",
    "GradientNotTrackedError",
    "InvalidInputError",
    "MemoryBundleError",
    "MemoryDebugError",
    "MemoryHistoryBoundaryError",
    "MemoryHistoryDisabledError",
    "MemoryHistoryError",
    "MemoryHistoryTruncatedError",
    "MemoryOwnershipError",
    "MemoryReconciliationError",
    "MissingDependencyError",
    "NativeExtensionUnavailableError",
    "NoObservationsError",
    "NonContiguousTensorError",
    "PayloadMissingError",
    "PayloadUnavailableError",
    "PointNotFoundError",
    "ProbeClosedError",
    "RecorderStateError",
    "ReportExistsError",
    "RunExistsError",
    "RunNotFoundError",
    "ScriptNotFoundError",
    "SecondCaptureError",
    "SnapshotFormatError",
    "StorageError",
    "StorageIOError",
    "SynchronizeDuringCaptureError",
    "TcgdError",
    "TcgdInternalError",
    "TensorBundleError",
    "TensorCheckError",
    "TensorComparisonError",
    "TensorDebugError",
    "TensorOwnershipError",
    "TensorPayloadUnavailableError",
    "UnsafePathError",
    "UnsafePickleError",
    "UnsupportedDtypeError",
    "UnsupportedFormatError",
    "WrongDeviceError",
]
