"""optim.shape "plateau": torch's ReduceLROnPlateau rule on the run's epoch losses (RINCE video)."""

from __future__ import annotations

import pytest
import torch

from semcl.config import OptimConfig
from semcl.engine.schedule import lr_at, plateau_reductions


def _torch_lrs(losses, patience, lr=1.0, factor=0.1):
    """The lr torch's scheduler sets before each epoch, given the losses of the epochs before it."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=factor, patience=patience)
    out = [opt.param_groups[0]["lr"]]
    for loss in losses:
        sched.step(loss)
        out.append(opt.param_groups[0]["lr"])
    return out


@pytest.mark.parametrize("patience", [0, 1, 2, 3])
def test_matches_torch_reduce_lr_on_plateau(patience):
    losses = [5.0, 4.0, 4.0, 4.0, 3.9999, 4.1, 3.0, 3.0, 3.0, 3.0, 3.0, 2.0, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5]
    opt = OptimConfig(lr=1.0, cosine=False, warmup_epochs=0, shape="plateau", plateau_patience=patience)
    ours = [lr_at(opt, 100, e, 0, 10, losses) for e in range(len(losses) + 1)]
    assert ours == pytest.approx(_torch_lrs(losses, patience))


def test_reductions_by_hand():
    # patience 1: bad epochs 2, 3 (4.0 is not below 4.0 * (1 - 1e-4)) -> cut after epoch 3; 3.9999 > 4 * 0.9999
    assert plateau_reductions([4.0, 4.0, 4.0], 1) == 1
    assert plateau_reductions([4.0, 4.0, 4.0, 3.9999], 1) == 1
    assert plateau_reductions([4.0, 3.0, 2.0, 1.0], 0) == 0
    assert plateau_reductions([], 0) == 0


def test_floor_and_factor():
    opt = OptimConfig(lr=1e-3, cosine=False, warmup_epochs=0, shape="plateau", plateau_patience=0,
                      plateau_factor=0.5, min_lr=3e-4)
    assert lr_at(opt, 10, 1, 0, 5, [1.0]) == pytest.approx(1e-3)
    assert lr_at(opt, 10, 2, 0, 5, [1.0, 1.0]) == pytest.approx(5e-4)
    assert lr_at(opt, 10, 3, 0, 5, [1.0, 1.0, 1.0]) == pytest.approx(3e-4)  # 2.5e-4 floored
    # only the epochs before `epoch` count, whatever the list holds
    assert lr_at(opt, 10, 1, 0, 5, [1.0, 1.0, 1.0]) == pytest.approx(1e-3)
