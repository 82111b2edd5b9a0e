"""A published weights folder of a timm architecture (an ImageNet ResNet-18 run, generated here) loads offline
through `timm.create_model('local-dir:...')` and gives our network's features in float64; the safetensors
metadata names the run; every evaluation protocol has a model-index task."""

from __future__ import annotations

import json

import torch
import yaml
from safetensors import safe_open

from semcl.evals.protocols import EVALUATIONS
from semcl.files import write_json_atomic
from semcl.publish.model_index import TASKS
from semcl.publish.weights import write_weights
from semcl.runtime.checkpoint import save_atomic


def _run(results, run_id, module, config):
    folder = results / "runs" / run_id
    state = {f"backbone.{k}": v for k, v in module.state_dict().items()}
    state["head.weight"] = torch.zeros(3, 2)  # heads are left behind
    save_atomic({"method": state, "epoch": 1}, folder / "checkpoints" / "last.pt")
    (folder / "config.yaml").write_text(yaml.safe_dump({"run_id": run_id, "seed": 1, "config": config}))
    write_json_atomic(folder / "metrics.json", {"run_id": run_id, "metrics": {}, "config": config})


def test_resnet18_weights_load_through_timm_local_dir(tmp_path):
    import timm

    from semcl.models.backbones import build_backbone

    torch.manual_seed(0)
    ours = build_backbone("resnet18")
    g = torch.Generator().manual_seed(1)
    for m in ours.modules():  # non-trivial running statistics: the eval-mode features check the buffers too
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
    config = {"method": {"name": "ce"}, "model": {"backbone": "resnet18"}, "data": {"name": "imagenet100"}}
    _run(tmp_path / "results", "r18", ours, config)
    folder = tmp_path / "weights"
    done = write_weights(tmp_path / "results", "r18", folder, {"run_id": "r18", "table": "t/x", "row": "r"})
    assert done.parameters == sum(p.numel() for p in ours.parameters()) and done.network == "resnet18"
    cfg = json.loads((folder / "config.json").read_text())
    assert (cfg["architecture"], cfg["num_classes"], cfg["num_features"]) == ("resnet18", 0, 512)
    assert cfg["pretrained_cfg"]["input_size"] == [3, 224, 224]
    with safe_open(folder / "model.safetensors", "pt") as f:
        assert (f.metadata()["run_id"], f.metadata()["network"]) == ("r18", "resnet18")
    theirs = timm.create_model(f"local-dir:{folder}", pretrained=True)
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(theirs.double().eval()(x), ours.double().eval()(x), rtol=0, atol=1e-10)


def test_every_evaluation_protocol_has_a_task():
    assert set(TASKS) == set(EVALUATIONS)
