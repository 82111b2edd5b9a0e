"""Common interface of the knowledge-distillation networks (RepDistiller's model zoo, re-implemented).

Every network in :mod:`semcl.models.kd` is a :class:`KDNet`:

* ``forward(x) -> logits [B, num_classes]``;
* ``forward_features(x, preact=False) -> (features, logits)`` where ``features`` is the list in
  RepDistiller's ``is_feat`` order: the stem output, one map per stage, and last the pooled
  penultimate vector ``[B, D]``. With ``preact=True`` the stage maps are taken *before* their final
  ReLU (what AB, the activation-boundary method, distils); stem and pooled vector are unchanged;
* ``feature_channels``: the channel count of each entry of ``features`` (the pooled vector's D last),
  so hint regressors / connectors / embeddings can be sized without a dummy forward pass;
* ``feature_modules()``: the modules that produce the features (everything but the classifier),
  trained alone in the 30-epoch initialisation stage of AB and FSP.

All pooling before the classifier is adaptive, so 32x32 (CIFAR) and 64x64 (Tiny-ImageNet-200)
inputs both give a [B, D] vector; RepDistiller's fixed ``AvgPool2d(8)``/``avg_pool2d(4)`` equal the
adaptive pool at 32x32. The implementation is ours (RepDistiller, BSD-2-Clause, Copyright 2020
Yonglong Tian, read for the layer layout only).
"""

from __future__ import annotations

import math

import torch
from torch import nn


class KDNet(nn.Module):
    """Base class: subclasses set ``feature_channels`` and implement ``forward_features``."""

    feature_channels: list[int]
    num_classes: int

    def forward_features(self, x: torch.Tensor, preact: bool = False) -> tuple[list[torch.Tensor], torch.Tensor]:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_features(x)[1]

    def feature_modules(self) -> nn.ModuleList:
        raise NotImplementedError

    @property
    def embedding_dim(self) -> int:
        """D of the pooled penultimate vector (CRD's embedding input)."""
        return self.feature_channels[-1]


@torch.no_grad()
def feature_shapes(model: KDNet, image_size: int, in_channels: int = 3) -> list[tuple[int, ...]]:
    """Per-sample shape of each entry of ``forward_features`` for a square ``image_size`` input.

    Runs one eval-mode forward on zeros and restores the training flag (connectors such as FitNet's
    ConvReg need spatial sizes, which depend on the input size).
    """
    was_training = model.training
    model.eval()
    try:
        param = next(model.parameters())
        feats, _ = model.forward_features(torch.zeros(1, in_channels, image_size, image_size, device=param.device))
    finally:
        model.train(was_training)
    return [tuple(f.shape[1:]) for f in feats]


def init_kaiming_fan_out(model: nn.Module) -> None:
    """CIFAR-ResNet init: Kaiming normal (fan_out, ReLU) convs, BN weight 1 / bias 0; Linear keeps torch's default."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def init_he_out_linear_small(model: nn.Module, linear_std: float | None) -> None:
    """WRN / VGG / MobileNetV2 init: conv weights N(0, 2 / (k*k*out_channels)), conv bias 0, BN 1/0;
    Linear bias 0 and, when ``linear_std`` is given, Linear weight N(0, linear_std^2)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            fan = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
            nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / fan))
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            if linear_std is not None:
                nn.init.normal_(m.weight, 0.0, linear_std)
            nn.init.zeros_(m.bias)
