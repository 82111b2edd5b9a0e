"""GPaCo / multi-task: each view through the encoder separately (official builder) vs concatenated,
and the queue's initial labels (random classes, as the official builders)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from semcl.methods.base import Batch, DataInfo, run_step
from semcl.methods.registry import method_class
from semcl.run_config import build_config

COUNTS = torch.tensor([6, 3, 1, 2])


def _method(name: str, **extra):
    cfg = build_config({"method": {"name": name, "queue_size": 16, **extra},
                        "model": {"backbone": "resnet_tiny", "head_hidden": 8, "head_dim": 4}}, where="test")
    torch.manual_seed(0)
    return method_class(name)(cfg, DataInfo(4, 1, None, COUNTS))


def _views() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    # the views differ in mean and scale, so per-view and pooled BN statistics differ
    return [torch.randn(4, 1, 12, 12, generator=g), 3.0 + 2.0 * torch.randn(4, 1, 12, 12, generator=g)]


def _bn_stats(module: nn.Module) -> list[torch.Tensor]:
    return [t.clone() for m in module.modules() if isinstance(m, nn.BatchNorm2d)
            for t in (m.running_mean, m.running_var)]


@pytest.mark.parametrize("name", ["gpaco", "multitask"])
def test_separate_forward_bn_running_stats_equal_two_separate_calls(name):
    m = _method(name)
    assert m.view_forward == "separate"  # the default follows the official builder
    ref = _method(name).backbone  # same init (seed 0)
    views = _views()
    m.train()
    ref.train()
    run_step(m, Batch.of(views, torch.tensor([0, 1, 2, 3])))
    with torch.no_grad():
        ref(views[0])
        ref(views[1])
    got, want = _bn_stats(m.backbone), _bn_stats(ref)
    assert len(got) > 0 and all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, want, strict=True))


def test_concat_variant_mixes_the_views_in_bn():
    m = _method("gpaco", view_forward="concat")
    ref = _method("gpaco").backbone
    views = _views()
    run_step(m, Batch.of(views, torch.tensor([0, 1, 2, 3])))
    with torch.no_grad():
        ref(torch.cat(views))  # one call on the stacked views
    got, want = _bn_stats(m.backbone), _bn_stats(ref)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, want, strict=True))
    sep = _method("gpaco")
    run_step(sep, Batch.of(views, torch.tensor([0, 1, 2, 3])))
    assert not torch.allclose(_bn_stats(sep.backbone)[0], got[0])  # the two forms really differ


@pytest.mark.parametrize("name", ["paco", "gpaco", "supcon", "multitask"])
def test_queue_labels_start_as_random_classes_or_empty(name):
    m = _method(name)
    assert m.bank.labels.min() >= 0 and m.bank.labels.max() < 4
    assert len(set(m.bank.labels.tolist())) > 1  # 16 draws over 4 classes: not all one class
    assert torch.equal(_method(name).bank.labels, m.bank.labels)  # seeded: same every build
    assert (_method(name, queue_init="empty").bank.labels == -1).all()


def test_official_queue_keys_are_normalised_over_the_slots_as_the_builders():
    from semcl.methods.paco.method import init_queue
    from semcl.models import MomentumQueue

    bank = MomentumQueue(None).bank(16, 4)
    torch.manual_seed(7)
    init_queue(bank, "official", 4)
    torch.manual_seed(7)  # replay the builder: queue = normalize(randn(K, d), dim=0), then queue_l
    keys = torch.randn(16, 4)
    keys = keys / keys.pow(2).sum(0, keepdim=True).sqrt()
    labels = torch.randint(0, 4, (16,))
    assert torch.allclose(bank.features, keys, atol=1e-6) and torch.equal(bank.labels, labels)
    assert torch.allclose(bank.features.norm(dim=0), torch.ones(4))  # each of the d columns is unit-norm
    assert bank.features.norm(dim=1).mean() < 0.8  # so a key's norm is about sqrt(d / K) = 0.5, not 1
    unit = MomentumQueue(None).bank(16, 4)
    before = unit.features.clone()
    init_queue(unit, "random", 4)
    assert torch.equal(unit.features, before) and torch.allclose(unit.features.norm(dim=1), torch.ones(16))


@pytest.mark.parametrize("name", ["paco", "gpaco", "supcon", "multitask"])
def test_the_default_queue_is_the_official_one(name):
    m = _method(name)
    assert m.cfg.method.queue_init == "official"
    assert torch.allclose(m.bank.features.norm(dim=0), torch.ones(m.bank.features.shape[1]))
