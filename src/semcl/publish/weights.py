"""A run's trained network for a bundle: runs/<id>/weights/model.safetensors, plus timm's config.json where timm
builds the architecture, so that `timm.create_model('local-dir:<folder>', pretrained=True)` loads it offline.

The tensors are the backbone `semcl export` writes (heads and momentum encoder left behind): timm's names where
timm has the network (ImageNet ResNets / ResNeXts, whose names are torchvision's, and the ViTs), else our own
module's state dict, which the builder named in the file's metadata (`load`) reloads strictly. The parameter count
is read off that network, built on the meta device (shapes only).
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from semcl.engine.export import FAMILY_FORMATS, TIMM_RESNETS, convert, on_meta_device, run_backbone, safetensors_bytes
from semcl.files import write_bytes_atomic, write_json_atomic

WEIGHTS_DIR, WEIGHTS_FILE, TIMM_CONFIG = "weights", "model.safetensors", "config.json"
# our network name -> the timm architecture that builds it (with the model_args config.json holds);
# our test ViT has no timm name, so it goes out as our own state dict
TIMM_ARCHITECTURES = {**TIMM_RESNETS, "vit_base_patch16": "vit_base_patch16_224",
                      "vit_large_patch16": "vit_large_patch16_224"}


@dataclass(frozen=True)
class PublishedWeights:
    network: str      # our backbone name (model.backbone, or the method's own network)
    family: str       # semcl.engine.export's family
    parameters: int   # of the network the weights load into
    load: dict        # how to rebuild it: {"call", "args", "kwargs"} (or timm's local-dir)
    source_run: str   # the run whose checkpoint holds the training (itself, or the run it shares a training with)


def _callable(dotted: str):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def parameter_count(load: dict) -> int:
    """The parameters of the network `load` builds (on the meta device: no memory, no init)."""
    net = on_meta_device(lambda: _callable(load["call"])(*load.get("args", []), **load.get("kwargs", {})))
    return sum(p.numel() for p in net.parameters())


def input_config(config: dict, channels: int) -> dict:
    """timm's pretrained_cfg preprocessing entries from the run's data: (C, H, W) and the normalisation statistics."""
    from semcl.data.registry import dataset_spec

    data = config.get("data") or {}
    spec = dataset_spec(data.get("name"))
    side = data.get("image_size") or (spec.synthetic_size if data.get("synthetic") else None) or spec.size
    return {"input_size": [channels, side, side], "mean": list(spec.mean), "std": list(spec.std)}


def timm_config(architecture: str, load: dict, config: dict, num_features: int) -> dict:
    """config.json as timm's local-dir loader reads it (timm.models._hub.load_model_config_from_path): the
    architecture, num_classes 0 (no head is published), the kwargs that differ from timm's defaults for that name
    (a ViT's: every VisionTransformer kwarg semcl.engine.export gives), and a pretrained_cfg with the preprocessing."""
    kwargs = {k: v for k, v in (load.get("kwargs") or {}).items() if k not in ("pretrained", "num_classes")}
    channels = int(kwargs.get("in_chans", 3))
    if channels == 3:
        kwargs.pop("in_chans", None)
    pretrained_cfg = {**input_config(config, channels), "num_classes": 0}
    if "img_size" in kwargs:  # a ViT: its position embedding fixes the input side
        pretrained_cfg["input_size"] = [channels, kwargs["img_size"], kwargs["img_size"]]
    return {"architecture": architecture, "num_classes": 0, "num_features": num_features, "global_pool": "avg",
            "model_args": kwargs, "pretrained_cfg": pretrained_cfg}


def write_weights(results: Path, source_run: str, folder: Path, labels: dict[str, str]) -> PublishedWeights:
    """Write folder/model.safetensors (metadata: `labels` + network and load call) and, where timm builds the
    network, folder/config.json; the weights come from `source_run`'s last checkpoint in the store `results`."""
    config, _, backbone, sd = run_backbone(results, source_run)
    architecture = TIMM_ARCHITECTURES.get(backbone.name)
    fmt = "timm" if architecture and "timm" in FAMILY_FORMATS[backbone.family] else "state_dict"
    tensors, load = convert(backbone, sd, fmt)
    params = parameter_count(load)
    meta = {**labels, "network": backbone.name, "family": backbone.family, "source_run": source_run,
            "load": json.dumps(load, sort_keys=True)}
    write_bytes_atomic(folder / WEIGHTS_FILE, safetensors_bytes(tensors, meta))
    if fmt == "timm":
        net = on_meta_device(lambda: _callable(load["call"])(*load.get("args", []), **load.get("kwargs", {})))
        write_json_atomic(folder / TIMM_CONFIG, timm_config(architecture, load, config, int(net.num_features)))
    return PublishedWeights(backbone.name, backbone.family, params, load, source_run)


def load_weights(folder: Path) -> dict[str, torch.Tensor]:
    """The tensors of a published weights folder (a reader's one call; nothing in the file runs)."""
    from safetensors.torch import load_file

    return load_file(Path(folder) / WEIGHTS_FILE)
