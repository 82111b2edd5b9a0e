"""Balanced Softmax (Ren et al., NeurIPS 2020): cross-entropy on logits + log(class prior).

Training adds log(n_j / N) of the training-set class frequencies to every logit, so the softmax
models the long-tailed training distribution; evaluation reads the raw logits (a balanced test
set), as the PaCo/GPaCo code evaluates its baselines.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from semcl.methods.base import Batch, DataInfo
from semcl.methods.ce.method import CrossEntropy


def log_prior(info: DataInfo) -> torch.Tensor:
    """log pi_j of the training set's class frequencies (+1e-9 for empty classes, official code)."""
    if info.class_counts is None:
        raise ValueError("this method needs the training set's class counts (DataInfo.class_counts)")
    counts = info.class_counts.double()
    return torch.log(counts / counts.sum() + 1e-9).float()


class BalancedSoftmax(CrossEntropy):
    """The cross-entropy model (backbone, linear head, raw-logit `classify`) with the prior in its loss."""

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        self.register_buffer("log_prior", log_prior(info))

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        views, labels = batch.views, batch.labels
        logits = self.classifier(self.backbone(views[0]))
        return {"loss": F.cross_entropy(logits + self.log_prior, labels)}
