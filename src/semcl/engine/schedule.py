"""Learning-rate schedules.

optim.shape None: the SupCon/RINCE training scripts -- cosine per epoch with a floor of
lr * rate**3, and a linear warm-up per iteration from warmup_from over the first epochs.
optim.shape "paco": the official PaCo/GPaCo scripts, which set the lr once per epoch (`paco_lr`).
optim.shape "mae": MAE's fine-tuning rule, set per iteration (`mae_lr`).
optim.shape "plateau": x0.1 on a plateau of the epoch loss (RINCE video, `plateau_reductions`).
`lr_at` looks the shape up in SHAPES, one function per shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from semcl.config import OptimConfig


def _epoch_lr(optim: OptimConfig, epochs: int, epoch1: int) -> float:
    """lr of 1-indexed epoch `epoch1` (the official scripts count epochs from 1)."""
    if not optim.cosine:
        # step schedule: the epochs already completed (epoch1 - 1) that reached a milestone
        passed = sum(epoch1 - 1 >= m for m in optim.step_milestones or [])
        return optim.lr * (optim.step_gamma if optim.step_gamma is not None else 0.1) ** passed
    floor = optim.lr * optim.lr_decay_rate**3
    return floor + (optim.lr - floor) * (1 + math.cos(math.pi * epoch1 / epochs)) / 2


def paco_lr(optim: OptimConfig, epochs: int, epoch: int) -> float:
    """lr of 0-indexed `epoch` e under the official PaCo/GPaCo rules (docs/papers/paco.md §d, §d.2), w = warmup_epochs:

    cosine (ImageNet(-LT), iNat, Places scripts, `adjust_learning_rate`):
        e < w:  lr * (e + 1) / w
        else:   lr * 0.5 * (1 + cos(pi * (e - w + 1) / (E - w + 1)))       (0 after the last epoch)
    step (CIFAR scripts, `paco_cifar.py` / `multitask_cifar.py`, milestones 320 and 360):
        if e <= w: lr * (e + 1) / w      -- e = w is still warm-up, so epoch 10 runs at 1.1 lr
        elif e > 360: lr * 0.01  elif e > 320: lr * 0.1  else: lr
      i.e. lr * gamma ** #{m in step_milestones: e > m}: milestone m first applies at epoch m + 1.
    w = 0 means no warm-up in both.
    """
    lr, w = optim.lr, optim.warmup_epochs
    if optim.cosine:
        if epoch < w:
            return lr * (epoch + 1) / w
        return lr * 0.5 * (1 + math.cos(math.pi * (epoch - w + 1) / (epochs - w + 1)))
    if w > 0 and epoch <= w:
        return lr * (epoch + 1) / w
    passed = sum(epoch > m for m in optim.step_milestones or [])
    return lr * (optim.step_gamma if optim.step_gamma is not None else 0.1) ** passed


def mae_lr(optim: OptimConfig, epochs: int, t: float) -> float:
    """lr at fractional epoch t = epoch + step / steps_per_epoch (MAE util/lr_sched.py), w = warmup_epochs:

        t < w:  lr * t / w
        else:   min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * (t - w) / (E - w)))
    """
    lr, w, floor = optim.lr, optim.warmup_epochs, optim.min_lr or 0.0
    if t < w:
        return lr * t / w
    return floor + (lr - floor) * 0.5 * (1 + math.cos(math.pi * (t - w) / max(epochs - w, 1e-12)))


PLATEAU_THRESHOLD = 1e-4  # torch ReduceLROnPlateau defaults: mode min, relative threshold, cooldown 0


def plateau_reductions(losses: Sequence[float], patience: int) -> int:
    """How often ReduceLROnPlateau (mode "min", threshold 1e-4 "rel", cooldown 0) would have cut the lr
    after seeing `losses`, one per finished epoch: an epoch is bad unless its loss is below
    best * (1 - 1e-4); more than `patience` bad epochs in a row cut the lr and restart the count."""
    best, bad, cuts = math.inf, 0, 0
    for loss in losses:
        if loss < best * (1 - PLATEAU_THRESHOLD):
            best, bad = loss, 0
        else:
            bad += 1
        if bad > patience:
            cuts, bad = cuts + 1, 0
    return cuts


def _plateau(optim: OptimConfig, epochs: int, epoch: int, step: int, steps_per_epoch: int,
             losses: Sequence[float]) -> float:
    # the paper monitors a validation loss; the video splits have no validation set, so the epoch's
    # training loss is monitored (named in rince/tab4's deviations)
    cuts = plateau_reductions(losses[:epoch], 10 if optim.plateau_patience is None else optim.plateau_patience)
    lr, factor = optim.lr, 0.1 if optim.plateau_factor is None else optim.plateau_factor
    for _ in range(cuts):
        new = max(lr * factor, optim.min_lr or 0.0)
        if lr - new > 1e-8:  # torch's eps: a smaller decay is ignored
            lr = new
    if optim.warmup_epochs > 0 and epoch < optim.warmup_epochs:
        p = (step + epoch * steps_per_epoch) / (optim.warmup_epochs * steps_per_epoch)
        return optim.warmup_from + p * (lr - optim.warmup_from)
    return lr


def _paco(optim: OptimConfig, epochs: int, epoch: int, step: int, steps_per_epoch: int,
          losses: Sequence[float]) -> float:
    return paco_lr(optim, epochs, epoch)


def _mae(optim: OptimConfig, epochs: int, epoch: int, step: int, steps_per_epoch: int,
         losses: Sequence[float]) -> float:
    return mae_lr(optim, epochs, epoch + step / steps_per_epoch)


def _supcon(optim: OptimConfig, epochs: int, epoch: int, step: int, steps_per_epoch: int,
            losses: Sequence[float]) -> float:
    """The SupCon/RINCE scripts: cosine or step per epoch, linear warm-up per iteration towards the
    lr of the last warm-up epoch."""
    epoch1 = epoch + 1
    if optim.warmup_epochs > 0 and epoch1 <= optim.warmup_epochs:
        target = _epoch_lr(optim, epochs, optim.warmup_epochs)
        p = (step + epoch * steps_per_epoch) / (optim.warmup_epochs * steps_per_epoch)
        return optim.warmup_from + p * (target - optim.warmup_from)
    return _epoch_lr(optim, epochs, epoch1)


# optim.shape -> its rule, called as (optim, epochs, epoch, step, steps_per_epoch, losses); None is the
# SupCon/RINCE default (cosine, or step with optim.cosine false). A new shape is one function + one entry
# here + its name in semcl.config.CHOICES["optim.shape"] (tests/engine/test_schedule.py checks they agree).
SHAPES: dict[str | None, Callable[..., float]] = {None: _supcon, "plateau": _plateau, "paco": _paco, "mae": _mae}


def lr_at(optim: OptimConfig, epochs: int, epoch: int, step: int, steps_per_epoch: int,
          losses: Sequence[float] = ()) -> float:
    """lr for 0-indexed `epoch` and `step` within it; `losses` are the mean losses of the epochs
    before `epoch` (shape "plateau" only: the schedule is a function of the run's own history, so a
    resumed run, which restores the history, continues on the same lr)."""
    return SHAPES[optim.shape](optim, epochs, epoch, step, steps_per_epoch, losses)
