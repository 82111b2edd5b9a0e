"""Cross-entropy baselines: `ce` (crop + flip) and `ce_sa` (the contrastive methods' strong
augmentation). Both differ only in `data.augment`, which the registry row sets."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from semcl.methods.base import Batch, DataInfo, Method
from semcl.models import LinearClassifier, build_backbone


class CrossEntropy(Method):
    num_views = 1
    has_classifier = True

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        self.classifier = LinearClassifier(self.backbone.out_dim, info.num_classes)

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        views, labels = batch.views, batch.labels
        logits = self.classifier(self.backbone(views[0]))
        return {"loss": F.cross_entropy(logits, labels)}

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        """The trained head's logits (reported beside the linear probe as `head_top1`)."""
        return self.classifier(self.backbone(x))

    def stage_features(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Pooled backbone maps per stage (the supervised reference of the per-stage probes, HSA Fig. 3)."""
        from semcl.evals.stage_pooling import pooled_stage_features

        return pooled_stage_features(self.backbone, x)
