"""Every dtype this package records, grouped as the tests need them (one list, shared by
the CPU and GPU tests)."""

from __future__ import annotations

import torch

FLOAT8 = [
    torch.float8_e4m3fn,
    torch.float8_e4m3fnuz,
    torch.float8_e5m2,
    torch.float8_e5m2fnuz,
    torch.float8_e8m0fnu,
]
# Small floats: every bit pattern is a meaningful test value (NaN payloads, subnormals).
SMALL_FLOATS = [*FLOAT8, torch.float16, torch.bfloat16]
WIDE_FLOATS = [torch.float32, torch.float64]
COMPLEX = [torch.complex32, torch.complex64, torch.complex128]
INTS = [
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.uint16,
    torch.uint32,
    torch.uint64,
]
ALL = [*SMALL_FLOATS, *WIDE_FLOATS, *COMPLEX, *INTS, torch.bool]


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes, for bitwise comparisons of any dtype."""
    return t.contiguous().reshape(-1).view(torch.uint8)
