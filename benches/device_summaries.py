"""P2 and P3 in a hand-captured CUDA graph (GPU only).

    python benches/device_summaries.py [--quick]

Each workload is K tensors of S bytes, each produced by one elementwise op in the graph.
Graphs are captured in this process and timed with CUDA events (minimum and median over
rounds of replays); every figure is added replay time over the ``none`` graph:

- P2 (record mode, many small values): ``probe`` (a ``TensorProbe`` with one copy node per
  value), ``probe batched`` (the same probe inside ``probe.batched()``: one copy kernel per
  64 values) and ``memcpy`` (``dst.copy_(y)`` per value); per-probe added time (target
  <= 0.3 us) and equal bytes in the slots.
- P3 (summary mode, large values): ``summary`` (the core's device summary kernel, up to
  64 values per launch (``MAX_SITES_PER_LAUNCH``), records written to the session's
  record table) against ``read`` (``torch.amax`` of every value captured: reading each
  value once) and the physical floor (bytes over the read bandwidth, --bandwidth). Bytes
  to the host per site per replay: one 112-byte record.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile

import torch
from _support import replay_times
from torch_cudagraph_debug import _native
from torch_cudagraph_debug._torch_bridge import register_nvrtc
from torch_cudagraph_debug.tensor_debug import RecordAction, TensorProbe
from torch_cudagraph_debug.tensor_debug.recorder import device_site, open_run_writer

P2_WORKLOADS = [(64, 4 << 10), (256, 4 << 10)]
P3_WORKLOADS = [(64, 4 << 20), (16, 64 << 20)]
RECORD_BYTES = 112


def capture(inputs, observe):
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for x in inputs:
            x.mul(2)
        with torch.cuda.graph(graph, stream=stream):
            outs = [x * 2 for x in inputs]
            observe(outs)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    return graph, outs


def device_recorder(tmp: str):
    register_nvrtc()
    writer = open_run_writer(name="bench", root=tmp, execution="cuda_graph")
    return writer, _native.DeviceRecorder(0, writer)


def p2(count: int, size: int, rounds: int, replays: int) -> dict[str, float]:
    inputs = [torch.randn(size // 4, device="cuda") for _ in range(count)]
    figures = {}
    graph, _ = capture(inputs, lambda outs: None)
    figures["none"] = replay_times(graph, rounds, replays)[0]
    dsts = [torch.empty_like(x) for x in inputs]

    def memcpy(outs):
        for d, y in zip(dsts, outs, strict=True):
            d.copy_(y)

    graph, _ = capture(inputs, memcpy)
    figures["memcpy"] = replay_times(graph, rounds, replays)[0]
    snapshots = {}
    for batched in (False, True):
        probe = TensorProbe(f"p2-{batched}", [RecordAction()])

        def observe(outs, probe=probe, batched=batched):
            with probe.batched() if batched else contextlib.nullcontext():
                for i, y in enumerate(outs):
                    probe(y, name=f"v{i}")

        graph, _ = capture(inputs, observe)
        key = "probe batched" if batched else "probe"
        figures[key] = replay_times(graph, rounds, replays)[0]
        graph.replay()
        snapshots[key] = probe.snapshot()
        probe.close()
    for i in range(count):
        a = snapshots["probe"].tensor(f"v{i}")
        b = snapshots["probe batched"].tensor(f"v{i}")
        assert torch.equal(a, b), f"batched copy of v{i} differs"
    return figures


def p3(
    count: int, size: int, rounds: int, replays: int, tmp: str, dtype: torch.dtype
) -> dict[str, float]:
    numel = size // torch.empty((), dtype=dtype).element_size()
    inputs = [torch.randn(numel, device="cuda", dtype=dtype) for _ in range(count)]
    figures = {}
    graph, _ = capture(inputs, lambda outs: None)
    figures["none"] = replay_times(graph, rounds, replays)[0]
    sink = []
    graph, _ = capture(inputs, lambda outs: sink.extend(torch.amax(y) for y in outs))
    figures["read"] = replay_times(graph, rounds, replays)[0]
    writer, recorder = device_recorder(tmp)

    def summarise(outs):
        handle = torch.cuda.current_stream().cuda_stream
        runtime = _native.ProbeRuntime(0)
        runtime.bind_capture(handle)
        summarise.runtime = runtime
        capture_index = recorder.add_capture(runtime)
        sites = [device_site(y, f"v{i}", i) for i, y in enumerate(outs)]
        step = _native.MAX_SITES_PER_LAUNCH
        for start in range(0, len(sites), step):
            recorder.register_sites(runtime, capture_index, sites[start : start + step], handle)

    graph, _ = capture(inputs, summarise)
    figures["summary"] = replay_times(graph, rounds, replays)[0]
    recorder.close()
    writer.close(False)
    summarise.runtime.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--bandwidth", type=float, default=4.3e12, help="read bytes/s")
    parser.add_argument(
        "--p3", default=None, help="P3 workloads as KxBYTES,... (default 64x4MiB,16x64MiB)"
    )
    parser.add_argument("--only-p3", action="store_true")
    parser.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="P3 values' dtype (bfloat16: the compiled Llama's activations)",
    )
    args = parser.parse_args()
    rounds, replays = (3, 50) if args.quick else (5, 200)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    p3_workloads = P3_WORKLOADS
    if args.p3:
        p3_workloads = [tuple(int(v) for v in w.split("x")) for w in args.p3.split(",")]
    if args.only_p3:
        P2_WORKLOADS.clear()
    print("\nP2: record mode, many small values (added replay time, us)")
    print("| K x size | memcpy | probe | probe batched | batched per probe | target |")
    print("| --- | --- | --- | --- | --- | --- |")
    for count, size in P2_WORKLOADS:
        f = p2(count, size, rounds, replays)
        added = {k: v - f["none"] for k, v in f.items()}
        print(
            f"| {count} x {size >> 10} KiB | {added['memcpy']:.1f} | {added['probe']:.1f} | "
            f"{added['probe batched']:.1f} | {added['probe batched'] / count:.3f} | <= 0.3 |"
        )
    print(f"\nP3: summary mode, large {args.dtype} values (added replay time, us)")
    print(
        "| K x size | read once (amax) | floor | summary | x read | x floor | bytes to host/site |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (count, size) in enumerate(p3_workloads):
            f = p3(count, size, rounds, replays, f"{tmp}/{i}", getattr(torch, args.dtype))
            read = f["read"] - f["none"]
            summary = f["summary"] - f["none"]
            floor = count * size / args.bandwidth * 1e6
            print(
                f"| {count} x {size / 2**20:g} MiB | {read:.1f} | {floor:.1f} | {summary:.1f} | "
                f"{summary / read:.2f} | {summary / floor:.2f} | {RECORD_BYTES} |"
            )


if __name__ == "__main__":
    main()
