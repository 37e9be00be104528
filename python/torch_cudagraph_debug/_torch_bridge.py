"""Where torch meets the native core: tensors cross as plain facts and host bytes."""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable

import torch

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import InvalidInputError, UnsupportedDtypeError


def dtype_name(dtype: torch.dtype) -> str:
    """Canonical name of a torch dtype (``torch.float32`` -> ``"float32"``)."""
    return str(dtype).removeprefix("torch.")


def dtype_from_name(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise UnsupportedDtypeError(f"dtype '{name}' is not known to torch {torch.__version__}")
    return dtype


def check_recordable(tensor: object, what: str) -> torch.Tensor:
    """Checks that ``tensor`` is a dense tensor of a dtype the core can record."""
    if not isinstance(tensor, torch.Tensor):
        raise InvalidInputError(f"{what}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.layout is not torch.strided:
        raise InvalidInputError(
            f"{what}: {tensor.layout} tensors cannot be recorded; convert with .to_dense()"
        )
    if tensor.device.type == "meta":
        raise InvalidInputError(f"{what}: a meta tensor has no values to record")
    _native.check_dtype(dtype_name(tensor.dtype))
    return tensor


def host_bytes(tensor: torch.Tensor) -> tuple[int, int]:
    """``(address, length)`` of a contiguous CPU tensor's bytes, as the native core takes
    them. The caller keeps ``tensor`` referenced while the core reads."""
    if tensor.device.type != "cpu" or not tensor.is_contiguous():
        raise InvalidInputError("host bytes need a contiguous CPU tensor")
    return (tensor.data_ptr(), tensor.numel() * tensor.element_size())


def summarize(tensor: torch.Tensor) -> _native.TensorValueSummary:
    """The native summary of a CPU tensor's values (the one summary type of the package:
    probes, runs and comparisons all report it)."""
    contiguous = tensor.contiguous()
    return _native.summarize(dtype_name(contiguous.dtype), host_bytes(contiguous))


def tensor_from_bytes(data: bytes, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """Rebuilds a contiguous CPU tensor from payload bytes (the bytes are copied once)."""
    if len(data) == 0:
        return torch.empty(shape, dtype=dtype)
    flat = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return flat.view(dtype).reshape(shape)


def _public_stream_handle(device_index: int) -> int:
    return int(torch.cuda.current_stream(device_index).cuda_stream)


# ``current_stream_handle(device_index)``: the ``cudaStream_t`` (as an int) of torch's
# current stream on ``cuda:device_index``. Torch's raw handle function, as Inductor's
# generated code reads it at every call (a C function returning an int, several
# microseconds cheaper than building a ``torch.cuda.Stream``), itself rather than a Python
# wrapper, so that the native point clock calls it without running Python; older torch
# without it takes the public path.
current_stream_handle: Callable[[int], int] = (
    getattr(torch._C, "_cuda_getCurrentRawStream", None) or _public_stream_handle
)


@functools.cache
def register_nvrtc() -> None:
    """Tells the core where torch's CUDA wheels keep NVRTC (``nvidia/*/lib``, off the
    loader path); the device summary kernels are compiled with it at first use."""
    spec = importlib.util.find_spec("nvidia")
    bases = list(spec.submodule_search_locations or []) if spec is not None else []
    bases.append(os.path.join(os.path.dirname(torch.__file__), "lib"))
    for base in bases:
        candidates = [base] + [os.path.join(base, d, "lib") for d in sorted(os.listdir(base))]
        for folder in candidates:
            if os.path.isdir(folder) and any(
                name.startswith("libnvrtc.so") for name in os.listdir(folder)
            ):
                _native.add_nvrtc_search_dir(folder)
