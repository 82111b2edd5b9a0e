"""PaCo, GPaCo and SupCon-with-a-queue: contrast samples and learnable class centers.

Setup of the official code (docs/papers/paco.md §c.1-§c.4):
* The class centers are the weight and bias of one linear classifier on the *un-normalised*
  pooled feature; a center logit is w_j . x + b_j, not divided by tau (code; `centers_over_tau`
  is the paper's ambiguous alternative). With `prior: train` log(pi_j) is added to every center
  logit during training (Balanced-Softmax rebalance); evaluation reads the raw logits.
* PaCo: view 1 -> query encoder + MoCo-v2 head (Linear-BN-ReLU-Linear); view 2 -> momentum key
  encoder (m 0.999). Anchors are the N queries; candidates [queries, keys, queue] with labels
  [y, y, queue labels]; keys are enqueued with their labels.
* GPaCo: no key encoder -- both views go through the one encoder with gradients, a 3-layer MLP
  head without BN, and both views (2N rows) are anchors; only view 2's projections are enqueued.
* SupCon (GPaCo Eq. 3): PaCo's sample terms only, every positive weighted 1; a linear classifier
  on the detached pooled feature is trained alongside so the run has logits to evaluate.
* Multi-task (GPaCo's baseline): GPaCo's one-encoder two-view setup with CE (+ log prior in the LT
  form) on both views' logits + weight * SupCon. The LT scripts multiply each anchor's SupCon term
  by a class weight meant to be the effective-number weight, but `cal_weight_for_classes` applies
  sum()/len() to a [1, C] array, so every weight is exactly 1 (PCL GPaCo/LT/losses.py:95-103 @fe56535):
  they train unweighted, as the default here; `supcon_class_weights: effective_number` is the
  intended weighting, a variant.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from semcl.errors import ConfigError
from semcl.losses import paco_loss, supcon_loss
from semcl.methods.balanced_softmax.method import log_prior
from semcl.methods.base import Batch, DataInfo, Method
from semcl.models import LinearClassifier, MomentumQueue, build_backbone, shuffled_forward


def mocov2_head(in_dim: int, hidden: int, out_dim: int) -> nn.Module:
    """PaCo's projector: the MoCo-v2 MLP with BN after the first layer (official MoCo builder)."""
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True),
                         nn.Linear(hidden, out_dim))


def gpaco_head(in_dim: int, hidden: int, out_dim: int) -> nn.Module:
    """GPaCo's projector: 3 linear layers, ReLU between, no BN (official GPaCo builder; the shared
    ProjectionHead(num_layers=3) has BN, so it is not used here)."""
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, hidden),
                         nn.ReLU(inplace=True), nn.Linear(hidden, out_dim))


def center_offset(prior: str, info: DataInfo) -> torch.Tensor:
    """What is added to the center logits in training: log pi (train), log(1/C) (uniform), or 0."""
    if prior == "train":
        return log_prior(info)
    if prior == "uniform":  # the official full-CIFAR-100 GPaCo script's constant offset (docs/papers/paco.md §g.8)
        return torch.full((info.num_classes,), -float(torch.log(torch.tensor(float(info.num_classes)))))
    return torch.zeros(info.num_classes)


def effective_number_weights(info: DataInfo, beta: float = 0.999) -> torch.Tensor:
    """mean(E) / E_j with E_j = (1 - beta^n_j) / (1 - beta) over all classes: the per-class weights
    the LT multi-task scripts intend for the SupCon term (their code yields all ones, module docstring;
    docs/papers/paco.md §c.5). An empty class (E = 0, weight infinite there, never used by an anchor) gets 0 here."""
    if info.class_counts is None:
        raise ValueError("effective-number weights need the training set's class counts")
    effective = (1 - beta ** info.class_counts.double()) / (1 - beta)
    weights = torch.where(effective > 0, effective.mean() / effective.clamp_min(1e-300), 0.0)
    return weights.float()


def init_backbone(backbone: nn.Module, pretrained: str | None, train_only: str | None) -> None:
    """Start from a torchvision state dict and freeze convolutions outside `train_only`.

    Places-LT (official PaCo/GPaCo scripts): ResNet-152 with torchvision ImageNet weights, every
    convolution frozen except those of layer4's last bottleneck (`layer4.2`); BN stays trainable.
    """
    if pretrained:
        from semcl.files import inflation_problem

        if Path(pretrained).is_file() and (problem := inflation_problem(pretrained)):
            raise ConfigError(f"{pretrained}: refused as 'model.pretrained': {problem}")
        try:
            state = torch.load(pretrained, map_location="cpu", weights_only=True)
        except (OSError, RuntimeError) as err:
            raise ConfigError(f"{pretrained}: cannot load 'model.pretrained' ({type(err).__name__})") from None
        state = {k: v for k, v in state.items() if not k.startswith("fc.")}  # our fc is the identity
        try:
            missing, unexpected = backbone.load_state_dict(state, strict=False)
        except RuntimeError:  # shape mismatches
            missing, unexpected = ["(shapes differ)"], []
        if missing or unexpected:
            raise ConfigError(f"{pretrained}: 'model.pretrained' does not fit the backbone "
                              f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    if train_only is not None:
        for name, module in backbone.named_modules():
            if isinstance(module, nn.Conv2d) and not name.startswith(train_only):
                module.weight.requires_grad_(False)


def init_queue(bank, how: str, num_classes: int) -> None:
    """The queue before its first writes (QUEUE_INIT in semcl.methods.paco); global RNG, seeded per run.
    "official" and "random" give the slots random class labels, so the initial keys count as positives
    of random classes until overwritten, as in the official builders."""
    k, d = bank.features.shape
    with torch.no_grad():
        if how == "official":  # register_buffer("queue", randn(K, d)); queue = normalize(queue, dim=0)
            bank.features.copy_(F.normalize(torch.randn(k, d), dim=0))
        if how in ("official", "random"):
            bank.labels.copy_(torch.randint(0, num_classes, (k,)))


class _QueueContrast(Method):
    """What the four methods share: encoder, projector, linear classifier (the class centres), a queue
    of keys and labels, and with two encoders (PaCo, SupCon) a momentum key encoder."""

    num_views = 2
    has_classifier = True
    one_encoder = False  # True: both views through the one encoder with gradients (GPaCo's setup)

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        init_backbone(self.backbone, cfg.model.pretrained, cfg.model.train_only)
        d, hidden, dim = self.backbone.out_dim, cfg.model.head_hidden, cfg.model.head_dim
        self.head = gpaco_head(d, hidden, dim) if self.one_encoder else mocov2_head(d, hidden, dim)
        self.classifier = LinearClassifier(d, info.num_classes)  # the class centers (PaCo, GPaCo)
        self.keys = MomentumQueue(None if self.one_encoder else m.momentum)
        if not self.one_encoder:
            self.key_backbone = self.keys.copy(self.backbone)
            self.key_head = self.keys.copy(self.head)
        self.bank = self.keys.bank(m.queue_size, dim)
        init_queue(self.bank, m.queue_init, info.num_classes)
        self.view_forward = getattr(m, "view_forward", "concat")
        self.tau = m.tau
        self.register_buffer("center_offset", center_offset(getattr(m, "prior", "none"), info))

    def _anchors(self, views: list[torch.Tensor], labels: torch.Tensor):
        """(pooled features, anchors, anchor labels, contrast set, its labels); stages the keys."""
        queue, queue_labels = self.bank.features.clone(), self.bank.labels.clone()
        if self.one_encoder:
            feats = self._encode_views(views[:2])  # one encoder, both views, with gradients
            z = F.normalize(self.head(feats).float(), dim=1)  # losses in float32 under autocast (optim.amp)
            y = torch.cat([labels, labels])
            self.keys.stage(labels, keys=z[labels.shape[0]:])  # only view 2's projections are enqueued
            return feats, z, y, torch.cat([z, queue]), torch.cat([y, queue_labels])
        feats = self.backbone(views[0])
        q = F.normalize(self.head(feats).float(), dim=1)  # losses in float32 under autocast (optim.amp)
        with torch.no_grad():
            # MoCo order: momentum update, then the keys; with several GPUs through shuffle-BN as
            # the official builder (one process: train-mode BN on the whole key batch)
            self.keys.update()
            keys = F.normalize(shuffled_forward(lambda v: self.key_head(self.key_backbone(v)), views[1]).float(), dim=1)
        self.keys.stage(labels, keys=keys)  # the queue is read by this step's graph: written after backward
        return feats, q, labels, torch.cat([q, keys, queue]), torch.cat([labels, labels, queue_labels])

    def _encode_views(self, views: list[torch.Tensor]) -> torch.Tensor:
        """Pooled features of both views, [2N, d]. "separate" (official GPaCo builder): one encoder
        call per view, so train-mode BN normalises each view by its own batch statistics and the
        running statistics take two updates; "concat": one call on the stacked views (BN mixes them)."""
        if self.view_forward == "concat":
            return self.backbone(torch.cat(views))
        return torch.cat([self.backbone(v) for v in views])

    def after_backward(self) -> None:
        self.keys.flush()

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        """Raw classifier logits of the query encoder (no prior), as the official evaluation."""
        return self.classifier(self.backbone(x))


def _self_mask(anchors: torch.Tensor, contrast: torch.Tensor) -> torch.Tensor:
    """Anchors are the first rows of `contrast`: only their own column leaves the candidate set."""
    mask = torch.zeros(anchors.shape[0], contrast.shape[0], dtype=torch.bool, device=anchors.device)
    return mask.fill_diagonal_(True)


class _CenterContrast(_QueueContrast):
    """PaCo's loss: sample positives weighted alpha, the own class center weighted 1."""

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        self.alpha, self.centers_over_tau, self.label_smoothing = m.alpha, m.centers_over_tau, m.label_smoothing

    def _centers(self, feats: torch.Tensor) -> torch.Tensor:
        logits = self.classifier(feats)
        if self.centers_over_tau:
            logits = logits / self.tau
        return logits + self.center_offset

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        # PaCo: only the queries are anchors, their own keys stay positives; GPaCo: both views are anchors.
        # The prior offset is already in the center logits (log(pi + 1e-9), official code), so an empty
        # class -- possible in small LT profiles -- needs no special case.
        feats, anchors, labels, contrast, contrast_labels = self._anchors(batch.views, batch.labels)
        centers = self._centers(feats).float()
        with torch.autocast(anchors.device.type, enabled=False):  # the loss runs in float32 (optim.amp)
            loss = paco_loss(anchors, contrast, contrast_labels, labels, centers, alpha=self.alpha, tau=self.tau,
                             self_mask=_self_mask(anchors, contrast), smoothing=self.label_smoothing)
        return {"loss": loss}


class PaCo(_CenterContrast):
    """PaCo (`paco`): query encoder + momentum key encoder."""


class GPaCo(_CenterContrast):
    """GPaCo (`gpaco`): one encoder, both views anchors, no momentum encoder."""

    one_encoder = True


def _supcon(anchors, labels, contrast, contrast_labels, tau: float, weights=None) -> torch.Tensor:
    with torch.autocast(anchors.device.type, enabled=False):  # the loss runs in float32 (optim.amp)
        return supcon_loss(anchors, contrast, contrast_labels, labels, tau=tau,
                           self_mask=_self_mask(anchors, contrast), anchor_weights=weights)


class SupConQueue(_QueueContrast):
    """SupCon in the MoCo framework (`supcon`, GPaCo Eq. 3): sample terms only; a linear classifier
    learns on the detached features so the run has logits to evaluate."""

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        feats, q, labels, contrast, contrast_labels = self._anchors(batch.views, batch.labels)
        loss = _supcon(q, labels, contrast, contrast_labels, self.tau)
        return {"loss": loss + F.cross_entropy(self.classifier(feats.detach()), labels)}


class MultiTask(_QueueContrast):
    """GPaCo's multi-task baseline (`multitask`): CE (+ prior in the LT form) on both views' logits
    + weight * SupCon, on GPaCo's one-encoder two-view setup."""

    one_encoder = True

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        self.weight = cfg.method.weight
        weights = cfg.method.supcon_class_weights
        self.register_buffer("supcon_class_weights", effective_number_weights(info) if weights else None)

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        feats, z, y, contrast, contrast_labels = self._anchors(batch.views, batch.labels)
        ce = F.cross_entropy(self.classifier(feats) + self.center_offset, y)
        w = None if self.supcon_class_weights is None else self.supcon_class_weights[y]
        return {"loss": ce + self.weight * _supcon(z, y, contrast, contrast_labels, self.tau, w)}


__all__ = ["GPaCo", "MultiTask", "PaCo", "SupConQueue"]
