"""MobileNetV2 (Sandler et al. 2018, torchvision's layout) in plain PyTorch, random weights.

    ansor-opt examples/models/mobilenet_v2.py:mobilenet_v2 --ansor-extract-tasks
"""

from __future__ import annotations

import torch
from torch import nn

# (expansion t, output channels c, repeats n, first stride s), as in the paper's Table 2.
SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def conv_bn_relu6(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout), nn.ReLU6()
    )


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expansion: int):
        super().__init__()
        hidden = cin * expansion
        layers = [conv_bn_relu6(cin, hidden, 1)] if expansion != 1 else []
        layers += [conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    def __init__(self, classes: int = 1000):
        super().__init__()
        layers, cin = [conv_bn_relu6(3, 32, 3, 2)], 32
        for expansion, cout, repeats, stride in SETTINGS:
            for index in range(repeats):
                layers.append(InvertedResidual(cin, cout, stride if index == 0 else 1, expansion))
                cin = cout
        layers.append(conv_bn_relu6(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean(dim=(2, 3)))


def mobilenet_v2(batch: int = 1, size: int = 224) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = MobileNetV2()
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            nn.init.uniform_(module.weight, 0.5, 1.5)
            nn.init.uniform_(module.bias, -0.2, 0.2)
            module.running_mean.uniform_(-0.2, 0.2)
            module.running_var.uniform_(0.5, 1.5)
    return model.eval(), (torch.randn(batch, 3, size, size),)
