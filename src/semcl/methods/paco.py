"""PaCo, GPaCo and SupCon-with-a-queue: contrast samples and learnable class centers.

Setup of the official code (../shared/papers/paco.md c.1-c.4):
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
  form) on both views' logits + weight * SupCon; the LT scripts also weight each anchor's SupCon
  term by its class's effective-number weight (`supcon_class_weights: effective_number`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from semcl.config import GPacoMethod, MultiTaskMethod, PacoMethod
from semcl.errors import ConfigError
from semcl.losses import paco_loss, supcon_loss
from semcl.methods.balanced_softmax import log_prior
from semcl.methods.base import DataInfo, Method
from semcl.models import (
    LinearClassifier,
    MemoryBank,
    build_backbone,
    gather_from_all_ranks,
    momentum_copy,
    momentum_update_,
    shuffled_forward,
)


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
    if prior == "uniform":  # the official full-CIFAR-100 GPaCo script's constant offset (paco.md g.8)
        return torch.full((info.num_classes,), -float(torch.log(torch.tensor(float(info.num_classes)))))
    return torch.zeros(info.num_classes)


def effective_number_weights(info: DataInfo, beta: float = 0.999) -> torch.Tensor:
    """mean(E) / E_j with E_j = (1 - beta^n_j) / (1 - beta) over all classes: the LT multi-task
    scripts' per-class weights of the SupCon term (paco.md c.5). An empty class (E = 0, weight
    infinite there, never used by an anchor) gets 0 here."""
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


class ParametricContrastive(Method):
    """PaCo (`paco`), GPaCo (`gpaco`) and SupCon in the MoCo framework (`supcon`)."""

    num_views = 2

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        self.kind = m.name
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        init_backbone(self.backbone, cfg.model.pretrained, cfg.model.train_only)
        d, hidden, dim = self.backbone.out_dim, cfg.model.head_hidden, cfg.model.head_dim
        one_encoder = isinstance(m, GPacoMethod | MultiTaskMethod)
        self.head = gpaco_head(d, hidden, dim) if one_encoder else mocov2_head(d, hidden, dim)
        self.classifier = LinearClassifier(d, info.num_classes)  # the class centers (PaCo, GPaCo)
        if not one_encoder:
            self.key_backbone = momentum_copy(self.backbone)
            self.key_head = momentum_copy(self.head)
            self.momentum = m.momentum
        self.bank = MemoryBank(m.queue_size, dim)
        self.tau = m.tau
        self.alpha = getattr(m, "alpha", 1.0)
        self.centers_over_tau = getattr(m, "centers_over_tau", False)
        self.label_smoothing = getattr(m, "label_smoothing", 0.0)
        self.weight = getattr(m, "weight", 0.0)
        prior = m.prior if isinstance(m, PacoMethod | GPacoMethod | MultiTaskMethod) else "none"
        self.register_buffer("center_offset", center_offset(prior, info))
        weights = getattr(m, "supcon_class_weights", None)
        self.register_buffer("supcon_class_weights", effective_number_weights(info) if weights else None)
        self._pending: tuple[torch.Tensor, torch.Tensor] | None = None

    def _centers(self, feats: torch.Tensor) -> torch.Tensor:
        logits = self.classifier(feats)
        if self.centers_over_tau:
            logits = logits / self.tau
        return logits + self.center_offset

    def _paco(self, anchors, labels, contrast, contrast_labels, feats) -> torch.Tensor:
        # the prior offset is already in the center logits (log(pi + 1e-9), official code), so an
        # empty class -- possible in small LT profiles -- needs no special case: class_prior=None
        self_mask = torch.zeros(anchors.shape[0], contrast.shape[0], dtype=torch.bool, device=labels.device)
        self_mask.fill_diagonal_(True)  # anchors are the first rows of `contrast`
        centers = self._centers(feats).float()
        with torch.autocast(anchors.device.type, enabled=False):  # the loss runs in float32 (optim.amp)
            return paco_loss(anchors, contrast, contrast_labels, labels, centers, alpha=self.alpha,
                             tau=self.tau, self_mask=self_mask, smoothing=self.label_smoothing)

    def _supcon(self, anchors, labels, contrast, contrast_labels) -> torch.Tensor:
        # GPaCo Eq. 3: anchors are the first rows of `contrast`; only their own column leaves A(i)
        self_mask = torch.zeros(anchors.shape[0], contrast.shape[0], dtype=torch.bool, device=labels.device)
        self_mask.fill_diagonal_(True)
        w = None if self.supcon_class_weights is None else self.supcon_class_weights[labels]
        with torch.autocast(anchors.device.type, enabled=False):  # the loss runs in float32 (optim.amp)
            return supcon_loss(anchors, contrast, contrast_labels, labels, tau=self.tau, self_mask=self_mask,
                               anchor_weights=w)

    def training_step(self, views: list[torch.Tensor], labels: torch.Tensor) -> dict[str, torch.Tensor]:
        n = labels.shape[0]
        queue, queue_labels = self.bank.features.clone(), self.bank.labels.clone()
        if self.kind in ("gpaco", "multitask"):
            feats = self.backbone(torch.cat(views[:2]))  # one encoder, both views, with gradients
            z = F.normalize(self.head(feats).float(), dim=1)  # losses in float32 under autocast (optim.amp)
            y = torch.cat([labels, labels])
            contrast, contrast_labels = torch.cat([z, queue]), torch.cat([y, queue_labels])
            if self.kind == "gpaco":  # both views are anchors
                loss = self._paco(z, y, contrast, contrast_labels, feats)
            else:  # CE (+ prior for the LT form) on both views' logits + weight * SupCon
                ce = F.cross_entropy(self.classifier(feats) + self.center_offset, y)
                loss = ce + self.weight * self._supcon(z, y, contrast, contrast_labels)
            keys = z[n:]
        else:
            feats = self.backbone(views[0])
            q = F.normalize(self.head(feats).float(), dim=1)  # losses in float32 under autocast (optim.amp)
            with torch.no_grad():
                # MoCo order: momentum update, then the keys; with several GPUs through shuffle-BN as
                # the official builder (one process: train-mode BN on the whole key batch)
                momentum_update_(self.key_backbone, self.backbone, self.momentum)
                momentum_update_(self.key_head, self.head, self.momentum)
                keys = F.normalize(shuffled_forward(lambda v: self.key_head(self.key_backbone(v)), views[1]).float(), dim=1)
            contrast, contrast_labels = torch.cat([q, keys, queue]), torch.cat([labels, labels, queue_labels])
            if self.kind == "paco":  # only the queries are anchors; their own keys stay positives
                loss = self._paco(q, labels, contrast, contrast_labels, feats)
            else:  # supcon: sample terms only; the classifier learns on detached features
                loss = self._supcon(q, labels, contrast, contrast_labels)
                loss = loss + F.cross_entropy(self.classifier(feats.detach()), labels)
        # the queue is read by this step's graph, so it is written only after backward
        self._pending = (keys.detach(), labels)
        return {"loss": loss}

    def after_backward(self) -> None:
        if self._pending is not None:
            keys, labels = self._pending  # every rank's queue takes the keys of the whole global batch
            self.bank.enqueue(gather_from_all_ranks(keys), gather_from_all_ranks(labels))
            self._pending = None

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        """Raw classifier logits of the query encoder (no prior), as the official evaluation."""
        return self.classifier(self.backbone(x))


__all__ = ["ParametricContrastive"]
