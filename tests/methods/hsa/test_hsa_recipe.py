"""The default CsMl recipe is the official code's loss scale and warm-up (main_moco.py:418-433): a float64
port of that loop against the knobs the method passes to the loss, epoch by epoch; the `paper_text` sum."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from semcl.errors import ConfigError
from semcl.losses.hsa import hsa_loss
from semcl.methods.base import DataInfo
from semcl.methods.registry import method_class
from semcl.run_config import build_config

TAU = 0.2


def _unit(g, *shape):
    return F.normalize(torch.randn(*shape, generator=g, dtype=torch.float64), dim=-1)


def _ce0(q, k, queue):
    """mean_b -log( e^{q.k/tau} / (e^{q.k/tau} + sum_i e^{q.n_i/tau}) ), one sample at a time."""
    total = 0.0
    for b in range(q.shape[0]):
        pos = math.exp(float(q[b] @ k[b]) / TAU)
        neg = sum(math.exp(float(q[b] @ n) / TAU) for n in queue)
        total += -math.log(pos / (pos + neg))
    return total / q.shape[0]


def _official(q_a, q_p, k_a, k_p, q_mix, lam, queue, epoch, lam_pair=(0.5, 0.5)):
    """main_moco.py's loop: per query the own / other key weights (lam[0], lam[1]) if epoch > 10 else (1, 0),
    plus the mixed query's (lambda, 1 - lambda), the sum divided by 3."""
    own, other = lam_pair if epoch > 10 else (1.0, 0.0)
    loss = own * _ce0(q_a, k_a, queue) + other * _ce0(q_a, k_p, queue)
    loss += own * _ce0(q_p, k_p, queue) + other * _ce0(q_p, k_a, queue)
    loss += lam * _ce0(q_mix, k_a, queue) + (1 - lam) * _ce0(q_mix, k_p, queue)
    return loss / 3


def _knobs(**method):
    cfg = build_config({"method": {"name": "hsa", "queue_size": 16, **method},
                        "model": {"backbone": "resnet_tiny", "head_hidden": 8, "head_dim": 4},
                        "data": {"name": "fashion_mnist"}}, where="test")
    torch.manual_seed(0)
    return method_class("hsa")(cfg, DataInfo(3, 1, None))


@pytest.mark.parametrize("epoch", [0, 10, 11, 150])
def test_default_recipe_is_the_official_loop_in_float64(epoch):
    g = torch.Generator().manual_seed(4)
    q_a, q_p, k_a, k_p, q_mix = (_unit(g, 5, 8) for _ in range(5))
    queue = _unit(g, 7, 8)
    lam = 0.37  # one box per batch: one kept fraction for the batch, as the official cutmix
    m = _knobs()
    kw = m._loss_kw(epoch)  # the weights, form and reduction the method's step passes
    got = hsa_loss(q_a, q_p, k_a, k_p, queue, TAU, q_mix=q_mix, lam=lam, **kw)["loss"]
    assert float(got) == pytest.approx(_official(q_a, q_p, k_a, k_p, q_mix, lam, queue, epoch), rel=1e-12)
    # the literal paper reading sums the three terms and pulls the neighbour from epoch 0: 3x, other weights
    text = _knobs(variant="paper_text")
    summed = hsa_loss(q_a, q_p, k_a, k_p, queue, TAU, q_mix=q_mix, lam=lam, **text._loss_kw(epoch))["loss"]
    assert float(summed) == pytest.approx(3 * _official(q_a, q_p, k_a, k_p, q_mix, lam, queue, 11), rel=1e-12)


def test_weight_schedule_of_each_variant():
    schedule = {v: [_knobs(variant=v)._loss_kw(e)["weights"] for e in (0, 1, 10, 11, 12)]
                for v in ("paper", "code", "paper_text")}
    warm, pulled = (1.0, 0.0), (0.5, 0.5)
    assert schedule["paper"] == schedule["code"] == [warm, warm, warm, pulled, pulled]
    assert schedule["paper_text"] == [pulled] * 5
    # a profile's scaled warm-up (mini / smoke: 1 epoch) pulls only the own key in epoch 0
    assert [_knobs(warmup_epochs=1)._loss_kw(e)["weights"] for e in (0, 1)] == [warm, pulled]
    with pytest.raises(ConfigError, match="warmup_epochs"):
        _knobs(warmup_epochs=-1)


def test_default_keeps_the_papers_components():
    k = _knobs().knobs
    assert (k.k, k.features, k.cutmix_alpha, k.companions, k.reduction, k.warmup_epochs) == \
        (10, "query", 1.0, True, "mean", 11)
