"""HSA multi-positive loss against float64 brute force written from the formula, and the reduction to
MoCo v2's InfoNCE with neighbour weight 0 and no mixing."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from semcl.losses.hsa import CODE_WARMUP_EPOCHS, hsa_loss, neighbour_weights, two_positive_loss

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py

B, D, K, TAU = 5, 6, 9, 0.2


def _unit(*shape: int, seed: int) -> torch.Tensor:
    return F.normalize(torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64), dim=-1)


@pytest.fixture
def batch():
    return {"q_a": _unit(B, D, seed=1), "q_p": _unit(B, D, seed=2), "q_mix": _unit(B, D, seed=3),
            "k_a": _unit(B, D, seed=4), "k_p": _unit(B, D, seed=5), "queue": _unit(K, D, seed=6)}


def _dot(x, y) -> float:
    return sum(float(a) * float(b) for a, b in zip(x, y, strict=True))


def _ref_pair(q, k1, k2, queue, w1, w2, form) -> float:
    """Batch mean, sample by sample in Python floats, straight from the formulas."""
    total = 0.0
    for i in range(q.shape[0]):
        neg = sum(math.exp(_dot(q[i], n) / TAU) for n in queue)
        e1, e2 = math.exp(_dot(q[i], k1[i]) / TAU), math.exp(_dot(q[i], k2[i]) / TAU)
        a, b = (float(w1[i]), float(w2[i])) if isinstance(w1, torch.Tensor) else (w1, w2)
        if form == "code":
            total += -a * math.log(e1 / (e1 + neg)) - b * math.log(e2 / (e2 + neg))
        else:
            den = (e1 if a > 0 else 0.0) + (e2 if b > 0 else 0.0) + neg
            total += (-a * math.log(e1 / den) if a > 0 else 0.0) + (-b * math.log(e2 / den) if b > 0 else 0.0)
    return total / q.shape[0]


@pytest.mark.parametrize("form", ["code", "single_softmax"])
@pytest.mark.parametrize("weights", [(0.5, 0.5), (1.0, 0.0), (0.3, 0.9)])
def test_two_positive_loss_matches_brute_force(batch, form, weights):
    got = two_positive_loss(batch["q_a"], batch["k_a"], batch["k_p"], batch["queue"], TAU, *weights, form=form)
    want = _ref_pair(batch["q_a"], batch["k_a"], batch["k_p"], batch["queue"], *weights, form)
    assert got.dtype == torch.float64
    assert got.item() == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("form", ["code", "single_softmax"])
@pytest.mark.parametrize("reduction,divisor", [("sum", 1), ("mean", 3)])
def test_total_with_mixing_matches_brute_force(batch, form, reduction, divisor):
    lam = torch.tensor([1.0, 0.0, 0.25, 0.6, 0.84], dtype=torch.float64)   # includes both degenerate boxes
    out = hsa_loss(batch["q_a"], batch["q_p"], batch["k_a"], batch["k_p"], batch["queue"], TAU,
                   q_mix=batch["q_mix"], lam=lam, form=form, reduction=reduction)
    qa = _ref_pair(batch["q_a"], batch["k_a"], batch["k_p"], batch["queue"], 0.5, 0.5, form)
    qp = _ref_pair(batch["q_p"], batch["k_p"], batch["k_a"], batch["queue"], 0.5, 0.5, form)
    qm = _ref_pair(batch["q_mix"], batch["k_a"], batch["k_p"], batch["queue"], lam, 1.0 - lam, form)
    assert out["loss_anchor"].item() == pytest.approx(qa, rel=1e-12)
    assert out["loss_neighbour"].item() == pytest.approx(qp, rel=1e-12)
    assert out["loss_mix"].item() == pytest.approx(qm, rel=1e-12)
    assert out["loss"].item() == pytest.approx((qa + qp + qm) / divisor, rel=1e-12)
    assert torch.isfinite(out["loss"])


def _moco_v2(q, k, queue, *, einsum: bool = False) -> torch.Tensor:
    """MoCo v2's loss: logits [l_pos, l_neg] / T, cross-entropy to index 0, batch mean. MoCo's code takes
    the dot products with einsum, which rounds differently from a row sum / matmul in the last bit."""
    if einsum:
        l_pos, l_neg = torch.einsum("nc,nc->n", q, k).unsqueeze(-1), torch.einsum("nc,kc->nk", q, queue)
    else:
        l_pos, l_neg = (q * k).sum(dim=1, keepdim=True), q @ queue.T
    logits = torch.cat([l_pos, l_neg], dim=1) / TAU
    return F.cross_entropy(logits, torch.zeros(q.shape[0], dtype=torch.long), reduction="none").mean()


def test_reduces_to_moco_v2_with_neighbour_weight_zero_and_no_mixing(batch):
    q_a, q_p, k_a, k_p, queue = (batch[n] for n in ("q_a", "q_p", "k_a", "k_p", "queue"))
    out = hsa_loss(q_a, q_p, k_a, k_p, queue, TAU, weights=(1.0, 0.0))
    assert set(out) == {"loss", "loss_anchor", "loss_neighbour"}
    assert torch.equal(out["loss_anchor"], _moco_v2(q_a, k_a, queue))
    assert torch.equal(out["loss_neighbour"], _moco_v2(q_p, k_p, queue))
    assert torch.equal(out["loss"], _moco_v2(q_a, k_a, queue) + _moco_v2(q_p, k_p, queue))
    torch.testing.assert_close(out["loss_anchor"], _moco_v2(q_a, k_a, queue, einsum=True), rtol=1e-14, atol=0)
    # the variant form and a box-free mix (lambda 1) reduce to the same thing, up to summation order
    alt = hsa_loss(q_a, q_p, k_a, k_p, queue, TAU, weights=(1.0, 0.0), q_mix=q_a, lam=1.0,
                   form="single_softmax")
    torch.testing.assert_close(alt["loss_mix"], _moco_v2(q_a, k_a, queue), rtol=1e-14, atol=0)
    torch.testing.assert_close(alt["loss_anchor"], _moco_v2(q_a, k_a, queue), rtol=1e-14, atol=0)


def test_gradients_flow_to_queries_only(batch):
    q = batch["q_a"].clone().requires_grad_()
    queue = batch["queue"].clone().requires_grad_()
    two_positive_loss(q, batch["k_a"], batch["k_p"], queue, TAU, 0.5, 0.5, form="single_softmax").backward()
    assert torch.isfinite(q.grad).all() and q.grad.abs().sum() > 0 and queue.grad is None


def test_neighbour_weights_warmup():
    assert neighbour_weights(0) == (0.5, 0.5)                                   # paper text: no warm-up
    code = [neighbour_weights(e, warmup_epochs=CODE_WARMUP_EPOCHS) for e in (0, 10, 11)]
    assert code == [(1.0, 0.0), (1.0, 0.0), (0.5, 0.5)]                        # official: epoch > 10


def test_bad_inputs(batch):
    with pytest.raises(ValueError, match="unknown HSA loss form"):
        two_positive_loss(batch["q_a"], batch["k_a"], batch["k_p"], batch["queue"], TAU, 1, 0, form="supcon")
    with pytest.raises(ValueError, match="needs lam"):
        hsa_loss(batch["q_a"], batch["q_p"], batch["k_a"], batch["k_p"], batch["queue"], TAU, q_mix=batch["q_a"])
    with pytest.raises(ValueError, match="reduction"):
        hsa_loss(batch["q_a"], batch["q_p"], batch["k_a"], batch["k_p"], batch["queue"], TAU, reduction="avg")


@pytest.mark.parametrize("form", ["code", "single_softmax"])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_multi_positive_loss_matches_brute_force(batch, form, reduction):
    from semcl.losses.hsa import multi_positive_hsa_loss

    m = 3
    q_ps = [_unit(B, D, seed=10 + j) for j in range(m)]
    k_ps = [_unit(B, D, seed=20 + j) for j in range(m)]
    q_mix = [_unit(B, D, seed=30 + j) for j in range(m)]
    lams = [torch.tensor([1.0, 0.0, 0.25, 0.6, 0.84], dtype=torch.float64), 0.3, 0.7]
    out = multi_positive_hsa_loss(batch["q_a"], q_ps, batch["k_a"], k_ps, batch["queue"], TAU, weights=(0.4, 0.8),
                                  q_mixes=q_mix, lams=lams, form=form, reduction=reduction)
    q = batch["queue"]
    anchor = sum(_ref_pair(batch["q_a"], batch["k_a"], k, q, 0.4, 0.8, form) for k in k_ps) / m
    neigh = [_ref_pair(qp, k, batch["k_a"], q, 0.4, 0.8, form) for qp, k in zip(q_ps, k_ps, strict=True)]
    mixes = []
    for qm, k, lam in zip(q_mix, k_ps, lams, strict=True):
        lt = lam if isinstance(lam, torch.Tensor) else torch.full((B,), lam, dtype=torch.float64)
        mixes.append(_ref_pair(qm, batch["k_a"], k, q, lt, 1.0 - lt, form))
    total = anchor + sum(neigh) + sum(mixes)
    assert out["loss_anchor"].item() == pytest.approx(anchor, rel=1e-12)
    assert [out[f"loss_neighbour{j}"].item() for j in range(m)] == pytest.approx(neigh, rel=1e-12)
    assert out["loss"].item() == pytest.approx(total / (1 + 2 * m if reduction == "mean" else 1), rel=1e-12)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_multi_positive_loss_with_one_neighbour_is_hsa_loss(batch, reduction):
    from semcl.losses.hsa import multi_positive_hsa_loss

    lam = torch.tensor([1.0, 0.0, 0.25, 0.6, 0.84], dtype=torch.float64)
    one = hsa_loss(batch["q_a"], batch["q_p"], batch["k_a"], batch["k_p"], batch["queue"], TAU,
                   q_mix=batch["q_mix"], lam=lam, reduction=reduction)
    many = multi_positive_hsa_loss(batch["q_a"], [batch["q_p"]], batch["k_a"], [batch["k_p"]], batch["queue"], TAU,
                                   q_mixes=[batch["q_mix"]], lams=[lam], reduction=reduction)
    assert many["loss"].item() == pytest.approx(one["loss"].item(), rel=1e-14)


def test_byol_form_is_the_weighted_regression(batch):
    """form byol: w_o (2 - 2 cos(q, k_o)) + w_x (2 - 2 cos(q, k_x)), batch mean; the queue is not read."""
    q = batch["q_a"] * 3.0  # a predicted query need not be unit length
    got = two_positive_loss(q, batch["k_a"], batch["k_p"], batch["queue"][:0], TAU, 0.3, 0.7, form="byol")
    want = 0.0
    for i in range(B):
        qn = [float(x) / math.sqrt(sum(float(y) ** 2 for y in q[i])) for x in q[i]]
        want += 0.3 * (2 - 2 * _dot(qn, batch["k_a"][i])) + 0.7 * (2 - 2 * _dot(qn, batch["k_p"][i]))
    assert got.item() == pytest.approx(want / B, rel=1e-12)
