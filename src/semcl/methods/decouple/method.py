"""Decouple (Kang et al., ICLR 2020): the second stage on a base run's frozen representation.

- `decouple_crt`: a freshly initialised linear classifier trained with cross-entropy under
  class-balanced sampling (classifier re-training);
- `decouple_lws`: the base classifier frozen; one scale per class learned the same way;
- `decouple_tau_norm`: the base classifier's rows divided by ||w_j||^tau; nothing is trained.

The base (`init_from` row, same seed) is any method whose state has `backbone.*` and
`classifier.*` (a LinearClassifier), e.g. `ce` or `balanced_softmax`; `load_dependencies` loads it.

Deviations from the official code (facebookresearch/classifier-balancing):
- its loop calls `.train()` on the frozen feature model, so BN batch statistics are used and the
  running statistics drift during stage 2; we keep the backbone in eval mode (truly frozen);
- it keeps the epoch with the best validation accuracy; we report the last epoch;
- tau is swept on the val split there (tau_norm.py); here too with `tau_select: val`, else fixed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from semcl.data.sampling import class_balanced_order
from semcl.methods.base import Batch, DataInfo, Dependency, Method
from semcl.models import LinearClassifier, build_backbone


def _load_prefixed(module: nn.Module, state: dict[str, torch.Tensor], prefix: str) -> None:
    """Load the `prefix`ed entries of a base state into `module`, strictly; ValueError names what does not fit."""
    sub = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    own = module.state_dict()
    missing = sorted(set(own) - set(sub))
    unexpected = sorted(set(sub) - set(own))
    shapes = sorted(k for k in set(own) & set(sub) if own[k].shape != sub[k].shape)
    if missing or unexpected or shapes:
        raise ValueError(f"base state does not fit '{prefix}*': missing {[prefix + k for k in missing]}, "
                         f"unexpected {[prefix + k for k in unexpected]}, other shape {[prefix + k for k in shapes]}")
    module.load_state_dict(sub)


class _Decoupled(Method):
    """Frozen backbone (no gradient, eval mode) with a linear classifier on top."""

    num_views = 1
    has_classifier = True
    sampling = "class_balanced"  # cRT / LWS take it from the config (method.sampling)
    load_classifier = True  # False for cRT: its classifier is a fresh one

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        self.backbone.requires_grad_(False)
        self.classifier = LinearClassifier(self.backbone.out_dim, info.num_classes)
        self.sampling = getattr(cfg.method, "sampling", self.sampling)

    def train(self, mode: bool = True):
        super().train(mode)
        self.backbone.eval()  # BN running statistics stay the base run's
        return self

    def epoch_order(self, labels: torch.Tensor, num_classes: int, generator: torch.Generator,
                    batch_size: int) -> torch.Tensor:
        if self.sampling == "instance":
            return super().epoch_order(labels, num_classes, generator, batch_size)
        return class_balanced_order(labels, num_classes, generator)

    def load_dependencies(self, deps: list[Dependency]) -> None:
        """Start from the base run's final weights (the row's `init_from`, same seed)."""
        (base,) = deps
        state = base.load_state()
        _load_prefixed(self.backbone, state, "backbone.")
        if self.load_classifier:
            _load_prefixed(self.classifier, state, "classifier.")

    def features(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():  # frozen: no graph through the backbone
            return self.backbone(x)

    def head(self, feats: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        views, labels = batch.views, batch.labels
        return {"loss": F.cross_entropy(self.head(self.features(views[0])), labels)}

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class DecoupleCRT(_Decoupled):
    """cRT: the classifier built in __init__ (from the run's seed) replaces the base's; only it trains."""

    load_classifier = False

    def head(self, feats: torch.Tensor) -> torch.Tensor:
        return self.classifier(feats)

    def param_groups(self) -> list[dict]:
        return [{"params": list(self.classifier.parameters())}]


class DecoupleLWS(_Decoupled):
    """LWS: logits_j = f_j * (w_j . x + b_j) with the base w, b frozen and f (init 1) learned.

    The paper writes w~_j = f_j w_j and says nothing of the bias; the official classifier
    (models/TauNormClassifier.py: `x = self.fc(x); x *= self.scales`) scales the bias too, as here.
    """

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        self.classifier.requires_grad_(False)
        self.scales = nn.Parameter(torch.ones(info.num_classes))

    def head(self, feats: torch.Tensor) -> torch.Tensor:
        return self.classifier(feats) * self.scales

    def param_groups(self) -> list[dict]:
        return [{"params": [self.scales]}]


class DecoupleTauNorm(_Decoupled):
    """tau-norm: logits_j = (w_j / ||w_j||^tau) . x without the bias, as the official tau_norm.py
    (`dotproduct_similarity(feat, pnorm(weights, p))`; the paper's Eq. drops b as well).

    Nothing trains: `param_groups()` is empty, so the train loop skips training whatever
    schedule.epochs says (rows should set 0, so no checkpoint is written and no time is spent).
    """

    sampling = "instance"

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        self.classifier.requires_grad_(False)
        self.register_buffer("tau", torch.tensor(float(cfg.method.tau)))  # a buffer: the chosen tau is saved
        grid = cfg.method.tau_grid or [round(0.1 * i, 1) for i in range(21)]  # tau_norm.py's 0..2 sweep
        self.validation_grid = grid if cfg.method.tau_select == "val" else None

    def head(self, feats: torch.Tensor, tau: float | torch.Tensor | None = None) -> torch.Tensor:
        w = self.classifier.fc.weight
        norms = w.norm(dim=1, keepdim=True).clamp_min(1e-12)  # an all-zero row stays zero, not NaN
        return F.linear(feats, w / norms.pow(self.tau if tau is None else tau))

    @torch.no_grad()
    def select_on_validation(self, feats: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
        """Set tau to the grid value with the best val top-1 (the first on ties); returns what it saw."""
        feats, labels = feats.to(self.tau.device), labels.to(self.tau.device)
        top1 = [float((self.head(feats, t).argmax(1) == labels).double().mean()) * 100 for t in self.validation_grid]
        best = max(range(len(top1)), key=lambda i: (top1[i], -i))
        self.tau.fill_(self.validation_grid[best])
        return {"tau": float(self.validation_grid[best]), "tau_val_top1": top1[best]}

    def param_groups(self) -> list[dict]:
        return []
