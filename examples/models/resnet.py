"""ResNet-18 and ResNet-50 (He et al. 2016, torchvision's layout) in plain PyTorch, random weights.

No torchvision: it does not work with the CPU torch build this project pins.

    ansor-opt examples/models/resnet.py:resnet50 --ansor-extract-tasks
"""

from __future__ import annotations

import torch
from torch import nn


def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(cout))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int = 1):
        super().__init__()
        self.body = nn.Sequential(conv_bn(cin, width, 3, stride), nn.ReLU(), conv_bn(width, width, 3))
        self.shortcut = conv_bn(cin, width, 1, stride) if stride != 1 or cin != width else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1):
        super().__init__()
        cout = width * self.expansion
        self.body = nn.Sequential(
            conv_bn(cin, width, 1), nn.ReLU(), conv_bn(width, width, 3, stride), nn.ReLU(), conv_bn(width, cout, 1)
        )
        self.shortcut = conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, block: type[BasicBlock] | type[Bottleneck], depths: tuple[int, ...], classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 64, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for stage, depth in enumerate(depths):
            width = 64 * 2**stage
            for index in range(depth):
                layers.append(block(cin, width, 2 if index == 0 and stage > 0 else 1))
                cin = width * block.expansion
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.layers(self.stem(x)).mean(dim=(2, 3)))


def _randomized(model: nn.Module) -> nn.Module:
    """Batch-norm statistics away from the identity, so a dropped or misplaced one shows in the outputs."""
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            nn.init.uniform_(module.weight, 0.5, 1.5)
            nn.init.uniform_(module.bias, -0.2, 0.2)
            module.running_mean.uniform_(-0.2, 0.2)
            module.running_var.uniform_(0.5, 1.5)
    return model.eval()


def resnet18(batch: int = 1, size: int = 224) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return _randomized(ResNet(BasicBlock, (2, 2, 2, 2))), (torch.randn(batch, 3, size, size),)


def resnet50(batch: int = 1, size: int = 224) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return _randomized(ResNet(Bottleneck, (3, 4, 6, 3))), (torch.randn(batch, 3, size, size),)
