"""Hara, Kataoka & Satoh's 3D-ResNet-18 (CVPR 2018, "Can Spatiotemporal 3D CNNs Retrace the History of
2D CNNs and ImageNet?"), the backbone RINCE's video experiments name (RINCE paper, arXiv 2201.11736 appendix,
"3D-Resnet18 (Hara, Kataoka, and Satoh 2018)"; docs/papers/rince.md §d.3).

Layout (kenshohara/3D-ResNets-PyTorch ``models/resnet.py``, written here in our own words):

    conv1  3 -> 64, kernel 7x7x7, stride (1, 2, 2), padding 3, no bias; BN; ReLU
    pool   max-pool 3x3x3, stride 2, padding 1
    layer1 2 BasicBlocks, 64 channels            layer2 2 BasicBlocks, 128, first stride 2
    layer3 2 BasicBlocks, 256, first stride 2    layer4 2 BasicBlocks, 512, first stride 2
    global average pool -> 512-d

A BasicBlock is two 3x3x3 convolutions with BN (ReLU between and after the sum). Where a block changes
shape, its shortcut is type "A" (He et al. 2016: subsample by stride, zero-pad the new channels; no
parameters), the type of Hara et al.'s released ResNet-18 (their README's model list: "resnet-18-kinetics.pth:
--model resnet --model_depth 18 --resnet_shortcut A"), or type "B" (a 1x1x1 convolution + BN). The RINCE
video code is not public, so which one RINCE trained is unknown; A is the default, B the variant
``hara_r3d18_b``. Deviation: Hara's type-A shortcut concatenates ``out.data`` and so passes no gradient
through the shortcut of the three downsampling blocks; ours keeps it (He et al.'s definition).

Against torchvision's ``r3d_18`` (the variant): a 7x7x7 stem instead of 3x7x7 and a max-pool after it,
so from layer1 on the feature maps are 2x smaller in T, H and W (about 1/8 of the compute).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

SHORTCUTS = ("A", "B")


class _Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, shortcut: str) -> None:
        super().__init__()
        self.conv1 = nn.Conv3d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm3d(cout)
        self.conv2 = nn.Conv3d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm3d(cout)
        self.stride, self.pad = stride, cout - cin
        self.down = None
        if (stride != 1 or cin != cout) and shortcut == "B":
            self.down = nn.Sequential(nn.Conv3d(cin, cout, 1, stride, bias=False), nn.BatchNorm3d(cout))

    def _shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if self.down is not None:
            return self.down(x)
        if self.stride != 1:
            x = x[:, :, ::self.stride, ::self.stride, ::self.stride]  # = avg_pool3d(kernel 1, stride)
        if self.pad:
            x = F.pad(x, (0, 0, 0, 0, 0, 0, 0, self.pad))  # zeros for the new channels
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self._shortcut(x))


class HaraR3D18(nn.Module):
    """Clips ``[B, 3, T, H, W]`` -> pooled features ``[B, 512]``."""

    widths = (64, 128, 256, 512)

    def __init__(self, shortcut: str = "A") -> None:
        super().__init__()
        if shortcut not in SHORTCUTS:
            raise ValueError(f"unknown shortcut type {shortcut!r} (known: {', '.join(SHORTCUTS)})")
        self.stem = nn.Sequential(nn.Conv3d(3, 64, 7, (1, 2, 2), 3, bias=False), nn.BatchNorm3d(64),
                                  nn.ReLU(inplace=True), nn.MaxPool3d(3, 2, 1))
        layers, cin = [], 64
        for k, w in enumerate(self.widths):
            stride = 1 if k == 0 else 2
            layers.append(nn.Sequential(_Block(cin, w, stride, shortcut), _Block(w, w, 1, shortcut)))
            cin = w
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.out_dim = self.widths[-1]
        for mod in self.modules():  # Hara et al.'s initialisation
            if isinstance(mod, nn.Conv3d):
                nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(mod, nn.BatchNorm3d):
                nn.init.ones_(mod.weight)
                nn.init.zeros_(mod.bias)

    def feature_maps(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The stem's and each layer's output, in order."""
        maps = [self.stem(x)]
        for layer in (self.layer1, self.layer2, self.layer3, self.layer4):
            maps.append(layer(maps[-1]))
        return maps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.feature_maps(x)[-1].mean(dim=(2, 3, 4))
