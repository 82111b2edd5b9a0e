"""Learning-rate schedule of the SupCon/RINCE training scripts: cosine per epoch with a floor
of lr * rate**3, and a linear warm-up per iteration over the first epochs."""

from __future__ import annotations

import math

from semcl.config import OptimConfig


def _epoch_lr(optim: OptimConfig, epochs: int, epoch1: int) -> float:
    """lr of 1-indexed epoch `epoch1` (the official scripts count epochs from 1)."""
    if not optim.cosine:
        # step schedule: the epochs already completed (epoch1 - 1) that reached a milestone
        passed = sum(epoch1 - 1 >= m for m in optim.step_milestones or [])
        return optim.lr * (optim.step_gamma if optim.step_gamma is not None else 0.1) ** passed
    floor = optim.lr * optim.lr_decay_rate**3
    return floor + (optim.lr - floor) * (1 + math.cos(math.pi * epoch1 / epochs)) / 2


def lr_at(optim: OptimConfig, epochs: int, epoch: int, step: int, steps_per_epoch: int) -> float:
    """lr for 0-indexed `epoch` and `step` within it."""
    epoch1 = epoch + 1
    if optim.warmup_epochs > 0 and epoch1 <= optim.warmup_epochs:
        target = _epoch_lr(optim, epochs, optim.warmup_epochs)
        p = (step + epoch * steps_per_epoch) / (optim.warmup_epochs * steps_per_epoch)
        return optim.warmup_from + p * (target - optim.warmup_from)
    return _epoch_lr(optim, epochs, epoch1)
