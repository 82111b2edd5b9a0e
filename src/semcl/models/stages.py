"""Per-stage feature maps of the suite's ResNet backbones, without changing their ``forward``.

Both backbone families (``CifarResNet`` and torchvision's ``ResNet`` behind ``build_backbone``) share
the stage names ``conv1``/``bn1``/``relu`` (stem) and ``layer1``..``layerN``; torchvision adds a max-pool
after the stem. :func:`stage_outputs` replays that forward and keeps every stage's map:

* ``"stem"``: after conv1-BN-ReLU, before any max-pool (the HSA stem probe applies the max-pool:
  semcl.evals.stage_pooling);
* ``"layer1"``..``"layerN"``: each stage's output (ResNet-50 at 224 px: 256x56x56, 512x28x28,
  1024x14x14, 2048x7x7).

Global average pooling of the last entry is exactly ``backbone(x)``.
"""

from __future__ import annotations

import torch
from torch import nn


def stage_names(backbone: nn.Module) -> list[str]:
    """``["stem", "layer1", ..., "layerN"]`` for a ResNet-style backbone (``ValueError`` otherwise)."""
    for attr in ("conv1", "bn1", "relu", "layer1"):
        if not hasattr(backbone, attr):
            raise ValueError(f"{type(backbone).__name__} has no {attr!r}: per-stage features need a ResNet backbone")
    n = 1
    while hasattr(backbone, f"layer{n + 1}"):
        n += 1
    return ["stem"] + [f"layer{i}" for i in range(1, n + 1)]


def stage_outputs(backbone: nn.Module, x: torch.Tensor, *, upto: str | None = None) -> dict[str, torch.Tensor]:
    """Feature maps ``{name: [B, C, H, W]}`` of the stem and every stage, in order.

    ``upto`` stops after that stage (e.g. ``"layer3"``), skipping the later, unused stages.
    """
    names = stage_names(backbone)
    if upto is not None and upto not in names:
        raise ValueError(f"unknown stage {upto!r}; known: {', '.join(names)}")
    out: dict[str, torch.Tensor] = {}
    h = backbone.relu(backbone.bn1(backbone.conv1(x)))
    out["stem"] = h
    if upto == "stem":
        return out
    maxpool = getattr(backbone, "maxpool", None)       # torchvision's stem only; the CIFAR stem has none
    if maxpool is not None:
        h = maxpool(h)
    for name in names[1:]:
        h = getattr(backbone, name)(h)
        out[name] = h
        if name == upto:
            break
    return out


def stage_channels(backbone: nn.Module) -> dict[str, int]:
    """Output channels of the stem and each stage, read from the modules (no forward pass).

    A stage ends in its last block's closing BN (or, in a one-block stage, its shortcut BN of the same
    width), so the last ``BatchNorm2d`` inside a stage gives the stage's width.
    """
    channels = {"stem": backbone.bn1.num_features}
    for name in stage_names(backbone)[1:]:
        bns = [m for m in getattr(backbone, name).modules() if isinstance(m, nn.BatchNorm2d)]
        channels[name] = bns[-1].num_features
    return channels
