"""MobileNetV2 for CIFAR at width multiplier 0.5 and expansion 6 (RepDistiller's ``mobile_half``,
the "MobileNetV2" student of the CRD tables; Sandler et al. 2018).

Layout (RepDistiller ``models/mobilenetv2.py``): 3x3 stride-2 conv-BN-ReLU stem to int(32 w)
channels; seven groups of inverted residuals (expansion t, channels int(c w), repeats n, first
stride s) with (t, c, n, s) = (1,16,1,1) (t,24,2,1) (t,32,3,2) (t,64,4,2) (t,96,3,1) (t,160,3,2)
(t,320,1,1); each block is 1x1 expand-BN-ReLU, 3x3 depthwise-BN-ReLU, 1x1 project-BN (linear
bottleneck) with an identity skip when stride 1 and widths match; 1x1 conv-BN-ReLU to 1280
channels (1280 is kept for w <= 1); global average pool; linear. At 32x32 the last map is 2x2.
Features: [stem, group1, group2, group4, group6, pooled]. Group outputs end in BN without ReLU, so
they already are pre-activations: ``preact`` returns the same list (as RepDistiller).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from semcl.models.kd.base import KDNet, init_he_out_linear_small

# (expansion, channels, repeats, first stride); None = the network's expansion t.
_SETTINGS = [(1, 16, 1, 1), (None, 24, 2, 1), (None, 32, 3, 2), (None, 64, 4, 2),
             (None, 96, 3, 1), (None, 160, 3, 2), (None, 320, 1, 1)]


def _conv_bn_relu(cin: int, cout: int, k: int, stride: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class _InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        mid = cin * expand
        self.use_skip = stride == 1 and cin == cout
        self.conv = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_skip else self.conv(x)


class MobileNetV2(KDNet):
    def __init__(self, num_classes: int = 100, width_mult: float = 0.5, expand: int = 6, in_channels: int = 3) -> None:
        super().__init__()
        self.num_classes = num_classes
        cin = int(32 * width_mult)
        self.conv1 = _conv_bn_relu(in_channels, cin, 3, 2)
        groups = []
        widths = []
        for t, c, n, s in _SETTINGS:
            cout = int(c * width_mult)
            layers = []
            for i in range(n):
                layers.append(_InvertedResidual(cin, cout, s if i == 0 else 1, expand if t is None else t))
                cin = cout
            groups.append(nn.Sequential(*layers))
            widths.append(cout)
        self.blocks = nn.ModuleList(groups)
        last = int(1280 * width_mult) if width_mult > 1.0 else 1280
        self.conv2 = _conv_bn_relu(cin, last, 1, 1)
        self.classifier = nn.Linear(last, num_classes)
        self.feature_channels = [int(32 * width_mult), widths[1], widths[2], widths[4], widths[6], last]
        init_he_out_linear_small(self, linear_std=0.01)

    def forward_features(self, x: torch.Tensor, preact: bool = False) -> tuple[list[torch.Tensor], torch.Tensor]:
        f0 = self.conv1(x)
        h = f0
        taps = []
        for i, group in enumerate(self.blocks):
            h = group(h)
            if i in (1, 2, 4, 6):
                taps.append(h)
        pooled = torch.flatten(F.adaptive_avg_pool2d(self.conv2(h), 1), 1)
        return [f0, *taps, pooled], self.classifier(pooled)

    def feature_modules(self) -> nn.ModuleList:
        return nn.ModuleList([self.conv1, self.blocks])


def mobile_half(num_classes: int = 100, in_channels: int = 3) -> MobileNetV2:
    return MobileNetV2(num_classes, width_mult=0.5, expand=6, in_channels=in_channels)
