"""The native core raises the package's own exception classes, exactly: each Rust error
becomes one class of `torch_cudagraph_debug.errors` (never a look-alike or a bare
RuntimeError), and that class is also the builtin a user would catch."""

from __future__ import annotations

import pickle

import pytest
import torch
from processes import python_stdout
from storage_files import data_files
from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import (
    ConfigError,
    CorruptRunError,
    InvalidInputError,
    RunNotFoundError,
    SnapshotFormatError,
    StorageError,
    TcgdError,
    UnsafePickleError,
    UnsupportedDtypeError,
    UnsupportedFormatError,
)
from torch_cudagraph_debug.memory_debug import MemoryProbeSnapshot
from torch_cudagraph_debug.tensor_debug import TensorComparisonOptions, TensorRecorder, TensorRun


def raised(call) -> BaseException:
    with pytest.raises(TcgdError) as info:
        call()
    return info.value


def test_a_corrupt_run_is_exactly_corrupt_run_error(tmp_path):
    with TensorRecorder(name="r", run_dir=tmp_path) as rec:
        with rec.record_point("p0"):
            rec.observe(torch.ones(4), name="x")
    (part,) = data_files(tmp_path, "observations")
    part.write_bytes(part.read_bytes()[:-8])
    error = raised(lambda: TensorRun.load(tmp_path))
    assert type(error) is CorruptRunError
    assert isinstance(error, StorageError) and isinstance(error, OSError)
    assert str(part) in str(error)


def test_a_version_one_run_is_exactly_unsupported_format_error(tmp_path):
    (tmp_path / "run.json").write_text("{}")
    error = raised(lambda: TensorRun.load(tmp_path))
    assert type(error) is UnsupportedFormatError
    assert isinstance(error, StorageError)
    assert "version 1" in str(error)


def test_a_directory_without_a_run_is_exactly_run_not_found_error(tmp_path):
    error = raised(lambda: TensorRun.load(tmp_path))
    assert type(error) is RunNotFoundError
    assert isinstance(error, FileNotFoundError)


def test_a_bad_comparison_option_is_exactly_invalid_input_error_with_its_attributes():
    error = raised(lambda: TensorComparisonOptions(rtol=-1))
    assert type(error) is InvalidInputError
    assert isinstance(error, ValueError)
    # The CLI names its flag from these two attributes, set by the native core.
    assert error.option == "rtol"
    assert error.reason == "must be a finite number >= 0, got -1"
    assert str(error) == "TensorComparisonOptions.rtol must be a finite number >= 0, got -1"


def test_a_bad_config_is_exactly_config_error():
    error = raised(lambda: _native.ProbeConfig.parse("version = 1\nopz = 2\n", "bad.toml"))
    assert type(error) is ConfigError
    assert isinstance(error, ValueError)
    assert str(error).startswith("bad.toml")


def test_an_unsafe_pickle_is_exactly_unsafe_pickle_error(tmp_path):
    class Boom:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [], "x": Boom()}))
    error = raised(lambda: MemoryProbeSnapshot.from_pickle(path))
    assert type(error) is UnsafePickleError
    assert isinstance(error, SnapshotFormatError) and isinstance(error, ValueError)
    assert "GLOBAL" in str(error)


def test_an_unrecordable_dtype_is_exactly_unsupported_dtype_error():
    error = raised(lambda: _native.check_dtype("qint8"))
    assert type(error) is UnsupportedDtypeError
    assert isinstance(error, TypeError)
    assert "qint8" in str(error)


def test_an_errors_module_without_a_raised_class_fails_the_import():
    # Every class the native core raises is checked when it loads, so a broken install
    # cannot turn a typed error into a crash (or a bare RuntimeError) later.
    code = (
        "import sys, types\n"
        "stub = types.ModuleType('torch_cudagraph_debug.errors')\n"
        "stub.TcgdError = type('TcgdError', (Exception,), {})\n"
        "sys.modules['torch_cudagraph_debug.errors'] = stub\n"
        "try:\n"
        "    import torch_cudagraph_debug\n"
        "except AttributeError as e:\n"
        "    print('refused:', e)\n"
    )
    assert python_stdout(code).strip() == (
        "refused: module 'torch_cudagraph_debug.errors' has no attribute 'TcgdInternalError'"
    )


def test_a_run_header_crosses_typed_and_its_metadata_as_python_values():
    # The header reaches the writer as a native RunHeader: its provenance and metadata are
    # converted from Python values (no JSON text), and a value with no JSON form is the
    # user's error, named.
    header = _native.RunHeader(
        "abc",
        "run",
        "tensor",
        "eager",
        rank=1,
        world_size=2,
        provenance={"torch": "2.11.0", "devices": [0, 1]},
        run_metadata={"lr": 0.5, "tags": ("a", "b"), 3: None},
    )
    assert (header.kind, header.rank, header.world_size) == ("tensor", 1, 2)
    assert header.provenance == {"torch": "2.11.0", "devices": [0, 1]}
    assert header.run_metadata == {"lr": 0.5, "tags": ["a", "b"], "3": None}
    for bad, why in (({"x": {1}}, "type set"), ({"x": float("inf")}, "finite")):
        expected = f"run_metadata must be JSON-serialisable.*{why}"
        with pytest.raises(InvalidInputError, match=expected):
            _native.RunHeader("abc", "run", "tensor", "eager", run_metadata=bad)
    with pytest.raises(InvalidInputError, match="kind must be tensor or memory"):
        _native.RunHeader("abc", "run", "table", "eager")
