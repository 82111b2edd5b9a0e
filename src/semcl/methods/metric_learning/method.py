"""RINCE's metric-learning baselines (Table 2; docs/papers/rince.md §c.10): triplet loss with rank
margins and FastAP. The losses are in semcl.losses.metric.

Both keep the SCL/RINCE model and recipe where the paper says "rest as RINCE": the backbone plus the
SCL projection head (Linear–ReLU–Linear, L2-normalised output; ``model.head_*``), the SCL/RINCE
augmentation (``data.augment: supcon``), ResNet-50, batch 512 and the preset's schedule; one augmented
view per image (a metric loss compares the batch's images with each other, so no second view is
needed), no momentum encoder and no memory bank. The losses read the normalised projection, so every
distance lies on the unit sphere (Euclidean d ∈ [0, 2] for the triplet loss, squared d ∈ [0, 4] for
FastAP's histogram); the evaluations read ``backbone`` features, as for SCL and RINCE.

- ``triplet``: batch-all triplets over the batch, margins m1 = 0.5 (negative in the anchor's
  superclass) and m2 = 1 (negative in another superclass); instance sampling.
- ``fastap``: FastAP with ``num_bins`` = 5 over fine-label relevance; batches of two superclasses
  (`epoch_order`: semcl.data.sampling.two_superclass_order).
"""

from __future__ import annotations

import torch

from semcl.data.sampling import two_superclass_order
from semcl.losses.metric import fastap_loss, rank_margin_triplet_loss
from semcl.methods.base import Batch, DataInfo, Method
from semcl.methods.metric_learning import FastAPMethod, TripletMethod
from semcl.models import ProjectionHead, build_backbone


class _ProjectedMetric(Method):
    """Backbone + SCL projection head; the loss sees the L2-normalised projections of one view."""

    num_views = 1

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        self.head = ProjectionHead(self.backbone.out_dim, cfg.model.head_hidden, cfg.model.head_dim,
                                   num_layers=cfg.model.head_layers)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Unit-norm projections [B, head_dim] in float32 (the loss runs outside autocast)."""
        z = self.head(self.backbone(x))
        return torch.nn.functional.normalize(z.float(), dim=1)


class RankMarginTriplet(_ProjectedMetric):
    """RINCE's "Triplet (rank margins)" baseline."""

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        assert isinstance(m, TripletMethod)
        if len(m.margins) != 2 or any(v < 0 for v in m.margins):
            raise ValueError(f"triplet: method.margins must be two non-negative values (m1, m2), got {m.margins}")
        self.margins = (float(m.margins[0]), float(m.margins[1]))
        self.register_buffer("fine_to_coarse", info.superclasses("the rank-margin triplet loss"), persistent=False)

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        views, labels = batch.views, batch.labels
        z = self.embed(views[0])
        with torch.autocast(z.device.type, enabled=False):
            loss = rank_margin_triplet_loss(z, labels, self.fine_to_coarse, self.margins)
        return {"loss": loss}


class FastAP(_ProjectedMetric):
    """RINCE's FastAP baseline: batches of two superclasses, relevance = same fine class."""

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        assert isinstance(m, FastAPMethod)
        if m.num_bins < 1:
            raise ValueError(f"fastap: method.num_bins must be >= 1, got {m.num_bins}")
        info.superclasses("FastAP's two-superclass batches")
        self.num_bins = int(m.num_bins)

    def epoch_order(self, labels: torch.Tensor, num_classes: int, generator: torch.Generator,
                    batch_size: int) -> torch.Tensor:
        """Batches of two superclasses (semcl.data.sampling.two_superclass_order)."""
        return two_superclass_order(labels, self.info.superclasses("FastAP's two-superclass batches"), batch_size,
                                    generator)

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        views, labels = batch.views, batch.labels
        z = self.embed(views[0])
        with torch.autocast(z.device.type, enabled=False):
            loss = fastap_loss(z, labels, self.num_bins)
        return {"loss": loss}
