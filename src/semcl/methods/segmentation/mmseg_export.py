"""MMSegmentation configs for the gpaco/seg rows' official recipes (UperNet-Swin, DeepLabV3+ R-18/50/101).

    python -m semcl.methods.segmentation.mmseg_export --out DIR [--data-root ROOT] [--run CONFIG]

writes one config per row (baseline and +GPaCo) and `gpaco_mmseg_plugin.py`, the plug-in that adds
GPaCo's pixel loss (semcl.losses.gpaco_seg, docs/papers/paco.md §c.7) to a decode head: the head's `cls_seg`
input (the decoder feature) goes through a 3-layer 1x1 MLP to 128-d (two ConvModules with the head's
norm, SyncBN in the base configs, then a conv, as the official heads); the loss is added with weight 1.
The suite's own DeepLabV3 rows are stand-ins (no decoder, no auxiliary head, square resizes, epochs):
the reported values sit on these official-recipe rows.
The base configs are MMSegmentation 1.x's own (`mmseg::...`); check their names against the
installed version. `--run CONFIG` trains one through mmengine when mmsegmentation is installed and
stops with one line naming the missing package otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from semcl.files import write_text_atomic

_DLV3P = "deeplabv3plus/deeplabv3plus_"
_R101 = "pretrained='open-mmlab://resnet101_v1c', backbone=dict(depth=101), "
# COCO-Stuff-10k has no DeepLabV3+ config in mmseg 1.x: the official config's own base files
# (PCL GPaCo/Seg/configs/paco_coco10k/*.py @fe56535), 4 GPUs x 4 images, 40k iterations, 512 x 512 crops
_COCO10K = ("_base_/models/deeplabv3plus_r50-d8.py", "_base_/datasets/coco-stuff10k.py",
            "_base_/default_runtime.py", "_base_/schedules/schedule_40k.py")
_COCO10K_MODEL = ("data_preprocessor=dict(size=(512, 512)), decode_head=dict(num_classes=171), "
                  "auxiliary_head=dict(num_classes=171)")

# row label (without "Baseline " / "GPaCo ") -> (mmseg 1.x base configs, model overrides, GPaCo alpha):
# the official recipes of PCL GPaCo/Seg/configs/paco_* @fe56535 (alphas: docs/papers/paco.md §c.7); the Swin rows
# crop 512 x 512 as the official configs (Swin-L included: window12, ImageNet-22k 384 pre-training)
ROWS = {
    "ADE20K Swin-T (UperNet)": (("swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py",), "",
                                0.01),
    "ADE20K Swin-B (UperNet)": (
        ("swin/swin-base-patch4-window12-in22k-384x384-pre_upernet_8xb2-160k_ade20k-512x512.py",), "", 0.01),
    "ADE20K Swin-L (UperNet)": (
        ("swin/swin-large-patch4-window12-in22k-384x384-pre_upernet_8xb2-160k_ade20k-512x512.py",), "", 0.01),
    "COCO-Stuff-10k ResNet-50 (DeepLabV3+)": (_COCO10K, _COCO10K_MODEL, 0.01),
    "COCO-Stuff-10k ResNet-101 (DeepLabV3+)": (_COCO10K, _R101 + _COCO10K_MODEL, 0.01),
    # mmseg's Context-59 configs: lr 0.004, wd 1e-4, 480 crops, slide test 480 / 320 (as the official ones)
    "Pascal Context 59 ResNet-50 (DeepLabV3+)": ((_DLV3P + "r50-d8_4xb4-40k_pascal-context-59-480x480.py",), "",
                                                 0.01),
    "Pascal Context 59 ResNet-101 (DeepLabV3+)": ((_DLV3P + "r101-d8_4xb4-40k_pascal-context-59-480x480.py",), "",
                                                  0.01),
    "Cityscapes ResNet-18 (DeepLabV3+)": ((_DLV3P + "r18-d8_4xb2-80k_cityscapes-512x1024.py",), "", 0.01),
    "Cityscapes ResNet-50 (DeepLabV3+)": ((_DLV3P + "r50-d8_4xb2-80k_cityscapes-512x1024.py",), "", 0.03),
    "Cityscapes ResNet-101 (DeepLabV3+)": ((_DLV3P + "r101-d8_4xb2-80k_cityscapes-512x1024.py",), "", 0.02),
}
HEADS = {"UperNet": "GPaCoUPerHead", "DeepLabV3+": "GPaCoDepthwiseSeparableASPPHead"}
MISSING = "mmsegmentation is not installed: pip install 'mmsegmentation>=1.0' mmcv (needed for the mmseg_seg rows)"

PLUGIN = '''"""GPaCo auxiliary pixel loss as an MMSegmentation 1.x plug-in (written by semcl mmseg_export)."""
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn import ConvModule
from mmseg.models.decode_heads import DepthwiseSeparableASPPHead, UPerHead
from mmseg.registry import MODELS

from semcl.losses.gpaco_seg import gpaco_pixel_loss


class _GPaCoMixin:
    def _gpaco_init(self, alpha=0.01, tau=0.07, num_samples=8192, embed_dim=128, loss_weight=1.0):
        c = self.channels
        self.gpaco = dict(alpha=alpha, tau=tau, num_samples=num_samples, weight=loss_weight)
        # as the official heads: ConvModules with the head's own conv/norm/act configs (SyncBN in the configs)
        conv = dict(conv_cfg=self.conv_cfg, norm_cfg=self.norm_cfg, act_cfg=self.act_cfg, inplace=False)
        self.gpaco_mlp = nn.Sequential(ConvModule(c, c, 1, **conv), ConvModule(c, c, 1, **conv),
                                       nn.Conv2d(c, embed_dim, 1))

    def cls_seg(self, feat):
        self._gpaco_feat = feat  # the decoder feature the classifier reads
        return super().cls_seg(feat)

    def loss_by_feat(self, seg_logits, batch_data_samples):
        losses = super().loss_by_feat(seg_logits, batch_data_samples)
        feat = self._gpaco_feat
        labels = self._stack_batch_gt(batch_data_samples).float()
        labels = F.interpolate(labels, size=feat.shape[-2:], mode="nearest")[:, 0].long()
        labels[labels == self.ignore_index] = self.out_channels  # >= C: ignored by the loss
        g = self.gpaco
        losses["loss_gpaco"] = g["weight"] * gpaco_pixel_loss(self.gpaco_mlp(feat), seg_logits, labels,
                                                              alpha=g["alpha"], tau=g["tau"],
                                                              num_samples=g["num_samples"])
        return losses


@MODELS.register_module()
class GPaCoUPerHead(_GPaCoMixin, UPerHead):
    def __init__(self, gpaco=None, **kwargs):
        super().__init__(**kwargs)
        self._gpaco_init(**(gpaco or {}))


@MODELS.register_module()
class GPaCoDepthwiseSeparableASPPHead(_GPaCoMixin, DepthwiseSeparableASPPHead):
    def __init__(self, gpaco=None, **kwargs):
        super().__init__(**kwargs)
        self._gpaco_init(**(gpaco or {}))
'''


def slug(label: str) -> str:
    return "".join(ch.lower() if ch.isalnum() else "_" for ch in label).strip("_").replace("__", "_")


def config_text(label: str, gpaco: bool, data_root: str | None) -> str:
    """One mmseg config: the row's base config, plus (gpaco) the plug-in head with the row's alpha."""
    bases, model, alpha = ROWS[label]
    lines = [f"# gpaco/seg row: {'GPaCo' if gpaco else 'Baseline'} {label} (written by semcl mmseg_export)",
             "_base_ = [" + ", ".join(f"'mmseg::{base}'" for base in bases) + "]"]
    head = ""
    if gpaco:
        head = (f"type='{HEADS['UperNet' if 'UperNet' in label else 'DeepLabV3+']}', gpaco=dict(alpha={alpha}, "
                "tau=0.07, num_samples=8192, embed_dim=128, loss_weight=1.0)")
        lines.append("custom_imports = dict(imports=['gpaco_mmseg_plugin'], allow_failed_imports=False)")
    if model or head:
        if head and "decode_head=dict(" in model:  # one decode_head dict holds both
            model = model.replace("decode_head=dict(", f"decode_head=dict({head}, ")
        elif head:
            model = f"{model}, decode_head=dict({head})" if model else f"decode_head=dict({head})"
        lines.append(f"model = dict({model})")
    if data_root:
        lines.append(f"train_dataloader = dict(dataset=dict(data_root='{data_root}'))")
        lines.append(f"val_dataloader = dict(dataset=dict(data_root='{data_root}'))")
        lines.append("test_dataloader = val_dataloader")
    return "\n".join(lines) + "\n"


def export(out: Path, data_root: str | None = None) -> list[Path]:
    """Write every row's two configs and the plug-in into `out`; returns the config paths."""
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "gpaco_mmseg_plugin.py", PLUGIN)
    paths = []
    for label in ROWS:
        for gpaco in (False, True):
            path = out / f"{'gpaco' if gpaco else 'baseline'}_{slug(label)}.py"
            write_text_atomic(path, config_text(label, gpaco, data_root))
            paths.append(path)
    return paths


def run(config: Path, work_dir: Path) -> None:
    """Train `config` through mmengine (the plug-in's folder on sys.path); one line if mmseg is missing."""
    if importlib.util.find_spec("mmseg") is None:
        raise SystemExit(MISSING)
    import sys

    from mmengine.config import Config
    from mmengine.runner import Runner

    sys.path.insert(0, str(config.parent))
    cfg = Config.fromfile(str(config))
    cfg.work_dir = str(work_dir)
    Runner.from_cfg(cfg).train()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--data-root", default=None)
    p.add_argument("--run", type=Path, default=None, help="a written config to train")
    a = p.parse_args(argv)
    for path in export(a.out, a.data_root):
        print(path)
    if a.run:
        run(a.run, a.out / "work_dirs" / a.run.stem)


if __name__ == "__main__":
    main()
