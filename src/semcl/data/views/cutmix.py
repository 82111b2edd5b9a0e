"""CutMix between an anchor and its kNN positive (HSA / CsMl, docs/papers/hsa.md §c.4).

    x_mix = M * x_a + (1 - M) * x_p,   M in {0, 1}^{H x W}

M is 0 inside one rectangle, so that region of the anchor is replaced by the same region of its
neighbour. The box follows CutMix (Yun et al. 2019): lambda0 ~ Beta(alpha, alpha); side lengths
floor(H * sqrt(1 - lambda0)) and floor(W * sqrt(1 - lambda0)); centre uniform over the pixels; corners
centre -/+ side // 2, clipped to the image. The returned lambda is the anchor's *kept* fraction after the
clipping, lambda = 1 - box_area / (H * W), which weights the mixed query's two positives.

alpha: 1 in the paper, 2.0 in the official code (its default flag, never overridden by the scripts).
Granularity: the official code draws one box and one lambda per mini-batch (``mode="batch"``, the
suite default since the paper is silent); ``mode="sample"`` draws one per sample (named variant). Under
DDP the official mini-batch is one process's (CSML main_moco.py:123-127, each mp.spawn process with its
own NumPy RNG), so the caller passes each rank its own generator (``Batch.mixing_generator``): one box
per rank and step, 32 on the paper's 32 GPUs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

MODES = ("batch", "sample")


class Mixed(NamedTuple):
    """``images`` [B, C, H, W]; ``lam`` float64 [B], the anchor's kept fraction per sample; ``boxes``
    int64 [B, 4] rows ``(y1, y2, x1, x2)``, the half-open region taken from the neighbour."""

    images: torch.Tensor
    lam: torch.Tensor
    boxes: torch.Tensor


def sample_beta(alpha: float, n: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` draws of Beta(alpha, alpha) as float64, determined by ``generator``.

    torch's Beta/Gamma samplers take no generator, so one 62-bit seed is drawn from ``generator`` and
    handed to numpy's Beta sampler: the draws stay a function of the epoch's generator.
    """
    if alpha <= 0:
        raise ValueError(f"CutMix alpha must be positive, got {alpha}")
    seed = int(torch.randint(2**62, (1,), generator=generator))
    return torch.from_numpy(np.random.default_rng(seed).beta(alpha, alpha, size=n))


def box_from_lam(
    height: int, width: int, lam: torch.Tensor, cy: torch.Tensor, cx: torch.Tensor
) -> torch.Tensor:
    """CutMix boxes ``(y1, y2, x1, x2)`` [n, 4] for Beta draws ``lam`` [n] and centres ``cy``, ``cx`` [n]."""
    ratio = torch.sqrt(1.0 - lam.double())
    cut_h = torch.floor(height * ratio).long()
    cut_w = torch.floor(width * ratio).long()
    y1 = (cy - cut_h // 2).clamp(0, height)
    y2 = (cy + cut_h // 2).clamp(0, height)
    x1 = (cx - cut_w // 2).clamp(0, width)
    x2 = (cx + cut_w // 2).clamp(0, width)
    return torch.stack([y1, y2, x1, x2], dim=1)


def kept_fraction(boxes: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """lambda = (H*W - box area) / (H*W) as float64 [n]: the share of anchor pixels after clipping."""
    area = (boxes[:, 1] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 2])
    total = height * width
    return (total - area).double() / total


class Cut(NamedTuple):
    """One step's CutMix draws, made on the host (`draw_cut`): ``inside`` bool [B, H, W] (the neighbour's pixels),
    ``lam`` float64 [B] and ``boxes`` int64 [B, 4] as in `Mixed`."""

    inside: torch.Tensor
    lam: torch.Tensor
    boxes: torch.Tensor


def draw_cut(batch: int, height: int, width: int, generator: torch.Generator, *, alpha: float = 1.0,
             mode: str = "batch") -> Cut:
    """The boxes of a CutMix over ``batch`` images of ``height`` x ``width``, drawn from ``generator`` (host work:
    the draws' values steer Python, numpy's seed). Draw order: the Beta seed, then the box centres (cy for all
    boxes, then cx)."""
    if mode not in MODES:
        raise ValueError(f"unknown CutMix mode {mode!r}; known: {', '.join(MODES)}")
    n = 1 if mode == "batch" else batch
    lam0 = sample_beta(alpha, n, generator)
    cy = torch.randint(height, (n,), generator=generator)
    cx = torch.randint(width, (n,), generator=generator)
    boxes = box_from_lam(height, width, lam0, cy, cx).expand(batch, 4).contiguous()   # one box -> all rows
    ys = torch.arange(height)[None, :, None]
    xs = torch.arange(width)[None, None, :]
    b = boxes[:, :, None, None]
    inside = (ys >= b[:, 0]) & (ys < b[:, 1]) & (xs >= b[:, 2]) & (xs < b[:, 3])   # [B, H, W]
    return Cut(inside, kept_fraction(boxes, height, width), boxes)


def paste(anchor: torch.Tensor, neighbour: torch.Tensor, cut: Cut) -> Mixed:
    """``anchor`` with ``cut``'s boxes taken from ``neighbour`` (both [B, C, H, W], same shape; device work)."""
    if anchor.shape != neighbour.shape or anchor.ndim != 4:
        raise ValueError(f"anchor and neighbour must be equal [B, C, H, W], got {tuple(anchor.shape)} "
                         f"and {tuple(neighbour.shape)}")
    images = torch.where(cut.inside[:, None].to(anchor.device), neighbour, anchor)
    return Mixed(images, cut.lam, cut.boxes)


def cutmix(
    anchor: torch.Tensor,
    neighbour: torch.Tensor,
    generator: torch.Generator,
    *,
    alpha: float = 1.0,
    mode: str = "batch",
) -> Mixed:
    """Paste a CutMix box of ``neighbour`` into ``anchor`` (both [B, C, H, W], same shape): `draw_cut`, then
    `paste`. The inputs are not modified."""
    if anchor.shape != neighbour.shape or anchor.ndim != 4:
        raise ValueError(f"anchor and neighbour must be equal [B, C, H, W], got {tuple(anchor.shape)} "
                         f"and {tuple(neighbour.shape)}")
    batch, _, height, width = anchor.shape
    return paste(anchor, neighbour, draw_cut(batch, height, width, generator, alpha=alpha, mode=mode))
