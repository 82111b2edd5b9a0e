"""semcl export: each backbone family's exported weights, loaded strictly into the target library's own model
(built locally, no download), give our features on the same input (float64); detectron2's pickle has its
names and shapes; plain state dicts reload into our builders; bad input is one line."""

from __future__ import annotations

import json
import pickle

import pytest
import torch
from safetensors.torch import load_file

from semcl.cli.main import main
from semcl.engine.export import export_run
from semcl.errors import SemclError
from semcl.files import write_json_atomic
from semcl.runtime.checkpoint import save_atomic


def _run(tmp_path, run_id, module, config, record=True):
    """A run folder as the engine leaves it: config.yaml, checkpoints/last.pt ({"method": ...}), metrics.json."""
    folder = tmp_path / "runs" / run_id
    (folder / "checkpoints").mkdir(parents=True)
    state = {f"backbone.{k}": v for k, v in module.state_dict().items()}
    state["head.weight"] = torch.zeros(3, 2)  # heads are left behind
    save_atomic({"method": state, "epoch": 1}, folder / "checkpoints" / "last.pt")
    import yaml

    # the engine's config.yaml: the run's header around its resolved config (semcl.engine.job)
    (folder / "config.yaml").write_text(yaml.safe_dump({"run_id": run_id, "seed": 123, "table": "t/x", "row": "r",
                                                        "profile": "smoke", "config": config}))
    if record:
        write_json_atomic(folder / "metrics.json", {
            "run_id": run_id, "table": "t/x", "row": "r", "profile": "smoke", "seed": 123,
            "metrics": {"top1": 12.5}, "config": config, "git": {"commit": "abc123", "dirty": False}})
    return folder


def _randomise_bn(module):
    """Non-trivial running statistics, so an eval-mode comparison checks the BN buffers too."""
    g = torch.Generator().manual_seed(0)
    for m in module.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
    return module


def _same(ours, theirs, x):
    ours, theirs = ours.double().eval(), theirs.double().eval()
    with torch.no_grad():
        torch.testing.assert_close(theirs(x.double()), ours(x.double()), rtol=0, atol=1e-10)


def test_resnet18_to_torchvision_timm_and_detectron2(tmp_path):
    import timm
    from torchvision.models import resnet18

    from semcl.models.backbones import build_backbone

    torch.manual_seed(0)
    ours = _randomise_bn(build_backbone("resnet18"))
    _run(tmp_path, "r18", ours, {"method": {"name": "ce"}, "model": {"backbone": "resnet18"}})
    x = torch.randn(1, 3, 32, 32)

    weights, meta_path = export_run(tmp_path, "r18", "torchvision")
    tv = resnet18(weights=None)
    tv.fc = torch.nn.Identity()
    tv.load_state_dict(load_file(weights), strict=True)
    _same(ours, tv, x)
    meta = json.loads(meta_path.read_text())
    assert (meta["source_run"], meta["code_commit"], meta["metrics"], meta["seed"]) == ("r18", "abc123",
                                                                                        {"top1": 12.5}, 123)
    assert meta["load"]["call"] == "torchvision.models.resnet18"
    assert meta["config"]["model"]["backbone"] == "resnet18"

    weights, _ = export_run(tmp_path, "r18", "timm")
    tm = timm.create_model("resnet18", pretrained=False, num_classes=0)
    tm.load_state_dict(load_file(weights), strict=True)
    _same(ours, tm, x)

    weights, _ = export_run(tmp_path, "r18", "detectron2", container="pickle")  # the .pkl detectron2 opens
    with open(weights, "rb") as f:
        d2 = pickle.load(f)
    assert d2["__author__"] == "semcl" and d2["matching_heuristics"] is True
    model = d2["model"]
    assert model["stem.conv1.weight"].shape == (64, 3, 7, 7)
    assert model["stem.conv1.norm.running_var"].shape == (64,)
    assert model["res2.0.conv2.norm.weight"].shape == (64,)
    assert model["res3.0.shortcut.weight"].shape == (128, 64, 1, 1)
    assert model["res5.1.conv2.weight"].shape == (512, 512, 3, 3)
    assert len(model) == len(tv.state_dict()) and not any(k.startswith(("layer", "fc")) for k in model)
    torch.testing.assert_close(torch.from_numpy(model["res4.1.conv1.norm.running_mean"]),
                               ours.layer3[1].bn1.running_mean.float())
    # by default the same names and tensors in a safetensors file (no pickle), its metafile saying how detectron2 reads it
    weights, meta_path = export_run(tmp_path, "r18", "detectron2")
    safe = load_file(weights)
    assert weights.suffix == ".safetensors" and safe.keys() == model.keys()
    assert all(torch.equal(safe[k], torch.from_numpy(v)) for k, v in model.items())
    assert "--container pickle" in json.loads(meta_path.read_text())["load"]["note"]


def test_resnet50_to_torchvision_equal_features(tmp_path):
    from torchvision.models import resnet50

    from semcl.models.backbones import build_backbone

    torch.manual_seed(1)
    ours = _randomise_bn(build_backbone("resnet50"))
    _run(tmp_path, "r50", ours, {"method": {"name": "paco"}, "model": {"backbone": "resnet50"}}, record=False)
    weights, meta_path = export_run(tmp_path, "r50", "torchvision", tmp_path.parent / f"{tmp_path.name}.r50.safetensors")
    tv = resnet50(weights=None)
    tv.fc = torch.nn.Identity()
    tv.load_state_dict(load_file(weights), strict=True)
    _same(ours, tv, torch.randn(1, 3, 32, 32))
    meta = json.loads(meta_path.read_text())
    assert meta["finished"] is False and meta["metrics"] is None and meta_path.name.endswith("r50.safetensors.json")


def test_vit_to_timm_equal_features(tmp_path):
    from timm.models.vision_transformer import VisionTransformer

    from semcl.models.vit import build_vit

    torch.manual_seed(2)
    ours = build_vit("vit_tiny_test", image_size=32)
    _run(tmp_path, "vit", ours, {"method": {"name": "mae_finetune", "arch": "vit_tiny_test"}, "model": {}})
    weights, meta_path = export_run(tmp_path, "vit", "timm")
    kwargs = json.loads(meta_path.read_text())["load"]["kwargs"]
    assert kwargs["img_size"] == 32 and kwargs["global_pool"] == "avg" and kwargs["fc_norm"] is True
    theirs = VisionTransformer(**kwargs)
    theirs.load_state_dict(load_file(weights), strict=True)
    _same(ours, theirs, torch.randn(1, 3, 32, 32))


def test_video_r3d18_to_torchvision_and_hara_to_state_dict(tmp_path):
    from torchvision.models.video import r3d_18

    from semcl.models.video import build_video_backbone

    torch.manual_seed(3)
    x = torch.randn(1, 3, 2, 16, 16)
    ours = _randomise_bn(build_video_backbone("r3d_18"))
    _run(tmp_path, "v1", ours, {"method": {"name": "video_rince", "backbone": "r3d_18"}, "model": {}})
    weights, _ = export_run(tmp_path, "v1", "torchvision")
    tv = r3d_18(weights=None)
    tv.fc = torch.nn.Identity()
    tv.load_state_dict(load_file(weights), strict=True)
    _same(ours, tv, x)

    hara = _randomise_bn(build_video_backbone("hara_r3d18_b"))
    _run(tmp_path, "v2", hara, {"method": {"name": "video_rince", "backbone": "hara_r3d18_b"}, "model": {}})
    with pytest.raises(SemclError, match="hara_r3d18_b.*no torchvision export.*state_dict"):
        export_run(tmp_path, "v2", "torchvision")
    weights, meta_path = export_run(tmp_path, "v2", "state_dict")
    load = json.loads(meta_path.read_text())["load"]
    assert load == {"call": "semcl.models.video.build_video_backbone", "args": ["hara_r3d18_b"], "kwargs": {},
                    "read": "safetensors.torch.load_file(weights)"}
    again = build_video_backbone(*load["args"])
    again.load_state_dict(load_file(weights), strict=True)
    _same(hara, again, x)


@pytest.mark.parametrize("arch", ["resnet8x4", "ShuffleV1"])
def test_kd_student_to_state_dict(tmp_path, arch):
    from semcl.models.kd import build_kd_model

    torch.manual_seed(4)
    ours = _randomise_bn(build_kd_model(arch, num_classes=10, in_channels=1))
    _run(tmp_path, arch, ours, {"method": {"name": "crd", "teacher_arch": "resnet32x4"}, "model": {"backbone": arch}})
    weights, meta_path = export_run(tmp_path, arch, "state_dict")
    load = json.loads(meta_path.read_text())["load"]
    assert load["kwargs"] == {"num_classes": 10, "in_channels": 1}
    again = build_kd_model(*load["args"], **load["kwargs"])
    again.load_state_dict(load_file(weights), strict=True)
    _same(ours, again, torch.randn(1, 1, 32, 32))


def test_cifar_resnet_plain_and_bad_input_one_line(tmp_path, capsys):
    from semcl.models.backbones import build_backbone

    ours = build_backbone("resnet_tiny")
    _run(tmp_path, "tiny", ours, {"method": {"name": "ce"}, "model": {"backbone": "resnet_tiny"}})
    assert main(["--results", str(tmp_path), "export", "tiny", "--format", "state_dict"]) == 0
    assert (tmp_path / "exports" / "tiny" / "resnet_tiny.state_dict.safetensors.json").is_file()
    capsys.readouterr()
    assert main(["--results", str(tmp_path), "export", "tiny", "--format", "detectron2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "resnet_tiny" in err and "state_dict" in err
    assert main(["--results", str(tmp_path), "export", "nosuchrun", "--format", "torchvision"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "nosuchrun" in err
    assert main(["--results", str(tmp_path / "runs" / "tiny"), "export", "..", "--format", "state_dict"]) == 2
    assert capsys.readouterr().err == ("semcl: error: run id '..': not a run id (a folder name under runs/, as "
                                       "`semcl status <table>` lists them)\n")
    (tmp_path / "exports" / "outdir").mkdir()  # --out a folder: the file goes inside it under its default name
    assert main(["--results", str(tmp_path), "export", "tiny", "--format", "state_dict",
                 "--out", str(tmp_path / "exports" / "outdir")]) == 0
    assert (tmp_path / "exports" / "outdir" / "resnet_tiny.state_dict.safetensors").is_file()
    capsys.readouterr()
    _run(tmp_path, "odd", ours, {"method": {"name": "ce"}, "model": {"backbone": "mystery_net"}})
    assert main(["--results", str(tmp_path), "export", "odd", "--format", "state_dict"]) == 2
    assert "mystery_net" in capsys.readouterr().err


def test_an_unfinished_run_exports_from_the_config_it_started_with(tmp_path, capsys):
    """No metrics.json yet (a run between checkpoints): the config comes from config.yaml's "config" mapping."""
    from semcl.models.backbones import build_backbone

    ours = build_backbone("resnet_tiny")
    folder = _run(tmp_path, "going", ours, {"method": {"name": "ce"}, "model": {"backbone": "resnet_tiny"}},
                  record=False)
    weights, meta = export_run(tmp_path, "going", "state_dict")
    again = build_backbone("resnet_tiny")
    again.load_state_dict(load_file(weights), strict=True)
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), ours.state_dict().values(), strict=True))
    (folder / "config.yaml").write_text("run_id: going\nconfig: [1\n")  # truncated: one line naming the file
    assert main(["--results", str(tmp_path), "export", "going", "--format", "state_dict"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{folder / 'config.yaml'}: not YAML" in err


def test_the_cli_names_the_export_formats_without_importing_torch():
    from semcl.cli import export as cli_export
    from semcl.engine import export as export_run
    assert cli_export.FORMATS == export_run.FORMATS and cli_export.CONTAINERS == export_run.CONTAINERS
