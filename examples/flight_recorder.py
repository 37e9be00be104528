"""Find where a NaN first appeared in a compiled model: summaries of every projection on
every call, a flight recorder that keeps the full values of the last calls on the device,
and the first-anomaly query. Under CUDA Graph Trees on a GPU (the history lands in the run
when the NaN appears); on the CPU the summaries alone locate it.

    python examples/flight_recorder.py --run-dir runs/flight
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys

import torch
import torch_cudagraph_debug.compile as tcgd_compile
from torch import nn

CALLS = 12
BAD_CALL = 7  # from this call on, layer 2's input gain holds a NaN


class Gained(nn.Module):
    """Linear layers, each fed through a gain: a NaN in one gain makes that layer's matmul
    the first site with a NaN."""

    def __init__(self, width: int = 64, depth: int = 4):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        for i in range(depth):
            self.register_buffer(f"gain{i}", torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = torch.relu(layer(x * getattr(self, f"gain{i}")))
        return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    torch.manual_seed(0)
    model = Gained().to(device)
    config = {
        "version": 1,
        "run": {"payload": "summary", "history": 4, "overwrite": True},
        "select": [{"ops": ["aten.addmm", "aten.mm"]}],
    }
    mode = "reduce-overhead" if cuda else None
    compiled = tcgd_compile.compile(model, probes=config, mode=mode, run_dir=args.run_dir)
    with torch.no_grad():
        for call in range(CALLS):
            if call == BAD_CALL:
                model.gain2[5] = math.nan
            compiled(torch.randn(32, 64, device=device))
    run = tcgd_compile.session_of(compiled).finish()

    anomaly = run.first_anomaly("nan")
    print(f"first NaN: point {anomaly.label}, site {anomaly.name} ({anomaly.site.module_path})")
    flight = [p.label for p in run.points if p.label.startswith("history:")]
    print(f"flight recorder points: {flight or 'none (no CUDA graphs here)'}")
    # The same question from the command line (exit status 1: an anomaly was found).
    command = [sys.executable, "-m", "torch_cudagraph_debug.cli", "tensor", "first-anomaly"]
    status = subprocess.run([*command, args.run_dir, "--kind", "nan"], check=False).returncode
    print(f"tcgd tensor first-anomaly exit status: {status}")


if __name__ == "__main__":
    main()
