"""RIDE: the loss against a float64 loop written from the formula, the hand-computed LDAM / DRW /
temperature vectors, the expert model (shared trunk, mean-of-experts inference), the epoch buffer,
and one engine step whose loss is recomputed by hand from the same views."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from semcl.data import ImageSet
from semcl.engine.train import train
from semcl.losses import ride_loss
from semcl.losses.ride import diversity_temperatures, effective_number_weights, ldam_logits, ldam_loss, ldam_margins
from semcl.methods.base import Batch, DataInfo, run_step
from semcl.methods.registry import METHODS, method_class
from semcl.models.ride import RideBackbone
from semcl.run_config import build_config

F64 = torch.float64
COUNTS = torch.tensor([40, 12, 5, 2])


def reference_ride(expert_logits, labels, counts, *, max_m, s, lam, T, drw, beta, reweight):
    """Loops over experts, samples and classes (float64 0-d tensors, so autograd works)."""
    C, E, B = len(counts), len(expert_logits), len(labels)
    n = [max(int(c), 1) for c in counts]
    raw = [nj ** -0.25 for nj in n]
    m = [max_m * r / max(raw) for r in raw]
    if drw:
        w = [(1 - beta) / (1 - beta**nj) for nj in n]
        w = [C * x / sum(w) for x in w]
        v = [C * (int(c) / int(sum(counts))) * reweight + 1 - reweight for c in counts]
        t = [T * vj / max(v) for vj in v]
    else:
        w, t = [1.0] * C, [T] * C
    t_bar = sum(t) / C
    ens = [[sum(float(z[b, j].detach()) for z in expert_logits) / E for j in range(C)] for b in range(B)]
    mean = sum(expert_logits) / E  # with gradient: the official lambda-0 case trains on the ensemble
    total = 0.0
    for expert in expert_logits:
        z = mean if lam == 0 else expert
        num, den = 0.0, 0.0
        for b in range(B):
            y = int(labels[b])
            row = [z[b, j] - (s * m[y] if j == y else 0.0) for j in range(C)]
            ce = torch.log(sum(torch.exp(x) for x in row)) - row[y]
            num, den = num + w[y] * ce, den + w[y]
        total = total + num / den
        kl = 0.0
        for b in range(B):
            p_den = sum(math.exp(ens[b][j] / t[j]) for j in range(C))
            q_den = torch.log(sum(torch.exp(z[b, j] / t[j]) for j in range(C)))
            for j in range(C):
                p = math.exp(ens[b][j] / t[j]) / p_den  # the target: no gradient
                kl = kl + p * (math.log(p) - (z[b, j] / t[j] - q_den))
        total = total + lam * t_bar**2 * kl / B
    return total


def _buffers(counts, *, drw, beta=0.9999, T=1.0, reweight=0.02):
    return {"class_weights": effective_number_weights(counts, beta) if drw else None,
            "temperature": diversity_temperatures(counts, T, reweight) if drw else T}


@pytest.mark.parametrize("drw", [False, True], ids=["plain", "drw"])
@pytest.mark.parametrize("lam", [-0.2, 0.0, 0.5])
def test_loss_matches_reference(drw, lam):
    g = torch.Generator().manual_seed(3)
    logits = [10 * torch.randn(5, 4, generator=g, dtype=F64) for _ in range(3)]
    labels = torch.tensor([0, 1, 2, 3, 0])
    mine = [z.clone().requires_grad_() for z in logits]
    theirs = [z.clone().requires_grad_() for z in logits]
    kw = _buffers(COUNTS, drw=drw, beta=0.99, T=2.0, reweight=0.3)
    got = ride_loss(mine, labels, margins=ldam_margins(COUNTS, 0.5), scale=30.0, diversity_weight=lam, **kw)
    ref = reference_ride(theirs, labels, COUNTS, max_m=0.5, s=30.0, lam=lam, T=2.0, drw=drw, beta=0.99, reweight=0.3)
    assert got.dtype == F64 and torch.allclose(got, ref, rtol=1e-10)
    got.backward()
    ref.backward()
    for a, b in zip(mine, theirs, strict=True):
        assert torch.allclose(a.grad, b.grad, rtol=1e-9, atol=1e-12)
    assert "semcl.losses.ride:ride_loss" in METHODS["ride"].losses


def test_diversity_term_pushes_experts_apart():
    # two experts that agree: KL = 0; once they differ, lam < 0 lowers the loss below the LDAM part
    z = torch.tensor([[2.0, 0.0, -1.0]], dtype=F64)
    other = torch.tensor([[0.0, 2.0, -1.0]], dtype=F64)
    margins, y = torch.zeros(3, dtype=F64), torch.tensor([0])
    same = ride_loss([z, z], y, margins=margins, scale=1.0, diversity_weight=-0.2)
    assert torch.allclose(same, ride_loss([z, z], y, margins=margins, scale=1.0, diversity_weight=0.0))
    apart = ride_loss([z, other], y, margins=margins, scale=1.0, diversity_weight=-0.2)
    ldam_sum = sum(ldam_loss(e, y, margins=margins, scale=1.0) for e in (z, other))
    assert apart < ldam_sum


def test_lambda_zero_trains_every_expert_term_on_the_ensemble_as_the_official_code():
    # z̄ = [1, 1, -1], y = 0, no margin: each of the 2 terms is log(2e + 1/e) - 1
    z = torch.tensor([[2.0, 0.0, -1.0]], dtype=F64, requires_grad=True)
    other = torch.tensor([[0.0, 2.0, -1.0]], dtype=F64, requires_grad=True)
    got = ride_loss([z, other], torch.tensor([0]), margins=torch.zeros(3, dtype=F64), scale=1.0, diversity_weight=0.0)
    assert float(got.detach()) == pytest.approx(2 * (math.log(2 * math.e + math.exp(-1)) - 1), rel=1e-12)
    got.backward()
    assert torch.equal(z.grad, other.grad)  # both experts get the ensemble's gradient


def test_hand_computed_vectors():
    # n^(-1/4) of [16, 1, 81, 256] = [1/2, 1, 1/3, 1/4]; the largest (n = 1) becomes max_m = 0.5
    assert torch.allclose(ldam_margins(torch.tensor([16, 1, 81, 256]), 0.5),
                          torch.tensor([0.25, 0.5, 1 / 6, 0.125], dtype=F64))
    # beta 0.5: (1 - b) / (1 - b^n) = [1, 2/3] for n = [1, 2]; scaled to sum C = 2: [6/5, 4/5]
    assert torch.allclose(effective_number_weights(torch.tensor([1, 2]), 0.5), torch.tensor([1.2, 0.8], dtype=F64))
    # pi = [3/4, 1/4], r = 0.5: v = 2 pi r + 1 - r = [1.25, 0.75]; / max, times T = 2: [2, 1.2]
    assert torch.allclose(diversity_temperatures(torch.tensor([3, 1]), 2.0, 0.5), torch.tensor([2.0, 1.2], dtype=F64))
    # only the target logit moves, by s * m_y
    out = ldam_logits(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([2]), torch.tensor([0.1, 0.2, 0.3]), 10.0)
    assert torch.allclose(out, torch.tensor([[1.0, 2.0, 0.0]]))


def _cfg(backbone: str = "resnet_tiny", **method):
    return build_config({"method": {"name": "ride", **method}, "model": {"backbone": backbone},
                         "data": {"name": "fashion_mnist", "augment": "crop_flip"},
                         "optim": {"batch_size": 16, "warmup_epochs": 0, "lr": 0.1}, "schedule": {"epochs": 1}},
                        where="test")


def _method(**method):
    torch.manual_seed(0)
    return method_class("ride")(_cfg(**method), DataInfo(4, 1, None, COUNTS))


def _by_hand(m, x):
    """Each expert run separately: trunk -> expert stages -> s * cos(feature, class weight)."""
    shared = m.backbone.trunk(x)
    feats = [expert(shared) for expert in m.backbone.experts]
    logits = [m.cfg.method.scale * F.normalize(f, dim=1) @ F.normalize(clf.weight, dim=1).T
              for f, clf in zip(feats, m.classifiers, strict=True)]
    return feats, logits


def test_inference_is_the_mean_of_the_experts():
    m = _method().eval()
    x = torch.randn(3, 1, 12, 12, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        feats, logits = _by_hand(m, x)
        assert torch.allclose(m.classify(x), (logits[0] + logits[1] + logits[2]) / 3, atol=1e-5)
        assert torch.allclose(m.backbone(x), torch.cat(feats, dim=1))  # what the feature evaluations read
    assert m.backbone.out_dim == 3 * m.backbone.expert_dim == 3 * 48  # resnet_tiny's 64 channels x 0.75


def test_trunk_is_shared_and_experts_are_independent():
    m = _method()
    bb = m.backbone
    numel = lambda mod: sum(p.numel() for p in mod.parameters())  # noqa: E731
    per_expert = numel(bb.experts[0])
    assert all(numel(e) == per_expert for e in bb.experts)
    assert numel(m) == numel(bb.trunk) + 3 * per_expert + numel(m.classifiers)  # one trunk copy
    assert [type(c).__name__ for c in bb.trunk] == ["Conv2d", "BatchNorm2d", "ReLU", "Sequential"]  # stem + layer1
    assert [s[0].conv1.out_channels for s in bb.experts[0][:2]] == [24, 48]
    assert not torch.equal(bb.experts[0][0][0].conv1.weight, bb.experts[1][0][0].conv1.weight)
    # every expert's logits alone send gradient into the one trunk
    x = torch.randn(4, 1, 12, 12, generator=torch.Generator().manual_seed(2))
    for i in range(3):
        m.zero_grad()
        m.expert_logits(x)[i].sum().backward()
        assert bb.trunk[0].weight.grad.abs().sum() > 0
        assert all((next(e.parameters()).grad is None) == (k != i) for k, e in enumerate(bb.experts))


@pytest.mark.parametrize("name", ["resnet50", "resnext50_32x4d"])
def test_imagenet_experts_own_layer3_and_layer4(name):
    bb = RideBackbone(name, num_experts=3, width=0.75)
    assert [type(c).__name__ for c in bb.trunk][-3:] == ["MaxPool2d", "Sequential", "Sequential"]  # layer1, layer2
    layer3, layer4 = bb.experts[0][0], bb.experts[0][1]
    assert (len(layer3), len(layer4)) == (6, 3) and layer3[0].conv1.in_channels == 512
    assert bb.expert_dim == 384 * 4  # official reduce_dimension: layer4 planes 512 -> 384
    assert layer3[0].conv2.groups == (32 if name.startswith("resnext") else 1)
    with torch.no_grad():
        assert bb.eval()(torch.randn(1, 3, 64, 64)).shape == (1, 3 * 1536)


def test_epoch_buffer_round_trips_and_switches_drw():
    m = _method(drw_epoch=5)
    assert int(m.epoch) == 0 and not m.drw_active  # without set_epoch calls: no re-weighting
    m.on_epoch_start(7)
    fresh = _method(drw_epoch=5)
    fresh.load_state_dict(m.state_dict())
    assert int(fresh.epoch) == 7 and fresh.drw_active
    fresh.on_epoch_start(4)
    assert not fresh.drw_active
    assert not _method(drw_epoch=None).drw_active


@pytest.mark.parametrize("epoch", [0, 5], ids=["before-drw", "drw"])
def test_training_step_is_the_formula(epoch):
    m = _method(drw_epoch=5)
    m.on_epoch_start(epoch)
    x = torch.randn(6, 1, 12, 12, generator=torch.Generator().manual_seed(4))
    labels = torch.tensor([0, 0, 1, 2, 3, 0])
    ref_model = copy.deepcopy(m)
    got = run_step(m, Batch.of([x], labels))["loss"]
    _, logits = _by_hand(ref_model, x)
    ref = reference_ride([z.double() for z in logits], labels, COUNTS, max_m=0.5, s=30.0, lam=-0.2, T=1.0,
                         drw=epoch >= 5, beta=0.9999, reweight=0.02)
    assert torch.allclose(got.double(), ref, rtol=1e-4)


def test_one_engine_step_loss_equals_the_formula(tmp_path):
    cfg = _cfg()
    g = torch.Generator().manual_seed(5)
    data = ImageSet("fashion_mnist", torch.randint(0, 256, (16, 1, 12, 12), dtype=torch.uint8, generator=g),
                    torch.tensor([0] * 8 + [1] * 4 + [2] * 3 + [3]), ["a", "b", "c", "d"])
    torch.manual_seed(0)
    m = method_class("ride")(cfg, DataInfo(4, 1, None, torch.bincount(data.labels, minlength=4)))
    before, seen, real_step = copy.deepcopy(m), {}, m.loss

    def spy(batch):
        seen.update(views=[v.clone() for v in batch.views], labels=batch.labels.clone())
        return real_step(batch)

    m.loss = spy
    history = train(m, data, cfg, seed=0, ckpt=tmp_path / "last.pt")
    assert len(history) == 1 and (tmp_path / "last.pt").exists()
    _, logits = _by_hand(before, seen["views"][0])
    ref = reference_ride([z.detach().double() for z in logits], seen["labels"], torch.bincount(data.labels, minlength=4),
                         max_m=0.5, s=30.0, lam=-0.2, T=1.0, drw=False, beta=0.9999, reweight=0.02)
    assert history[0]["loss"] == pytest.approx(float(ref), rel=1e-4)
    assert not torch.equal(m.classifiers[0].weight, before.classifiers[0].weight)  # the step changed the model
