"""The segmentation methods: torchvision DeepLabV3 trained on label maps, optionally + GPaCo's pixel loss.

The engine hands a method image views and per-image labels; a segmenter instead reads each batch's
images and label maps from the training set by `batch.indices` (the views are not used), flips both
with the batch's generator, and normalises with the dataset statistics.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from semcl.data import stats
from semcl.data.sets.segmentation import IGNORE
from semcl.losses.gpaco_seg import gpaco_pixel_loss
from semcl.methods.base import Batch, DataInfo, Method, TrainContext
from semcl.methods.paco.method import init_backbone


class LabelMaps(NamedTuple):
    """A step's images [B, C, H, W] in [0, 1] and int64 label maps [B, H, W], read and flipped on the host."""

    images: torch.Tensor
    masks: torch.Tensor
    batch: Batch


class _TinyBackbone(nn.Module):
    """Three stride-2 conv blocks (output stride 8), for smoke runs."""

    out_channels = 32

    def __init__(self) -> None:
        super().__init__()
        layers, c = [], 3
        for out in (16, 32, 32):
            layers += [nn.Conv2d(c, out, 3, 2, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True)]
            c = out
        self.body = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> OrderedDict:
        return OrderedDict(out=self.body(x))


def build_deeplabv3(name: str, num_classes: int) -> nn.Module:
    """torchvision DeepLabV3, randomly initialised (ImageNet weights come from `model.pretrained`)."""
    from torchvision.models import segmentation as seg
    from torchvision.models.segmentation.deeplabv3 import DeepLabHead, DeepLabV3

    if name == "deeplabv3_tiny":
        return DeepLabV3(_TinyBackbone(), DeepLabHead(_TinyBackbone.out_channels, num_classes), None)
    fn = {"deeplabv3_resnet50": seg.deeplabv3_resnet50, "deeplabv3_resnet101": seg.deeplabv3_resnet101}[name]
    return fn(weights=None, weights_backbone=None, num_classes=num_classes, aux_loss=False)


class Segmenter(Method):
    """DeepLabV3 with pixel cross-entropy; `segment(x)` gives logits at the input size."""

    has_segmenter = True  # read by semcl.evals.protocols.segmentation

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        self.net = build_deeplabv3(m.segmenter, info.num_classes)
        self.backbone = self.net.backbone
        # ImageNet weights for the ResNet, from a torchvision/timm-layout state dict the user gives (the
        # official runs start from ImageNet-pretrained ResNets); nothing is downloaded
        init_backbone(self.backbone, cfg.model.pretrained, None)
        mean, std = stats(cfg.data.name)
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1), persistent=False)
        self.train_set = None

    def on_train_start(self, ctx: TrainContext) -> None:
        self.train_set = ctx.train_set

    def decode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(decoder feature [B, 256, h, w], logits [B, C, h, w]) at the backbone's output stride."""
        feat = self.net.backbone(x)["out"]
        *body, classifier = list(self.net.classifier)
        hidden = feat
        for module in body:  # ASPP -> 3x3 conv -> BN -> ReLU: the feature the classifier reads
            hidden = module(hidden)
        return hidden, classifier(hidden)

    def segment(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(self.decode(x)[1], size=x.shape[-2:], mode="bilinear", align_corners=False)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.net.backbone(x)["out"].mean((2, 3))

    def prepare(self, batch: Batch) -> LabelMaps:
        """The batch's images and label maps from the training set, flipped together at random."""
        idx = batch.indices
        images = self.train_set.images[idx].float() / 255.0
        masks = self.train_set.masks[idx].long()
        if self.cfg.method.flip:
            flip = torch.rand(len(idx), generator=batch.generator) < 0.5
            images[flip], masks[flip] = images[flip].flip(-1), masks[flip].flip(-1)
        return LabelMaps(images, masks, batch)

    def loss(self, inputs: LabelMaps) -> dict[str, torch.Tensor]:
        batch, device = inputs.batch, self.mean.device  # copied without waiting for the device's queue
        x = (inputs.images.to(device, non_blocking=True) - self.mean) / self.std
        y = inputs.masks.to(device, non_blocking=True)
        hidden, logits = self.decode(x)
        up = F.interpolate(logits, size=y.shape[-2:], mode="bilinear", align_corners=False)
        ce = F.cross_entropy(up, y, ignore_index=IGNORE)
        extra = self.extra_loss(hidden, logits, y, batch)
        return {"loss": ce + extra, "ce": ce.detach(), "aux": extra.detach()}

    def extra_loss(self, hidden, logits, labels, batch) -> torch.Tensor:
        return logits.new_zeros(())


class GPacoSegmenter(Segmenter):
    """+ GPaCo pixel loss on MLP(decoder feature), labels nearest-downsampled (docs/papers/paco.md §c.7)."""

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        c, d = 256, cfg.method.embed_dim  # DeepLabHead's hidden width
        self.mlp = nn.Sequential(nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True),
                                 nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True),
                                 nn.Conv2d(c, d, 1))

    def extra_loss(self, hidden, logits, labels, batch) -> torch.Tensor:
        m = self.cfg.method
        small = F.interpolate(labels[:, None].float(), size=hidden.shape[-2:], mode="nearest")[:, 0].long()
        z = self.mlp(hidden)
        return m.weight * gpaco_pixel_loss(z, logits, small, alpha=m.alpha, tau=m.tau, num_samples=m.num_samples,
                                           generator=batch.generator)
