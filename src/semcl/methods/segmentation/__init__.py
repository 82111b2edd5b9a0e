"""Semantic segmentation with and without GPaCo's auxiliary pixel loss (GPaCo Sec. IV-D, docs/papers/paco.md §c.7).

The in-suite segmenter is torchvision's DeepLabV3 (ResNet-50/101, or a tiny CNN for smoke tests): a
stand-in for the paper's MMSegmentation models (UperNet-Swin, DeepLabV3+), which
`semcl.methods.segmentation.mmseg_export` writes as ready-to-run mmseg configs.
"""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec

SEGMENTERS = frozenset({"deeplabv3_resnet50", "deeplabv3_resnet101", "deeplabv3_tiny"})


@dataclass
class SegBaselineMethod:
    """Pixel-wise cross-entropy (void 255 ignored) on the upsampled logits."""

    name: str = "seg_baseline"
    segmenter: str = "deeplabv3_resnet50"  # in-suite stand-in; the paper's models go through mmseg
    flip: bool = True  # random horizontal flip of image and label map (mmseg's RandomFlip 0.5)


@dataclass
class GPacoSegMethod:
    """Cross-entropy + GPaCo pixel loss (weight 1) on a 3-layer 1x1 MLP of the decoder feature."""

    name: str = "gpaco_seg"
    segmenter: str = "deeplabv3_resnet50"
    flip: bool = True
    alpha: float = 0.01  # ADE20K / COCO-Stuff-10k / Context-59 / Cityscapes R-18 (official configs, c.7)
    tau: float = 0.07
    num_samples: int = 8192  # sampled anchor pixels per image (-1: all)
    embed_dim: int = 128
    weight: float = 1.0  # added with weight 1 to the CE loss (official configs)

    def __post_init__(self) -> None:
        if self.num_samples == 0 or self.num_samples < -1:
            raise ValueError(f"num_samples must be -1 (all pixels) or positive, got {self.num_samples}")


_M = "semcl.methods.segmentation.method"
_BUILDER = f"{_M}:build_deeplabv3"
SEG_BASELINE = MethodSpec("seg_baseline", SegBaselineMethod, f"{_M}:Segmenter", choices={"segmenter": SEGMENTERS},
                          summary="DeepLabV3 (torchvision stand-in) with pixel cross-entropy",
                          losses=("torch.nn.functional:cross_entropy",), builder=_BUILDER)
GPACO_SEG = MethodSpec("gpaco_seg", GPacoSegMethod, f"{_M}:GPacoSegmenter", choices={"segmenter": SEGMENTERS},
                       summary="DeepLabV3 (torchvision stand-in) + GPaCo auxiliary pixel loss",
                       losses=("torch.nn.functional:cross_entropy", "semcl.losses.gpaco_seg:gpaco_pixel_loss"),
                       builder=_BUILDER, head_layers=3)  # GPacoSegmenter.mlp: three 1x1 convolutions
