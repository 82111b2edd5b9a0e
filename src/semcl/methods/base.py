"""What every method provides to the engine: modules to train, one training step, its state."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from semcl.config import RunConfig


@dataclass(frozen=True)
class DataInfo:
    """What a method needs to know about its training data."""

    num_classes: int
    in_channels: int
    fine_to_coarse: torch.Tensor | None  # int64 [C]: superclass of each class, where known
    class_counts: torch.Tensor | None = None  # int64 [C]: training images per class (class priors)

    def superclasses(self, what: str) -> torch.Tensor:
        """int64 [C] superclass of each class (-1 = none), for methods that need the hierarchy;
        ValueError naming `what` when the dataset has none."""
        if self.fine_to_coarse is None:
            raise ValueError(f"{what} needs a dataset with superclass labels (DataInfo.fine_to_coarse is None)")
        f2c = self.fine_to_coarse.to(torch.int64)
        if f2c.shape != (self.num_classes,):
            raise ValueError(f"fine_to_coarse has shape {tuple(f2c.shape)}, expected ({self.num_classes},)")
        if not bool((f2c >= 0).any()):
            raise ValueError(f"{what}: no class has a known superclass")
        return f2c


class Method(nn.Module):
    """Base class. Subclasses build their modules in __init__ and define `training_step`.

    `backbone` is what the evaluations read (features before any head). Every piece of
    training state (key encoders, memory banks with their labels and pointer) is a module or
    buffer, so `state_dict()` is a complete checkpoint of the method.
    """

    num_views: int = 1
    backbone: nn.Module

    def __init__(self, cfg: RunConfig, info: DataInfo):
        super().__init__()
        self.cfg = cfg
        self.info = info

    def training_step(self, views: list[torch.Tensor], labels: torch.Tensor) -> dict[str, torch.Tensor]:
        """Losses of one batch; the engine back-propagates `loss`. Side effects that the
        official code performs before the optimiser step (momentum update, enqueue) go here."""
        raise NotImplementedError

    def after_backward(self) -> None:
        """Called after backward, before the optimiser step (e.g. to enqueue keys)."""

    def load_base_state(self, state: dict[str, torch.Tensor]) -> None:
        """Start from a base run's final weights (`state` = that run's checkpoint["method"]).

        Called once before training by rows with `init_from` (e.g. Decouple's second stage on a
        cross-entropy run of the same seed); methods without a second stage refuse."""
        raise ValueError(f"method {self.cfg.method.name!r} does not start from a base run")

    def optimized_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    # evaluation side (CONTRACT.md); a minimal stand-in until the full base class lands
    def features(self, x: torch.Tensor) -> torch.Tensor:
        """What the evaluations read: the backbone's pooled features, before any head."""
        return self.backbone(x)

    @property
    def has_classifier(self) -> bool:
        """Whether `classify` gives class logits; a subclass may also set it as a class attribute."""
        return type(self).classify is not Method.classify

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no classifier")

    def stage_features(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Pooled features per backbone stage, for per-stage probes; none by default."""
        return {}
