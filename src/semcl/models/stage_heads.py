"""Companion embedding branches at intermediate stages (HSA multi-level losses, docs/papers/hsa.md §c.6).

For stage l the branch g^l is one ResNet bottleneck block on the stage's map (1x1 -> 3x3 -> 1x1 with the
stage's widths: C -> C/4 -> C/4 -> C, identity residual), global average pooling (``inferred``), and a
2-layer MLP C -> C -> 128 (MoCo v2's projector shape). Query and key sides use g^l and a momentum copy
of it; both are dropped after pre-training (never part of the exported backbone).

The paper attaches branches to stages 2 and 3, read as torchvision ``layer2`` (512 ch, 28x28) and
``layer3`` (1024 ch, 14x14) of ResNet-50 (``inferred``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from semcl.models.heads import ProjectionHead
from semcl.models.stages import stage_channels

PAPER_STAGES = ("layer2", "layer3")


class StageHead(nn.Module):
    """Bottleneck block + global average pool + 2-layer MLP: ``[B, C, H, W] -> [B, out_dim]``."""

    def __init__(self, in_channels: int, out_dim: int = 128, *, hidden_dim: int | None = None,
                 normalize: bool = True) -> None:
        super().__init__()
        if in_channels % 4:
            raise ValueError(f"a bottleneck branch needs channels divisible by 4 (expansion 4), got {in_channels}")
        from torchvision.models.resnet import Bottleneck  # lazy: torchvision costs ~1 s to import

        # planes = C / 4 so that planes * expansion == C: identity shortcut, widths of the stage's own blocks
        self.block = Bottleneck(in_channels, in_channels // 4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.mlp = ProjectionHead(in_channels, hidden_dim or in_channels, out_dim, num_layers=2, normalize=normalize)
        self.out_dim = out_dim
        for m in self.block.modules():                    # the backbones' init (torchvision's ResNet init)
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.flatten(self.pool(self.block(x)), 1))


def build_stage_heads(backbone: nn.Module, stages: Sequence[str] = PAPER_STAGES, out_dim: int = 128,
                      *, normalize: bool = True) -> nn.ModuleDict:
    """One :class:`StageHead` per named stage of ``backbone``, sized from its modules."""
    channels = stage_channels(backbone)
    unknown = [s for s in stages if s not in channels or s == "stem"]
    if unknown:
        known = [s for s in channels if s != "stem"]
        raise ValueError(f"unknown stage(s) {', '.join(unknown)} for {type(backbone).__name__}; known: {', '.join(known)}")
    return nn.ModuleDict({s: StageHead(channels[s], out_dim, normalize=normalize) for s in stages})


def apply_stage_heads(heads: nn.ModuleDict, outputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``{stage: head(outputs[stage])}`` for every head, from :func:`semcl.models.stages.stage_outputs`."""
    return {name: head(outputs[name]) for name, head in heads.items()}
