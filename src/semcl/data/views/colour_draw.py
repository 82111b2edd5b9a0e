"""The CPU part of a split colour view: draw every parameter of the view, run only its resized crop.

A colour view (`sim`, `sim_cifar`, `aug_cifar` of semcl.data.views.tvaugment) is a resized crop followed by
per-pixel colour steps, a blur and a flip. The crop needs the whole decoded image and stays in the
loader worker; the rest depends only on the crop and a few numbers per image, so it can run batched on
the training device (semcl.data.views.colour_finish). To give the very same pixels, the numbers are drawn
here by torchvision's own transform objects, in the order and with the calls its `Compose` makes,
from the same torch stream; only the pixel work is skipped.

The drawn numbers travel as one float64 record per image (float64 holds every float32 draw exactly),
so a batch of them collates by `torch.stack`.
"""

from __future__ import annotations

import torch
from torchvision.transforms import v2

# record layout: the jitter's four slots (op id per slot in torchvision's ColorJitter numbering,
# 0 brightness 1 contrast 2 saturation 3 hue; -1 = nothing), its four factors, then the coins
ORDER = slice(0, 4)
FACTORS = slice(4, 8)
GRAY, BLUR, SIGMA, FLIP = 8, 9, 10, 11
RECORD = 12

# the steps a finish can run after the crop, named as the finish names them
JITTER, GREY, BLUR_STEP, FLIP_STEP = "jitter", "grey", "blur", "flip"


def _jitter_of(step: object) -> v2.ColorJitter | None:
    if isinstance(step, v2.ColorJitter):
        return step
    if isinstance(step, v2.RandomApply) and len(step.transforms) == 1 and isinstance(step.transforms[0], v2.ColorJitter):
        return step.transforms[0]
    return None


def _blur_of(step: object) -> v2.GaussianBlur | None:
    if isinstance(step, v2.RandomApply) and len(step.transforms) == 1 and isinstance(step.transforms[0], v2.GaussianBlur):
        return step.transforms[0]
    return None


def program_of(transform: object) -> tuple[tuple[str, ...], int] | None:
    """(the finish's steps in the recipe's order, the blur's kernel size) of a torchvision Compose that is a
    RandomResizedCrop followed only by colour jitter, grayscale, blur and flip; None for any other pipeline
    (RandAugment, AutoAugment, ... have no batched equal and keep the per-image path)."""
    steps = list(getattr(transform, "transforms", ()))
    if not steps or not isinstance(steps[0], v2.RandomResizedCrop) or not isinstance(transform, v2.Compose):
        return None
    program, kernel = [], 0
    for step in steps[1:]:
        if _jitter_of(step) is not None:
            program.append(JITTER)
        elif isinstance(step, v2.RandomGrayscale):
            program.append(GREY)
        elif (blur := _blur_of(step)) is not None:
            if blur.kernel_size[0] != blur.kernel_size[1]:
                return None
            program.append(BLUR_STEP)
            kernel = int(blur.kernel_size[0])
        elif isinstance(step, v2.RandomHorizontalFlip):
            program.append(FLIP_STEP)
        else:
            return None
    if len(set(program)) != len(program):
        return None  # one record slot per step kind
    return tuple(program), kernel


def _coin(p: float) -> bool:
    # torchvision's RandomApply / _RandomApplyTransform: skip when rand(1) >= p
    return not bool(torch.rand(1) >= p)


def draw_and_crop(transform: v2.Compose, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the view's resized crop, uint8 [C, S, S]; its record, float64 [RECORD]) of one uint8 [C, H, W]
    image, drawing from torch's default CPU stream exactly what `transform(image)` draws (the caller seeds
    it, as PerImageAugment does). The transform must pass `program_of`."""
    rec = torch.zeros(RECORD, dtype=torch.float64)
    rec[ORDER] = -1
    crop = image
    for step in transform.transforms:
        if isinstance(step, v2.RandomResizedCrop):
            crop = step.transform(image, step.make_params([image]))
        elif (jitter := _jitter_of(step)) is not None:
            if jitter is not step and not _coin(step.p):
                continue
            p = jitter.make_params([crop])
            factors = (p["brightness_factor"], p["contrast_factor"], p["saturation_factor"], p["hue_factor"])
            # a factor torchvision leaves None skips its slot, as ColorJitter.transform does
            rec[ORDER] = torch.tensor([int(i) if factors[int(i)] is not None else -1 for i in p["fn_idx"]],
                                      dtype=torch.float64)
            rec[FACTORS] = torch.tensor([0.0 if f is None else f for f in factors], dtype=torch.float64)
        elif isinstance(step, v2.RandomGrayscale):
            rec[GRAY] = float(_coin(step.p))
        elif (blur := _blur_of(step)) is not None:
            if _coin(step.p):
                rec[BLUR] = 1.0
                rec[SIGMA] = blur.make_params([crop])["sigma"][0]
        elif isinstance(step, v2.RandomHorizontalFlip):
            rec[FLIP] = float(_coin(step.p))
        else:
            raise ValueError(f"colour split: step {type(step).__name__} has no batched finish")
    return crop, rec
