"""The PaCo/GPaCo method wiring: heads, class-prior offsets, the queue and labels, fine-tuning init."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from semcl.errors import ConfigError
from semcl.methods.base import Batch, DataInfo, run_step
from semcl.methods.paco.method import init_backbone
from semcl.methods.registry import method_class
from semcl.models import build_backbone
from semcl.run_config import build_config

COUNTS = torch.tensor([6, 3, 1, 0])  # an empty class must not break the prior (official +1e-9)


def _method(name: str, **extra):
    cfg = build_config({"method": {"name": name, "queue_size": 16, **extra},
                        "model": {"backbone": "resnet_tiny", "head_hidden": 8, "head_dim": 4}}, where="test")
    torch.manual_seed(0)
    return method_class(name)(cfg, DataInfo(4, 1, None, COUNTS))


def _views(n: int = 4) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randn(n, 1, 12, 12, generator=g) for _ in range(2)]


@pytest.mark.parametrize("name", ["paco", "gpaco", "supcon", "multitask"])
def test_step_enqueues_keys_with_labels_after_backward(name):
    m = _method(name, queue_init="empty")
    labels = torch.tensor([0, 1, 2, 0])
    loss = run_step(m, Batch.of(_views(), labels))["loss"]
    assert loss.ndim == 0 and math.isfinite(float(loss.detach()))
    assert int((m.bank.labels >= 0).sum()) == 0  # nothing written before backward
    loss.backward()
    m.after_backward()
    assert m.bank.labels[:4].tolist() == labels.tolist() and int(m.bank.ptr) == 4
    assert torch.allclose(m.bank.features[:4].norm(dim=1), torch.ones(4))
    assert m.classify(_views()[0]).shape == (4, 4)


def test_paco_has_a_momentum_key_encoder_and_gpaco_none():
    paco, gpaco = _method("paco"), _method("gpaco")
    assert hasattr(paco, "key_backbone") and not hasattr(gpaco, "key_backbone")
    assert isinstance(paco.head[1], nn.BatchNorm1d)  # MoCo-v2 head
    assert not any(isinstance(layer, nn.BatchNorm1d) for layer in gpaco.head)  # 3 linear layers, no BN
    assert sum(isinstance(layer, nn.Linear) for layer in gpaco.head) == 3


def test_center_offsets_train_uniform_none():
    pi = COUNTS.double() / COUNTS.sum()
    assert torch.allclose(_method("paco").center_offset, torch.log(pi + 1e-9).float())
    assert torch.allclose(_method("gpaco", prior="uniform").center_offset, torch.full((4,), -math.log(4)))
    assert torch.equal(_method("gpaco", prior="none").center_offset, torch.zeros(4))


def test_gpaco_gradient_reaches_both_views():
    m = _method("gpaco")
    views = [v.requires_grad_() for v in _views()]
    run_step(m, Batch.of(views, torch.tensor([0, 1, 2, 0])))["loss"].backward()
    assert all(v.grad is not None and v.grad.abs().sum() > 0 for v in views)


def test_pretrained_init_and_partial_freeze(tmp_path):
    src = build_backbone("resnet18")
    state = {**src.state_dict(), "fc.weight": torch.zeros(1000, 512), "fc.bias": torch.zeros(1000)}
    torch.save(state, tmp_path / "r18.pth")
    net = build_backbone("resnet18")
    init_backbone(net, str(tmp_path / "r18.pth"), "layer4.1")
    assert torch.equal(net.conv1.weight, src.conv1.weight)
    assert not net.conv1.weight.requires_grad and net.bn1.weight.requires_grad
    assert net.layer4[1].conv2.weight.requires_grad and not net.layer4[0].conv2.weight.requires_grad
    with pytest.raises(ConfigError, match="does not fit the backbone"):
        init_backbone(build_backbone("resnet_tiny"), str(tmp_path / "r18.pth"), None)


def test_multitask_lt_form_weights_supcon_anchors_by_effective_number():
    # E_j = (1 - 0.999^n) / 0.001 for n = 6, 3, 1, 0: 5.98502, 2.997001, 1, 0; mean 2.495505
    e = [(1 - 0.999**n) / 0.001 for n in (6, 3, 1)] + [0.0]
    mean = sum(e) / 4
    m = _method("multitask", prior="train", supcon_class_weights="effective_number")
    expected = torch.tensor([mean / e[0], mean / e[1], mean / e[2], 0.0])
    assert torch.allclose(m.supcon_class_weights, expected.float(), rtol=1e-6)
    assert math.isclose(float(m.supcon_class_weights[2]), 2.4955045, rel_tol=1e-6)
    assert _method("multitask").supcon_class_weights is None  # CIFAR form: unweighted


@pytest.mark.parametrize("name", ["paco", "gpaco", "supcon", "multitask"])
def test_fp16_autocast_step_computes_the_loss_in_float32(name):
    # optim.amp fp16: encoders run in float16, the queue stays float32; the loss must be float32 and
    # equal to the same step without autocast up to float16 rounding of the encoder outputs
    labels = torch.tensor([0, 1, 2, 0])
    plain = float(run_step(_method(name), Batch.of(_views(), labels))["loss"].detach())
    with torch.autocast("cpu", dtype=torch.float16):
        loss = run_step(_method(name), Batch.of(_views(), labels))["loss"]
    assert loss.dtype == torch.float32 and math.isclose(float(loss.detach()), plain, rel_tol=2e-2)


@pytest.mark.parametrize(("name", "layers"), [("paco", 2), ("supcon", 2), ("gpaco", 3), ("multitask", 3)])
def test_config_records_the_projector_depth_the_method_builds(name, layers):
    """GPaCo and its multi-task baseline build a fixed 3-layer MLP (official GPaCo builder): their config says 3,
    whatever the default; PaCo and SupCon build the 2-layer MoCo-v2 head the default 2 describes."""
    m = _method(name)
    assert m.cfg.model.head_layers == layers
    assert sum(isinstance(x, nn.Linear) for x in m.head.modules()) == layers


@pytest.mark.parametrize("name", ["gpaco", "multitask", "gpaco_vit", "multitask_vit", "gpaco_seg"])
def test_a_config_naming_another_projector_depth_is_refused(name):
    with pytest.raises(ConfigError, match=rf"^test: 'model.head_layers' = 2, but method '{name}' builds a 3-layer "
                                          r"projector whatever it says \(leave the key out\)$"):
        build_config({"method": {"name": name}, "model": {"head_layers": 2}}, where="test")
    assert build_config({"method": {"name": name}}, where="test").model.head_layers == 3
