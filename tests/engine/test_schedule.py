"""Learning-rate schedules: the official PaCo/GPaCo per-epoch rules (optim.shape paco) against values
worked out by hand, and the SupCon shape (optim.shape None) unchanged."""

from __future__ import annotations

import math

import pytest

from semcl.config import hashable_config
from semcl.engine.schedule import lr_at, paco_lr
from semcl.errors import ConfigError
from semcl.run_config import build_config


def _optim(**kw):
    return build_config({"optim": kw}, where="test").optim


def test_last_epoch_matches_the_released_checkpoint():
    # lr 0.04, w 10, E 400, e 399: 0.04 * 0.5 * (1 + cos(pi * 390 / 391)) = 6.4557e-7; the maintainer's
    # checkpoint stores "0.00000065" (paco.md d, issue #25)
    opt = _optim(shape="paco", lr=0.04, warmup_epochs=10)
    lr = lr_at(opt, 400, 399, 0, 100)
    assert lr == pytest.approx(6.455708233743529e-07, rel=1e-12)
    assert f"{lr:.8f}" == "0.00000065"


def test_cosine_warm_up_per_epoch():
    opt = _optim(shape="paco", lr=0.04, warmup_epochs=10)
    # e < w: lr (e + 1) / w, the same for every step of the epoch (set once per epoch)
    for e in range(10):
        assert lr_at(opt, 400, e, 0, 50) == lr_at(opt, 400, e, 49, 50) == pytest.approx(0.004 * (e + 1), rel=1e-12)
    # e = w is the first cosine epoch: pi * 1 / 391, already just below lr
    assert lr_at(opt, 400, 10, 7, 50) == pytest.approx(0.02 * (1 + math.cos(math.pi / 391)), rel=1e-12)
    assert lr_at(opt, 400, 205, 0, 50) == pytest.approx(0.02 * (1 + math.cos(math.pi * 196 / 391)), rel=1e-12)
    # Places-LT: w 5, E 30, lr 0.02
    places = _optim(shape="paco", lr=0.02, warmup_epochs=5)
    assert [paco_lr(places, 30, e) for e in range(5)] == pytest.approx([0.004, 0.008, 0.012, 0.016, 0.02])
    assert paco_lr(places, 30, 29) == pytest.approx(0.01 * (1 + math.cos(math.pi * 25 / 26)), rel=1e-12)


def official_cifar(epoch: int, lr: float = 0.05, warmup: int = 10) -> float:
    """The official CIFAR scripts' adjust_learning_rate, written out."""
    if epoch <= warmup:
        return lr / warmup * (epoch + 1)
    if epoch > 360:
        return lr * 0.01
    if epoch > 320:
        return lr * 0.1
    return lr


def test_cifar_step_rule():
    opt = _optim(shape="paco", lr=0.05, warmup_epochs=10, cosine=False, step_milestones=[320, 360], step_gamma=0.1)
    got = {e: lr_at(opt, 400, e, 3, 10) for e in range(400)}
    assert all(got[e] == pytest.approx(official_cifar(e), rel=1e-12) for e in range(400))
    # by hand: epochs 0..10 warm up (epoch 10 at 1.1 lr), a milestone m applies from epoch m + 1
    expected = {0: 0.005, 9: 0.05, 10: 0.055, 11: 0.05, 320: 0.05, 321: 0.005, 360: 0.005, 361: 0.0005,
                399: 0.0005}
    assert {e: got[e] for e in expected} == pytest.approx(expected, rel=1e-12)


def test_no_warm_up_and_no_milestones_is_constant():
    # the smoke profiles: warmup_epochs 0, cosine false, no milestones
    opt = _optim(shape="paco", lr=0.3, warmup_epochs=0, cosine=False)
    assert [lr_at(opt, 3, e, 0, 4) for e in range(3)] == [0.3, 0.3, 0.3]
    cos = _optim(shape="paco", lr=0.3, warmup_epochs=0)
    assert paco_lr(cos, 3, 0) == pytest.approx(0.15 * (1 + math.cos(math.pi / 4)), rel=1e-12)


def supcon_lr(optim, epochs: int, epoch: int, step: int, steps_per_epoch: int) -> float:
    """The schedule as it stood before optim.shape existed (SupCon scripts), copied verbatim."""
    def epoch_lr(epoch1: int) -> float:
        if not optim.cosine:
            passed = sum(epoch1 - 1 >= m for m in optim.step_milestones or [])
            return optim.lr * (optim.step_gamma if optim.step_gamma is not None else 0.1) ** passed
        floor = optim.lr * optim.lr_decay_rate**3
        return floor + (optim.lr - floor) * (1 + math.cos(math.pi * epoch1 / epochs)) / 2

    epoch1 = epoch + 1
    if optim.warmup_epochs > 0 and epoch1 <= optim.warmup_epochs:
        target = epoch_lr(optim.warmup_epochs)
        p = (step + epoch * steps_per_epoch) / (optim.warmup_epochs * steps_per_epoch)
        return optim.warmup_from + p * (target - optim.warmup_from)
    return epoch_lr(epoch1)


@pytest.mark.parametrize("kw", [
    {},
    {"lr": 0.04, "lr_decay_rate": 0.0, "warmup_epochs": 10, "warmup_from": 0.004},
    {"lr": 0.1, "cosine": False, "warmup_epochs": 2, "step_milestones": [5, 8], "step_gamma": 0.2},
    {"lr": 0.5, "warmup_epochs": 0},
])
def test_shape_none_is_the_old_schedule_exactly(kw):
    opt = _optim(**kw)
    assert opt.shape is None and "shape" not in hashable_config(build_config({"optim": kw}, where="test"))["optim"]
    for epoch in range(12):
        for step in (0, 3, 6):
            assert lr_at(opt, 12, epoch, step, 7) == supcon_lr(opt, 12, epoch, step, 7)


def test_shape_is_validated():
    with pytest.raises(ConfigError, match="'optim.shape' = 'cosine' is not one of"):
        _optim(shape="cosine")


def test_every_shape_the_schema_allows_has_a_rule():
    from semcl.config import CHOICES
    from semcl.engine.schedule import SHAPES

    assert set(SHAPES) == CHOICES["optim.shape"] | {None}  # None: the SupCon/RINCE default
    # each entry is reached through lr_at: warm-up epoch 0, step 5 of 10, lr 1, 2 warm-up epochs, 10 epochs.
    # None: warmup_from + p (target - warmup_from), p = 5 / 20, target = the cosine lr of epoch 2 of 10 with
    # floor 1e-3: 1e-3 + 0.999 (1 + cos(pi / 5)) / 2 = 0.904508...; paco: lr (e + 1) / w = 0.5;
    # mae: lr t / w = 0.5 / 2 = 0.25; plateau: warmup_from + p (lr - warmup_from) = 0.01 + 0.25 x 0.99
    target = 1e-3 + 0.999 * (1 + math.cos(math.pi / 5)) / 2
    expected = {None: 0.01 + 0.25 * (target - 0.01), "paco": 0.5, "mae": 0.25, "plateau": 0.01 + 0.25 * 0.99}
    for shape, want in expected.items():
        opt = _optim(shape=shape, lr=1.0, warmup_epochs=2, warmup_from=0.01)
        assert lr_at(opt, 10, 0, 5, 10) == pytest.approx(want, rel=1e-12), shape
