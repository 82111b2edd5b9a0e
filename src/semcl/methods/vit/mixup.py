"""MAE's mixup / cutmix (timm `Mixup`, mode "batch"), replayable from the epoch's generator.

timm draws its mixing parameters from NumPy's global random state; here that state is seeded from
the step's generator for the call and restored afterwards, so a resumed run mixes exactly as before and
nothing else's NumPy stream moves. The caller passes `batch.mixing_generator`: with several ranks each rank's
own, so every rank draws its own lambda and box as MAE's DDP processes do (main_finetune.py seeds each
process with seed + rank); with one process the epoch's generator. Targets are soft: with lam the kept share of image i,
    t_i = lam * smooth(y_i) + (1 - lam) * smooth(y_{B-1-i}),  smooth(y) = (1 - s) onehot(y) + s / C,
and the loss is the soft-target CE  L = mean_i -sum_c t_ic log softmax(z_i)_c.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def soft_target_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """mean_i -sum_c target_ic log softmax(logits_i)_c (timm SoftTargetCrossEntropy)."""
    return torch.sum(-target * F.log_softmax(logits, dim=-1), dim=-1).mean()


class SeededMixup:
    """Callable (images [B, C, H, W], labels [B], generator) -> (mixed images, soft targets [B, C]).

    With mixup and cutmix both 0 it only smooths the one-hot targets (plain label-smoothed CE)."""

    def __init__(self, *, mixup: float, cutmix: float, prob: float, switch_prob: float, smoothing: float,
                 num_classes: int):
        self.smoothing, self.num_classes = smoothing, num_classes
        self.active = mixup > 0 or cutmix > 0
        self._mixup = None
        if self.active:
            try:
                from timm.data import Mixup
            except ImportError:
                raise ImportError("mixup / cutmix need timm: pip install 'semcl[timm]'") from None
            self._mixup = Mixup(mixup_alpha=mixup, cutmix_alpha=cutmix, prob=prob, switch_prob=switch_prob,
                                mode="batch", label_smoothing=smoothing, num_classes=num_classes)

    def draw(self, batch_size: int, generator: torch.Generator) -> int | None:
        """The step's seed for timm's NumPy draws, from the CPU generator (host work); None when inactive."""
        if not self.active:
            return None
        if batch_size % 2:
            raise ValueError(f"mixup / cutmix need an even batch, got {batch_size} (set optim.batch_size even)")
        return int(torch.randint(0, 2**31 - 1, (1,), generator=generator))

    def apply(self, x: torch.Tensor, labels: torch.Tensor, seed: int | None):
        """(mixed images, soft targets [B, C]) under `draw`'s seed."""
        if seed is None:
            off = self.smoothing / self.num_classes
            target = torch.full((labels.shape[0], self.num_classes), off, device=x.device)
            return x, target.scatter_(1, labels[:, None], 1.0 - self.smoothing + off)
        saved = np.random.get_state()
        np.random.seed(seed)
        try:
            return self._mixup(x.clone(), labels)
        finally:
            np.random.set_state(saved)

    def __call__(self, x: torch.Tensor, labels: torch.Tensor, generator: torch.Generator):
        return self.apply(x, labels, self.draw(x.shape[0], generator))
