"""RINCE's hierarchy-aware cross-entropy baselines (Table 2, docs/papers/rince.md §c.10).

Both train like the `ce` row (crop + flip, lr 0.8, 500 epochs, batch 512; set by the registry row)
and keep its model: a backbone and a linear fine-class head. The evaluations read `backbone`
features; `classify` returns the fine head's logits (`head_top1`).

- `label_smoothing_superclass`: CE against a target that moves α from the true class to its
  superclass siblings (semcl.losses.hierarchical_ce.superclass_smoothed_targets).
- `two_heads`: a second linear head on the same features predicts the superclass;
  L = (1 − λ)·CE_fine + λ·CE_superclass. `logit_norm: l2` L2-normalises each head's logits before
  its CE, as the official SupCEResNet(two_heads=True) does; the default is the paper's plain CE.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from semcl.losses.hierarchical_ce import superclass_label_smoothing_loss, two_heads_loss
from semcl.methods.base import Batch, DataInfo
from semcl.methods.ce.method import CrossEntropy
from semcl.methods.ce_baselines import LabelSmoothingSuperclassMethod, TwoHeadsMethod
from semcl.models import LinearClassifier


class LabelSmoothingSuperclass(CrossEntropy):
    """The CE model with superclass label smoothing in its loss."""

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        assert isinstance(m, LabelSmoothingSuperclassMethod)
        if not 0.0 <= m.alpha <= 1.0:
            raise ValueError(f"method.alpha must be in [0, 1], got {m.alpha}")
        self.alpha = float(m.alpha)
        self.register_buffer("fine_to_coarse", info.superclasses("label smoothing within superclass"),
                             persistent=False)

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        views, labels = batch.views, batch.labels
        logits = self.classifier(self.backbone(views[0]))
        return {"loss": superclass_label_smoothing_loss(logits, labels, self.fine_to_coarse, self.alpha)}


class TwoHeads(CrossEntropy):
    """Backbone + fine head (`classifier`, C outputs) + superclass head (`coarse_classifier`)."""

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        assert isinstance(m, TwoHeadsMethod)
        if not 0.0 <= m.weight <= 1.0:
            raise ValueError(f"method.weight (lambda) must be in [0, 1], got {m.weight}")
        f2c = info.superclasses("the two-heads baseline")
        self.weight = float(m.weight)
        self.logit_norm = m.logit_norm
        self.num_coarse = int(f2c.max()) + 1
        self.register_buffer("fine_to_coarse", f2c, persistent=False)
        self.coarse_classifier = LinearClassifier(self.backbone.out_dim, self.num_coarse)

    def _norm(self, logits: torch.Tensor) -> torch.Tensor:
        return F.normalize(logits, dim=1) if self.logit_norm == "l2" else logits

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(fine logits [B, C], superclass logits [B, K]) of images x, normalised as `logit_norm` says."""
        feat = self.backbone(x)
        return self._norm(self.classifier(feat)), self._norm(self.coarse_classifier(feat))

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        views, labels = batch.views, batch.labels
        fine, coarse = self.heads(views[0])
        return two_heads_loss(fine, coarse, labels, self.fine_to_coarse, self.weight)

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        """The fine head's logits (the superclass head is not read by any evaluation)."""
        return self._norm(self.classifier(self.backbone(x)))
