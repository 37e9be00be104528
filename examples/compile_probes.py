"""Compile a small model with probes chosen by a config file, record every call, compare
it site by site with an eager reference, and query the run with DuckDB. CUDA Graph Trees
(mode="reduce-overhead") on a GPU; Inductor's CPU backend otherwise.

    python examples/compile_probes.py --run-dir runs/compiled
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch_cudagraph_debug.compile as tcgd_compile
from torch import nn
from torch_cudagraph_debug.compile.differential import differential
from torch_cudagraph_debug.compile.explain import explain
from torch_cudagraph_debug.tensor_debug import TensorComparisonOptions

HERE = Path(__file__).resolve().parent


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


class Model(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.blocks = nn.Sequential(*(Block(width) for _ in range(depth)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", default="runs/compiled")
    parser.add_argument("--config", default=str(HERE / "probes.toml"))
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    mode = "reduce-overhead" if cuda else None
    run_dir = Path(args.run_dir)

    torch.manual_seed(0)
    model = Model().to(device).eval()
    example = torch.randn(8, 64, device=device)

    # 1. What the config selects, and why (a throwaway compilation).
    print(explain(args.config, model, example, mode=mode).to_text(show_rejected=False))

    # 2. Record: every call of the compiled model is a point of the run (a re-run of the
    #    example replaces the run it wrote before).
    compiled = tcgd_compile.compile(
        model, probes=args.config, mode=mode, run_dir=run_dir, overwrite=True
    )
    with torch.no_grad():
        for _ in range(args.steps):
            compiled(torch.randn(8, 64, device=device))
    run = tcgd_compile.session_of(compiled).finish()
    print(f"\nrecorded {run!r}")
    print(f"points: {run.labels}; replay indices: {[p.replay_index for p in run.points]}")

    # 3. Differential report: the eager model against the compiled model at the same sites
    #    (and, on a GPU, against its CUDA graph replays), on the same inputs; a verdict per
    #    comparison and the first diverging site in execution order. Inductor's fused
    #    kernels (GELU here) round differently from ATen's in the last bits of float32, so
    #    compiled and eager agree to a tolerance, not bit for bit; the float64 rule says
    #    whether a difference is more than rounding.
    batches = [(torch.randn(8, 64, device=device),) for _ in range(3)]
    result = differential(
        model,
        batches,
        probes=args.config,
        run_dir=run_dir.parent / f"{run_dir.name}-diff",
        mode=mode,
        overwrite=True,
        comparison_options=TensorComparisonOptions(rtol=1e-4, atol=1e-5),
    )
    first = result.first_divergence
    print(f"\ndifferential (eager vs compiled): {result.status}")
    for verdict in result.verdicts:
        print(f"  {verdict.comparison} ({verdict.scope}): {verdict.status}")
    if first is not None:
        print(f"first issue: {first.description}")
    # Each site runs at every call: an issue names the point (the call) it is at.
    for issue in result.comparison.worst_issues(3):
        site = issue.observation
        print(
            f"  worst: point {issue.label!r}, {site.name}[{site.invocation_index}] "
            f"({site.status}, max abs error {site.max_abs_error})"
        )

    # 4. Query the run's Parquet files directly (run_id picks its rows among the root's).
    query(run_dir, run.run_id)

    print("\nruns written (job roots; `tcgd tensor summary ROOT --name NAME` reads one):")
    for written, what in (
        (run, f"the compiled model's {len(run.points)} calls"),
        *(
            (variant, f"differential: the {variant.name} variant")
            for variant in (result.eager, result.compiled, result.graphs, result.float64)
            if variant is not None
        ),
    ):
        print(f"  {written.path}  (run {written.name!r}: {what})")


def query(run_dir: Path, run_id: str) -> None:
    import duckdb

    print("\nDuckDB: per site, mean and max |value| over the recorded calls")
    if not any(run_dir.glob("observations/rank=*/*.parquet")):
        # read_parquet fails on a glob that matches no file.
        print(f"  no observation files under {run_dir}/observations: nothing was recorded")
        return
    print(
        duckdb.sql(
            f"""
            SELECT graph_kind, module_path, aten_op, count(*) AS points,
                   round(avg(mean), 5) AS avg_mean, round(max(greatest(abs(min), abs(max))), 4)
                   AS max_abs
            FROM read_parquet('{run_dir}/observations/rank=*/*.parquet')
            WHERE run_id = '{run_id}'
            GROUP BY ALL ORDER BY module_path, aten_op
            """
        )
    )


if __name__ == "__main__":
    main()
