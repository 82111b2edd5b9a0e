"""ShuffleNetV1 (g = 3, Zhang et al. 2018) and ShuffleNetV2 (1x, Ma et al. 2018) for CIFAR,
RepDistiller's ``ShuffleV1`` / ``ShuffleV2``.

Both use a 1x1 conv-BN-ReLU stem to 24 channels (no stride, no max-pool) and three stages that
each halve the resolution, global average pool, linear (RepDistiller's fixed ``avg_pool2d(4)``
is the adaptive pool at 32x32). Features: [stem, stage1, stage2, stage3, pooled]; ``preact`` takes
each stage's last block before its final ReLU.

V1 stage widths 240/480/960 with 4/8/4 bottlenecks. Bottleneck: grouped 1x1 to out/4 channels
(ungrouped when the input is the 24-channel stem) -BN-ReLU, channel shuffle, 3x3 depthwise -BN-
ReLU, grouped 1x1 -BN; stride-2 blocks concatenate a 3x3/2 average-pooled shortcut (their branch
produces out - in channels), stride-1 blocks add the identity; ReLU.

V2 stage widths 116/232/464, 3/7/3 basic units after one down-sampling unit, 1x1 conv-BN-ReLU to
1024 before pooling. Down unit: [dw3x3/2-BN, 1x1-BN-ReLU] || [1x1-BN-ReLU, dw3x3/2-BN, 1x1-BN-ReLU],
concatenated and shuffled. Basic unit: channel split in halves, the second half through
1x1-BN-ReLU, dw3x3-BN, 1x1-BN-ReLU, concatenated with the first half, shuffled; its ``preact`` is
the concatenation before the last ReLU and before the shuffle (as RepDistiller).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from semcl.models.kd.base import KDNet


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """[N, g*c, H, W] -> interleave: channel j*c + i moves to i*g + j."""
    n, ch, h, w = x.shape
    return x.view(n, groups, ch // groups, h, w).transpose(1, 2).reshape(n, ch, h, w)


class _V1Bottleneck(nn.Module):
    def __init__(self, cin: int, branch_out: int, stride: int, groups: int) -> None:
        super().__init__()
        mid = branch_out // 4
        self.stride = stride
        # The stem has only 24 channels: the first 1x1 conv is not grouped there (ShuffleNet paper).
        self.g1 = 1 if cin == 24 else groups
        self.groups = groups
        self.conv1 = nn.Conv2d(cin, mid, 1, groups=self.g1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(mid, branch_out, 1, groups=groups, bias=False)
        self.bn3 = nn.BatchNorm2d(branch_out)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = channel_shuffle(F.relu(self.bn1(self.conv1(x))), self.g1)
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.stride == 2:
            pre = torch.cat([out, F.avg_pool2d(x, 3, stride=2, padding=1)], 1)
        else:
            pre = out + x
        return F.relu(pre), pre


class _V2Basic(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        half = ch // 2
        self.conv1 = nn.Conv2d(half, half, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(half)
        self.conv2 = nn.Conv2d(half, half, 3, 1, 1, groups=half, bias=False)
        self.bn2 = nn.BatchNorm2d(half)
        self.conv3 = nn.Conv2d(half, half, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(half)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = x.shape[1] // 2
        x1, x2 = x[:, :c], x[:, c:]
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x2)))))
        branch_pre = self.bn3(self.conv3(out))
        out = channel_shuffle(torch.cat([x1, F.relu(branch_pre)], 1), 2)
        return out, torch.cat([x1, branch_pre], 1)


class _V2Down(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        mid = cout // 2
        self.conv1 = nn.Conv2d(cin, cin, 3, 2, 1, groups=cin, bias=False)
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv2 = nn.Conv2d(cin, mid, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(cin, mid, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(mid)
        self.conv4 = nn.Conv2d(mid, mid, 3, 2, 1, groups=mid, bias=False)
        self.bn4 = nn.BatchNorm2d(mid)
        self.conv5 = nn.Conv2d(mid, mid, 1, bias=False)
        self.bn5 = nn.BatchNorm2d(mid)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        left = F.relu(self.bn2(self.conv2(self.bn1(self.conv1(x)))))
        right = self.bn4(self.conv4(F.relu(self.bn3(self.conv3(x)))))
        right = F.relu(self.bn5(self.conv5(right)))
        out = channel_shuffle(torch.cat([left, right], 1), 2)
        return out, out


class _Stage(nn.Module):
    """Blocks returning (out, preact); the stage returns its last block's pair."""

    def __init__(self, blocks: list[nn.Module]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pre = x
        for block in self.blocks:
            x, pre = block(x)
        return x, pre


class _ShuffleBase(KDNet):
    stem_width = 24

    def _stem(self, in_channels: int) -> None:
        self.conv1 = nn.Conv2d(in_channels, self.stem_width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(self.stem_width)

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        return h

    def forward_features(self, x: torch.Tensor, preact: bool = False) -> tuple[list[torch.Tensor], torch.Tensor]:
        f0 = F.relu(self.bn1(self.conv1(x)))
        f1, p1 = self.layer1(f0)
        f2, p2 = self.layer2(f1)
        f3, p3 = self.layer3(f2)
        pooled = torch.flatten(F.adaptive_avg_pool2d(self._head(f3), 1), 1)
        feats = [f0, p1, p2, p3, pooled] if preact else [f0, f1, f2, f3, pooled]
        return feats, self.linear(pooled)

    def feature_modules(self) -> nn.ModuleList:
        return nn.ModuleList([self.conv1, self.bn1, self.layer1, self.layer2, self.layer3])


class ShuffleNetV1(_ShuffleBase):
    def __init__(self, num_classes: int = 100, widths: tuple[int, int, int] = (240, 480, 960),
                 blocks: tuple[int, int, int] = (4, 8, 4), groups: int = 3, in_channels: int = 3) -> None:
        super().__init__()
        self.num_classes = num_classes
        self._stem(in_channels)
        cin = self.stem_width
        stages = []
        for w, n in zip(widths, blocks, strict=True):
            # The first block of a stage concatenates its pooled input, so its branch makes w - cin channels.
            stage = [_V1Bottleneck(cin, w - cin, 2, groups)] + [_V1Bottleneck(w, w, 1, groups) for _ in range(n - 1)]
            stages.append(_Stage(stage))
            cin = w
        self.layer1, self.layer2, self.layer3 = stages
        self.linear = nn.Linear(widths[2], num_classes)
        self.feature_channels = [self.stem_width, *widths, widths[2]]


class ShuffleNetV2(_ShuffleBase):
    def __init__(self, num_classes: int = 100, widths: tuple[int, int, int, int] = (116, 232, 464, 1024),
                 blocks: tuple[int, int, int] = (3, 7, 3), in_channels: int = 3) -> None:
        super().__init__()
        self.num_classes = num_classes
        self._stem(in_channels)
        cin = self.stem_width
        stages = []
        for w, n in zip(widths[:3], blocks, strict=True):
            stages.append(_Stage([_V2Down(cin, w)] + [_V2Basic(w) for _ in range(n)]))
            cin = w
        self.layer1, self.layer2, self.layer3 = stages
        self.conv2 = nn.Conv2d(widths[2], widths[3], 1, bias=False)
        self.bn2 = nn.BatchNorm2d(widths[3])
        self.linear = nn.Linear(widths[3], num_classes)
        self.feature_channels = [self.stem_width, *widths[:3], widths[3]]

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn2(self.conv2(h)))


def shufflenet_v1(num_classes: int = 100, in_channels: int = 3) -> ShuffleNetV1:
    return ShuffleNetV1(num_classes, in_channels=in_channels)


def shufflenet_v2(num_classes: int = 100, in_channels: int = 3) -> ShuffleNetV2:
    return ShuffleNetV2(num_classes, in_channels=in_channels)
