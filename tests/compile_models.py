"""Small models the compile-plugin tests share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
import torch_cudagraph_debug.compile as tcgd_compile
from torch import nn
from torch._inductor.custom_graph_pass import CustomGraphPass


class MLP(nn.Module):
    """Linear, ReLU, Linear: two addmm sites and one relu site."""

    def __init__(self, inputs: int = 8, hidden: int = 16, outputs: int = 4):
        super().__init__()
        self.fc1 = nn.Linear(inputs, hidden)
        self.fc2 = nn.Linear(hidden, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class SigmoidMLP(nn.Module):
    """Three linears with a relu and a sigmoid between them (differential tests plant their
    divergence in the sigmoid)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.sigmoid(self.fc2(torch.relu(self.fc1(x)))))


class PerturbSigmoid(CustomGraphPass):
    """A post-grad pass (with its own cache key) that makes sigmoid nodes compute tanh,
    keeping their names: a stand-in for a miscompiled kernel on the compiled side only."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        for node in graph.nodes:
            if node.target is torch.ops.aten.sigmoid.default:
                node.target = torch.ops.aten.tanh.default

    def uuid(self) -> bytes:
        return b"perturb-sigmoid"


def compile_on_graph_trees(
    model: nn.Module, config: object, run_dir: Path
) -> tuple[Callable[..., object], tcgd_compile.ProbeSession]:
    """``model`` compiled with backend="tcgd" under CUDA Graph Trees (mode
    "reduce-overhead"), recording as ``config`` says into ``run_dir``; and its session."""
    compiled = torch.compile(
        model,
        backend="tcgd",
        options={"probes": config, "run_dir": run_dir, "mode": "reduce-overhead"},
    )
    return compiled, tcgd_compile.session_of(compiled)


def write_differential_factory(directory: Path) -> tuple[Path, Path]:
    """A `tcgd differential` factory file (`make()` returns a small model and two batches)
    and a config selecting its addmm and relu nodes, written into `directory`."""
    factory = directory / "factory.py"
    factory.write_text(
        "import torch\n"
        "def make():\n"
        "    torch.manual_seed(0)\n"
        "    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())\n"
        "    return model, [(torch.randn(3, 8),) for _ in range(2)]\n"
    )
    config = directory / "probes.toml"
    config.write_text('version = 1\n[[select]]\nops = ["aten.addmm", "aten.relu"]\n')
    return factory, config
