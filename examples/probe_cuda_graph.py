"""Observe intermediate values inside a hand-captured CUDA graph on every replay, check
them against expectations, and record three replays as a Parquet run (GPU only).

    python examples/probe_cuda_graph.py --run-dir runs/probe-demo
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch_cudagraph_debug.tensor_debug import (
    CheckAction,
    RecordAction,
    TensorProbe,
    TensorRecorder,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", default="runs/probe-demo")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("this example captures a CUDA graph: it needs a GPU")

    # 1. A probe: the latest value of each observation, read after any replay.
    static_x = torch.arange(8, device="cuda", dtype=torch.float32)
    expected_relu = torch.relu(torch.arange(8.0) * 2 - 5)
    probe = TensorProbe("hidden", [RecordAction(), CheckAction({("after_relu", 0): expected_relu})])
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        first = probe(static_x * 2, name="after_scale")
        second = probe(torch.relu(first - 5), name="after_relu")
        output = second.square()
    graph.replay()
    snapshot = probe.snapshot(synchronize=torch.cuda.current_stream())
    for obs in snapshot.observations:
        print(f"replay={snapshot.replay_index} {obs.name}[{obs.invocation_index}]: {obs.tensor()}")
    print(f"output: {output.cpu()}")
    static_x.fill_(1.0)  # the next replay differs from what the check expects
    graph.replay()
    torch.cuda.synchronize()
    print(f"check after replay 2: {probe.check_status()}")
    probe.close()  # safe before `del graph`: the graph keeps the probe's slots alive
    del graph

    # 2. A recorder: one point per replay, into a Parquet run.
    # overwrite=True: running the example again replaces its run (and only its run).
    run_dir = Path(args.run_dir)
    with TensorRecorder(
        execution="cuda_graph", name="probe-demo", run_dir=run_dir, overwrite=True
    ) as rec:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            rec.observe(torch.sin(static_x), name="sin")
        for step in range(3):
            static_x.normal_()
            with rec.record_point(f"replay{step}"):
                graph.replay()
    run = rec.result
    print(f"recorded {run!r}")
    for point in run:
        sin = point.observation("sin")
        print(f"{point.label}: replay_index={point.replay_index} mean={sin.summary.mean:.4f}")


if __name__ == "__main__":
    main()
