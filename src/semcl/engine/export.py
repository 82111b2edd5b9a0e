"""``semcl export <run_id>``: a finished (or checkpointed) run's backbone in a format other code loads.

Formats, per backbone family (``FAMILY_FORMATS``):
- ``torchvision``: ImageNet ResNets / ResNeXts (``torchvision.models.<name>`` keys, without ``fc``) and the
  ``r3d_18`` video net (``torchvision.models.video.r3d_18`` keys, without ``fc``);
- ``timm``: the ViTs (``timm.models.vision_transformer.VisionTransformer``, MAE's avg-pool + fc_norm, no head)
  and the ResNets timm ships under the same name (timm's ResNet uses torchvision's parameter names);
- ``detectron2``: ImageNet ResNets / ResNeXts, renamed as ``semcl.models.weight_formats.detectron2_name`` documents;
- ``state_dict``: every family (CIFAR ResNets, Hara 3D-ResNets, the small 3D ResNet, KD students): our own
  module's state dict, which reloads strictly into the builder named in the metafile.

The weights go in a safetensors file by default (``<backbone>.<format>.safetensors``: loading it runs no code);
``container="pickle"`` writes torch.save's ``.pth`` (detectron2: its ``.pkl``) on request. An ``out`` inside the
results store (but for its exports/ folder), below a file, or over an existing file without ``force`` is refused
in one line before anything is written (``check_out_path``).

Beside the weights a metafile ``<weights>.json`` (written atomically, like the weights) names the source run,
its table / row / profile / seed, the resolved config, the metrics (null while unfinished), the code commit the
run recorded, the weights' sha256 and the call that rebuilds the model.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from semcl.errors import DataError, SemclError
from semcl.files import write_atomic
from semcl.methods.registry import METHODS
from semcl.models.weight_formats import detectron2_name, layout_mismatch
from semcl.runtime.checkpoint import safe_load
from semcl.store import ResultsRoot
from semcl.store.run_folder import RunFolder

FORMATS = ("torchvision", "timm", "detectron2", "state_dict")
# our backbone name -> timm's model name for the same network (parameter names equal torchvision's)
TIMM_RESNETS = {"resnet18": "resnet18", "resnet50": "resnet50", "resnet101": "resnet101",
                "resnet152": "resnet152", "resnext50_32x4d": "resnext50_32x4d"}
FAMILY_FORMATS = {
    "imagenet_resnet": ("torchvision", "timm", "detectron2", "state_dict"),
    "cifar_resnet": ("state_dict",),
    "vit": ("timm", "state_dict"),
    "video_torchvision": ("torchvision", "state_dict"),
    "video": ("state_dict",),
    "kd_zoo": ("state_dict",),  # the KD networks (semcl.models.kd)
}
IMAGENET_RESNETS = ("resnet18", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x4d",
                    "resnet200")


@dataclass(frozen=True)
class Backbone:
    name: str
    family: str


def backbone_of(config: Mapping) -> Backbone:
    """Which backbone a resolved run config trains, as its method declares it (MethodSpec.networks)."""
    from semcl.models.backbones import BACKBONES
    from semcl.models.kd import KD_MODEL_ALIASES, KD_MODELS
    from semcl.run_config import build_config

    cfg = build_config(dict(config), where="the run's config.yaml")
    nets = METHODS[cfg.method.name].networks(cfg.method, cfg.model)
    name = nets.trained
    if nets.family == "vit":
        return Backbone(name, "vit")
    if nets.family == "video":
        return Backbone(name, "video_torchvision" if name == "r3d_18" else "video")
    if KD_MODEL_ALIASES.get(name, name) in KD_MODELS:
        return Backbone(name, "kd_zoo")
    if name in IMAGENET_RESNETS:
        return Backbone(name, "imagenet_resnet")
    if name in BACKBONES:
        return Backbone(name, "cifar_resnet")
    raise SemclError(f"config key 'model.backbone' is {name!r}: no export for this backbone family")


def on_meta_device(build):
    with torch.device("meta"):  # shapes only: no memory, no init cost
        return build()


def _check_loads(target: torch.nn.Module, sd: Mapping[str, torch.Tensor], what: str) -> None:
    """The keys and shapes of ``sd`` are exactly ``target``'s (what a strict load_state_dict needs)."""
    want = {k: tuple(v.shape) for k, v in target.state_dict().items()}
    missing, extra, bad = layout_mismatch(want, sd)
    if missing or extra:
        first = f"missing {missing[0]}" if missing else f"unexpected {extra[0]}"
        raise SemclError(f"the backbone's weights do not fit {what}: {first} ({len(missing)} missing, "
                         f"{len(extra)} unexpected)")
    if bad is not None:
        raise SemclError(f"the backbone's {bad} has shape {tuple(sd[bad].shape)}, {what} expects {want[bad]}")


def _vit_kwargs(name: str, sd: Mapping[str, torch.Tensor]) -> dict:
    """timm VisionTransformer kwargs of our ViT ``name`` (image size read back from pos_embed)."""
    from semcl.models.vit import VITS

    patch, dim, depth, heads = VITS[name]
    grid = round((sd["pos_embed"].shape[1] - 1) ** 0.5)
    return {"img_size": grid * patch, "patch_size": patch, "in_chans": int(sd["patch_embed.proj.weight"].shape[1]),
            "num_classes": 0, "embed_dim": dim, "depth": depth, "num_heads": heads, "mlp_ratio": 4.0,
            "qkv_bias": True, "global_pool": "avg", "fc_norm": True}


def _in_channels(sd: Mapping[str, torch.Tensor]) -> int:
    return int(next(v for v in sd.values() if v.dim() >= 4).shape[1])


def convert(backbone: Backbone, sd: dict[str, torch.Tensor], fmt: str) -> tuple[object, dict]:
    """(payload to write, how to rebuild) for ``fmt``; SemclError when the family has no such format."""
    allowed = FAMILY_FORMATS[backbone.family]
    if fmt not in allowed:
        raise SemclError(f"backbone {backbone.name!r} ({backbone.family}) has no {fmt} export; "
                         f"formats for it: {', '.join(allowed)}")
    sd = {k: v.detach().cpu().clone() for k, v in sd.items()}
    if fmt == "state_dict":
        return sd, _own_builder(backbone, sd)
    if backbone.family == "vit":  # timm
        kwargs = _vit_kwargs(backbone.name, sd)
        from semcl.models.vit import timm_vit_class

        _check_loads(on_meta_device(lambda: timm_vit_class()(**kwargs)), sd, "timm VisionTransformer")
        return sd, {"call": "timm.models.vision_transformer.VisionTransformer", "kwargs": kwargs}
    if backbone.family == "video_torchvision":
        sd = {k.removeprefix("net."): v for k, v in sd.items()}
        from torchvision.models.video import r3d_18

        target = on_meta_device(lambda: r3d_18(weights=None))
        target.fc = torch.nn.Identity()
        _check_loads(target, sd, "torchvision r3d_18")
        return sd, {"call": "torchvision.models.video.r3d_18", "kwargs": {"weights": None},
                    "note": "set model.fc = torch.nn.Identity() (or strict=False): fc is not exported"}
    # ImageNet ResNets: our module is torchvision's ResNet with fc = Identity
    sd = {k: v for k, v in sd.items() if not k.startswith("fc.")}
    from semcl.models.backbones import build_backbone

    target = on_meta_device(lambda: build_backbone(backbone.name, in_channels=3))
    _check_loads(target, sd, f"a 3-channel {backbone.name}")
    if fmt == "detectron2":
        model = {detectron2_name(k): v.numpy() for k, v in sd.items()}
        return ({"model": model, "__author__": "semcl", "matching_heuristics": True},
                {"call": "detectron2 MODEL.WEIGHTS", "note": "a .pkl read by DetectionCheckpointer"})
    if fmt == "timm":
        if backbone.name not in TIMM_RESNETS:
            raise SemclError(f"backbone {backbone.name!r}: timm has no model of that name; use --format torchvision")
        return sd, {"call": "timm.create_model", "args": [TIMM_RESNETS[backbone.name]],
                    "kwargs": {"pretrained": False, "num_classes": 0}}
    if backbone.name in ("resnext101_32x4d", "resnet200"):
        return sd, {"call": "semcl.models.backbones.build_backbone", "args": [backbone.name],
                    "note": "a torchvision.models.resnet.ResNet (no torchvision builder of this name); fc omitted"}
    return sd, {"call": f"torchvision.models.{backbone.name}", "kwargs": {"weights": None},
                "note": "fc is not exported: set model.fc = torch.nn.Identity() (or load with strict=False)"}


def _own_builder(backbone: Backbone, sd: Mapping[str, torch.Tensor]) -> dict:
    """Our builder call that the plain state dict reloads into strictly (checked here)."""
    if backbone.family == "kd_zoo":
        from semcl.models.kd import build_kd_model

        linear = [v for k, v in sd.items() if k.endswith("weight") and v.dim() == 2]
        kwargs = {"num_classes": int(linear[-1].shape[0]) if linear else 100, "in_channels": _in_channels(sd)}
        target = on_meta_device(lambda: build_kd_model(backbone.name, **kwargs))
        call, args = "semcl.models.kd.build_kd_model", [backbone.name]
    elif backbone.family in ("video", "video_torchvision"):
        from semcl.models.video import build_video_backbone

        target, call, args, kwargs = (on_meta_device(lambda: build_video_backbone(backbone.name)),
                                      "semcl.models.video.build_video_backbone", [backbone.name], {})
    elif backbone.family == "vit":
        from semcl.models.vit import build_vit

        vk = _vit_kwargs(backbone.name, sd)
        kwargs = {"image_size": vk["img_size"], "in_channels": vk["in_chans"]}
        target, call, args = on_meta_device(lambda: build_vit(backbone.name, **kwargs)), "semcl.models.vit.build_vit", \
            [backbone.name]
    else:
        from semcl.models.backbones import build_backbone

        kwargs = {"in_channels": _in_channels(sd)}
        target = on_meta_device(lambda: build_backbone(backbone.name, **kwargs))
        call, args = "semcl.models.backbones.build_backbone", [backbone.name]
    _check_loads(target, sd, call)
    return {"call": call, "args": args, "kwargs": kwargs}


def _read_run(run_dir: Path, run_id: str) -> tuple[dict, dict | None]:
    """(resolved config, finished record or None) of a run folder."""
    from semcl.store import Store

    record = Store(run_dir.parent.parent).read_record(run_id)
    if record is not None and isinstance(record.get("config"), dict):
        return record["config"], record
    # a run not finished yet: the config it started with (its config.yaml's "config", under the run's header)
    config = Store(run_dir.parent.parent).read_config(run_id)["config"]
    return config, record


CONTAINERS = ("safetensors", "pickle")  # the file the weights go in: safetensors (no code runs on load), or a pickle


def run_backbone(results: Path, run_id: str) -> tuple[dict, dict | None, Backbone, dict[str, torch.Tensor]]:
    """(resolved config, finished record or None, backbone, the backbone's weights as our module names them) of a
    run of the store `results`, read from its last checkpoint (weights_only)."""
    import re

    run_dir = ResultsRoot(Path(results)).runs / run_id
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", run_id):  # `..` or a path names a folder that is no run
        raise SemclError(f"run id {run_id!r}: not a run id (a folder name under runs/, as `semcl status <table>` "
                         "lists them)")
    if not run_dir.is_dir():
        raise SemclError(f"run id {run_id!r}: no run folder {run_dir} (see `semcl status <table>`)")
    config, record = _read_run(run_dir, run_id)
    backbone = backbone_of(config)
    ckpt = RunFolder(run_dir).checkpoint
    if not ckpt.is_file():
        raise DataError(f"{ckpt}: checkpoint not found; the run has not trained yet")
    # weights_only (the engine's safe load): a crafted checkpoint is refused, nothing in it runs
    state = safe_load(ckpt, remedy="export only checkpoints semcl wrote")
    if not isinstance(state, Mapping) or not isinstance(state.get("method"), Mapping):
        raise DataError(f"{ckpt}: no state dict under key 'method'")
    sd = {k.removeprefix("backbone."): v for k, v in state["method"].items() if k.startswith("backbone.")}
    if not sd:
        raise DataError(f"{ckpt}: key 'method' holds no 'backbone.' weights")
    return config, record, backbone, sd


def safetensors_bytes(payload: object, metadata: Mapping[str, str]) -> bytes:
    """The weights as a safetensors file (string metadata in its header); a detectron2 payload keeps its names."""
    from safetensors.torch import save

    tensors = payload["model"] if isinstance(payload, Mapping) and "model" in payload else payload
    tensors = {k: (torch.from_numpy(v) if not isinstance(v, torch.Tensor) else v).contiguous()
               for k, v in tensors.items()}
    return save(tensors, metadata=dict(metadata))


def check_out_path(results: Path, weights: Path, force: bool) -> None:
    """SemclError (one line) for an --out the export must not write: inside the results store other than its
    exports/ folder (a run's last.pt or metrics.json would be replaced), below a file, or over an existing file
    without --force (the weights or their metafile)."""
    store, target = Path(results).resolve(), weights.resolve()
    if target.is_relative_to(store) and not target.is_relative_to(ResultsRoot(store).exports):
        raise SemclError(f"--out {weights}: inside the results store {results} (its runs' files are never "
                         f"replaced); write it elsewhere or under {ResultsRoot(Path(results)).exports}")
    for parent in weights.parents:
        if parent.exists():
            if not parent.is_dir():
                raise SemclError(f"--out {weights}: {parent} is a file, not a folder")
            break
    for path in (weights, weights.with_name(weights.name + ".json")):
        if (path.exists() or path.is_symlink()) and not force:
            raise SemclError(f"--out {path}: exists; pass --force to replace it")
        if path.is_dir():
            raise SemclError(f"--out {path}: a folder is in the way")


def export_run(results: Path, run_id: str, fmt: str, out: Path | None = None, tag: str | None = None,
               container: str = "safetensors", force: bool = False) -> tuple[Path, Path]:
    """Write the run's backbone in ``fmt`` and its metafile; returns (weights path, metafile path). `tag` (a --set
    variant's folder-safe name) goes into the default file name: <backbone>.<tag>.<fmt>.<safetensors|pth|pkl>.
    `container`: safetensors (default; no pickle for third parties) or pickle (torch.save, detectron2's .pkl)."""
    from semcl.files import write_json_atomic

    if fmt not in FORMATS:
        raise SemclError(f"--format {fmt!r}: unknown; known: {', '.join(FORMATS)}")
    if container not in CONTAINERS:
        raise SemclError(f"--container {container!r}: unknown; known: {', '.join(CONTAINERS)}")
    config, record, backbone, sd = run_backbone(results, run_id)
    payload, rebuild = convert(backbone, sd, fmt)
    suffix = ".safetensors" if container == "safetensors" else ".pkl" if fmt == "detectron2" else ".pth"
    name = f"{backbone.name}{'.' + tag if tag else ''}.{fmt}{suffix}"
    weights = Path(out) if out else ResultsRoot(Path(results)).exports / run_id / name
    if weights.is_dir():  # a folder given as --out: the file goes inside it under its default name
        weights = weights / name
    check_out_path(results, weights, force)
    if container == "safetensors":
        data = safetensors_bytes(payload, {"source_run": run_id, "format": fmt, "backbone": backbone.name})
        dump = lambda f: f.write(data)  # noqa: E731
        rebuild = {**rebuild, "read": "safetensors.torch.load_file(weights)"}
        if fmt == "detectron2":  # its checkpointer opens pickles only
            rebuild["note"] = ("detectron2's names; DetectionCheckpointer opens a .pkl: export with --container pickle, "
                               "or pickle {'model': <these tensors as numpy>, 'matching_heuristics': True} yourself")
    else:
        dump = (lambda f: pickle.dump(payload, f)) if fmt == "detectron2" else (lambda f: torch.save(payload, f))
    write_atomic(weights, dump)  # a reader never loads half a file
    meta_path = weights.with_name(weights.name + ".json")
    git = (record or {}).get("git") or {}
    meta = {"source_run": run_id, "format": fmt, "container": container, "backbone": backbone.name,
            "family": backbone.family, "weights": weights.name,
            "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(), "load": rebuild,
            **{k: (record or {}).get(k) for k in ("table", "row", "profile", "seed")},
            "finished": record is not None, "metrics": (record or {}).get("metrics"),
            "code_commit": git.get("commit"), "code_dirty": git.get("dirty"), "config": config}
    write_json_atomic(meta_path, meta)
    return weights, meta_path
