"""The comparison engine against torch, element by element, over random dtypes, shapes and
NaN / ±inf / -0.0 placements: verdicts follow ``torch.isclose(candidate, reference)``
evaluated in float64 (allclose mode) and value equality like ``torch.equal`` (exact mode);
integers and bool compare exactly; every metric is recomputed with torch."""

from __future__ import annotations

import datetime as dt
import math

import pytest
import torch
from dtype_cases import ALL, COMPLEX, INTS, SMALL_FLOATS, WIDE_FLOATS
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_cudagraph_debug import _native
from torch_cudagraph_debug._torch_bridge import host_bytes, summarize
from torch_cudagraph_debug.tensor_debug import (
    TensorComparisonOptions,
    TensorObservation,
    TensorPoint,
    compare_points,
)

SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0]


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    stride, step = [], 1
    for size in reversed(shape):
        stride.append(step)
        step *= max(size, 1)
    return tuple(reversed(stride))


def observation(name: str, t: torch.Tensor) -> TensorObservation:
    t = t.contiguous()
    return TensorObservation(
        order=0,
        name=name,
        invocation_index=0,
        shape=tuple(t.shape),
        stride=row_major(tuple(t.shape)),
        dtype=t.dtype,
        source_device="cpu",
        nbytes=t.numel() * t.element_size(),
        payload="full",
        digest=_native.content_digest(host_bytes(t)),
        summary=summarize(t),
        site=None,
        _load=lambda: t,
    )


def point(label: str, t: torch.Tensor) -> TensorPoint:
    return TensorPoint(
        index=0,
        label=label,
        timestamp=dt.datetime.now(dt.timezone.utc),
        metadata={},
        replay_index=None,
        observations=(observation("x", t),),
    )


def to_c128(t: torch.Tensor) -> torch.Tensor:
    if t.dtype is torch.complex32:
        t = t.to(torch.complex64)
    return t.to(torch.complex128)


def random_pair(
    dtype: torch.dtype, shape: tuple[int, ...], seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """A reference and a candidate: the candidate is the reference with some elements
    nudged, replaced, or swapped for special values."""
    g = torch.Generator().manual_seed(seed)
    numel = math.prod(shape)

    def randint(hi: int) -> int:
        return int(torch.randint(0, max(hi, 1), (1,), generator=g))

    if dtype in SMALL_FLOATS:
        bits = torch.randint(0, 256, (numel * dtype.itemsize,), generator=g, dtype=torch.uint8)
        ref = bits.view(dtype).reshape(shape)
        cand_bits = bits.clone()
        for _ in range(randint(numel * dtype.itemsize + 1)):
            cand_bits[randint(cand_bits.numel())] = randint(256)
        return ref, cand_bits.view(dtype).reshape(shape)
    if dtype in INTS or dtype is torch.bool:
        if dtype is torch.bool:
            ref = torch.randint(0, 2, shape, generator=g).bool()
            cand = ref.clone().reshape(-1)
            for _ in range(randint(numel + 1) // 2):
                i = randint(numel)
                cand[i] = ~cand[i]
            return ref, cand.reshape(shape)
        info = torch.iinfo(dtype)
        lo, hi = max(info.min, -(2**62)), min(info.max, 2**62)
        ref = torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dtype)
        cand = ref.clone().reshape(-1)
        for _ in range(randint(numel + 1) // 2):
            i = randint(numel)
            cand[i] = int(cand[i]) + (1 if int(cand[i]) < int(hi) - 1 else -1)
        return ref, cand.reshape(shape)
    scale = 10.0 ** float(randint(9) - 4)
    ref = torch.randn(shape, generator=g, dtype=torch.float64) * scale
    if dtype in COMPLEX:
        ref = torch.complex(ref, torch.randn(shape, generator=g, dtype=torch.float64) * scale)
    flat = ref.reshape(-1)
    for _ in range(randint(numel + 1) // 3):
        flat[randint(numel)] = SPECIALS[randint(len(SPECIALS))]
    cand = ref.clone().reshape(-1)
    for _ in range(randint(numel + 1)):
        i = randint(numel)
        kind = randint(4)
        if kind == 0:  # a tiny relative change: usually within rtol
            cand[i] = cand[i] * (1 + 1e-7)
        elif kind == 1:  # a clear change
            cand[i] = cand[i] * 1.5 + 1e-3
        elif kind == 2:  # a special value
            cand[i] = SPECIALS[randint(len(SPECIALS))]
        else:  # near the tolerance edge
            cand[i] = cand[i] + 1e-5 * abs(cand[i]) * (0.5 + randint(3) / 2)
    cand = cand.reshape(shape)
    if dtype is torch.complex32:
        return ref.to(torch.complex64).to(dtype), cand.to(torch.complex64).to(dtype)
    return ref.to(dtype), cand.to(dtype)


def expected_close(
    ref: torch.Tensor, cand: torch.Tensor, o: TensorComparisonOptions
) -> torch.Tensor:
    """Per-element verdicts, flattened, from torch."""
    if ref.dtype in INTS or ref.dtype is torch.bool:
        # Exact integers over the whole range: compare as Python ints.
        r = ref.reshape(-1).tolist()
        c = cand.reshape(-1).tolist()
        return torch.tensor([a == b for a, b in zip(c, r, strict=True)], dtype=torch.bool)
    if ref.dtype.is_complex:
        r, c = to_c128(ref).reshape(-1), to_c128(cand).reshape(-1)
    else:
        r, c = ref.to(torch.float64).reshape(-1), cand.to(torch.float64).reshape(-1)
    if o.mode == "allclose":
        return torch.isclose(c, r, rtol=o.rtol, atol=o.atol, equal_nan=o.equal_nan)
    both_nan = torch.isnan(c) & torch.isnan(r)
    return (c == r) | (both_nan if o.equal_nan else torch.zeros_like(both_nan))


def expected_metrics(ref: torch.Tensor, cand: torch.Tensor) -> dict[str, object]:
    if ref.dtype.is_complex:
        r, c = to_c128(ref).reshape(-1), to_c128(cand).reshape(-1)
        r_nan = torch.isnan(r.real) | torch.isnan(r.imag)
        c_nan = torch.isnan(c.real) | torch.isnan(c.imag)
        r_inf = ~r_nan & (torch.isinf(r.real) | torch.isinf(r.imag))
        c_inf = ~c_nan & (torch.isinf(c.real) | torch.isinf(c.imag))
    else:
        if ref.dtype in (torch.int64, torch.uint64):
            # Differences beyond 2^53 must be exact: take them from Python ints.
            diffs = [
                abs(a - b)
                for a, b in zip(cand.reshape(-1).tolist(), ref.reshape(-1).tolist(), strict=True)
            ]
            e = torch.tensor(diffs, dtype=torch.float64)
        r, c = ref.to(torch.float64).reshape(-1), cand.to(torch.float64).reshape(-1)
        r_nan, c_nan = torch.isnan(r), torch.isnan(c)
        r_inf, c_inf = torch.isinf(r), torch.isinf(c)
    finite = ~(r_nan | c_nan | r_inf | c_inf)
    if ref.dtype not in (torch.int64, torch.uint64):
        e = (c - r).abs()
    e = e[finite]
    base = r[finite].abs()
    rel = e / base
    rel = rel[~torch.isnan(rel)]
    out: dict[str, object] = {
        "finite_pairs": int(finite.sum()),
        "nan_introduced": int((c_nan & ~r_nan).sum()),
        "inf_introduced": int((c_inf & ~r_inf).sum()),
    }
    if e.numel():
        out["max_abs_error"] = float(e.max())
        out["max_rel_error"] = float(rel.max()) if rel.numel() else 0.0
        out["mean_abs_error"] = float(e.mean())
    else:
        out["max_abs_error"] = out["max_rel_error"] = out["mean_abs_error"] = None
    return out


def ulp_distance_max(ref: torch.Tensor, cand: torch.Tensor) -> int | None:
    """Max ULP distance for the IEEE formats, from the sign-magnitude bit patterns."""
    views = {
        torch.float16: (torch.int16, 15),
        torch.bfloat16: (torch.int16, 15),
        torch.float32: (torch.int32, 31),
        torch.float64: (torch.int64, 63),
    }
    if ref.dtype not in views:
        return None
    int_dtype, sign_bit = views[ref.dtype]
    finite = torch.isfinite(ref.reshape(-1).double()) & torch.isfinite(cand.reshape(-1).double())
    if not bool(finite.any()):
        return None
    r = ref.reshape(-1).view(int_dtype)[finite]
    c = cand.reshape(-1).view(int_dtype)[finite]
    mask = (1 << sign_bit) - 1
    if int_dtype is torch.int64:
        # Sums of two 63-bit magnitudes overflow int64: use Python ints.
        return max(
            (a & mask) + (b & mask) if (a < 0) != (b < 0) else abs((a & mask) - (b & mask))
            for a, b in zip(c.tolist(), r.tolist(), strict=True)
        )
    c, r = c.to(torch.int64), r.to(torch.int64)
    ma, mb = c & mask, r & mask
    d = torch.where((c < 0) != (r < 0), ma + mb, (ma - mb).abs())
    return int(d.max())


def python_value(t: torch.Tensor) -> object:
    if t.dtype.is_complex:
        return complex(to_c128(t))
    if t.dtype in INTS or t.dtype is torch.bool:
        return int(t)
    return float(t.to(torch.float64))


def same(a: object, b: object) -> bool:
    if isinstance(a, complex) or isinstance(b, complex):
        a, b = complex(a), complex(b)
        return same(a.real, b.real) and same(a.imag, b.imag)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


def check(ref: torch.Tensor, cand: torch.Tensor, options: TensorComparisonOptions) -> None:
    result = compare_points(point("r", ref), point("c", cand), options=options)
    o = result.observation("x")
    close = expected_close(ref, cand, options)
    mismatches = int((~close).sum())
    identical = torch.equal(
        ref.contiguous().reshape(-1).view(torch.uint8),
        cand.contiguous().reshape(-1).view(torch.uint8),
    )
    assert o.status == ("match" if mismatches == 0 else "mismatch"), (o, close)
    assert result.status == o.status and result.ok == (mismatches == 0)
    m = o.metrics
    assert m is not None
    if identical and o.kind == "digest":
        # The digest shortcut: identical bytes, and no NaN to disagree with itself.
        assert mismatches == 0
        assert m.mismatch_count == 0 and m.first_mismatch is None
        return
    assert o.kind == "values"
    assert m.total == ref.numel()
    assert m.mismatch_count == mismatches, (m, close)
    if mismatches:
        first = int((~close).nonzero()[0])
        assert m.first_mismatch is not None
        assert m.first_mismatch.index == first
        coordinate = tuple(int(i) for i in torch.unravel_index(torch.tensor(first), ref.shape))
        assert m.first_mismatch.coordinate == coordinate
        assert same(m.first_mismatch.reference, python_value(ref.reshape(-1)[first]))
        assert same(m.first_mismatch.candidate, python_value(cand.reshape(-1)[first]))
    else:
        assert m.first_mismatch is None
    want = expected_metrics(ref, cand)
    assert m.finite_pairs == want["finite_pairs"]
    assert m.nan_introduced == want["nan_introduced"]
    assert m.inf_introduced == want["inf_introduced"]
    # Equal up to the last bits: complex moduli (hypot) round differently in Rust and torch.
    assert nearly(m.max_abs_error, want["max_abs_error"]), (m, want)
    assert nearly(m.max_rel_error, want["max_rel_error"]), (m, want)
    if want["mean_abs_error"] is None:
        assert m.mean_abs_error is None
    else:
        assert math.isclose(m.mean_abs_error, want["mean_abs_error"], rel_tol=1e-12, abs_tol=0)
    ulp = ulp_distance_max(ref, cand)
    if ulp is not None:
        assert m.max_ulp_distance == ulp
    if options.mode == "exact" and not options.equal_nan and ref.dtype in (*WIDE_FLOATS, *INTS):
        # Exact mode is torch.equal for the dtypes torch.equal supports on CPU.
        assert result.ok == torch.equal(cand, ref)


options_strategy = st.builds(
    TensorComparisonOptions,
    mode=st.sampled_from(["allclose", "exact"]),
    rtol=st.sampled_from([0.0, 1e-5, 1e-3, 0.5]),
    atol=st.sampled_from([0.0, 1e-8, 1e-3]),
    equal_nan=st.booleans(),
)


def nearly(got: float | None, want: float | None) -> bool:
    if got is None or want is None or not math.isfinite(want) or not math.isfinite(got):
        return got == want or (got is not None and want is not None and got != got and want != want)
    return math.isclose(got, want, rel_tol=1e-12, abs_tol=0.0)


@settings(max_examples=400, deadline=None)
@given(
    dtype=st.sampled_from(ALL),
    shape=st.lists(st.integers(0, 6), min_size=0, max_size=3).map(tuple),
    seed=st.integers(0, 2**31 - 1),
    options=options_strategy,
)
@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_verdicts_and_metrics_match_torch(dtype, shape, seed, options):
    ref, cand = random_pair(dtype, shape, seed)
    check(ref, cand, options)


def large_pair(dtype: torch.dtype, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Like `random_pair`, vectorised, for tensors that span several native tasks."""
    g = torch.Generator().manual_seed(seed)
    where = torch.randint(0, n, (n // 50,), generator=g)
    if dtype in SMALL_FLOATS:
        bits = torch.randint(0, 256, (n * dtype.itemsize,), generator=g, dtype=torch.uint8)
        cand = bits.clone()
        cand[where] = torch.randint(0, 256, (where.numel(),), generator=g, dtype=torch.uint8)
        return bits.view(dtype), cand.view(dtype)
    if dtype is torch.bool:
        ref = torch.randint(0, 2, (n,), generator=g).bool()
        cand = ref.clone()
        cand[where] = ~cand[where]
        return ref, cand
    if dtype in INTS:
        info = torch.iinfo(dtype)
        lo, hi = max(info.min, -(2**62)), min(info.max, 2**62) - 1
        ref = torch.randint(lo, hi, (n,), generator=g, dtype=torch.int64)
        cand = ref.clone()
        cand[where] += 1
        return ref.to(dtype), cand.to(dtype)
    ref = torch.randn(n, generator=g, dtype=torch.float64)
    if dtype in COMPLEX:
        ref = torch.complex(ref, torch.randn(n, generator=g, dtype=torch.float64))
    specials = torch.tensor(SPECIALS, dtype=torch.float64)
    ref[torch.randint(0, n, (n // 100,), generator=g)] = specials[
        torch.randint(0, len(SPECIALS), (n // 100,), generator=g)
    ].to(ref.dtype)
    cand = ref.clone()
    cand[where] = cand[where] * (1 + 1e-7)
    nudged = torch.randint(0, n, (n // 200,), generator=g)
    cand[nudged] = cand[nudged] * 1.5 + 1e-3
    special = torch.randint(0, n, (n // 300,), generator=g)
    cand[special] = specials[torch.randint(0, len(SPECIALS), (special.numel(),), generator=g)].to(
        cand.dtype
    )
    if dtype is torch.complex32:
        return ref.to(torch.complex64).to(dtype), cand.to(torch.complex64).to(dtype)
    return ref.to(dtype), cand.to(dtype)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_large_tensors_split_across_tasks_match_torch(dtype):
    # Several parallel tasks (of 2^18 elements); metrics must not depend on the split.
    ref, cand = large_pair(dtype, 600_001, seed=5)
    check(ref, cand, TensorComparisonOptions())
    first = compare_points(point("r", ref), point("c", cand)).to_dict()
    second = compare_points(point("r", ref), point("c", cand)).to_dict()
    assert first["points"][0]["observations"] == second["points"][0]["observations"]


def test_identical_bytes_with_nan_follow_equal_nan():
    t = torch.tensor([1.0, math.nan, -0.0])
    strict = compare_points(point("r", t), point("c", t.clone()))
    assert strict.status == "mismatch"
    assert strict.observation("x").metrics.mismatch_count == 1
    loose = compare_points(
        point("r", t), point("c", t.clone()), options=TensorComparisonOptions(equal_nan=True)
    )
    assert loose.status == "match" and loose.observation("x").kind == "digest"
    # torch.equal agrees: a NaN is not equal to itself.
    assert not torch.equal(t, t.clone())


def test_signed_zero_and_infinities():
    ref = torch.tensor([0.0, math.inf, -math.inf, 1.0])
    cand = torch.tensor([-0.0, math.inf, math.inf, math.inf])
    for mode in ("allclose", "exact"):
        o = compare_points(
            point("r", ref), point("c", cand), options=TensorComparisonOptions(mode=mode, rtol=1e9)
        ).observation("x")
        # -0.0 == 0.0 and inf == inf; -inf vs inf and 1 vs inf never match, whatever rtol.
        assert o.metrics.mismatch_count == 2
        assert o.metrics.first_mismatch.coordinate == (2,)
        assert o.metrics.inf_introduced == 1
