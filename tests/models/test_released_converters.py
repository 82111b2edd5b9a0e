"""The authors' checkpoint layouts (semcl.models.released), each read from a file written as the official training
script writes it: its dict keys, the official parameter names and shapes, synthetic values. The converted network
must compute what the same tensors loaded by hand (module by module, the official names written out here) give.
Bad files (truncated, another network's, a pickle that would run code, a missing key) are one line, nothing loads."""

from __future__ import annotations

import argparse
import os

import pytest
import torch

from semcl.engine.released import _network, load_weights, released_row
from semcl.errors import DataError
from semcl.models.released import LAYOUTS
from semcl.registry.tables import RELEASED_LAYOUTS, get_table


def _values(shapes: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    """Synthetic values in each tensor's shape and dtype: BN variances positive, counts and labels as integers."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for k, v in shapes.items():
        if v.is_floating_point():
            x = torch.randn(v.shape, generator=g) * 0.2
            out[k] = x.abs() + 0.5 if k.endswith("running_var") else x
        else:
            out[k] = torch.randint(0, 5, v.shape, generator=g, dtype=v.dtype)
    return out


def _built(table_id: str, label: str, profile: str = "smoke"):
    table = get_table(table_id)
    row, _ = released_row(table, label)
    return table, row, _network(table, row, profile)


def _official_pcl(method, paco: bool) -> dict[str, torch.Tensor]:
    """The DDP-wrapped MoCo builder's state dict (PCL moco/builder.py @fe56535): names written out, shapes ours."""
    sd = method.state_dict()
    names = {f"module.encoder_q.{k[len('backbone.'):]}": k for k in sd if k.startswith("backbone.")}
    names |= {f"module.encoder_q.fc.{k[len('head.'):]}": k for k in sd if k.startswith("head.")}
    names |= {"module.linear.weight": "classifier.fc.weight", "module.linear.bias": "classifier.fc.bias",
              "module.queue": "bank.features", "module.queue_l": "bank.labels", "module.queue_ptr": "bank.ptr"}
    if paco:
        names |= {f"module.encoder_k.{k[len('key_backbone.'):]}": k for k in sd if k.startswith("key_backbone.")}
        names |= {f"module.encoder_k.fc.{k[len('key_head.'):]}": k for k in sd if k.startswith("key_head.")}
    state = _values({o: sd[s] for o, s in names.items()}, 0)
    state["module.queue_ptr"] = torch.tensor([3])  # builder.py registers it as torch.zeros(1, dtype=torch.long)
    if paco:  # the momentum centres: saved by PaCo's builder, never read at test time
        state |= {"module.linear_k.weight": torch.zeros_like(sd["classifier.fc.weight"]),
                  "module.linear_k.bias": torch.zeros_like(sd["classifier.fc.bias"])}
    return state


def _save_pcl(path, state):
    torch.save({"epoch": 400, "arch": "resnet50", "acc": 58.5, "state_dict": state,
                "optimizer": {"state": {}, "param_groups": [{"lr": 0.0, "params": [0]}]}}, path)


def test_the_registry_names_the_layouts_the_package_has():
    assert set(LAYOUTS) == set(RELEASED_LAYOUTS)


@pytest.mark.parametrize("table_id, label, paco", [
    ("gpaco/imagenet-lt", "GPaCo ResNet-50 (authors checkpoint)", False),
    ("paco/imagenet-lt", "PaCo ResNet-50 (authors checkpoint)", True),
])
def test_a_pcl_checkpoint_gives_the_outputs_of_its_tensors_loaded_by_hand(tmp_path, table_id, label, paco):
    table, row, method = _built(table_id, label)
    state = _official_pcl(method, paco)
    assert "module.encoder_q.conv1.weight" in state and "module.encoder_q.fc.0.weight" in state
    path = tmp_path / row.released.file
    _save_pcl(path, state)
    loaded = load_weights(method, table.id, row, path)
    assert loaded.kept == ("center_offset",)
    assert loaded.dropped == (("module.linear_k.weight", "module.linear_k.bias") if paco else ())

    _, _, ref = _built(table_id, label)  # by hand: each module from its official prefix
    strip = lambda p: {k[len(p):]: v for k, v in state.items() if k.startswith(p)}  # noqa: E731
    ref.backbone.load_state_dict({k: v for k, v in strip("module.encoder_q.").items() if not k.startswith("fc.")})
    ref.head.load_state_dict(strip("module.encoder_q.fc."))
    ref.classifier.fc.weight.data.copy_(state["module.linear.weight"])
    ref.classifier.fc.bias.data.copy_(state["module.linear.bias"])
    x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    method.eval(), ref.eval()
    with torch.no_grad():
        torch.testing.assert_close(method.classify(x), ref.classify(x), rtol=0, atol=0)
        torch.testing.assert_close(method.head(method.backbone(x)), ref.head(ref.backbone(x)), rtol=0, atol=0)
    assert torch.equal(method.bank.features, state["module.queue"])
    assert torch.equal(method.bank.labels, state["module.queue_l"])
    if paco:
        assert torch.equal(method.key_backbone.conv1.weight, state["module.encoder_k.conv1.weight"])


def test_a_rince_checkpoint_with_its_argparse_options_loads_into_the_supcon_network(tmp_path):
    table, row, method = _built("rince/tab2", "RINCE-out (authors checkpoint)")
    sd = method.state_dict()
    names = {f"backbone_q.encoder.{k[len('backbone.'):]}": k for k in sd if k.startswith("backbone.")}
    names |= {f"backbone_k.encoder.{k[len('key_backbone.'):]}": k for k in sd if k.startswith("key_backbone.")}
    names |= {f"backbone_q.head.{k[len('head.net.'):]}": k for k in sd if k.startswith("head.net.")}
    names |= {f"backbone_k.head.{k[len('key_head.net.'):]}": k for k in sd if k.startswith("key_head.net.")}
    names |= {"memorybank_InfoNCE": "bank.features", "memorybank_labels": "bank.labels"}
    state = _values({o: sd[s] for o, s in names.items()}, 2)
    assert "backbone_q.encoder.layer1.0.conv1.weight" in state and "backbone_q.head.2.weight" in state
    path = tmp_path / "last.pth"
    # main_supcon.py's save_model: the options object is pickled too (util.py @1a060ae)
    torch.save({"opt": argparse.Namespace(model="resnet50", m=0.99, min_tau=0.1), "model": state,
                "optimizer": {"state": {}, "param_groups": []}, "epoch": 500}, path)
    with pytest.raises(DataError, match="sha256 .* differs from the registry's"):
        load_weights(method, table.id, row, path)  # the registry knows the released file's sha256 (git LFS)
    from dataclasses import replace

    row = replace(row, released=replace(row.released, sha256=None))
    loaded = load_weights(method, table.id, row, path)
    assert loaded.kept == ("bank.ptr",)
    _, _, ref = _built("rince/tab2", "RINCE-out (authors checkpoint)")
    ref.backbone.load_state_dict({k[len("backbone_q.encoder."):]: v for k, v in state.items()
                                  if k.startswith("backbone_q.encoder.")})
    ref.head.net.load_state_dict({k[len("backbone_q.head."):]: v for k, v in state.items()
                                  if k.startswith("backbone_q.head.")})
    x = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    method.eval(), ref.eval()
    with torch.no_grad():
        torch.testing.assert_close(method.head(method.backbone(x)), ref.head(ref.backbone(x)), rtol=0, atol=0)


def test_a_crd_teacher_loads_with_its_blocks_one_level_down(tmp_path):
    table, row, method = _built("scns/kd-cifar100", "Teacher resnet56 (authors checkpoint)")
    sd = method.state_dict()
    # RepDistiller models/resnet.py names: layer<i>.<j>.conv1 ..., fc; semcl's KD zoo: layer<i>.blocks.<j>.
    names = {k[len("backbone."):].replace(".blocks.", "."): k for k in sd}
    state = _values({o: sd[s] for o, s in names.items()}, 4)
    assert "layer1.0.conv1.weight" in state and "fc.weight" in state
    path = tmp_path / "ckpt_epoch_240.pth"
    torch.save({"epoch": 240, "model": state, "accuracy": 72.34, "optimizer": {"state": {}, "param_groups": []}}, path)
    load_weights(method, table.id, row, path)
    _, _, ref = _built("scns/kd-cifar100", "Teacher resnet56 (authors checkpoint)")
    for name, tensor in state.items():  # by hand, one parameter at a time
        stage = name.split(".")
        if stage[0].startswith("layer") and stage[1].isdigit():
            stage.insert(1, "blocks")
        target = ref.backbone
        for part in stage[:-1]:
            target = getattr(target, part) if not part.isdigit() else target[int(part)]
        getattr(target, stage[-1]).data.copy_(tensor)
    x = torch.randn(2, *(3, 32, 32), generator=torch.Generator().manual_seed(5))
    x = x[:, : method.backbone.conv1.in_channels]
    method.eval(), ref.eval()
    with torch.no_grad():
        torch.testing.assert_close(method.classify(x), ref.classify(x), rtol=0, atol=0)


def _official_gpaco_vit(method) -> dict[str, torch.Tensor]:
    """VisionTransformer_paco's state dict (PCL GPaCo/MAE-ViTs/models_vit_paco.py @fe56535, global_pool=True so
    `norm` is deleted and `fc_norm` added; timm's ViT names; projector `mlp`; queue buffers): names written out."""
    sd = method.state_dict()
    names = {k[len("backbone."):]: k for k in sd if k.startswith("backbone.")}
    names |= {"head.weight": "head.weight", "head.bias": "head.bias",
              **{f"mlp.{i}.{p}": f"projector.{i}.{p}" for i in (0, 2, 4) for p in ("weight", "bias")},
              "queue": "bank.features", "queue_l": "bank.labels"}
    state = _values({o: sd[s] for o, s in names.items()}, 6)
    state["queue_ptr"] = torch.tensor([64])  # torch.zeros(1, dtype=torch.long) there
    return state


@pytest.mark.parametrize("label", ["GPaCo ViT-B (authors checkpoint)", "GPaCo ViT-L (authors checkpoint)"])
def test_a_gpaco_vit_checkpoint_gives_the_outputs_of_its_tensors_loaded_by_hand(tmp_path, label):
    table, row, method = _built("gpaco/mae-robustness", label)  # smoke: the tiny ViT, the official names
    state = _official_gpaco_vit(method)
    assert {"cls_token", "pos_embed", "patch_embed.proj.weight", "blocks.0.attn.qkv.weight", "fc_norm.weight",
            "head.weight", "mlp.4.weight", "queue", "queue_l"} <= set(state) and "norm.weight" not in state
    assert state["queue"].shape == (128, 128) and state["mlp.4.weight"].shape[0] == 128
    path = tmp_path / row.released.file
    # util/misc.py save_model: the argparse options are pickled beside the weights
    torch.save({"model": state, "optimizer": {"state": {}, "param_groups": []}, "epoch": 99,
                "scaler": {"scale": 65536.0}, "args": argparse.Namespace(model="vit_base_patch16", alpha=0.2)}, path)
    loaded = load_weights(method, table.id, row, path)
    assert loaded.kept == ("pretrained_loaded",) and loaded.dropped == ()
    assert loaded.tensors == len(state)

    _, _, ref = _built("gpaco/mae-robustness", label)  # by hand: the timm ViT under its own names, head, mlp
    ref.backbone.load_state_dict({k: v for k, v in state.items() if not k.startswith(("head.", "mlp.", "queue"))})
    ref.head.load_state_dict({k[len("head."):]: v for k, v in state.items() if k.startswith("head.")})
    ref.projector.load_state_dict({k[len("mlp."):]: v for k, v in state.items() if k.startswith("mlp.")})
    x = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(7))
    method.eval(), ref.eval()
    with torch.no_grad():
        torch.testing.assert_close(method.classify(x), ref.classify(x), rtol=0, atol=0)
        torch.testing.assert_close(method.projector(method.backbone(x)), ref.projector(ref.backbone(x)),
                                   rtol=0, atol=0)
    assert torch.equal(method.bank.features, state["queue"]) and int(method.bank.ptr) == 64


def test_an_mae_pretraining_file_is_not_a_gpaco_vit_checkpoint(tmp_path):
    table, row, method = _built("gpaco/mae-robustness", "GPaCo ViT-B (authors checkpoint)")
    state = _official_gpaco_vit(method)
    # MAE's pre-trained encoder: the final `norm`, no fc_norm, no head / projector / queue
    mae = {k: v for k, v in state.items() if not k.startswith(("fc_norm.", "head.", "mlp.", "queue"))}
    mae |= {"norm.weight": state["fc_norm.weight"], "norm.bias": state["fc_norm.bias"]}
    path = tmp_path / "mae_pretrain_vit_base.pth"
    torch.save({"model": mae}, path)
    before = {k: v.clone() for k, v in method.state_dict().items()}
    with pytest.raises(DataError, match=r"not this row's network: unexpected norm.weight, norm.bias; missing "
                                        r"backbone.fc_norm.weight, backbone.fc_norm.bias, head.weight"):
        load_weights(method, table.id, row, path)
    assert all(torch.equal(before[k], v) for k, v in method.state_dict().items())


class _RunsCode:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def _gpaco_file(tmp_path):
    table, row, method = _built("gpaco/imagenet-lt", "GPaCo ResNet-50 (authors checkpoint)")
    state = _official_pcl(method, paco=False)
    return table, row, method, state


@pytest.mark.parametrize("how, message", [
    ("truncated", "not a readable checkpoint"),
    ("another network", "not this row's network: unexpected module.encoder_q.fc.1.weight"),
    ("runs code", "holds objects other than tensors"),
    ("missing key", "not this row's network: missing classifier.fc.bias"),
    ("shape", "shape of 'classifier.fc.weight'"),
    ("no state dict", "no state dict under key 'state_dict'"),
])
def test_a_wrong_file_is_one_line_and_nothing_loads(tmp_path, monkeypatch, how, message):
    monkeypatch.chdir(tmp_path)
    table, row, method, state = _gpaco_file(tmp_path)
    path = tmp_path / "file.pth"
    if how == "another network":  # PaCo's builder: a second encoder and the momentum centres
        _, _, paco = _built("paco/imagenet-lt", "PaCo ResNet-50 (authors checkpoint)")
        _save_pcl(path, _official_pcl(paco, paco=True))
    elif how == "runs code":
        torch.save({"state_dict": state, "x": _RunsCode()}, path)
    elif how == "missing key":
        _save_pcl(path, {k: v for k, v in state.items() if k != "module.linear.bias"})
    elif how == "shape":
        _save_pcl(path, {**state, "module.linear.weight": state["module.linear.weight"][:-1]})
    elif how == "no state dict":
        torch.save({"model": state}, path)
    else:
        _save_pcl(path, state)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    before = {k: v.clone() for k, v in method.state_dict().items()}
    with pytest.raises(DataError) as err:
        load_weights(method, table.id, row, path)
    text = str(err.value)
    assert "\n" not in text and message in text and str(path) in text and row.label in text
    assert all(torch.equal(before[k], v) for k, v in method.state_dict().items())  # never a partial load
    assert not (tmp_path / "pwned").exists()


def _official_ranking():
    """The weights of RINCE's imagenet100 `losses.ContrastiveRanking` (losses.py:34-47 @1a060ae): two torchvision
    ResNet-18s whose fc became Linear(512, 512)-ReLU-Linear(512, 128), the memory bank and its one-element pointer."""
    import torchvision

    net = torch.nn.Module()
    for name in ("backbone_q", "backbone_k"):
        enc = torchvision.models.resnet18(num_classes=128)
        enc.fc = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), enc.fc)
        setattr(net, name, enc)
    net.register_buffer("memorybank_InfoNCE", torch.randn(8192, 128))
    net.register_buffer("memorybank_labels", torch.ones(8192, dtype=torch.long) * -1)
    net.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))
    return net


def _unpinned(row):
    from dataclasses import replace

    return replace(row, released=replace(row.released, sha256=None))


@pytest.mark.parametrize("label", ["SCL-out (authors checkpoint)", "RINCE-out-in (authors checkpoint)"])
def test_a_rince_imagenet100_checkpoint_loads_into_the_resnet18_supcon_network(tmp_path, label):
    table, row, method = _built("rince/tab3", label, profile="paper")  # the paper's ResNet-18 and 8192-key bank
    official = _official_ranking()
    values = _values(official.state_dict(), 8)
    official.load_state_dict(values)
    path = tmp_path / "last.pth"
    # DistributedDataParallel(criterion).state_dict(): every key under `module.`; util.py save_model's dict
    torch.save({"opt": argparse.Namespace(model="resnet18", memorybank_size=8192), "epoch": 500,
                "model": {f"module.{k}": v for k, v in values.items()}, "optimizer": {"state": {}, "param_groups": []}},
               path)
    with pytest.raises(DataError, match="sha256 .* differs from the registry's"):
        load_weights(method, table.id, row, path)  # the registry holds the git LFS object's sha256
    loaded = load_weights(method, table.id, _unpinned(row), path)
    assert loaded.tensors == len(values) and loaded.kept == ()
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(9))
    method.eval(), official.eval()
    with torch.no_grad():
        # semcl's head L2-normalises its output, as the official forward does right after the encoder
        ours = (method.head.net(method.backbone(x)), method.key_head.net(method.key_backbone(x)))
        torch.testing.assert_close(ours[0], official.backbone_q(x), rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(ours[1], official.backbone_k(x), rtol=1e-5, atol=1e-4)
    assert torch.equal(method.bank.features, values["memorybank_InfoNCE"]) and int(method.bank.ptr) == int(
        values["queue_ptr"][0])


def test_rince_imagenet100_cross_entropy_checkpoint_is_the_torchvision_resnet18(tmp_path):
    import torchvision

    table, row, method = _built("rince/tab3", "Cross-entropy s.a. (authors checkpoint)", profile="paper")
    official = torchvision.models.resnet18(num_classes=100)  # main_ce.py set_model
    values = _values(official.state_dict(), 10)
    official.load_state_dict(values)
    path = tmp_path / "ckpt_epoch_500.pth"
    torch.save({"opt": argparse.Namespace(model="resnet18"), "epoch": 500,
                "model": {f"module.{k}": v for k, v in values.items()}, "optimizer": {"state": {}, "param_groups": []}},
               path)
    load_weights(method, table.id, _unpinned(row), path)
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(11))
    method.eval(), official.eval()
    with torch.no_grad():
        torch.testing.assert_close(method.classify(x), official(x), rtol=1e-5, atol=1e-6)
    # the SupCon file is not this row's network: one line naming the first offending keys
    supcon = tmp_path / "last.pth"
    torch.save({"model": {f"module.{k}": v for k, v in _official_ranking().state_dict().items()}}, supcon)
    with pytest.raises(DataError, match=r"not this row's network: unexpected module.memorybank_InfoNCE, "
                                        r"module.memorybank_labels, module.queue_ptr; missing backbone.conv1.weight"):
        load_weights(method, table.id, _unpinned(row), supcon)
