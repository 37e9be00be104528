"""Replay cost of observing K tensors of size S in a hand-captured CUDA graph (GPU only).

    python benches/probe_overhead.py [--quick]

For each workload, four graphs whose own work is one elementwise op per tensor are
captured in this process and timed with CUDA events (minimum and median over rounds of
replays):

- ``none``: no observation (the baseline);
- ``probe``: a ``TensorProbe`` with ``RecordAction`` on every output (device slots);
- ``memcpy``: a raw device-to-device copy of every output into a preallocated buffer
  (``dst.copy_(y)`` captured as memcpy nodes: the floor for one copy node per tensor);
- ``d2h``: a device-to-host copy of every output into pinned memory (staging on the host).

Printed figures: added replay time of each method over ``none``, the probe's added time
as a ratio to ``memcpy`` and to the physical floor (read + write at the device's copy
bandwidth, --bandwidth), and how many times cheaper the probe is than ``d2h``.
"""

from __future__ import annotations

import argparse

import torch
from _support import replay_times
from torch_cudagraph_debug.tensor_debug import RecordAction, TensorProbe

WORKLOADS = [(64, 4 << 10), (64, 4 << 20), (16, 64 << 20)]


def capture(inputs, method, probe=None, targets=None):
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for x in inputs:  # warm up kernels outside the capture
            x.mul(2)
        with torch.cuda.graph(graph, stream=stream):
            for i, x in enumerate(inputs):
                y = x * 2
                if method == "probe":
                    probe(y, name=f"t{i}")
                elif method in ("memcpy", "d2h"):
                    targets[i].copy_(y, non_blocking=True)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    return graph


def time_replays(graph, rounds: int, replays: int) -> tuple[float, float]:
    """Minimum and median microseconds per replay over `rounds` rounds, after 20 warm-up
    replays."""
    for _ in range(20):
        graph.replay()
    torch.cuda.synchronize()
    return replay_times(graph, rounds, replays)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and replays")
    parser.add_argument(
        "--bandwidth", type=float, default=4.3e12, help="copy floor bandwidth, bytes/s"
    )
    args = parser.parse_args()
    rounds, replays = (3, 50) if args.quick else (5, 200)
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    print(f"timing: minimum of {rounds} rounds of {replays} replays (median in brackets), us\n")
    print(
        "| K x size | none | probe (+added) | memcpy (+added) | d2h (+added) "
        "| probe/memcpy | probe/floor | d2h/probe |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for count, size in WORKLOADS:
        numel = size // 4
        inputs = [torch.randn(numel, device="cuda") for _ in range(count)]
        results = {}
        graphs = {}
        probe = TensorProbe("bench", [RecordAction()])
        for method in ("none", "probe", "memcpy", "d2h"):
            targets = None
            if method == "memcpy":
                targets = [torch.empty(numel, device="cuda") for _ in range(count)]
            elif method == "d2h":
                targets = [torch.empty(numel, pin_memory=True) for _ in range(count)]
            graphs[method] = (capture(inputs, method, probe, targets), targets)
            results[method] = time_replays(graphs[method][0], rounds, replays)
        # The probe's slots must hold the last replay's values: check one.
        last = probe.snapshot().tensor("t0")
        assert torch.equal(last, (inputs[0] * 2).cpu()), "probe slot does not match"
        base = results["none"][0]
        added = {m: results[m][0] - base for m in results}
        floor = count * size * 2 / args.bandwidth * 1e6

        def cell(m, results=results, added=added):
            return f"{results[m][0]:.1f} [{results[m][1]:.1f}] (+{added[m]:.1f})"

        label = f"{count} x {size // 1024} KiB" if size < 1 << 20 else f"{count} x {size >> 20} MiB"
        print(
            f"| {label} | {base:.1f} | {cell('probe')} | {cell('memcpy')} | {cell('d2h')} "
            f"| {added['probe'] / max(added['memcpy'], 1e-9):.2f} "
            f"| {added['probe'] / floor:.2f} "
            f"| {added['d2h'] / max(added['probe'], 1e-9):.1f} |"
        )
        del graphs
        probe.close()
        torch.cuda.synchronize()
    print(
        f"\nfloor: K x size x 2 bytes at {args.bandwidth / 1e12:.1f} TB/s. probe/memcpy and "
        "probe/floor compare added replay time; d2h/probe: times cheaper than host staging."
    )


if __name__ == "__main__":
    main()
