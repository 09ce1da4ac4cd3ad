"""Tiny models for tests and first tries: a 2-layer MLP and a 2-layer CNN, random weights.

    ansor-opt examples/models/tiny.py:tiny_cnn --ansor-extract-tasks
"""

from __future__ import annotations

import torch
from torch import nn


class TinyMLP(nn.Module):
    def __init__(self, features: int = 64, hidden: int = 128, classes: int = 16):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class TinyCNN(nn.Module):
    def __init__(self, channels: int = 16, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, stride=2, padding=1)
        self.fc = nn.Linear(2 * channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.conv2(x))
        return self.fc(x.mean(dim=(2, 3)))


def tiny_mlp(batch: int = 8) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return TinyMLP().eval(), (torch.randn(batch, 64),)


def tiny_cnn(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return TinyCNN().eval(), (torch.randn(batch, 3, 16, 16),)
