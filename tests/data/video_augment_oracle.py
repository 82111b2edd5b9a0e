"""The clip augmentation as it was before its split into draw / apply (kept as the oracle of the split).

`augment_before_split(aug, clips, generator)` is ClipAugment.__call__ of that version, its random draws
interleaved with the ops: the split version must give the same tensors and leave the generator in the
same state (tests/data/test_video_augment.py, tests/data/test_clip_loader.py).
"""

from __future__ import annotations

import torch

from semcl.data.views.clip_augment import centre_boxes
from semcl.data.views.crop import crop_flip, sample_crop_boxes
from semcl.data.views.jitter import BRIGHTNESS, CONTRAST, HUE, JITTER_OPS, SATURATION, grayscale_like, rgb_to_grayscale


def _rand(n: int, gen: torch.Generator) -> torch.Tensor:
    return torch.rand(n, generator=gen, device=gen.device).cpu()


def _between(n: int, lo: float, hi: float, gen: torch.Generator) -> torch.Tensor:
    return _rand(n, gen) * (hi - lo) + lo


def _rows(clips: torch.Tensor, t: int) -> torch.Tensor:
    return (clips[:, None] * t + torch.arange(t)).flatten()


def _contrast_clip(x: torch.Tensor, factor: torch.Tensor, t: int) -> torch.Tensor:
    n = x.shape[0] // t
    mean = rgb_to_grayscale(x).view(n, -1).mean(dim=1).repeat_interleave(t).view(-1, 1, 1, 1)
    f = factor.to(x.dtype).view(-1, 1, 1, 1)
    return (f * x + (1.0 - f) * mean).clamp_(0.0, 1.0)


def _jitter(aug, x: torch.Tensor, b: int, t: int, gen: torch.Generator) -> torch.Tensor:
    r = aug.recipe
    chosen = _rand(b, gen) < r.jitter_p
    factors = {
        BRIGHTNESS: _between(b, 1 - r.brightness, 1 + r.brightness, gen),
        CONTRAST: _between(b, 1 - r.contrast, 1 + r.contrast, gen),
        SATURATION: _between(b, 1 - r.saturation, 1 + r.saturation, gen),
        HUE: _between(b, -r.hue, r.hue, gen),
    }
    order = torch.rand((b, 4), generator=gen, device=gen.device).argsort(dim=1).cpu()
    strengths = {BRIGHTNESS: r.brightness, CONTRAST: r.contrast, SATURATION: r.saturation, HUE: r.hue}
    active = [op for op, s in strengths.items() if s > 0 and (x.shape[1] == 3 or op in (BRIGHTNESS, CONTRAST))]
    for step in range(4):
        for op in active:
            clips = torch.nonzero(chosen & (order[:, step] == op)).squeeze(1)
            if not clips.numel():
                continue
            rows = _rows(clips, t).to(x.device)
            f = factors[op].index_select(0, clips).repeat_interleave(t).to(x.device)
            sub = x.index_select(0, rows)
            if op == CONTRAST and aug.contrast_mean == "clip":
                sub = _contrast_clip(sub, f, t)
            else:
                sub = JITTER_OPS[op](sub, f)
            x.index_copy_(0, rows, sub)
    return x


def augment_before_split(aug, clips: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    b, c, t, height, width = clips.shape
    r = aug.recipe
    x = clips.permute(0, 2, 1, 3, 4).reshape(b * t, c, height, width).float().div_(255.0)
    if r.crop_scale is not None:
        boxes = sample_crop_boxes(b, height, width, r.crop_scale, r.crop_ratio, generator).cpu()
    else:
        boxes = centre_boxes(b, height, width)
    flip = _rand(b, generator) < r.flip_p if r.flip_p > 0 else torch.zeros(b, dtype=torch.bool)
    x = crop_flip(x, boxes.repeat_interleave(t, 0), flip.repeat_interleave(t, 0).to(x.device), aug.size)
    if r.jitter_p > 0:
        x = _jitter(aug, x, b, t, generator)
    if r.gray_p > 0:
        gray = _rand(b, generator) < r.gray_p
        if c == 3:
            rows = _rows(torch.nonzero(gray).squeeze(1), t).to(x.device)
            x.index_copy_(0, rows, grayscale_like(x.index_select(0, rows)))
    mean = torch.tensor(aug.mean, device=x.device).view(1, -1, 1, 1)
    std = torch.tensor(aug.std, device=x.device).view(1, -1, 1, 1)
    x = x.sub_(mean).div_(std)
    return x.view(b, t, c, aug.size, aug.size).transpose(1, 2).contiguous()
