"""Decouple's second stage (cRT, tau-norm, LWS) on a cross-entropy base, and class-balanced sampling."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from semcl.data import ImageSet
from semcl.data.sampling import class_balanced_order
from semcl.engine.train import train
from semcl.errors import ConfigError
from semcl.methods.base import DataInfo, Dependency
from semcl.methods.registry import METHODS, PLANNED_METHODS, method_class
from semcl.run_config import build_config

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py

COUNTS = torch.tensor([90, 10, 0])  # a head class, a tail class, an empty class
NAMES = ("decouple_crt", "decouple_tau_norm", "decouple_lws")




def _cfg(name: str, **method):
    return build_config({"method": {"name": name, **method}, "model": {"backbone": "resnet_tiny"},
                         "data": {"augment": "crop_flip"}, "schedule": {"epochs": 1},
                         "optim": {"batch_size": 20, "lr": 0.5, "warmup_epochs": 0}}, where="test")


def _info() -> DataInfo:
    return DataInfo(3, 3, None, COUNTS)


def _base():
    """A CE model whose BN statistics have moved and whose class rows have different norms."""
    torch.manual_seed(0)
    ce = method_class("ce")(_cfg("ce"), _info())
    g = torch.Generator().manual_seed(5)
    ce.train()
    with torch.no_grad():
        for _ in range(3):
            ce.backbone(torch.randn(8, 3, 8, 8, generator=g) * 2 + 1)
        ce.classifier.fc.weight.mul_(torch.tensor([[0.5], [2.0], [4.0]]))
        ce.classifier.fc.bias.copy_(torch.tensor([0.3, -0.2, 0.1]))
    return ce.eval()


def _base_run(state: dict) -> list[Dependency]:
    """A finished base run as the engine hands it to a second stage."""
    return [Dependency("init_from", "base", Path("base"), lambda: state, dict, dict)]


def _params(m) -> list:
    return [p for g in m.param_groups() for p in g["params"]]


def _method(name: str, base=None, seed: int = 1, **extra):
    torch.manual_seed(seed)
    m = method_class(name)(_cfg(name, **extra), _info())
    m.load_dependencies(_base_run((base or _base()).state_dict()))
    return m.eval()


def _x() -> torch.Tensor:
    return torch.randn(6, 3, 8, 8, generator=torch.Generator().manual_seed(2))


def test_schemas_need_a_base_and_are_no_longer_planned():
    for name in NAMES:
        assert METHODS[name].depends == "init_from" and name not in PLANNED_METHODS
    assert _cfg("decouple_crt").method.sampling == "class_balanced" and _cfg("decouple_tau_norm").method.tau == 1.0
    with pytest.raises(ConfigError, match="method.sampling"):
        _cfg("decouple_lws", sampling="square_root")


def test_instance_order_is_the_loops_randperm():
    labels = torch.arange(3).repeat(17)
    m = _method("decouple_crt", sampling="instance")
    got = m.epoch_order(labels, 3, torch.Generator().manual_seed(11), 20)
    assert torch.equal(got, torch.randperm(51, generator=torch.Generator().manual_seed(11)))
    balanced = _method("decouple_crt").epoch_order(labels, 3, torch.Generator().manual_seed(11), 20)
    assert torch.equal(balanced, class_balanced_order(labels, 3, torch.Generator().manual_seed(11)))


def test_class_balanced_order_draws_classes_then_images_uniformly():
    # 9000 head and 1000 tail images, interleaved; class 2 has none
    labels = torch.ones(10_000, dtype=torch.long)
    labels[torch.randperm(10_000, generator=torch.Generator().manual_seed(0))[:9000]] = 0
    order = class_balanced_order(labels, 3, torch.Generator().manual_seed(3))
    assert order.shape == (10_000,) and order.dtype == torch.long
    assert int(order.min()) >= 0 and int(order.max()) < 10_000
    drawn = labels[order]
    assert int((drawn == 2).sum()) == 0
    # tail draws ~ Binomial(10000, 1/2): mean 5000, std 50; allow 5 std
    assert abs(int((drawn == 1).sum()) - 5000) < 5 * 50
    # within a class, images are hit uniformly: Pearson chi^2 over the class's images ~ chi^2(df)
    for c, size in ((0, 9000), (1, 1000)):
        hits = torch.bincount(order[drawn == c], minlength=10_000)[labels == c].double()
        expected = hits.sum() / size
        chi2 = float(((hits - expected) ** 2 / expected).sum())
        assert abs(chi2 - (size - 1)) < 5 * math.sqrt(2 * (size - 1)), (c, chi2)
    again = class_balanced_order(labels, 3, torch.Generator().manual_seed(3))
    assert torch.equal(order, again)


@pytest.mark.parametrize("tau", [0.0, 0.5, 1.0])
def test_tau_norm_logits_match_a_float64_reference(tau):
    base = _base()
    m = _method("decouple_tau_norm", base, tau=tau)
    x = _x()
    with torch.no_grad():
        feats = base.backbone(x).double()
        w = base.classifier.fc.weight.double()
        expected = feats @ (w / w.norm(dim=1, keepdim=True) ** tau).T
        got = m.classify(x)
    assert torch.allclose(got.double(), expected, rtol=1e-5, atol=1e-5)
    if tau == 0.0:  # the base logits without the bias
        assert torch.allclose(got, base.classify(x) - base.classifier.fc.bias, atol=1e-5)
    assert _params(m) == []


def test_lws_scales_the_base_logits_bias_included():
    base = _base()
    m = _method("decouple_lws", base)
    x = _x()
    with torch.no_grad():
        assert torch.allclose(m.classify(x), base.classify(x), atol=1e-6)  # f = 1: the base classifier
        m.scales.copy_(torch.tensor([1.0, 2.0, 0.5]))
        assert torch.allclose(m.classify(x), base.classify(x) * torch.tensor([1.0, 2.0, 0.5]), atol=1e-6)
    assert _params(m) == [m.scales]


def test_loading_the_base_run_keeps_the_backbone_and_crt_keeps_its_fresh_classifier():
    base = _base()
    x = _x()
    torch.manual_seed(1)
    fresh = method_class("decouple_crt")(_cfg("decouple_crt"), _info())
    fresh_w = fresh.classifier.fc.weight.detach().clone()
    fresh.load_dependencies(_base_run(base.state_dict()))
    fresh.eval()
    for name in NAMES:
        m = fresh if name == "decouple_crt" else _method(name, base)
        with torch.no_grad():
            assert torch.equal(m.backbone(x), base.backbone(x)), name
        assert not any(p.requires_grad for p in m.backbone.parameters())
    assert torch.equal(fresh.classifier.fc.weight, fresh_w)
    assert not torch.allclose(fresh.classifier.fc.weight, base.classifier.fc.weight)
    assert torch.equal(_method("decouple_lws", base).classifier.fc.weight, base.classifier.fc.weight)
    assert _params(fresh) == list(fresh.classifier.parameters())


@pytest.mark.parametrize("name", NAMES)
def test_a_missing_base_key_is_named(name):
    state = _base().state_dict()
    del state["backbone.bn1.running_mean"]
    with pytest.raises(ValueError, match=r"missing \['backbone.bn1.running_mean'\]"):
        method_class(name)(_cfg(name), _info()).load_dependencies(_base_run(state))


def test_classifier_keys_are_required_except_by_crt():
    state = {k: v for k, v in _base().state_dict().items() if not k.startswith("classifier.")}
    method_class("decouple_crt")(_cfg("decouple_crt"), _info()).load_dependencies(_base_run(state))  # discards it
    with pytest.raises(ValueError, match="classifier.fc.weight"):
        method_class("decouple_lws")(_cfg("decouple_lws"), _info()).load_dependencies(_base_run(state))


def _train_set() -> ImageSet:
    labels = torch.tensor([0] * 90 + [1] * 10)
    images = torch.randint(0, 256, (100, 3, 8, 8), generator=torch.Generator().manual_seed(4), dtype=torch.uint8)
    return ImageSet("cifar100", images, labels, ["a", "b", "c"])


@pytest.mark.parametrize("name", ["decouple_crt", "decouple_lws"])
def test_one_epoch_trains_only_the_head_on_class_balanced_batches(tmp_path, name):
    base = _base()
    m = _method(name, base)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    seen = []
    step = m.loss

    def recording_step(batch):
        assert not m.backbone.training  # BN statistics frozen while the head trains
        seen.append(batch.labels)
        return step(batch)

    m.loss = recording_step
    history = train(m, _train_set(), m.cfg, seed=123, ckpt=tmp_path / "last.pt")
    after = m.state_dict()
    assert len(history) == 1 and math.isfinite(history[0]["loss"]) and (tmp_path / "last.pt").exists()
    for k in before:
        if k.startswith("backbone."):  # weights and BN running statistics, bit for bit
            assert torch.equal(after[k], before[k]), k
    trained = ["classifier.fc.weight", "classifier.fc.bias"] if name == "decouple_crt" else ["scales"]
    assert all(not torch.equal(after[k], before[k]) for k in trained)
    if name == "decouple_lws":
        assert torch.equal(after["classifier.fc.weight"], before["classifier.fc.weight"])
    # 5 batches of 20 from a 90/10 set: ~half tail images (Binomial(100, 1/2), std 5)
    tail = int((torch.cat(seen) == 1).sum())
    assert len(seen) == 5 and abs(tail - 50) < 4 * 5


def test_tau_norm_trains_nothing_and_writes_no_checkpoint(tmp_path):
    m = _method("decouple_tau_norm")
    before = {k: v.clone() for k, v in m.state_dict().items()}
    assert train(m, _train_set(), m.cfg, seed=123, ckpt=tmp_path / "last.pt") == []
    assert not (tmp_path / "last.pt").exists()
    assert all(torch.equal(v, before[k]) for k, v in m.state_dict().items())


def test_tau_is_chosen_on_validation_as_the_first_best_grid_value():
    grid = [0.0, 0.5, 1.0, 2.0]
    base = _base()
    m = _method("decouple_tau_norm", base, tau_select="val", tau_grid=grid)
    feats = torch.randn(40, base.backbone.out_dim, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    w = base.classifier.fc.weight.detach().double()
    labels = (feats @ (w / w.norm(dim=1, keepdim=True) ** 2.0).T).argmax(1)  # tau = 2 is right on every image
    labels[:3] = (labels[:3] + 1) % 3  # ... but three
    acc = [float(((feats @ (w / w.norm(dim=1, keepdim=True) ** t).T).argmax(1) == labels).double().mean()) * 100
           for t in grid]
    best = acc.index(max(acc))
    chosen = m.select_on_validation(feats.float(), labels)
    assert chosen == {"tau": grid[best], "tau_val_top1": pytest.approx(acc[best])}
    assert float(m.state_dict()["tau"]) == grid[best]  # saved with the method
    assert _method("decouple_tau_norm", base).validation_grid is None  # fixed tau unless asked


def test_tau_norm_row_chooses_tau_on_the_val_split_end_to_end(tmp_path):
    from semcl.engine.job import execute_run
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table
    from semcl.store import Store

    runs = {r.row_label: r for r in plan_runs(get_table("gpaco/tab2"), "smoke", ["Decouple tau-norm ResNet-50"])}
    store = Store(tmp_path)
    execute_run(runs["CE ResNet-50"], store, tmp_path / "data")
    rec = execute_run(runs["Decouple tau-norm ResNet-50"], store, tmp_path / "data")
    assert rec["metrics"]["tau"] in [round(0.1 * i, 1) for i in range(21)] and rec["history"] == []
    assert 0.0 <= rec["metrics"]["tau_val_top1"] <= 100.0
