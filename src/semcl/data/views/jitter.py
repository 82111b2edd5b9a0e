"""Batched colour operations with one factor per sample, matching torchvision's definitions.

Every function takes float images ``[B, C, H, W]`` in ``[0, 1]`` and a factor tensor
``[B]`` and computes what ``torchvision.transforms.functional.adjust_*`` computes for
each image with its own factor (tensor backend): brightness scales, contrast blends
with the mean of the grayscale image, saturation blends with the grayscale image, hue
rotates H in HSV. Results are clamped to ``[0, 1]`` after each op, as torchvision does.
One-channel images support brightness and contrast; saturation and hue are identities
on them (there is no colour to change), again as in torchvision.
"""

from __future__ import annotations

import torch

# ITU-R 601-2 luma weights, the ones torchvision's rgb_to_grayscale uses for tensors.
_LUMA = (0.2989, 0.587, 0.114)


def _per_sample(factor: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
    return factor.to(device=images.device, dtype=images.dtype).view(-1, 1, 1, 1)


def rgb_to_grayscale(images: torch.Tensor) -> torch.Tensor:
    """Luma ``[B, 1, H, W]`` of RGB ``[B, 3, H, W]`` (identity on one-channel images)."""
    if images.shape[1] == 1:
        return images
    r, g, b = images.unbind(1)
    return (_LUMA[0] * r + _LUMA[1] * g + _LUMA[2] * b).unsqueeze(1)


def _blend(images: torch.Tensor, other: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """``clamp(f·img + (1 − f)·other)``, torchvision's ``_blend`` with per-sample ``f``."""
    f = _per_sample(factor, images)
    return (f * images + (1.0 - f) * other).clamp_(0.0, 1.0)


def adjust_brightness(images: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Scale intensities by ``factor`` (a blend with black)."""
    return (images * _per_sample(factor, images)).clamp_(0.0, 1.0)


def adjust_contrast(images: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Blend each image with the mean of its grayscale version."""
    mean = rgb_to_grayscale(images).mean(dim=(1, 2, 3), keepdim=True)
    return _blend(images, mean, factor)


def adjust_saturation(images: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Blend each RGB image with its grayscale version; identity on one channel."""
    if images.shape[1] == 1:
        return images
    return _blend(images, rgb_to_grayscale(images), factor)


def _indicator(d: torch.Tensor) -> torch.Tensor:
    """1.0 where ``d == 0``, else 0.0, for ``d`` in ``[0, 1]``.

    ``ceil`` maps (0, 1] to 1 and 0 to 0 exactly. Used instead of comparisons and
    ``torch.where``, which run unvectorised on some CPU builds (~10× slower per element).
    """
    return 1.0 - torch.ceil(d)


def _hue6(images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Hue in sixths of a turn (``[0, 6)``), min and chroma (max − min) of RGB ``[B, 3, H, W]``.

    Same hexcone model as torchvision's ``_rgb2hsv``: hue is read off whichever channel is
    the maximum, with red winning ties, then green; gray pixels get hue 0.
    """
    r, g, b = images.unbind(1)
    maxc = images.amax(dim=1)
    minc = images.amin(dim=1)
    chroma = maxc - minc
    is_r = _indicator(maxc - r)
    is_g = (1.0 - is_r) * _indicator(maxc - g)
    is_b = 1.0 - is_r - is_g
    # Gray pixels (chroma 0) take the red branch with numerator g − b = 0, so clamping
    # the divisor is enough to give them hue 0.
    h = (is_r * (g - b) + is_g * (2.0 * chroma + (b - r)) + is_b * (4.0 * chroma + (r - g)))
    h = h / chroma.clamp(min=1e-12)
    return _wrap6(h), minc, chroma


def _wrap6(h6: torch.Tensor) -> torch.Tensor:
    """``h6 mod 6`` in ``[0, 6)``, via floor (vectorised) rather than ``remainder``."""
    return h6 - 6.0 * torch.floor(h6 * (1.0 / 6.0))


# Piecewise-linear share of the chroma each channel gets at hue h6 (in sixths):
# clamp(a·|h6 − o| + c, 0, 1) with (o, a, c) per channel. Red: |h6 − 3| − 1 (full on
# [0, 1] ∪ [5, 6]); green: 2 − |h6 − 2| (full on [1, 3]); blue: 2 − |h6 − 4| (full on
# [3, 5]). This is the hexcone's HSV→RGB map, piecewise-identical to torchvision's
# six-sector table lookup, but computed on all three channels at once without masks.
_HUE_OFFSET = torch.tensor([3.0, 2.0, 4.0]).view(1, 3, 1, 1)
_HUE_SLOPE = torch.tensor([1.0, -1.0, -1.0]).view(1, 3, 1, 1)
_HUE_BIAS = torch.tensor([-1.0, 2.0, 2.0]).view(1, 3, 1, 1)


def _from_hue6(h6: torch.Tensor, minc: torch.Tensor, chroma: torch.Tensor) -> torch.Tensor:
    """RGB ``[B, 3, H, W]`` from hue in ``[0, 6)``, min and chroma (each ``[B, H, W]``)."""
    dev, dt = h6.device, h6.dtype
    share = (h6.unsqueeze(1) - _HUE_OFFSET.to(dev, dt)).abs_()
    share.mul_(_HUE_SLOPE.to(dev, dt)).add_(_HUE_BIAS.to(dev, dt)).clamp_(0.0, 1.0)
    return share.mul_(chroma.unsqueeze(1)).add_(minc.unsqueeze(1)).clamp_(0.0, 1.0)


def rgb_to_hsv(images: torch.Tensor) -> torch.Tensor:
    """RGB → HSV, all channels in ``[0, 1]``."""
    h6, minc, chroma = _hue6(images)
    maxc = minc + chroma
    s = chroma / torch.where(chroma == 0, torch.ones_like(maxc), maxc)
    return torch.stack((h6 / 6.0, s, maxc), dim=1)


def hsv_to_rgb(images: torch.Tensor) -> torch.Tensor:
    """HSV ``[B, 3, H, W]`` → RGB, inverse of :func:`rgb_to_hsv`."""
    h, s, v = images.unbind(1)
    chroma = v * s
    return _from_hue6(_wrap6(h * 6.0), v - chroma, chroma)


def adjust_hue(images: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Rotate hue by ``factor`` turns (in ``[-0.5, 0.5]``); identity on one channel.

    Hue rotation keeps each pixel's min and chroma, so the round trip goes through
    (hue, min, chroma) directly and never forms the saturation.
    """
    if images.shape[1] == 1:
        return images
    h6, minc, chroma = _hue6(images)
    h6 = _wrap6(h6 + 6.0 * _per_sample(factor, images).view(-1, 1, 1))
    return _from_hue6(h6, minc, chroma)


def grayscale_like(images: torch.Tensor) -> torch.Tensor:
    """Grayscale with the input's channel count (what RandomGrayscale outputs)."""
    return rgb_to_grayscale(images).expand_as(images)


# Op ids used by the jitter scheduler in augment.py, in torchvision's ColorJitter order.
BRIGHTNESS, CONTRAST, SATURATION, HUE = range(4)
JITTER_OPS = (adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue)
