"""VGG with BatchNorm for CIFAR (no fully connected head besides the classifier): vgg8, vgg11,
vgg13, vgg16, vgg19 (RepDistiller's ``vgg*_bn``; vgg8 is configuration "S", one conv per block).

Layout (RepDistiller ``models/vgg.py``): five blocks of 3x3 convs (with bias) + BN + ReLU, the last
ReLU of each block applied outside it so its pre-activation can be read; 2x2 max-pools after blocks
0, 1, 2 and -- only for inputs of 64 pixels or more -- after block 3, so block 4 sees a 4x4 map at
both 32x32 and 64x64 inputs (RepDistiller pools after block 3 exactly when H == 64; ``>= 64`` here
extends the same rule to larger inputs); global average pool; one linear layer on 512 channels.
Features: [block0, block1, block2, block3, block4, pooled]; ``preact`` gives blocks 1-4 before
their ReLU (block0 stays activated, as in RepDistiller).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from semcl.models.kd.base import KDNet, init_he_out_linear_small

VGG_CONFIGS: dict[str, list[list[int]]] = {
    "S": [[64], [128], [256], [512], [512]],
    "A": [[64], [128], [256, 256], [512, 512], [512, 512]],
    "B": [[64, 64], [128, 128], [256, 256], [512, 512], [512, 512]],
    "D": [[64, 64], [128, 128], [256, 256, 256], [512, 512, 512], [512, 512, 512]],
    "E": [[64, 64], [128, 128], [256, 256, 256, 256], [512, 512, 512, 512], [512, 512, 512, 512]],
}


def _block(widths: list[int], cin: int) -> nn.Sequential:
    """conv-BN-ReLU repeated, without the final ReLU (the caller applies it)."""
    layers: list[nn.Module] = []
    for w in widths:
        layers += [nn.Conv2d(cin, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(inplace=True)]
        cin = w
    return nn.Sequential(*layers[:-1])


class VGG(KDNet):
    def __init__(self, cfg: list[list[int]], num_classes: int = 100, in_channels: int = 3) -> None:
        super().__init__()
        self.num_classes = num_classes
        ins = [in_channels] + [c[-1] for c in cfg[:-1]]
        self.block0, self.block1, self.block2, self.block3, self.block4 = (_block(c, i) for c, i in zip(cfg, ins, strict=True))
        self.classifier = nn.Linear(cfg[4][-1], num_classes)
        self.feature_channels = [c[-1] for c in cfg] + [cfg[4][-1]]
        init_he_out_linear_small(self, linear_std=0.01)

    def forward_features(self, x: torch.Tensor, preact: bool = False) -> tuple[list[torch.Tensor], torch.Tensor]:
        big = x.shape[-2] >= 64
        f0 = F.relu(self.block0(x))
        feats, pres = [f0], [f0]
        h = F.max_pool2d(f0, 2)
        for i, block in enumerate((self.block1, self.block2, self.block3, self.block4), start=1):
            pre = block(h)
            act = F.relu(pre)
            feats.append(act)
            pres.append(pre)
            if i < 3 or (i == 3 and big):
                h = F.max_pool2d(act, 2)
            else:
                h = act
        pooled = torch.flatten(F.adaptive_avg_pool2d(feats[-1], 1), 1)
        out = (pres if preact else feats) + [pooled]
        return out, self.classifier(pooled)

    def feature_modules(self) -> nn.ModuleList:
        return nn.ModuleList([self.block0, self.block1, self.block2, self.block3, self.block4])


def vgg8(num_classes: int = 100, in_channels: int = 3) -> VGG:
    return VGG(VGG_CONFIGS["S"], num_classes, in_channels)


def vgg11(num_classes: int = 100, in_channels: int = 3) -> VGG:
    return VGG(VGG_CONFIGS["A"], num_classes, in_channels)


def vgg13(num_classes: int = 100, in_channels: int = 3) -> VGG:
    return VGG(VGG_CONFIGS["B"], num_classes, in_channels)


def vgg16(num_classes: int = 100, in_channels: int = 3) -> VGG:
    return VGG(VGG_CONFIGS["D"], num_classes, in_channels)


def vgg19(num_classes: int = 100, in_channels: int = 3) -> VGG:
    return VGG(VGG_CONFIGS["E"], num_classes, in_channels)
