"""ResNet-50 for CIFAR (RepDistiller's ``ResNet50`` from ``models/resnetv2.py``, the teacher of the
cross-family CRD pairs): He et al. 2016's bottleneck ResNet-50 with a 3x3 stride-1 stem and no
max-pool, stages of 3/4/6/3 bottlenecks (width 64/128/256/512, expansion 4) at strides 1/2/2/2,
projection shortcuts (1x1 conv + BN) where the shape changes, global average pool, linear on 2048.
Features: [stem, stage1, stage2, stage3, stage4, pooled]; ``preact`` gives each stage's last
``bn3(conv3) + shortcut`` before its ReLU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from semcl.models.kd.base import KDNet, init_kaiming_fan_out


class _Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        pre = self.bn3(self.conv3(out)) + self.shortcut(x)
        return F.relu(pre), pre


class _Stage(nn.Module):
    def __init__(self, cin: int, planes: int, n: int, stride: int) -> None:
        super().__init__()
        cout = planes * _Bottleneck.expansion
        self.blocks = nn.ModuleList(_Bottleneck(cin if i == 0 else cout, planes, stride if i == 0 else 1) for i in range(n))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pre = x
        for block in self.blocks:
            x, pre = block(x)
        return x, pre


class ResNetBottleneckCifar(KDNet):
    def __init__(self, num_blocks: tuple[int, int, int, int] = (3, 4, 6, 3), num_classes: int = 100, in_channels: int = 3) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.conv1 = nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        planes = (64, 128, 256, 512)
        strides = (1, 2, 2, 2)
        cin = 64
        stages = []
        for p, n, s in zip(planes, num_blocks, strides, strict=True):
            stages.append(_Stage(cin, p, n, s))
            cin = p * _Bottleneck.expansion
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.linear = nn.Linear(cin, num_classes)
        self.feature_channels = [64, *(p * _Bottleneck.expansion for p in planes), cin]
        init_kaiming_fan_out(self)

    def forward_features(self, x: torch.Tensor, preact: bool = False) -> tuple[list[torch.Tensor], torch.Tensor]:
        f0 = F.relu(self.bn1(self.conv1(x)))
        f1, p1 = self.layer1(f0)
        f2, p2 = self.layer2(f1)
        f3, p3 = self.layer3(f2)
        f4, p4 = self.layer4(f3)
        pooled = torch.flatten(F.adaptive_avg_pool2d(f4, 1), 1)
        feats = [f0, p1, p2, p3, p4, pooled] if preact else [f0, f1, f2, f3, f4, pooled]
        return feats, self.linear(pooled)

    def feature_modules(self) -> nn.ModuleList:
        return nn.ModuleList([self.conv1, self.bn1, self.layer1, self.layer2, self.layer3, self.layer4])


def resnet50_cifar(num_classes: int = 100, in_channels: int = 3) -> ResNetBottleneckCifar:
    return ResNetBottleneckCifar((3, 4, 6, 3), num_classes, in_channels)
