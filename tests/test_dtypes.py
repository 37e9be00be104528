"""Every dtype torch has that can be recorded: bit-exact round trips, and native summaries
checked against torch over random shapes, values and NaN/Inf placements."""

from __future__ import annotations

import math

import pytest
import torch
from dtype_cases import ALL, COMPLEX, SMALL_FLOATS, WIDE_FLOATS, as_bytes
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_cudagraph_debug import _native
from torch_cudagraph_debug._torch_bridge import dtype_name, host_bytes, summarize
from torch_cudagraph_debug.errors import UnsupportedDtypeError
from torch_cudagraph_debug.tensor_debug import TensorRecorder


def test_supported_dtypes_are_exactly_these():
    # Every dtype torch has is checked as the recorder checks it: these pass, the rest
    # (quantized, bit-packed, ...) are typed errors.
    every = {d for d in vars(torch).values() if isinstance(d, torch.dtype)}
    accepted = set()
    for dtype in every:
        try:
            _native.check_dtype(dtype_name(dtype))
        except UnsupportedDtypeError:
            continue
        accepted.add(dtype)
    assert accepted == set(ALL)


def random_tensor(dtype: torch.dtype, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    numel = math.prod(shape)
    if dtype in SMALL_FLOATS:
        bits = torch.randint(0, 256, (numel * dtype.itemsize,), generator=g, dtype=torch.uint8)
        return bits.view(dtype).reshape(shape)
    if dtype in WIDE_FLOATS or dtype in COMPLEX:
        values = torch.randn(shape, generator=g, dtype=torch.float64) * 10.0 ** float(seed % 7 - 3)
        if dtype in COMPLEX:
            imag = torch.randn(shape, generator=g, dtype=torch.float64)
            values = torch.complex(values, imag)
        flat = values.reshape(-1)
        if numel:
            # Specials at random places, sometimes all of one kind.
            for special in (math.nan, math.inf, -math.inf, 0.0):
                count = int(torch.randint(0, numel + 1, (1,), generator=g)) // 3
                where = torch.randint(0, numel, (count,), generator=g)
                flat[where] = special
        if dtype is torch.complex32:
            # complex128 -> complex32 has no direct kernel on CPU.
            return values.to(torch.complex64).to(dtype)
        return values.to(dtype)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    info = torch.iinfo(dtype)
    lo, hi = max(info.min, -(2**62)), min(info.max, 2**62)
    values = torch.randint(lo, hi, shape, generator=g, dtype=torch.int64)
    if numel:
        values.reshape(-1)[0] = lo  # extremes are where conversions go wrong
    return values.to(dtype)


def torch_summary(t: torch.Tensor) -> dict[str, object]:
    """What the native summary must equal, computed with torch in float64."""
    if t.dtype.is_complex:
        z = t.to(torch.complex128).reshape(-1)
        nan = torch.isnan(z.real) | torch.isnan(z.imag)
        inf = ~nan & (torch.isinf(z.real) | torch.isinf(z.imag))
        finite = ~nan & ~inf
        values = z[finite].abs()
        posinf, neginf = int(inf.sum()), 0
        zero = int(((z.real == 0) & (z.imag == 0)).sum())
    else:
        x = t.to(torch.float64).reshape(-1)
        finite_mask = torch.isfinite(x)
        values = x[finite_mask]
        nan = torch.isnan(x)
        posinf, neginf = int((x == math.inf).sum()), int((x == -math.inf).sum())
        zero = int((x == 0).sum())
    has = values.numel() > 0
    return {
        "numel": t.numel(),
        "finite": int(values.numel()),
        "nan": int(nan.sum()),
        "posinf": posinf,
        "neginf": neginf,
        "zero": zero,
        "min": float(values.min()) if has else None,
        "max": float(values.max()) if has else None,
        "mean": float(values.mean()) if has else None,
        "std": float(values.std(unbiased=False)) if has else None,
        "l2": float(torch.linalg.vector_norm(values)) if has else 0.0,
    }


# The native summary's names, in this file's (shorter) spelling.
_NATIVE_NAMES = {
    "numel": "numel",
    "finite": "finite_count",
    "nan": "nan_count",
    "posinf": "pos_inf_count",
    "neginf": "neg_inf_count",
    "zero": "zero_count",
    "min": "min",
    "max": "max",
    "mean": "mean",
    "std": "std",
    "l2": "l2_norm",
}


def native_summary(t: torch.Tensor) -> dict[str, object]:
    t = t.contiguous()
    summary = _native.summarize(dtype_name(t.dtype), host_bytes(t)).to_dict()
    return {short: summary[name] for short, name in _NATIVE_NAMES.items()}


def assert_summary_matches(t: torch.Tensor) -> None:
    got, want = native_summary(t), torch_summary(t)
    for key in ("numel", "finite", "nan", "posinf", "neginf", "zero"):
        assert got[key] == want[key], (key, t.dtype, got, want)
    for key in ("min", "max"):
        if t.dtype.is_complex and want[key] is not None:
            # |z| is hypot(re, im) here; torch's vectorised abs computes sqrt(re^2 + im^2),
            # which can differ in the last bit.
            assert got[key] is not None, (key, got)
            assert math.isclose(got[key], want[key], rel_tol=1e-15), (key, t.dtype, got, want)
        else:
            assert got[key] == want[key], (key, t.dtype, got, want)
    for key in ("mean", "std", "l2"):
        if want[key] is None:
            assert got[key] is None, (key, got)
        else:
            scale = max(abs(want[key]), abs(want["max"] or 0), abs(want["min"] or 0), 1e-300)
            assert abs(got[key] - want[key]) <= 1e-9 * scale, (key, t.dtype, got, want)


@settings(max_examples=300, deadline=None)
@given(
    dtype=st.sampled_from(ALL),
    shape=st.lists(st.integers(0, 7), min_size=0, max_size=3).map(tuple),
    seed=st.integers(0, 2**31 - 1),
)
@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_native_summary_matches_torch(dtype, shape, seed):
    assert_summary_matches(random_tensor(dtype, shape, seed))


@pytest.mark.parametrize("dtype", ALL, ids=dtype_name)
def test_native_summary_matches_torch_on_large_tensors(dtype):
    # Large enough that the native side splits the work across threads.
    assert_summary_matches(random_tensor(dtype, (1_100_000,), seed=7))


@pytest.mark.parametrize("dtype", ALL, ids=dtype_name)
def test_every_dtype_round_trips_bit_exactly(tmp_path, dtype):
    value = random_tensor(dtype, (3, 5), seed=11)
    scalar = random_tensor(dtype, (), seed=12)
    with TensorRecorder(run_dir=tmp_path / "run") as rec, rec.record_point("p"):
        rec.observe(value, name="value")
        rec.observe(scalar, name="scalar")
        rec.observe(value[:0], name="empty")
    point = rec.result["p"]
    for name, original in (("value", value), ("scalar", scalar), ("empty", value[:0])):
        obs = point.observation(name)
        got = obs.tensor()
        assert obs.dtype is dtype and got.dtype is dtype
        assert tuple(got.shape) == tuple(original.shape)
        # Compare bit patterns: NaN payloads and signed zeros must survive too.
        assert torch.equal(as_bytes(got), as_bytes(original)), name
        assert obs.summary == summarize(original)


def unsupported_tensor(dtype: torch.dtype) -> torch.Tensor:
    if dtype in (torch.qint8, torch.quint8):
        return torch.quantize_per_tensor(torch.randn(4), 0.1, 0, dtype)
    return torch.empty(4, dtype=dtype)


@pytest.mark.parametrize(
    "dtype",
    [torch.qint8, torch.quint8, torch.float4_e2m1fn_x2, torch.bits8, torch.uint4],
    ids=str,
)
def test_unsupported_dtype_is_a_typed_error_naming_it(tmp_path, dtype):
    name = dtype_name(dtype)
    with pytest.raises(UnsupportedDtypeError, match=f"unsupported dtype '{name}'"):
        _native.check_dtype(name)
    with TensorRecorder(run_dir=tmp_path / "run") as rec, rec.record_point("p"):
        with pytest.raises(UnsupportedDtypeError, match=f"'{name}'.*supported dtypes are"):
            rec.observe(unsupported_tensor(dtype), name="x")
        # The failed call used up no invocation index.
        rec.observe(torch.ones(2), name="x")
    assert rec.result["p"].observation("x", 0).tensor().tolist() == [1.0, 1.0]
