"""RIDE with 3 experts (Wang et al., ICLR 2021), as GPaCo re-implements it for Table II / Fig. 1(a).

Experts share the early stages (semcl.models.ride), each has a cosine classifier scaled by s (official
``NormedLinear`` + ``use_norm``), and trains with LDAM(-DRW) plus the distribution-aware diversity term
(semcl.losses.ride). Inference: the mean of all experts' logits (``classify``).

Departures from the official code, chosen for GPaCo's comparison:
- no expert router (the official second stage that routes easy images to fewer experts), so every image
  uses all experts: "RIDE (3 experts)" without routing;
- no knowledge distillation (GPaCo: "we do not apply knowledge distillation tricks");
- the suite's optimiser and schedule (GPaCo's "same training time + RandAugment"), not RIDE's.

DRW needs the epoch: the engine calls ``on_epoch_start`` at each epoch start; until then the
method stays at epoch 0 (no re-weighting). The epoch is a buffer, so it travels with checkpoints.
"""

from __future__ import annotations

import torch
from torch import nn

from semcl.losses.ride import diversity_temperatures, effective_number_weights, ldam_margins, ride_loss
from semcl.methods.base import Batch, DataInfo, Method
from semcl.models import NormalizedLinear
from semcl.models.ride import RideBackbone


class Ride(Method):
    num_views = 1
    has_classifier = True

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        p = cfg.method
        if info.class_counts is None:
            raise ValueError("RIDE needs the training set's class counts (DataInfo.class_counts) for LDAM and DRW")
        self.backbone = RideBackbone(cfg.model.backbone, num_experts=p.num_experts, width=p.expert_width,
                                     in_channels=info.in_channels)
        self.classifiers = nn.ModuleList(NormalizedLinear(self.backbone.expert_dim, info.num_classes)
                                         for _ in range(p.num_experts))
        counts = info.class_counts
        self.register_buffer("margins", ldam_margins(counts, p.max_margin).float())
        self.register_buffer("drw_weights", effective_number_weights(counts, p.drw_beta).float())
        self.register_buffer("drw_temperatures",
                             diversity_temperatures(counts, p.diversity_temperature, p.diversity_reweight).float())
        self.register_buffer("epoch", torch.zeros((), dtype=torch.long))
        # the buffer's value on the host: reading the buffer each step would wait for the device
        # (semcl.runtime.host_sync); None after a state dict was loaded, until it is read once
        self._epoch_now: int | None = 0
        self.register_load_state_dict_post_hook(_forget_epoch)

    def on_epoch_start(self, epoch: int) -> None:
        """The 0-based epoch about to run (DRW switches on at ``method.drw_epoch``)."""
        self.epoch.fill_(int(epoch))
        self._epoch_now = int(epoch)

    @property
    def drw_active(self) -> bool:
        # official: `epoch > reweight_epoch` with 1-based epochs == 0-based epoch >= drw_epoch
        if self.cfg.method.drw_epoch is None:
            return False
        if self._epoch_now is None:
            self._epoch_now = int(self.epoch)
        return self._epoch_now >= self.cfg.method.drw_epoch

    def expert_logits(self, x: torch.Tensor) -> list[torch.Tensor]:
        s = self.cfg.method.scale
        return [s * clf(f) for clf, f in zip(self.classifiers, self.backbone.expert_features(x), strict=True)]

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        views, labels = batch.views, batch.labels
        p, drw = self.cfg.method, self.drw_active
        loss = ride_loss(self.expert_logits(views[0]), labels, margins=self.margins, scale=p.scale,
                         class_weights=self.drw_weights if drw else None, diversity_weight=p.diversity_weight,
                         temperature=self.drw_temperatures if drw else p.diversity_temperature)
        return {"loss": loss}

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        """Mean of the experts' scaled cosine logits (official inference without the router)."""
        return torch.stack(self.expert_logits(x)).mean(0)


def _forget_epoch(module: Ride, incompatible_keys) -> None:
    """After a state dict was loaded: the epoch is read from the buffer again."""
    module._epoch_now = None
