"""Backbone encoders: images [B, C, H, W] -> pooled features [B, D].

Every backbone built here has an integer attribute ``out_dim`` (= D) so heads can
be sized without a dummy forward pass.

Two families:

* CIFAR ResNets (``resnet50_cifar``, ``resnet18_cifar``, ``resnet_tiny``) with the
  stem used by the SupCon / RINCE CIFAR code: one 3x3 stride-1 conv, BN, ReLU and
  *no* max-pool, so a 32x32 image keeps its resolution until the first strided
  stage. Implemented here because torchvision has no such stem.
* ImageNet ResNets/ResNeXts taken from ``torchvision.models`` (random init, ``fc``
  replaced by ``nn.Identity``), for the ImageNet-scale tables.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:
    from torchvision.models.resnet import ResNet as _TvResNet


def _conv3x3(in_planes: int, planes: int, stride: int = 1) -> nn.Conv2d:
    # No conv bias: every conv is followed by BN, whose shift makes a bias redundant.
    return nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)


def _shortcut(in_planes: int, out_planes: int, stride: int) -> nn.Sequential:
    """Projection shortcut (1x1 conv + BN) when the shape changes, identity otherwise.

    An empty ``nn.Sequential`` is the identity and keeps the parameter names stable
    (``shortcut.0`` / ``shortcut.1``) for the blocks that do project.
    """
    if stride == 1 and in_planes == out_planes:
        return nn.Sequential()
    return nn.Sequential(
        nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False),
        nn.BatchNorm2d(out_planes),
    )


class PadShortcut(nn.Module):
    """He et al.'s option A (the LDAM-DRW / PaCo CIFAR ResNet-32, PCL PaCo/LT/models/resnet_cifar.py):
    every second pixel, then zero channels planes // 4 on each side; no parameters."""

    def __init__(self, planes: int) -> None:
        super().__init__()
        self.pad = planes // 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad), "constant", 0.0)


class BasicBlock(nn.Module):
    """Two 3x3 convs with a residual connection (ResNet-18/34 style). `pad_shortcut`: option-A
    zero-padding shortcuts where the shape changes, instead of 1x1 conv + BN projections."""

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1, *, pad_shortcut: bool = False) -> None:
        super().__init__()
        self.conv1 = _conv3x3(in_planes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        changes = stride != 1 or in_planes != planes
        self.shortcut = PadShortcut(planes) if pad_shortcut and changes else _shortcut(in_planes, planes, stride)
        self.relu = nn.ReLU(inplace=True)

    @property
    def last_bn(self) -> nn.BatchNorm2d:
        """The BN closing the residual branch (target of ``zero_init_residual``)."""
        return self.bn2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 (carries the stride) -> 1x1 expand, with a residual."""

    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out_planes = planes * self.expansion
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out_planes, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_planes)
        self.shortcut = _shortcut(in_planes, out_planes, stride)
        self.relu = nn.ReLU(inplace=True)

    @property
    def last_bn(self) -> nn.BatchNorm2d:
        """The BN closing the residual branch (target of ``zero_init_residual``)."""
        return self.bn3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """ResNet with the small-image stem (3x3 conv, stride 1, no max-pool).

    Args:
        block: ``BasicBlock`` or ``Bottleneck``.
        num_blocks: blocks per stage.
        widths: base width (``planes``) per stage; a stage outputs
            ``width * block.expansion`` channels.
        strides: stride of the first block of each stage.
        stem_width: output channels of the stem conv.
        in_channels: image channels (1 for MNIST-like data, 3 for RGB).
        zero_init_residual: start each residual branch's last BN at weight 0, so
            every block begins as the identity (helps large-batch training).
    """

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        num_blocks: Sequence[int],
        widths: Sequence[int],
        strides: Sequence[int],
        *,
        stem_width: int = 64,
        in_channels: int = 3,
        zero_init_residual: bool = False,
        pad_shortcut: bool = False,
        fan_in_init: bool = False,
    ) -> None:
        super().__init__()
        if not len(num_blocks) == len(widths) == len(strides):
            raise ValueError("num_blocks, widths and strides must have the same length")
        self.conv1 = _conv3x3(in_channels, stem_width)
        self.bn1 = nn.BatchNorm2d(stem_width)
        self.relu = nn.ReLU(inplace=True)
        in_planes = stem_width
        for i, (n, width, stride) in enumerate(zip(num_blocks, widths, strides, strict=True), start=1):
            blocks = []
            for j in range(n):
                extra = {"pad_shortcut": True} if pad_shortcut else {}
                blocks.append(block(in_planes, width, stride if j == 0 else 1, **extra))
                in_planes = width * block.expansion
            # layer1, layer2, ...: the usual ResNet names, so checkpoints read naturally.
            self.add_module(f"layer{i}", nn.Sequential(*blocks))
        self.num_stages = len(num_blocks)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.out_dim: int = in_planes
        init_weights(self, zero_init_residual, "fan_in" if fan_in_init else "fan_out")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        for i in range(1, self.num_stages + 1):
            x = getattr(self, f"layer{i}")(x)
        # flatten (not .view) so channels_last inputs, whose pooled [B, C, 1, 1]
        # tensor is not contiguous in NCHW order, still work.
        return torch.flatten(self.avgpool(x), 1)


def init_weights(model: nn.Module, zero_init_residual: bool, mode: str = "fan_out") -> None:
    """Kaiming-normal (relu gain) convs, fan_out (torchvision's choice) or fan_in (init.kaiming_normal_'s
    default, the LDAM / PaCo CIFAR ResNet-32); BN weight 1 / bias 0."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode=mode, nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d | nn.GroupNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    if zero_init_residual:
        for m in model.modules():
            if isinstance(m, BasicBlock | Bottleneck):
                nn.init.zeros_(m.last_bn.weight)


def resnet50_cifar(*, in_channels: int = 3, zero_init_residual: bool = False) -> CifarResNet:
    """ResNet-50 with the CIFAR stem: Bottleneck [3, 4, 6, 3] -> 2048-d."""
    return CifarResNet(
        Bottleneck,
        (3, 4, 6, 3),
        (64, 128, 256, 512),
        (1, 2, 2, 2),
        in_channels=in_channels,
        zero_init_residual=zero_init_residual,
    )


def resnet18_cifar(*, in_channels: int = 3, zero_init_residual: bool = False) -> CifarResNet:
    """ResNet-18 with the CIFAR stem: BasicBlock [2, 2, 2, 2] -> 512-d."""
    return CifarResNet(
        BasicBlock,
        (2, 2, 2, 2),
        (64, 128, 256, 512),
        (1, 2, 2, 2),
        in_channels=in_channels,
        zero_init_residual=zero_init_residual,
    )


def resnet_tiny(*, in_channels: int = 3, zero_init_residual: bool = False) -> CifarResNet:
    """A ~0.08M-parameter ResNet for CPU runs: 16-ch stem, one BasicBlock per stage.

    Widths (16, 32, 64), strides (1, 2, 2) -> 64-d. Global average pooling makes it
    accept any input of at least 8x8.
    """
    return CifarResNet(
        BasicBlock,
        (1, 1, 1),
        (16, 32, 64),
        (1, 2, 2),
        stem_width=16,
        in_channels=in_channels,
        zero_init_residual=zero_init_residual,
    )


def resnet_tiny4(*, in_channels: int = 3, zero_init_residual: bool = False) -> CifarResNet:
    """``resnet_tiny`` with a fourth stage: widths (8, 16, 32, 64), strides (1, 2, 2, 2) -> 64-d.

    The reduced (CI) preflight's stand-in for the four-stage ResNets, so rows that probe or add losses at
    ``layer1``..``layer4`` (HSA) keep every stage they name.
    """
    return CifarResNet(BasicBlock, (1, 1, 1, 1), (8, 16, 32, 64), (1, 2, 2, 2), stem_width=8,
                       in_channels=in_channels, zero_init_residual=zero_init_residual)


def resnet32_cifar(*, in_channels: int = 3, zero_init_residual: bool = False) -> CifarResNet:
    """ResNet-32 layout of the long-tailed CIFAR literature: 16-ch stem, five BasicBlocks per stage,
    widths (16, 32, 64), strides (1, 2, 2) -> 64-d; projection shortcuts, fan_out init (the variant)."""
    return CifarResNet(BasicBlock, (5, 5, 5), (16, 32, 64), (1, 2, 2), stem_width=16, in_channels=in_channels,
                       zero_init_residual=zero_init_residual)


def resnet32_ldam(*, in_channels: int = 3, zero_init_residual: bool = False) -> CifarResNet:
    """The LDAM-DRW / PaCo CIFAR-100-LT ResNet-32 (PCL PaCo/LT/models/resnet_cifar.py @fe56535): as
    resnet32_cifar with option-A zero-padding shortcuts and fan_in Kaiming-normal convs."""
    return CifarResNet(BasicBlock, (5, 5, 5), (16, 32, 64), (1, 2, 2), stem_width=16, in_channels=in_channels,
                       zero_init_residual=zero_init_residual, pad_shortcut=True, fan_in_init=True)


def resnet200(*, in_channels: int = 3, zero_init_residual: bool = False) -> nn.Module:
    """ResNet-200 (bottleneck blocks [3, 24, 36, 3]) -> 2048-d; torchvision has no builder for it."""
    from torchvision.models.resnet import Bottleneck as TvBottleneck
    from torchvision.models.resnet import ResNet as TvResNet

    return _imagenet_backbone(TvResNet(TvBottleneck, [3, 24, 36, 3], zero_init_residual=zero_init_residual),
                              in_channels)


def _imagenet_backbone(model: _TvResNet, in_channels: int) -> _TvResNet:
    """Turn a torchvision ResNet into a feature extractor with ``out_dim``."""
    out_dim = model.fc.in_features
    model.fc = nn.Identity()
    if in_channels != 3:
        old = model.conv1
        model.conv1 = nn.Conv2d(
            in_channels,
            old.out_channels,
            kernel_size=old.kernel_size,
            stride=old.stride,
            padding=old.padding,
            bias=False,
        )
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    model.out_dim = out_dim
    return model


def _torchvision(ctor_name: str) -> Callable[..., nn.Module]:
    """Builder for ``torchvision.models.<ctor_name>`` (random init) as a feature extractor.

    torchvision is imported on first use, not at module import: it adds one to two
    seconds to ``import semcl.models``, which every spawned DDP / data-loader
    worker would pay even when only the CIFAR backbones are used.
    """

    def build(*, in_channels: int = 3, zero_init_residual: bool = False) -> nn.Module:
        ctor = getattr(importlib.import_module("torchvision.models"), ctor_name)
        model = ctor(weights=None, zero_init_residual=zero_init_residual)
        return _imagenet_backbone(model, in_channels)

    build.__doc__ = f"torchvision ``{ctor_name}`` (random init) as a feature extractor."
    build.__name__ = ctor_name
    return build


def resnext101_32x4d(*, in_channels: int = 3, zero_init_residual: bool = False) -> nn.Module:
    """ResNeXt-101 32x4d (used in the PaCo/GPaCo long-tailed tables) -> 2048-d.

    torchvision ships only the 32x8d and 64x4d variants, so this one is assembled
    from torchvision's generic ``ResNet`` with ``groups=32, width_per_group=4``.
    """
    from torchvision.models.resnet import Bottleneck as TvBottleneck
    from torchvision.models.resnet import ResNet as TvResNet

    model = TvResNet(
        TvBottleneck,
        [3, 4, 23, 3],
        groups=32,
        width_per_group=4,
        zero_init_residual=zero_init_residual,
    )
    return _imagenet_backbone(model, in_channels)


BACKBONES: dict[str, Callable[..., nn.Module]] = {
    "resnet50_cifar": resnet50_cifar,
    "resnet18_cifar": resnet18_cifar,
    "resnet_tiny": resnet_tiny,
    "resnet_tiny4": resnet_tiny4,
    "resnet32_cifar": resnet32_cifar,
    "resnet32_ldam": resnet32_ldam,
    "resnet18": _torchvision("resnet18"),
    "resnet50": _torchvision("resnet50"),
    "resnet101": _torchvision("resnet101"),
    "resnet152": _torchvision("resnet152"),
    "resnext50_32x4d": _torchvision("resnext50_32x4d"),
    "resnext101_32x4d": resnext101_32x4d,
    "resnet200": resnet200,
}


def build_backbone(name: str, *, in_channels: int = 3, zero_init_residual: bool = False) -> nn.Module:
    """Build a registered backbone by name; its forward returns [B, out_dim]."""
    try:
        builder = BACKBONES[name]
    except KeyError:
        raise ValueError(f"unknown backbone {name!r}; known: {', '.join(sorted(BACKBONES))}") from None
    return builder(in_channels=in_channels, zero_init_residual=zero_init_residual)
