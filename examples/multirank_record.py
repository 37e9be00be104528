"""Record one run per rank of a multi-process job into one job root (GPU ranks with NCCL
when there are GPUs, CPU ranks with gloo otherwise).

    torchrun --nproc_per_node=2 examples/multirank_record.py --job-dir runs/job
    tcgd tensor group-summary runs/job
    tcgd query "SELECT rank, count(*) FROM observations GROUP BY rank" runs/job
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
from torch_cudagraph_debug.tensor_debug import TensorRecorder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job-dir", default="runs/job")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank))) if cuda else None
    if device is not None:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    weight = torch.randn(32, 32, device=device)
    with TensorRecorder(name="job", run_dir=args.job_dir, group_id="demo-job") as rec:
        for step in range(args.steps):
            x = torch.randn(8, 32, device=device) + rank  # each rank sees its own data
            with rec.record_point(f"step{step}"):
                h = rec.observe(x @ weight, name="hidden")
                total = h.sum()
                dist.all_reduce(total)  # identical on every rank after the reduction
                rec.observe(total, name="allreduced")
    print(f"rank {rank}: recorded {rec.result!r}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
