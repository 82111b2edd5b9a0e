"""CIFAR ResNets of the KD benchmarks: resnet8/14/20/32/44/56/110 (widths 16-16-32-64) and
resnet8x4 / resnet32x4 (widths 32-64-128-256), He et al. 2016's 6n+2 basic-block design.

Layout (RepDistiller ``models/resnet.py``): 3x3 conv stem (no max-pool), BN, ReLU; three stages of
n = (depth - 2) / 6 basic blocks at strides 1, 2, 2; a 1x1 conv + BN projection shortcut wherever
the shape changes (the x4 nets' first stage too, 32 -> 64 channels); global average pool; linear.
Features: [stem, stage1, stage2, stage3, pooled]; ``preact`` gives each stage's last
``bn2(conv2) + shortcut`` before its ReLU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from semcl.models.kd.base import KDNet, init_kaiming_fan_out


class _Basic(nn.Module):
    """relu(bn2(conv2(relu(bn1(conv1 x)))) + shortcut(x)); forward returns (out, pre-ReLU sum)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = F.relu(self.bn1(self.conv1(x)))
        pre = self.bn2(self.conv2(out)) + (x if self.downsample is None else self.downsample(x))
        return F.relu(pre), pre


class _Stage(nn.Module):
    def __init__(self, cin: int, cout: int, blocks: int, stride: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(_Basic(cin if i == 0 else cout, cout, stride if i == 0 else 1) for i in range(blocks))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pre = x
        for block in self.blocks:
            x, pre = block(x)
        return x, pre


class CifarResNet(KDNet):
    """``depth`` = 6n + 2; ``widths`` = (stem, stage1, stage2, stage3) channels."""

    def __init__(self, depth: int, widths: tuple[int, int, int, int], num_classes: int = 100, in_channels: int = 3) -> None:
        super().__init__()
        if (depth - 2) % 6 != 0:
            raise ValueError(f"CIFAR ResNet depth must be 6n+2, got {depth}")
        n = (depth - 2) // 6
        self.num_classes = num_classes
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.layer1 = _Stage(widths[0], widths[1], n, 1)
        self.layer2 = _Stage(widths[1], widths[2], n, 2)
        self.layer3 = _Stage(widths[2], widths[3], n, 2)
        self.fc = nn.Linear(widths[3], num_classes)
        self.feature_channels = [widths[0], widths[1], widths[2], widths[3], widths[3]]
        init_kaiming_fan_out(self)

    def forward_features(self, x: torch.Tensor, preact: bool = False) -> tuple[list[torch.Tensor], torch.Tensor]:
        f0 = F.relu(self.bn1(self.conv1(x)))
        f1, p1 = self.layer1(f0)
        f2, p2 = self.layer2(f1)
        f3, p3 = self.layer3(f2)
        pooled = torch.flatten(F.adaptive_avg_pool2d(f3, 1), 1)
        feats = [f0, p1, p2, p3, pooled] if preact else [f0, f1, f2, f3, pooled]
        return feats, self.fc(pooled)

    def feature_modules(self) -> nn.ModuleList:
        return nn.ModuleList([self.conv1, self.bn1, self.layer1, self.layer2, self.layer3])


_THIN = (16, 16, 32, 64)
_X4 = (32, 64, 128, 256)


def resnet8(num_classes: int = 100, in_channels: int = 3) -> CifarResNet:
    return CifarResNet(8, _THIN, num_classes, in_channels)


def resnet14(num_classes: int = 100, in_channels: int = 3) -> CifarResNet:
    return CifarResNet(14, _THIN, num_classes, in_channels)


def resnet20(num_classes: int = 100, in_channels: int = 3) -> CifarResNet:
    return CifarResNet(20, _THIN, num_classes, in_channels)


def resnet32(num_classes: int = 100, in_channels: int = 3) -> CifarResNet:
    return CifarResNet(32, _THIN, num_classes, in_channels)


def resnet44(num_classes: int = 100, in_channels: int = 3) -> CifarResNet:
    return CifarResNet(44, _THIN, num_classes, in_channels)


def resnet56(num_classes: int = 100, in_channels: int = 3) -> CifarResNet:
    return CifarResNet(56, _THIN, num_classes, in_channels)


def resnet110(num_classes: int = 100, in_channels: int = 3) -> CifarResNet:
    return CifarResNet(110, _THIN, num_classes, in_channels)


def resnet8x4(num_classes: int = 100, in_channels: int = 3) -> CifarResNet:
    return CifarResNet(8, _X4, num_classes, in_channels)


def resnet32x4(num_classes: int = 100, in_channels: int = 3) -> CifarResNet:
    return CifarResNet(32, _X4, num_classes, in_channels)
