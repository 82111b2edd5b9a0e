"""Wide ResNets WRN-d-k of the KD benchmarks (Zagoruyko & Komodakis 2016): wrn_16_1, wrn_16_2,
wrn_40_1, wrn_40_2.

Layout (RepDistiller ``models/wrn.py``): 3x3 conv stem to 16 channels (no BN/ReLU after it);
three stages of n = (d - 4) / 6 pre-activation blocks with widths 16k, 32k, 64k at strides 1, 2, 2;
a block is ``conv2(relu(bn2(conv1(relu(bn1 x))))) + shortcut``, where a block that changes the
width applies ``relu(bn1 x)`` to the shortcut input as well and projects it with a bias-free 1x1
conv; a final BN + ReLU, global average pool, linear.

Features: [stem, stage1, stage2, stage3, pooled]. A stage's output is itself pre-activation (its
ReLU comes later), so RepDistiller's ``preact`` variant returns the stage outputs passed through
the BN that *follows* them: stage1 -> bn1 of stage2's first block, stage2 -> bn1 of stage3's first
block, stage3 -> the final BN. RepDistiller re-applies those BNs a second time in its forward
(in train mode updating their running statistics twice per batch); here the values are taken from
the one pass, which gives the same numbers without the extra statistics update.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from semcl.models.kd.base import KDNet, init_he_out_linear_small


class _WideBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.shortcut = None if cin == cout else nn.Conv2d(cin, cout, 1, stride, 0, bias=False)

    def forward_with_bn(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(block output, bn1(x)): the second is the previous stage's ``preact`` feature."""
        normed = self.bn1(x)
        act = F.relu(normed)
        out = self.conv2(F.relu(self.bn2(self.conv1(act))))
        # A width-changing block shortcuts from the activated input (Zagoruyko's layout).
        skip = x if self.shortcut is None else self.shortcut(act)
        return out + skip, normed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_with_bn(x)[0]


class WideResNet(KDNet):
    def __init__(self, depth: int, widen: int, num_classes: int = 100, in_channels: int = 3) -> None:
        super().__init__()
        if (depth - 4) % 6 != 0:
            raise ValueError(f"WRN depth must be 6n+4, got {depth}")
        n = (depth - 4) // 6
        widths = [16, 16 * widen, 32 * widen, 64 * widen]
        self.num_classes = num_classes
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False)
        self.block1 = self._stage(widths[0], widths[1], n, 1)
        self.block2 = self._stage(widths[1], widths[2], n, 2)
        self.block3 = self._stage(widths[2], widths[3], n, 2)
        self.bn1 = nn.BatchNorm2d(widths[3])
        self.fc = nn.Linear(widths[3], num_classes)
        self.feature_channels = [widths[0], widths[1], widths[2], widths[3], widths[3]]
        init_he_out_linear_small(self, linear_std=None)

    @staticmethod
    def _stage(cin: int, cout: int, n: int, stride: int) -> nn.Sequential:
        return nn.Sequential(*(_WideBlock(cin if i == 0 else cout, cout, stride if i == 0 else 1) for i in range(n)))

    @staticmethod
    def _run_stage(stage: nn.Sequential, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Stage output and bn1 of its first block applied to the stage input."""
        x, normed_in = stage[0].forward_with_bn(x)
        for block in stage[1:]:
            x = block(x)
        return x, normed_in

    def forward_features(self, x: torch.Tensor, preact: bool = False) -> tuple[list[torch.Tensor], torch.Tensor]:
        f0 = self.conv1(x)
        f1 = self.block1(f0)
        f2, p1 = self._run_stage(self.block2, f1)
        f3, p2 = self._run_stage(self.block3, f2)
        p3 = self.bn1(f3)
        pooled = torch.flatten(F.adaptive_avg_pool2d(F.relu(p3), 1), 1)
        feats = [f0, p1, p2, p3, pooled] if preact else [f0, f1, f2, f3, pooled]
        return feats, self.fc(pooled)

    def feature_modules(self) -> nn.ModuleList:
        # As RepDistiller: the final BN is not part of the initialisation stage's trainable set.
        return nn.ModuleList([self.conv1, self.block1, self.block2, self.block3])


def wrn_16_1(num_classes: int = 100, in_channels: int = 3) -> WideResNet:
    return WideResNet(16, 1, num_classes, in_channels)


def wrn_16_2(num_classes: int = 100, in_channels: int = 3) -> WideResNet:
    return WideResNet(16, 2, num_classes, in_channels)


def wrn_40_1(num_classes: int = 100, in_channels: int = 3) -> WideResNet:
    return WideResNet(40, 1, num_classes, in_channels)


def wrn_40_2(num_classes: int = 100, in_channels: int = 3) -> WideResNet:
    return WideResNet(40, 2, num_classes, in_channels)
