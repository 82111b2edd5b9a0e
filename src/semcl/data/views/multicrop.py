"""Small crops for multi-crop training (SwAV, Caron et al. 2020; HSA's "multi-crop augmentation").

`small_crop_view(aug, size, scale)` turns a run's view augmentation into its small-crop twin: the same
pipeline with the random-resized crop drawn from `scale` (area fraction) and resized to `size`. Batched
recipes (semcl.data.views.augment) get the crop scale and output size replaced; per-image recipes
(semcl.data.views.tvaugment) get their RandomResizedCrop step replaced (the other steps, e.g. the blur, are kept as
they are, as SwAV applies one pipeline to every crop size).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch

ViewFn = Callable[[torch.Tensor, torch.Generator], torch.Tensor]

SWAV_SMALL_SCALE = (0.05, 0.14)  # SwAV's small crops (its global crops use (0.14, 1); the recipe's scale is kept)
SWAV_SIZE_RATIO = 96 / 224  # small side over global side


def small_crop_view(aug: ViewFn, size: int, scale: Sequence[float] = SWAV_SMALL_SCALE) -> ViewFn:
    """The small-crop twin of `aug` (module docstring); ValueError for a recipe without a random crop."""
    from semcl.data.views.augment import Augment

    lo, hi = float(scale[0]), float(scale[1])
    if not 0 < lo <= hi <= 1:
        raise ValueError(f"multi-crop scale must satisfy 0 < min <= max <= 1, got {tuple(scale)}")
    if isinstance(aug, Augment):
        if aug.recipe.crop_scale is None:
            raise ValueError(f"multi-crop needs a recipe with a random crop, got {aug.recipe}")
        return Augment(dataclasses.replace(aug.recipe, crop_scale=(lo, hi)), size=size, mean=aug.mean, std=aug.std)
    from torchvision.transforms import v2

    from semcl.data.views.tvaugment import PerImageAugment

    if isinstance(aug, PerImageAugment) and isinstance(aug.transform, v2.Compose):
        steps = list(aug.transform.transforms)
        at = [i for i, s in enumerate(steps) if isinstance(s, v2.RandomResizedCrop)]
        if at:
            steps[at[0]] = v2.RandomResizedCrop(size, scale=(lo, hi), antialias=True)
            return PerImageAugment(v2.Compose(steps), mean=aug.mean.flatten().tolist(), std=aug.std.flatten().tolist())
    raise ValueError(f"multi-crop needs a view recipe with a random-resized crop, got {aug!r}")
