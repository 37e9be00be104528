"""Record intermediate tensors of a small model's training steps, then query the run with
DuckDB, without this package, straight from the Parquet files of its job root.

    python examples/record_eager.py --run-dir runs/eager-demo

Runs on the GPU when there is one, else on the CPU.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import nn
from torch_cudagraph_debug.tensor_debug import TensorRecorder, TensorRun


class Block(nn.Module):
    """A pre-norm MLP block; the recorder observes what flows between its layers."""

    def __init__(self, width: int, recorder: TensorRecorder):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)
        self.recorder = recorder

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.recorder.observe(self.norm(x), name="norm")
        h = self.recorder.observe(torch.nn.functional.gelu(self.up(h)), name="up.gelu")
        return x + self.recorder.observe(self.down(h), name="down")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", default="runs/eager-demo")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    run_dir = Path(args.run_dir)
    torch.manual_seed(0)
    device = torch.device(args.device)

    # overwrite=True: running the example again replaces its run (and only its run).
    with TensorRecorder(
        name="eager-demo", run_dir=run_dir, run_metadata={"model": "2x mlp"}, overwrite=True
    ) as rec:
        model = nn.Sequential(Block(64, rec), Block(64, rec)).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(args.steps):
            x = torch.randn(8, 64, device=device)
            with rec.record_point(f"step{step}", metadata={"step": step}):
                out = model(x)
                loss = rec.observe(out.square().mean(), name="loss")
                loss.backward()
                rec.observe(model[0].up.weight.grad, name="grad.block0.up")
            optimizer.step()
            optimizer.zero_grad()
    run: TensorRun = rec.result
    print(f"recorded {run!r}")
    print(f"device: {device}; points: {run.labels}")

    import duckdb

    # The root may hold other runs (and a run it held before this one): run_id picks the
    # rows of this run. The rank is a path partition (`rank=0/`), not a column of the files.
    observations = (
        f"read_parquet('{run_dir}/observations/rank=*/*.parquet', hive_partitioning=true)"
    )
    query = f"""
        SELECT rank, point_label, name, invocation_index AS inv, dtype, numel,
               round(mean, 5) AS mean, round(std, 5) AS std, round(l2, 4) AS l2
        FROM {observations}
        WHERE run_id = '{run.run_id}' AND name IN ('down', 'loss')
        ORDER BY point_index, ordinal
    """
    print("DuckDB over the run's observation files:")
    print(duckdb.sql(query))
    loss_trend = duckdb.sql(
        f"SELECT list(round(mean, 5) ORDER BY point_index) FROM {observations} "
        f"WHERE run_id = '{run.run_id}' AND name = 'loss'"
    ).fetchall()[0][0]
    print(f"loss by step: {loss_trend}")


if __name__ == "__main__":
    main()
