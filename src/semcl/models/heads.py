"""Heads that sit on top of a backbone's pooled features [B, D]."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class ProjectionHead(nn.Module):
    """MLP projector for the contrastive loss.

    ``num_layers=2`` (SupCon / RINCE, e.g. 2048 -> 2048 -> 128)::

        Linear(in, hidden) - ReLU - Linear(hidden, out)

    ``num_layers=3`` (GPaCo's projector)::

        Linear(in, hidden) - BN - ReLU - Linear(hidden, hidden) - BN - ReLU - Linear(hidden, out)

    The Linear layers directly followed by BN have no bias: BN's shift would cancel
    it, so it would only be a dead parameter.

    With ``normalize`` the output is L2-normalised along dim 1, so dot products
    between projections are cosine similarities, as the losses expect.
    """

    def __init__(
        self,
        in_dim: int,
        hidden_dim: int,
        out_dim: int,
        *,
        num_layers: int = 2,
        normalize: bool = True,
    ) -> None:
        super().__init__()
        if num_layers == 2:
            layers: list[nn.Module] = [
                nn.Linear(in_dim, hidden_dim),
                nn.ReLU(inplace=True),
                nn.Linear(hidden_dim, out_dim),
            ]
        elif num_layers == 3:
            layers = [
                nn.Linear(in_dim, hidden_dim, bias=False),
                nn.BatchNorm1d(hidden_dim),
                nn.ReLU(inplace=True),
                nn.Linear(hidden_dim, hidden_dim, bias=False),
                nn.BatchNorm1d(hidden_dim),
                nn.ReLU(inplace=True),
                nn.Linear(hidden_dim, out_dim),
            ]
        else:
            raise ValueError(f"unsupported num_layers {num_layers}; known: 2, 3")
        self.net = nn.Sequential(*layers)
        self.normalize = normalize
        self.out_dim = out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.net(x)
        return F.normalize(z, dim=1) if self.normalize else z


class LinearClassifier(nn.Module):
    """A single affine layer: features [B, D] -> logits [B, num_classes]."""

    def __init__(self, in_dim: int, num_classes: int) -> None:
        super().__init__()
        self.fc = nn.Linear(in_dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class NormalizedLinear(nn.Module):
    """Cosine classifier: logits are cos(x, w_c), both sides L2-normalised.

    Outputs lie in [-1, 1] and carry no scale; a temperature or scale factor is the
    loss's business, so the same head serves losses with different temperatures.
    """

    def __init__(self, in_dim: int, num_classes: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_classes, in_dim))
        # Same init as nn.Linear; only the direction of each row matters here.
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.normalize(x, dim=1), F.normalize(self.weight, dim=1))
