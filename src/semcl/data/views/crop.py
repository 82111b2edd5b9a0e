"""Batched geometric augmentation: RandomResizedCrop boxes, crop+flip resampling, padded crops, resize.

All randomness comes from an explicit ``torch.Generator``; draws are made on the
generator's device and then moved, so a CPU generator gives the same boxes whatever
device the images are on.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

_TRIES = 10  # torchvision's RandomResizedCrop.get_params tries this many boxes


def _uniform(shape: tuple[int, ...], lo: float, hi: float, gen: torch.Generator) -> torch.Tensor:
    return torch.rand(shape, generator=gen, device=gen.device, dtype=torch.float64) * (hi - lo) + lo


def sample_crop_boxes(n: int, height: int, width: int, scale: tuple[float, float],
                      ratio: tuple[float, float], gen: torch.Generator) -> torch.Tensor:
    """Per-sample crop boxes ``[n, 4]`` as int64 ``(top, left, h, w)``, RandomResizedCrop-style.

    Follows torchvision's ``get_params`` for each sample: up to ten tries of an area
    fraction uniform in ``scale`` and a log-uniform aspect ratio, the first box that fits
    wins, with the position uniform over valid integer offsets; if none fits, a centred
    box clamped to the ratio range. Vectorised: all ten tries are drawn for every sample
    at once (so the generator stream differs from torchvision's, not the distribution).
    Rounding uses round-half-to-even, like Python's ``round`` in torchvision.
    """
    area = float(height * width)
    target = area * _uniform((n, _TRIES), scale[0], scale[1], gen)
    aspect = torch.exp(_uniform((n, _TRIES), math.log(ratio[0]), math.log(ratio[1]), gen))
    w = torch.round(torch.sqrt(target * aspect)).long()
    h = torch.round(torch.sqrt(target / aspect)).long()
    ok = (w > 0) & (w <= width) & (h > 0) & (h <= height)
    first = ok.to(torch.int8).argmax(dim=1, keepdim=True)  # index of the first fitting try
    found = ok.any(dim=1)
    w = w.gather(1, first).squeeze(1)
    h = h.gather(1, first).squeeze(1)

    # Fallback: the whole image, trimmed to the nearest allowed aspect ratio.
    in_ratio = width / height
    if in_ratio < min(ratio):
        fw, fh = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        fw, fh = int(round(height * max(ratio))), height
    else:
        fw, fh = width, height
    w = torch.where(found, w, torch.full_like(w, fw))
    h = torch.where(found, h, torch.full_like(h, fh))

    # Offsets uniform over {0, ..., H - h}; floor(u * (H - h + 1)) matches randint.
    u = torch.rand((n, 2), generator=gen, device=gen.device, dtype=torch.float64)
    top = torch.floor(u[:, 0] * (height - h + 1)).long().clamp_(max=height - h)
    left = torch.floor(u[:, 1] * (width - w + 1)).long().clamp_(max=width - w)
    top = torch.where(found, top, (height - h) // 2)
    left = torch.where(found, left, (width - w) // 2)
    return torch.stack([top, left, h, w], dim=1)


def crop_flip(images: torch.Tensor, boxes: torch.Tensor, flip: torch.Tensor,
              size: int) -> torch.Tensor:
    """Resample box ``(top, left, h, w)`` of each image to ``size``², mirrored where ``flip``.

    ``images`` is float ``[B, C, H, W]``. One ``grid_sample`` does crop, resize
    and flip: output pixel centre ``u`` reads input position ``left + (u + ½)·w/size − ½``
    (the align_corners=False convention, so a full-image box at the input size is the
    identity). Flipping negates the x scale, which is the same as flipping the crop.

    Differences from torchvision's tensor ``resized_crop``: bilinear taps at the box edge
    read the real neighbouring pixels instead of clamping to the cropped patch (only
    the outer half-pixel ring differs), and there is no antialiasing filter, which
    matters only when a box is larger than ``size`` (downscaling; never the case for
    32×32 CIFAR crops at size 32). Image-border taps clamp (``padding_mode="border"``).
    """
    b, _, height, width = images.shape
    boxes = boxes.to(device=images.device, dtype=images.dtype)
    top, left, h, w = boxes.unbind(1)
    # Normalised output pixel centres; the map is axis-aligned, so the sampling grid is
    # an outer combination of one x row and one y column per sample (much cheaper than
    # affine_grid's general [size², 3] × [3, 2] product).
    centres = (torch.arange(size, device=images.device, dtype=images.dtype) * 2 + 1) / size - 1
    sx = torch.where(flip.to(images.device), -w, w) / width
    gx = sx[:, None] * centres + ((2 * left + w) / width - 1)[:, None]  # [B, size]
    gy = (h / height)[:, None] * centres + ((2 * top + h) / height - 1)[:, None]
    grid = torch.stack((gx[:, None, :].expand(b, size, size),
                        gy[:, :, None].expand(b, size, size)), dim=-1)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="border",
                         align_corners=False)


def pad_crop_flip(images: torch.Tensor, offsets: torch.Tensor, flip: torch.Tensor, pad: int) -> torch.Tensor:
    """torchvision's RandomCrop(size, padding=pad) + mirror, batched, at the input size ``S``.

    ``images`` float ``[B, C, S, S]`` are zero-padded by ``pad`` on every side (torchvision pads the
    uint8 image with fill 0, i.e. black before normalisation); sample b keeps rows
    ``offsets[b, 0] + [0, S)`` and columns ``offsets[b, 1] + [0, S)`` of the padded image
    (``offsets`` int64 ``[B, 2]`` in ``[0, 2·pad]``), its columns reversed where ``flip``. Pure
    indexing: no interpolation, the output is the same pixels torchvision keeps.
    """
    b, c, height, width = images.shape
    padded = F.pad(images, (pad, pad, pad, pad))
    dev = images.device
    offsets = offsets.to(dev)
    rows = offsets[:, :1] + torch.arange(height, device=dev)  # [B, S]
    cols = offsets[:, 1:] + torch.arange(width, device=dev)
    cols = torch.where(flip.to(dev).view(-1, 1), cols.flip(1), cols)
    batch = torch.arange(b, device=dev).view(-1, 1, 1)
    # advanced indexing on dims 0, 2, 3 puts the channel dim last: [B, S, S, C]
    return padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)


def resize(images: torch.Tensor, size: int) -> torch.Tensor:
    """Bilinear antialiased resize of float ``[B, C, H, W]`` to ``size``² (no-op if equal)."""
    if images.shape[-2:] == (size, size):
        return images
    return F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False,
                         antialias=True)
