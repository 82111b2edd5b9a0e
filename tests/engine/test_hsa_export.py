"""Backbone export: the suite's ResNet-50 into torchvision's resnet50 (keys match except fc) and into
detectron2's R50 names (documented convert-torchvision-to-d2 mapping, keys checked by hand)."""

from __future__ import annotations

import pickle

import pytest
import torch

from semcl.errors import DataError
from semcl.models.backbones import build_backbone
from semcl.models.weight_formats import detectron2_name, export_checkpoint, to_detectron2, to_torchvision_resnet50

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py


def _materialize(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Real CPU tensors for a meta-built model, each filled with its own index so values are traceable."""
    model = model.to_empty(device="cpu")
    sd = model.state_dict()
    for i, v in enumerate(sd.values()):
        v.fill_(i)
    return sd


@pytest.fixture(scope="module")
def method_state() -> dict[str, torch.Tensor]:
    """A method state dict as a run checkpoint holds it: query backbone plus things that must not travel."""
    with torch.device("meta"):
        backbone = build_backbone("resnet50")
    state = {f"backbone.{k}": v for k, v in _materialize(backbone).items()}
    state.update({"key_backbone.conv1.weight": torch.zeros(64, 3, 7, 7), "head.net.0.weight": torch.zeros(2, 2),
                  "stage_heads.layer2.block.conv1.weight": torch.zeros(128, 512, 1, 1)})
    return state


def test_loads_into_torchvision_resnet50_strictly_except_fc(method_state):
    from torchvision.models import resnet50

    sd = to_torchvision_resnet50(method_state, prefix="backbone.")
    with torch.device("meta"):
        target = resnet50(weights=None)
    result = target.load_state_dict(sd, strict=False, assign=True)     # assign: shapes checked, no init cost
    assert sorted(result.missing_keys) == ["fc.bias", "fc.weight"] and result.unexpected_keys == []
    assert torch.equal(target.layer3[5].bn2.running_var, method_state["backbone.layer3.5.bn2.running_var"])
    assert torch.equal(target.conv1.weight, method_state["backbone.conv1.weight"])


def test_detectron2_names_by_hand():
    assert detectron2_name("conv1.weight") == "stem.conv1.weight"
    assert detectron2_name("bn1.running_var") == "stem.conv1.norm.running_var"
    assert detectron2_name("layer1.0.downsample.0.weight") == "res2.0.shortcut.weight"
    assert detectron2_name("layer1.0.downsample.1.bias") == "res2.0.shortcut.norm.bias"
    assert detectron2_name("layer2.0.bn1.num_batches_tracked") == "res3.0.conv1.norm.num_batches_tracked"
    assert detectron2_name("layer3.5.bn3.weight") == "res4.5.conv3.norm.weight"
    assert detectron2_name("layer4.2.conv2.weight") == "res5.2.conv2.weight"


def test_detectron2_pickle_from_a_checkpoint(method_state, tmp_path):
    ckpt = tmp_path / "last.pt"
    torch.save({"method": method_state, "epoch": 1}, ckpt)
    out = export_checkpoint(ckpt, tmp_path / "export" / "r50.pkl", "detectron2")
    with open(out, "rb") as f:
        payload = pickle.load(f)
    assert payload["__author__"] == "semcl" and payload["matching_heuristics"] is True
    model = payload["model"]
    assert len(model) == len(to_torchvision_resnet50(method_state, prefix="backbone."))   # heads left behind
    assert all(k.startswith(("stem.", "res2.", "res3.", "res4.", "res5.")) for k in model)
    assert {"stem.conv1.weight", "stem.conv1.norm.bias", "res2.0.shortcut.weight", "res5.2.conv3.norm.running_mean"} \
        <= set(model)
    assert (model["res4.3.conv2.norm.weight"] == method_state["backbone.layer3.3.bn2.weight"].numpy()).all()
    assert model["res3.0.shortcut.weight"].shape == (512, 256, 1, 1)
    assert to_detectron2(method_state, prefix="backbone.").keys() == model.keys()


def test_rejects_what_is_not_a_torchvision_resnet50(method_state, tmp_path):
    with torch.device("meta"):
        cifar = build_backbone("resnet50_cifar").state_dict()
    with pytest.raises(ValueError, match="not a torchvision ResNet-50 backbone"):
        to_torchvision_resnet50(cifar)
    bad = dict(method_state, **{"backbone.conv1.weight": torch.zeros(64, 3, 3, 3)})
    with pytest.raises(ValueError, match=r"backbone\.conv1\.weight has shape"):
        to_torchvision_resnet50(bad, prefix="backbone.")
    ckpt = tmp_path / "odd.pt"
    torch.save({"model": {}}, ckpt)
    with pytest.raises(DataError, match="no state dict under key 'method'"):
        export_checkpoint(ckpt, tmp_path / "x.pkl", "detectron2")
    with pytest.raises(DataError, match="not found"):
        export_checkpoint(tmp_path / "none.pt", tmp_path / "x.pkl", "torchvision")
