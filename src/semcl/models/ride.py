"""RIDE's multi-expert backbone (Wang et al., ICLR 2021): one shared trunk, E experts on top.

The trunk is the stem and every stage but the last two of a registered ResNet/ResNeXt (ImageNet
ResNet-50: stem + layer1 + layer2; CIFAR ResNet-32 / resnet_tiny: stem + layer1), as in the official
``EAResNet`` / ``ride_resnet_cifar``. Each expert owns freshly built, independently initialised copies of
the last two stages at ``width`` times their channels (official ``reduce_dimension``: 0.75), then global
average pooling. The forward pass returns the experts' pooled features concatenated, [B, E·D]: what the
suite's feature evaluations read (the experts' spaces differ, so a mean would mix unrelated axes).
"""

from __future__ import annotations

import torch
from torch import nn

from semcl.models.backbones import CifarResNet, build_backbone, init_weights

_STAGES = ("layer1", "layer2", "layer3", "layer4")


def _stage_shape(stage: nn.Sequential) -> tuple[type[nn.Module], int, int, int, int]:
    """(block class, blocks, in channels, planes, stride) of a ResNet stage, for either family."""
    first, last = stage[0], stage[-1]
    block = type(first)
    out = (last.conv3 if hasattr(last, "conv3") else last.conv2).out_channels
    stride = max(m.stride[0] for m in first.modules() if isinstance(m, nn.Conv2d))
    return block, len(stage), first.conv1.in_channels, out // block.expansion, stride


def _build_stage(base: nn.Module, block, blocks: int, in_planes: int, planes: int, stride: int) -> nn.Sequential:
    if isinstance(base, CifarResNet):
        layers = [block(in_planes, planes, stride)]
        layers += [block(planes * block.expansion, planes, 1) for _ in range(blocks - 1)]
        return nn.Sequential(*layers)
    # torchvision ResNet/ResNeXt: its own _make_layer knows groups and width_per_group
    base.inplanes = in_planes
    return base._make_layer(block, planes, blocks, stride=stride)


class RideBackbone(nn.Module):
    """Shared trunk + ``num_experts`` experts; ``forward`` -> [B, num_experts * expert_dim]."""

    def __init__(self, name: str, *, num_experts: int = 3, width: float = 0.75, in_channels: int = 3) -> None:
        super().__init__()
        if num_experts < 1 or width <= 0:
            raise ValueError(f"need num_experts >= 1 and width > 0, got {num_experts} and {width}")
        base = build_backbone(name, in_channels=in_channels)
        stages = [s for s in _STAGES if hasattr(base, s)]
        if len(stages) < 3:
            raise ValueError(f"backbone {name!r} has {len(stages)} stages; RIDE needs at least 3")
        own = stages[-2:]
        trunk = []
        for child_name, child in base.named_children():
            if child_name == own[0]:
                break
            trunk.append(child)
        self.trunk = nn.Sequential(*trunk)
        shapes = [_stage_shape(getattr(base, s)) for s in own]
        self.experts = nn.ModuleList()
        for _ in range(num_experts):
            in_planes, layers = shapes[0][2], []
            for block, blocks, _, planes, stride in shapes:
                planes = max(1, round(planes * width))
                layers.append(_build_stage(base, block, blocks, in_planes, planes, stride))
                in_planes = planes * block.expansion
            expert = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(1))
            init_weights(expert, zero_init_residual=False)  # the suite's (= torchvision's) ResNet init
            self.experts.append(expert)
        self.num_experts = num_experts
        self.expert_dim: int = in_planes
        self.out_dim: int = num_experts * in_planes

    def expert_features(self, x: torch.Tensor) -> list[torch.Tensor]:
        shared = self.trunk(x)
        return [expert(shared) for expert in self.experts]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat(self.expert_features(x), dim=1)
