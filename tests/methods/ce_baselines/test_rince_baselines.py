"""RINCE's hierarchy-aware CE baselines: label smoothing within the superclass and two heads."""

from __future__ import annotations

import math

import pytest
import torch

from semcl.data.classnames import CIFAR100_FINE_TO_COARSE, FASHION_MNIST_FINE_TO_COARSE
from semcl.errors import ConfigError
from semcl.losses import superclass_label_smoothing_loss, superclass_smoothed_targets, two_heads_loss
from semcl.methods.base import Batch, DataInfo, run_step
from semcl.methods.ce_baselines import LabelSmoothingSuperclassMethod, TwoHeadsMethod
from semcl.methods.registry import METHODS, PLANNED_METHODS, method_class
from semcl.registry.tables import get_table
from semcl.run_config import build_config

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py

F2C = torch.tensor([0, 0, 0, 1, 1, 2])  # superclasses {0, 1, 2}, {3, 4}, {5}




# --- label smoothing within the superclass -------------------------------------------------------

def test_smoothed_targets_match_hand_computed_rows():
    q = superclass_smoothed_targets(torch.tensor([0, 1, 3, 4, 5]), F2C, 0.2)
    expected = torch.tensor([
        [0.8, 0.1, 0.1, 0.0, 0.0, 0.0],  # two siblings: 0.2 / 2 each
        [0.1, 0.8, 0.1, 0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.8, 0.2, 0.0],  # one sibling takes all of alpha
        [0.0, 0.0, 0.0, 0.2, 0.8, 0.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],  # alone in its superclass: keeps the full mass
    ])
    torch.testing.assert_close(q, expected)
    assert q.dtype == torch.float32


def test_smoothed_targets_unknown_superclass_keeps_one_hot_and_rows_sum_to_one():
    q = superclass_smoothed_targets(torch.tensor([0, 2]), torch.tensor([0, 0, -1]), 0.3)
    torch.testing.assert_close(q, torch.tensor([[0.7, 0.3, 0.0], [0.0, 0.0, 1.0]]))
    labels = torch.arange(6).repeat(3)
    for alpha in (0.0, 0.37, 1.0):
        q = superclass_smoothed_targets(labels, F2C, alpha, dtype=torch.float64)
        torch.testing.assert_close(q.sum(1), torch.ones(len(labels), dtype=torch.float64))
    torch.testing.assert_close(superclass_smoothed_targets(labels, F2C, 0.0), torch.eye(6)[labels])
    assert superclass_smoothed_targets(torch.tensor([0]), F2C, 1.0)[0, 0] == 0.0


def test_smoothed_targets_on_the_real_hierarchies():
    cifar = torch.tensor(CIFAR100_FINE_TO_COARSE)
    q = superclass_smoothed_targets(torch.arange(100), cifar, 0.1)
    assert ((q > 0).sum(1) == 5).all()  # the class and its 4 siblings
    assert torch.allclose(q[q > 0.5], torch.full((100,), 0.9))
    assert torch.allclose(q[(q > 0) & (q < 0.5)], torch.full((400,), 0.025))
    same = cifar[:, None] == cifar[None, :]
    assert ((q > 0) == same).all()
    # Fashion-MNIST: upper-body {0, 2, 4, 6} has 3 siblings, footwear {5, 7, 9} 2, trouser / dress / bag none
    q = superclass_smoothed_targets(torch.arange(10), torch.tensor(FASHION_MNIST_FINE_TO_COARSE), 0.3)
    assert torch.allclose(q[0, [2, 4, 6]], torch.full((3,), 0.1)) and math.isclose(q[0, 0], 0.7, rel_tol=1e-6)
    assert torch.allclose(q[5, [7, 9]], torch.full((2,), 0.15))
    for alone in (1, 3, 8):
        assert torch.equal(q[alone], torch.eye(10)[alone])


def test_smoothing_loss_matches_float64_brute_force_and_its_gradient():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(7, 6, generator=g, dtype=torch.float64) * 3
    labels = torch.tensor([0, 1, 2, 3, 4, 5, 0])
    alpha = 0.2
    x = logits.clone().requires_grad_(True)
    loss = superclass_label_smoothing_loss(x, labels, F2C, alpha)
    # brute force: explicit targets and log-softmax
    total = 0.0
    grads = torch.zeros_like(logits)
    for i, y in enumerate(labels.tolist()):
        sibs = [c for c in range(6) if c != y and F2C[c] == F2C[y]]
        qrow = [0.0] * 6
        qrow[y] = 1.0 - (alpha if sibs else 0.0)
        for c in sibs:
            qrow[c] = alpha / len(sibs)
        lse = math.log(sum(math.exp(v) for v in logits[i].tolist()))
        total += -sum(qc * (v - lse) for qc, v in zip(qrow, logits[i].tolist(), strict=True))
        p = torch.softmax(logits[i], 0)
        grads[i] = (p - torch.tensor(qrow, dtype=torch.float64)) / len(labels)
    assert math.isclose(loss.item(), total / len(labels), rel_tol=1e-12)
    loss.backward()
    torch.testing.assert_close(x.grad, grads)
    # alpha = 0 is the plain cross-entropy
    torch.testing.assert_close(superclass_label_smoothing_loss(logits, labels, F2C, 0.0),
                               torch.nn.functional.cross_entropy(logits, labels))
    assert "semcl.losses.hierarchical_ce:superclass_label_smoothing_loss" in METHODS["label_smoothing_superclass"].losses


def test_smoothing_loss_refuses_missing_hierarchy_and_bad_alpha():
    logits, labels = torch.zeros(2, 6), torch.tensor([0, 1])
    with pytest.raises(ValueError, match="fine_to_coarse"):
        superclass_label_smoothing_loss(logits, labels, None, 0.1)
    with pytest.raises(ValueError, match="alpha"):
        superclass_label_smoothing_loss(logits, labels, F2C, 1.5)
    with pytest.raises(ValueError, match="5 classes"):
        superclass_label_smoothing_loss(torch.zeros(2, 5), labels, F2C, 0.1)


# --- two heads ------------------------------------------------------------------------------------

def _ce_by_hand(row: list[float], target: int) -> float:
    return -(row[target] - math.log(sum(math.exp(v) for v in row)))


def test_two_heads_loss_is_the_weighted_sum_of_the_two_ces():
    fine = torch.tensor([[2.0, -1.0, 0.5, 0.0, 0.3, -0.2],
                         [0.1, 0.2, 0.3, 1.5, -0.5, 0.0],
                         [-1.0, 0.0, 0.0, 0.0, 0.4, 2.5]], dtype=torch.float64)
    coarse = torch.tensor([[1.0, 0.0, -1.0], [0.2, 0.9, 0.1], [0.0, -0.3, 0.6]], dtype=torch.float64)
    labels = torch.tensor([0, 3, 5])  # superclasses 0, 1, 2
    lam = 0.1
    ce_f = sum(_ce_by_hand(fine[i].tolist(), y) for i, y in enumerate([0, 3, 5])) / 3
    ce_c = sum(_ce_by_hand(coarse[i].tolist(), k) for i, k in enumerate([0, 1, 2])) / 3
    out = two_heads_loss(fine, coarse, labels, F2C, lam)
    assert math.isclose(out["loss"].item(), (1 - lam) * ce_f + lam * ce_c, rel_tol=1e-12)
    assert math.isclose(out["loss_fine"].item(), ce_f, rel_tol=1e-12)
    assert math.isclose(out["loss_coarse"].item(), ce_c, rel_tol=1e-12)
    assert math.isclose(two_heads_loss(fine, coarse, labels, F2C, 0.0)["loss"].item(), ce_f, rel_tol=1e-12)
    assert math.isclose(two_heads_loss(fine, coarse, labels, F2C, 1.0)["loss"].item(), ce_c, rel_tol=1e-12)
    # a class without a known superclass adds no superclass term (the mean still divides by B)
    f2c_unknown = torch.tensor([0, 0, 0, 1, 1, -1])
    out = two_heads_loss(fine, coarse, labels, f2c_unknown, lam)
    assert math.isclose(out["loss_coarse"].item(), (ce_c * 3 - _ce_by_hand(coarse[2].tolist(), 2)) / 3, rel_tol=1e-12)
    with pytest.raises(ValueError, match="fine_to_coarse"):
        two_heads_loss(fine, coarse, labels, None, lam)
    with pytest.raises(ValueError, match="lambda"):
        two_heads_loss(fine, coarse, labels, F2C, -0.1)


# --- the methods ----------------------------------------------------------------------------------

def _cfg(name: str, **method):
    return build_config({"method": {"name": name, **method}, "model": {"backbone": "resnet_tiny"},
                         "data": {"augment": "crop_flip"}, "schedule": {"epochs": 1},
                         "optim": {"batch_size": 12, "lr": 0.1, "warmup_epochs": 0}}, where="test")


def _info(f2c=F2C) -> DataInfo:
    return DataInfo(6, 3, f2c, None)


def _batch():
    g = torch.Generator().manual_seed(3)
    return torch.randn(12, 3, 8, 8, generator=g), torch.arange(6).repeat(2)


def test_schemas_are_registered_and_no_longer_planned():
    for name, schema in (("label_smoothing_superclass", LabelSmoothingSuperclassMethod), ("two_heads", TwoHeadsMethod)):
        assert METHODS[name].schema is schema and name in METHODS and name not in PLANNED_METHODS
    assert (LabelSmoothingSuperclassMethod().alpha, TwoHeadsMethod().weight, TwoHeadsMethod().logit_norm) == (0.1, 0.1, None)
    assert _cfg("two_heads", logit_norm="l2").method.logit_norm == "l2"
    with pytest.raises(ConfigError, match="logit_norm"):
        _cfg("two_heads", logit_norm="l1")


def test_grid_rows_train_like_the_ce_row():
    # tab2's Label smoothing / Two heads rows show the best row of these grids (paper: best fine accuracy)
    for tid, label in (("rince/tab9", "alpha = 0.1"), ("rince/tab10", "lambda = 0.1")):
        t = get_table(tid)
        cfg = t.resolve(t.row(label), "paper")
        assert (cfg.optim.lr, cfg.schedule.epochs, cfg.data.augment, cfg.optim.batch_size) == (0.8, 500, "crop_flip", 512)
    assert get_table("rince/tab9").resolve(get_table("rince/tab9").row("alpha = 0.1"), "paper").method.alpha == 0.1
    t10 = get_table("rince/tab10")
    two = t10.resolve(t10.row("lambda = 0.1"), "paper").method
    assert (two.weight, two.logit_norm) == (0.1, None)


@pytest.mark.parametrize("name", ["label_smoothing_superclass", "two_heads"])
def test_methods_refuse_a_dataset_without_superclasses(name):
    with pytest.raises(ValueError, match="superclass"):
        method_class(name)(_cfg(name), _info(None))


def test_label_smoothing_method_step_uses_the_smoothed_target_and_alpha_zero_is_ce():
    x, y = _batch()
    torch.manual_seed(0)
    m = method_class("label_smoothing_superclass")(_cfg("label_smoothing_superclass", alpha=0.3), _info()).train()
    loss = run_step(m, Batch.of([x], y))["loss"]
    expected = superclass_label_smoothing_loss(m.classify(x), y, F2C, 0.3)  # train-mode BN: same batch, same output
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert m.classifier.fc.weight.grad.abs().sum() > 0 and next(m.backbone.parameters()).grad is not None
    torch.manual_seed(0)
    ls0 = method_class("label_smoothing_superclass")(_cfg("label_smoothing_superclass", alpha=0.0), _info()).train()
    torch.manual_seed(0)
    ce = method_class("ce")(_cfg("ce"), _info()).train()
    torch.testing.assert_close(run_step(ls0, Batch.of([x], y))["loss"], run_step(ce, Batch.of([x], y))["loss"])


def test_two_heads_method_step_matches_the_hand_formula_and_trains_both_heads():
    x, y = _batch()
    torch.manual_seed(0)
    m = method_class("two_heads")(_cfg("two_heads", weight=0.25), _info()).train()
    assert m.num_coarse == 3 and m.coarse_classifier.fc.out_features == 3 and m.classifier.fc.out_features == 6
    out = run_step(m, Batch.of([x], y))
    fine, coarse = m.heads(x)
    ce = torch.nn.functional.cross_entropy
    torch.testing.assert_close(out["loss"], 0.75 * ce(fine, y) + 0.25 * ce(coarse, F2C[y]))
    torch.testing.assert_close(m.classify(x), fine)  # classify = the fine head's logits
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    out["loss"].backward()
    assert m.coarse_classifier.fc.weight.grad.abs().sum() > 0 and m.classifier.fc.weight.grad.abs().sum() > 0
    before = out["loss"].item()
    opt.step()
    assert run_step(m, Batch.of([x], y))["loss"].item() < before  # one SGD step on the same batch lowers the loss
    # weight 0: the superclass head receives no gradient
    m0 = method_class("two_heads")(_cfg("two_heads", weight=0.0), _info()).train()
    run_step(m0, Batch.of([x], y))["loss"].backward()
    grad = m0.coarse_classifier.fc.weight.grad
    assert grad is None or grad.abs().sum() == 0


def test_two_heads_l2_variant_normalises_both_heads_logits():
    x, y = _batch()
    torch.manual_seed(0)
    m = method_class("two_heads")(_cfg("two_heads", logit_norm="l2"), _info()).train()
    fine, coarse = m.heads(x)
    torch.testing.assert_close(fine.norm(dim=1), torch.ones(12))
    torch.testing.assert_close(coarse.norm(dim=1), torch.ones(12))
    torch.testing.assert_close(m.classify(x).norm(dim=1), torch.ones(12))
    ce = torch.nn.functional.cross_entropy
    torch.testing.assert_close(run_step(m, Batch.of([x], y))["loss"], 0.9 * ce(fine, y) + 0.1 * ce(coarse, F2C[y]))
    # unit-norm logits bound the fine CE from below: log(1 + (C - 1) e^{-margin}) with margin <= sqrt(C / (C - 1))
    assert ce(fine, y).item() >= math.log(1 + 5 * math.exp(-math.sqrt(6 / 5))) - 1e-6
