"""Video backbones: Hara et al.'s 3D-ResNet-18 (RINCE video, docs/papers/rince.md §d.3; semcl.models.hara_r3d),
torchvision's r3d_18 (a variant: no max-pool) and a small 3D ResNet (`mini`).

All map clips ``[B, 3, T, H, W]`` to pooled features ``[B, out_dim]`` (global average over time
and space); ``out_dim`` is 512 for the 18-layer nets and 128 for ``r3d_small``.
"""

from __future__ import annotations

import torch
from torch import nn

# hara_r3d18 / hara_r3d18_b: Hara et al.'s 3D-ResNet-18, shortcut A / B (semcl.models.hara_r3d)
VIDEO_BACKBONES = ("hara_r3d18", "hara_r3d18_b", "r3d_18", "r3d_small")


class _Block3d(nn.Module):
    """Basic residual block of 3×3×3 convolutions (He et al.; 3D as Hara et al. 2018)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv3d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm3d(cout)
        self.conv2 = nn.Conv3d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm3d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv3d(cin, cout, 1, stride, bias=False), nn.BatchNorm3d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (x if self.down is None else self.down(x)))


class SmallR3D(nn.Module):
    """A 3D ResNet with one basic block per stage and widths (16, 32, 64, 128): r3d_18's layout at
    1/4 width and half depth, for CPU-sized runs."""

    def __init__(self, widths: tuple[int, ...] = (16, 32, 64, 128)) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv3d(3, widths[0], (3, 7, 7), (1, 2, 2), (1, 3, 3), bias=False),
                                  nn.BatchNorm3d(widths[0]), nn.ReLU(inplace=True))
        blocks, cin = [], widths[0]
        for k, w in enumerate(widths):
            blocks.append(_Block3d(cin, w, 1 if k == 0 else 2))
            cin = w
        self.blocks = nn.Sequential(*blocks)
        self.out_dim = widths[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.stem(x)).mean(dim=(2, 3, 4))


class _TorchvisionR3D(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from torchvision.models.video import r3d_18  # lazy: torchvision's video models

        self.net = r3d_18(weights=None)  # random init: RINCE pre-trains from scratch
        self.net.fc = nn.Identity()
        self.out_dim = 512

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def build_video_backbone(name: str) -> nn.Module:
    """The video backbone ``name`` (see VIDEO_BACKBONES); it has ``out_dim``."""
    if name in ("hara_r3d18", "hara_r3d18_b"):
        from semcl.models.hara_r3d import HaraR3D18

        return HaraR3D18(shortcut="B" if name.endswith("_b") else "A")
    if name == "r3d_18":
        return _TorchvisionR3D()
    if name == "r3d_small":
        return SmallR3D()
    raise ValueError(f"unknown video backbone {name!r} (known: {', '.join(VIDEO_BACKBONES)})")
