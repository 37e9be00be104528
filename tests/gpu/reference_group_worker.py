"""One rank of the reference documents' two-rank examples, run by
``test_reference_groups_torchrun_gpu.py`` under ``torchrun --nproc-per-node=2``.

Each rank records on the GPU what the documents' group examples load, into the current
directory, with rank and world size left to the recorders' defaults (``RANK`` and
``WORLD_SIZE`` from torchrun):

- ``--part tensor``: ``eager-group/rank-<r>.tcgd-tensor`` (an eager run of the model) and
  ``cuda-graph-group/rank-<r>.tcgd-tensor`` (the same model captured once and replayed),
  both of run name ``forward-model`` and one point ``forward``; the same tensor groups
  under the CLI example's names ``eager-group`` and ``cg-group``.
- ``--part memory-baseline``: ``baseline/rank-<r>.tcgd-memory``, points ``forward_start``
  and ``forward_end`` around a capture into the process's first graph pool, ``(0, 1)``.
- ``--part memory-candidate``: ``candidate/rank-<r>.tcgd-memory``, points
  ``capture_start`` and ``capture_end`` around a larger capture into pool ``(0, 4)``.

The memory parts run in processes of their own so that the pools get the numbers the
documents map (a process's graph pool handles count from 1).

Ranks share GPUs round-robin (two ranks on one GPU when the machine has one); the ranks
synchronise over gloo, which allows that, where NCCL refuses two ranks on one device.
"""

from __future__ import annotations

import argparse
import os
import shutil

import torch
import torch.distributed as dist


def model_and_input(device: torch.device) -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)  # every rank and both groups: the same weights and input
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8))
    return model.to(device), torch.randn(16, 64, device=device)


def record_tensor_groups(device: torch.device, group_id: str) -> None:
    from torch_cudagraph_debug.tensor_debug import TensorRecorder

    rank = dist.get_rank()
    model, x = model_and_input(device)
    with torch.no_grad():
        with TensorRecorder(
            execution="eager",
            bundle_dir=f"eager-group/rank-{rank}.tcgd-tensor",
            name="forward-model",
            group_id=f"{group_id}-eager",
        ) as rec:
            with rec.record_point("forward"):
                hidden = rec.observe(model[1](model[0](x)), name="hidden")
                rec.observe(model[2](hidden), name="output")

        static_x = x.clone()
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):  # warm up outside the capture, as torch advises
            model(static_x)
        torch.cuda.current_stream(device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with TensorRecorder(
            execution="cuda_graph",
            bundle_dir=f"cuda-graph-group/rank-{rank}.tcgd-tensor",
            name="forward-model",
            group_id=f"{group_id}-graph",
        ) as rec:
            with torch.cuda.graph(graph):
                hidden = rec.observe(model[1](model[0](static_x)), name="hidden")
                rec.observe(model[2](hidden), name="output")
            with rec.record_point("forward"):
                graph.replay()
    # The tensor CLI example names its groups eager-group and cg-group.
    bundle = f"rank-{rank}.tcgd-tensor"
    shutil.copytree(f"cuda-graph-group/{bundle}", f"cg-group/{bundle}")


def record_memory(device: torch.device, part: str, group_id: str) -> None:
    from torch_cudagraph_debug.memory_debug import MemoryRecorder

    rank = dist.get_rank()
    baseline = part == "memory-baseline"
    labels = ("forward_start", "forward_end") if baseline else ("capture_start", "capture_end")
    pools = [torch.cuda.graph_pool_handle() for _ in range(1 if baseline else 4)]
    assert pools[-1] == ((0, 1) if baseline else (0, 4)), pools
    mib = (16 if baseline else 24) * 1024 * 1024 // 4
    static_x = torch.ones(mib, device=device)
    torch.cuda.synchronize(device)
    with MemoryRecorder(
        name="forward" if baseline else "capture",
        bundle_dir=f"{'baseline' if baseline else 'candidate'}/rank-{rank:05d}.tcgd-memory",
        group_id=f"{group_id}-{part}",
        devices=[device],
    ) as rec:
        rec.record_point(labels[0])
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pools[-1]):
            out = static_x * 2
        graph.replay()
        torch.cuda.synchronize(device)
        rec.record_point(labels[1])
    del out, graph


def main() -> None:
    parser = argparse.ArgumentParser(description="one rank of the reference's group examples")
    parser.add_argument("--part", choices=["tensor", "memory-baseline", "memory-candidate"])
    parser.add_argument("--group-id", default="reference-groups")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    local_rank = int(os.environ.get("LOCAL_RANK", dist.get_rank()))
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    if args.part == "tensor":
        record_tensor_groups(device, args.group_id)
    else:
        record_memory(device, args.part, args.group_id)
    dist.barrier()
    print(f"rank {dist.get_rank()} of {dist.get_world_size()} on {device}: {args.part} recorded")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
