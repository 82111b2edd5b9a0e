"""Per-stage pooled features for intermediate-layer linear probes (HSA Fig. 3, docs/papers/hsa.md §f).

The official linear-evaluation code probes a ResNet-50 at "ending points" and pools each map with an
adaptive average pool to a fixed grid before flattening (``inferred`` to be the Fig. 3 protocol):

    ending point      suite stage   channels  map (224 px)  pooled to  probe input
    1  (stem)         stem          64        56x56         14x14      12544
    4  (layer1 end)   layer1        256       56x56         14x14      50176
    8  (layer2 end)   layer2        512       28x28         7x7        25088
    14 (layer3 end)   layer3        1024      14x14         7x7        50176
    17 (layer4 end)   layer4        2048      7x7           1x1        2048

Ending point 1 is after the stem's max-pool (haohang96/CSML @be34e84 classifiers/cls_opt.py: in_feat_size 56
for id 1, the 56x56 map layer1 reads), so the "stem" probe reads the max-pooled stem map where the backbone
has a max-pool (torchvision's ResNets; the CIFAR stem has none). Backbones with fewer stages (the CIFAR
ResNets) keep this map by name, except that their last stage is always pooled to 1x1, so its probe sees
exactly ``backbone(x)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from semcl.models.stages import stage_channels, stage_names, stage_outputs

OFFICIAL_POOL: dict[str, int] = {"stem": 14, "layer1": 14, "layer2": 7, "layer3": 7, "layer4": 1}
POOLS = ("avg", "max")


def probe_pool_sizes(names: Sequence[str]) -> dict[str, int]:
    """Pooled grid side per stage: :data:`OFFICIAL_POOL` by name, 1 for the last stage, 7 otherwise."""
    sizes = {n: OFFICIAL_POOL.get(n, 7) for n in names}
    sizes[names[-1]] = 1
    return sizes


def pool_map(feat: torch.Tensor, size: int, pool: str = "avg") -> torch.Tensor:
    """Adaptive average (or max) pool of ``[B, C, H, W]`` to ``size x size``, flattened to ``[B, C*size*size]``."""
    if pool not in POOLS:
        raise ValueError(f"unknown probe pooling {pool!r}; known: {', '.join(POOLS)}")
    fn = F.adaptive_avg_pool2d if pool == "avg" else F.adaptive_max_pool2d
    return torch.flatten(fn(feat, size), 1)


def pooled_stage_features(
    backbone: nn.Module,
    x: torch.Tensor,
    *,
    stages: Sequence[str] | None = None,
    sizes: dict[str, int] | None = None,
    pool: str = "avg",
) -> dict[str, torch.Tensor]:
    """``{stage: [B, C*s*s]}`` probe inputs for the requested stages (all, stem included, by default).

    No autograd graph is built; the caller sets eval mode (frozen BN statistics, as for linear probes).
    """
    names = stage_names(backbone)
    wanted = list(stages) if stages is not None else names
    unknown = [s for s in wanted if s not in names]
    if unknown:
        raise ValueError(f"unknown stage(s) {', '.join(unknown)}; known: {', '.join(names)}")
    sizes = {**probe_pool_sizes(names), **(sizes or {})}
    last = max(wanted, key=names.index)
    with torch.no_grad():
        maps = stage_outputs(backbone, x, upto=last)
        if "stem" in wanted and getattr(backbone, "maxpool", None) is not None:
            maps["stem"] = backbone.maxpool(maps["stem"])  # ending point 1: after the max-pool, as layer1 reads it
    return {s: pool_map(maps[s], sizes[s], pool) for s in wanted}


def probe_dims(backbone: nn.Module, *, sizes: dict[str, int] | None = None) -> dict[str, int]:
    """Probe input width per stage, C * s * s, without a forward pass."""
    names = stage_names(backbone)
    sizes = {**probe_pool_sizes(names), **(sizes or {})}
    return {n: c * sizes[n] ** 2 for n, c in stage_channels(backbone).items()}
