"""Small models the compile-plugin tests share."""

from __future__ import annotations

import torch
from torch import nn


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
