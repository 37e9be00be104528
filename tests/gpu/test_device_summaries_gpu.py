"""On-device summaries and the flight recorder, on the GPU.

The summary kernel is checked against the host summary of the same bytes for every real
dtype (float8 and bf16 included), with NaN and infinities; the compile plugin's summary
mode is checked under CUDA Graph Trees (no device synchronisation per call, zero skips,
equal outputs); and the flight recorder is shown finding a NaN injected at a known call
and site.
"""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
import torch_cudagraph_debug.compile as tcgd_compile
from dtype_cases import FLOAT8
from repo_scripts import load_script
from torch._dynamo.utils import counters
from torch_cudagraph_debug import _native
from torch_cudagraph_debug._torch_bridge import dtype_name, register_nvrtc, summarize
from torch_cudagraph_debug.errors import (
    InvalidInputError,
    PayloadUnavailableError,
    RecorderStateError,
)
from torch_cudagraph_debug.tensor_debug import TensorRecorder, TensorRun
from torch_cudagraph_debug.tensor_debug.recorder import device_site, open_run_writer

# Documented tolerance of device summaries against host ones (docs/tensor-debug.md):
# counts, min and max are exact; mean, std and L2 agree to this relative error (both
# accumulate in float64, in different orders).
RTOL = 1e-9

FLOATS = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool]


def random_values(dtype: torch.dtype, numel: int, generator: torch.Generator) -> torch.Tensor:
    """Random values of `dtype` on the device, with NaN and infinities where the dtype
    has them (float8: every byte pattern, specials included)."""
    if dtype in FLOAT8:
        raw = torch.randint(0, 256, (numel,), dtype=torch.uint8, generator=generator)
        return raw.view(dtype).cuda()
    if dtype in FLOATS:
        values = torch.randn(numel, dtype=torch.float64, generator=generator) * 3 + 1
        if numel >= 16:
            picks = torch.randint(0, numel, (9,), generator=generator)
            values[picks[:3]] = math.nan
            values[picks[3:6]] = math.inf
            values[picks[6:8]] = -math.inf
            values[picks[8]] = 0.0
        return values.to(dtype).cuda()
    if dtype == torch.bool:
        return (torch.rand(numel, generator=generator) > 0.5).cuda()
    info = torch.iinfo(dtype)
    low, high = max(info.min, -(2**31)), min(info.max, 2**31 - 1)
    return (
        torch.randint(low, high, (numel,), generator=generator, dtype=torch.int64).to(dtype).cuda()
    )


def assert_summaries_match(
    device: _native.TensorValueSummary, host: _native.TensorValueSummary, what: str
) -> None:
    counts = ("numel", "finite_count", "nan_count", "pos_inf_count", "neg_inf_count")
    for field in (*counts, "zero_count"):
        assert getattr(device, field) == getattr(host, field), (what, field, device, host)
    for field in ("min", "max"):
        assert getattr(device, field) == getattr(host, field), (what, field, device, host)
    for field in ("mean", "std", "l2_norm"):
        d, h = getattr(device, field), getattr(host, field)
        if h is None:
            assert d is None, (what, field, device, host)
        else:
            assert d == pytest.approx(h, rel=RTOL, abs=1e-300), (what, field, device, host)


def record_hand_captured(
    tmp_path, tensors: dict[str, torch.Tensor], refresh, replays: int, per_launch=1, **kw
):
    """Captures one summary site per tensor into a graph with the core's device recorder
    and replays it `replays` times, one point each; `refresh(i)` changes the values
    before replay i. Returns the run and the host summaries expected per point."""
    register_nvrtc()
    writer = open_run_writer(name="device", root=str(tmp_path), execution="cuda_graph")
    recorder = _native.DeviceRecorder(0, writer, **kw)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            handle = torch.cuda.current_stream().cuda_stream
            runtime = _native.ProbeRuntime(0)
            runtime.bind_capture(handle)
            capture = recorder.add_capture(runtime)
            sites = [device_site(t, name, order) for order, (name, t) in enumerate(tensors.items())]
            # Batched as a probe op's inputs are (at most 16 sites per launch).
            for start in range(0, len(sites), per_launch):
                recorder.register_sites(runtime, capture, sites[start : start + per_launch], handle)
    expected = []
    for i in range(replays):
        refresh(i)
        torch.cuda.synchronize()
        expected.append({name: summarize(t.cpu()) for name, t in tensors.items()})
        graph.replay()
        recorder.close_point(f"p{i}", "{}", torch.cuda.current_stream().cuda_stream)
    recorder.flush()
    recorder.close()
    writer.close(True)
    runtime.close()
    return TensorRun.load(tmp_path, name="device"), expected


@pytest.mark.parametrize("numel", [1, 1000, 1 << 20])
def test_device_summaries_equal_host_summaries_for_every_real_dtype(tmp_path, numel):
    generator = torch.Generator().manual_seed(numel)
    tensors = {dtype_name(d): random_values(d, numel, generator) for d in FLOAT8 + FLOATS + INTS}

    def refresh(i: int) -> None:
        for t in tensors.values():
            t.copy_(random_values(t.dtype, numel, generator))

    # One site per launch, and many (two launches of 16 and the rest): same answers.
    run, expected = record_hand_captured(
        tmp_path, tensors, refresh, replays=3, per_launch={1: 1, 1000: 16}.get(numel, 7)
    )
    assert run.labels == ("p0", "p1", "p2")
    for point, want in zip(run.points, expected, strict=True):
        got = {o.name: o for o in point.observations}
        assert set(got) == set(want)
        for name, host in want.items():
            assert got[name].payload == "summary"
            assert_summaries_match(got[name].summary, host, f"{point.label} {name}")


def test_a_large_value_is_summarised_by_many_blocks_and_agrees(tmp_path):
    generator = torch.Generator().manual_seed(7)
    big = (torch.randn(16 << 20, generator=generator) * 1e3 + 5e3).cuda()  # 64 MiB float32
    odd = torch.randn(1_000_003, generator=generator, dtype=torch.float64).cuda()
    run, expected = record_hand_captured(
        tmp_path, {"big": big, "odd": odd}, lambda i: big.mul_(1.5), replays=2
    )
    for point, want in zip(run.points, expected, strict=True):
        for o in point.observations:
            assert_summaries_match(o.summary, want[o.name], o.name)
    # Every replay is its own point and the replay counter advanced once per replay.
    assert [p.replay_index for p in run.points] == [1, 2]


def test_a_cuda_graph_recorder_summarises_on_the_device(tmp_path):
    """`TensorRecorder(execution="cuda_graph", payload="summary")`: the summary kernel is
    captured beside the model, the host gets only records; a `payload="full"` value of the
    same graph still arrives whole, and the points list both in capture order."""
    x = torch.zeros(4096, device="cuda")
    rec = TensorRecorder(
        execution="cuda_graph",
        payload="summary",
        non_contiguous="copy",
        name="cgs",
        run_dir=tmp_path / "run",
    )

    def body():
        rec.observe(torch.sin(x) * 2, name="y")
        rec.observe(x, name="x", payload="full")
        rec.observe(x.view(64, 64).t(), name="t")

    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        body()
    torch.cuda.current_stream().wait_stream(stream)
    assert rec._device is not None
    expected = []
    for step in range(3):
        x.copy_(torch.randn(4096, device="cuda") * (step + 1))
        x[step] = math.nan
        with rec.record_point(f"step{step}"):
            graph.replay()
        expected.append(x.clone())
    with pytest.raises(RecorderStateError, match="saw no new replay"):
        with rec.record_point("idle"):
            pass
    with pytest.raises(InvalidInputError, match="already used"):
        with rec.record_point("step0"):
            pass
    run = rec.finish()
    assert run.labels == ("step0", "step1", "step2")
    assert [p.replay_index for p in run.points] == [1, 2, 3]
    assert rec._device.counts == (3, 0)
    for point, value in zip(run.points, expected, strict=True):
        y, whole, t = point.observations
        assert (y.name, whole.name, t.name) == ("y", "x", "t")
        assert (y.payload, whole.payload, t.payload) == ("summary", "full", "summary")
        # Bitwise (the value holds a NaN).
        assert torch.equal(whole.tensor().view(torch.int32), value.cpu().view(torch.int32))
        assert_summaries_match(y.summary, summarize((torch.sin(value) * 2).cpu()), "y")
        assert_summaries_match(t.summary, summarize(value.view(64, 64).t().contiguous().cpu()), "t")
        assert t.summary.nan_count == 1
        assert t.stride == (1, 64)
        with pytest.raises(PayloadUnavailableError):
            y.tensor()


# The example's model: linear layers, each fed through a gain buffer, so that setting one
# gain element to NaN makes that layer's matmul the first site with a NaN.
Gained = load_script("examples/flight_recorder.py").Gained


SUMMARY_CONFIG = {
    "version": 1,
    "run": {"payload": "summary"},
    "select": [{"ops": ["aten.addmm", "aten.mm"], "graphs": ["inference"]}],
}


@pytest.mark.usefixtures("fresh_inductor")
def test_summary_mode_under_graph_trees_never_synchronises_per_call(tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = Gained().cuda()
    inputs = [torch.randn(32, 64, device="cuda") for _ in range(12)]
    with torch.no_grad():
        plain = torch.compile(model, mode="reduce-overhead")
        plain_out = [plain(x).clone() for x in inputs]
    torch._dynamo.reset()
    counters.clear()

    compiled = tcgd_compile.compile(
        model, probes=SUMMARY_CONFIG, mode="reduce-overhead", run_dir=tmp_path / "run"
    )
    session = tcgd_compile.session_of(compiled)
    syncs = {"n": 0}
    original = torch.cuda.synchronize

    def counting(*args, **kwargs):
        syncs["n"] += 1
        return original(*args, **kwargs)

    with torch.no_grad():
        outs = [compiled(inputs[i]).clone() for i in range(3)]  # warmup and recording
        monkeypatch.setattr(torch.cuda, "synchronize", counting)
        outs += [compiled(x).clone() for x in inputs[3:]]
        monkeypatch.setattr(torch.cuda, "synchronize", original)
    run = session.finish()

    assert syncs["n"] == 0, "a replayed call synchronised the device"
    assert counters["inductor"]["cudagraph_skips"] == 0
    for a, b in zip(outs, plain_out, strict=True):
        assert torch.equal(a, b)
    assert run.labels == tuple(f"call{i}" for i in range(12))
    harvested, dumps = session.device_counts
    assert harvested >= 9 and dumps == 0
    # Each point's summaries are those of the values the call computed: rebuild them
    # eagerly from the same weights and inputs.
    sites = sorted({o.name for p in run.points for o in p.observations})
    assert len(sites) == 4, sites
    for i in range(3, 12):
        point = run[f"call{i}"]
        assert point.replay_index is not None
        x = inputs[i]
        with torch.no_grad():
            for layer_index, layer in enumerate(model.layers):
                observation = point.observations[layer_index]
                xin = x * getattr(model, f"gain{layer_index}")
                mm = xin @ layer.weight.t()
                x = torch.relu(mm + layer.bias)
                # Inductor keeps addmm, or splits it into mm and a bias add it fuses on.
                if observation.site.aten_op.startswith("aten.addmm"):
                    mm = mm + layer.bias
                want = summarize(mm.cpu())
                got = observation.summary
                assert got.numel == want.numel and got.nan_count == 0
                # Inductor's addmm may round differently from eager: compare loosely here;
                # the kernel's exactness is the test above.
                assert got.mean == pytest.approx(want.mean, rel=1e-3, abs=1e-4)
                assert got.max == pytest.approx(want.max, rel=1e-3, abs=1e-4)


@pytest.mark.usefixtures("fresh_inductor")
def test_the_flight_recorder_lands_the_calls_before_an_injected_nan(tmp_path):
    torch.manual_seed(1)
    model = Gained().cuda()
    config = {**SUMMARY_CONFIG, "run": {"payload": "summary", "history": 4}}
    compiled = tcgd_compile.compile(
        model, probes=config, mode="reduce-overhead", run_dir=tmp_path / "run"
    )
    session = tcgd_compile.session_of(compiled)
    inputs = [torch.randn(32, 64, device="cuda") for _ in range(14)]
    with torch.no_grad():
        for i, x in enumerate(inputs):
            if i == 9:
                model.gain2[5] = math.nan  # from call 9 on, layer 2's matmul is NaN
            compiled(x)
    run = session.finish()
    assert counters["inductor"]["cudagraph_skips"] == 0
    _, dumps = session.device_counts
    assert dumps == 1

    flight = [p for p in run.points if p.label.startswith("history:")]
    assert [p.label for p in flight] == [f"history:call9:call{i}" for i in range(6, 10)]
    sites = [o.name for o in run["call5"].observations]
    for p in flight:
        assert [o.name for o in p.observations] == sites
        assert all(o.payload == "full" for o in p.observations)
        assert p.metadata["flight_recorder"]["trigger_point"] == "call9"
    # The full values: finite before call 9, NaN at layer 2 (and after) at call 9.
    last = flight[-1]
    values = [o.tensor() for o in last.observations]
    assert all(torch.isfinite(v).all() for v in values[:2])
    assert torch.isnan(values[2]).all()
    before = [o.tensor() for o in flight[-2].observations]
    assert all(torch.isfinite(v).all() for v in before)
    # The summaries say the same, and the query finds call 9 at layer 2's site.
    assert run["call8"].observations[2].summary.nan_count == 0
    assert run["call9"].observations[2].summary.nan_count == 32 * 64
    anomaly = run.first_anomaly("nan")
    assert anomaly is not None
    assert anomaly.label == "call9" and anomaly.name == sites[2]


def test_batched_copies_land_the_same_bytes_as_one_copy_per_value():
    from torch_cudagraph_debug.tensor_debug import RecordAction, TensorProbe

    torch.manual_seed(3)
    # 130 values: two full launches of 64 and a partial one.
    inputs = [torch.randn(1024 + 3 * i, device="cuda") for i in range(120)]
    inputs += [torch.randint(0, 9, (37,), device="cuda", dtype=torch.int8) for _ in range(10)]
    snapshots = []
    # The inputs change between the two graphs; each snapshot is checked against its own.
    for batched in (False, True):
        probe = TensorProbe(f"copies-{batched}", [RecordAction()])
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            outs = [x * 2 for x in inputs]  # warm up
            with torch.cuda.graph(graph, stream=stream):
                outs = [x * 2 for x in inputs]
                block = probe.batched() if batched else contextlib.nullcontext()
                with block:
                    for i, y in enumerate(outs):
                        probe(y, name=f"v{i}")
        torch.cuda.current_stream().wait_stream(stream)
        for x in inputs:
            x.add_(1)
        graph.replay()
        snapshot = probe.snapshot()
        assert probe.replay_index == 1
        for i, x in enumerate(inputs):
            assert torch.equal(snapshot.tensor(f"v{i}"), (x * 2).cpu()), (batched, i)
        snapshots.append(snapshot)
        probe.close()
        del graph
    # Both ways saw every value of their replay exactly (checked above, each against the
    # inputs of its own replay), with the same shapes and dtypes.
    per_site, batched_snapshot = snapshots
    assert [o.name for o in per_site.observations] == [
        o.name for o in batched_snapshot.observations
    ]
    assert [o.dtype for o in per_site.observations] == [
        o.dtype for o in batched_snapshot.observations
    ]


@pytest.mark.usefixtures("fresh_inductor")
def test_full_payloads_and_sampled_calls_reach_the_host_without_a_sync_per_call(
    tmp_path, monkeypatch
):
    torch.manual_seed(2)
    model = Gained().cuda()
    inputs = [torch.randn(32, 64, device="cuda") for _ in range(10)]
    select = [{"ops": ["aten.addmm", "aten.mm"], "graphs": ["inference"]}]
    configs = {
        "full": {"version": 1, "run": {"payload": "full"}, "select": select},
        "sampled": {
            "version": 1,
            "run": {"payload": "summary", "full_every": 3},
            "select": select,
        },
    }
    runs = {}
    for name, config in configs.items():
        torch._dynamo.reset()
        compiled = tcgd_compile.compile(
            model, probes=config, mode="reduce-overhead", run_dir=tmp_path / name
        )
        session = tcgd_compile.session_of(compiled)
        syncs = {"n": 0}
        original = torch.cuda.synchronize

        def counting(*args, original=original, syncs=syncs, **kwargs):
            syncs["n"] += 1
            return original(*args, **kwargs)

        with torch.no_grad():
            for i, x in enumerate(inputs):
                if i == 3:
                    monkeypatch.setattr(torch.cuda, "synchronize", counting)
                compiled(x)
        monkeypatch.setattr(torch.cuda, "synchronize", original)
        runs[name] = session.finish()
        assert syncs["n"] == 0, name
        assert counters["inductor"]["cudagraph_skips"] == 0
    full, sampled = runs["full"], runs["sampled"]
    assert full.labels == sampled.labels == tuple(f"call{i}" for i in range(10))
    for i in range(2, 10):
        label = f"call{i}"
        assert all(o.payload == "full" for o in full[label].observations)
        kinds = {o.payload for o in sampled[label].observations}
        # Device point numbers start at the first captured call; every third of them
        # keeps full values, the others summaries only.
        assert kinds in ({"full"}, {"summary"}), (label, kinds)
        for a, b in zip(full[label].observations, sampled[label].observations, strict=True):
            assert a.name == b.name
            assert a.summary.numel == b.summary.numel
            assert a.summary.max == pytest.approx(b.summary.max, rel=1e-6)
            if b.payload == "full":
                assert torch.equal(a.tensor(), b.tensor())
    sampled_points = [p.label for p in sampled.points if p.observations[0].payload == "full"]
    assert 3 <= len(sampled_points) <= 5, sampled_points
    # The full run's values are the replay's: rebuild call 7 eagerly.
    x = inputs[7]
    with torch.no_grad():
        for layer_index, layer in enumerate(model.layers):
            observation = full["call7"].observations[layer_index]
            xin = x * getattr(model, f"gain{layer_index}")
            mm = xin @ layer.weight.t()
            x = torch.relu(mm + layer.bias)
            if observation.site.aten_op.startswith("aten.addmm"):
                mm = mm + layer.bias
            torch.testing.assert_close(observation.tensor(), mm.cpu(), rtol=1e-3, atol=1e-3)
