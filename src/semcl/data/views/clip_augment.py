"""Clip augmentation: one set of random parameters per clip, applied to all of its frames at once.

RINCE video (docs/papers/rince.md §d.3): random-sized crop to 128×128, horizontal flip, colour jitter, random
colour drop (grey). Strengths are not given; the default ``VIDEO_RECIPE`` is the image recipe of
the same paper (``supcon``: scale (0.2, 1), ratio (3/4, 4/3), flip 0.5, ColorJitter(0.4, 0.4,
0.4, 0.1) with p = 0.8, grey p = 0.2) -- a named assumption.

A batch ``[B, C, T, H, W]`` is viewed as ``B·T`` images; every per-clip draw (crop box, flip,
jitter factors and op order, grey) is repeated over the clip's ``T`` frames and the batched
image ops of semcl.data.views.crop / semcl.data.views.jitter run once on all frames. Contrast blends with
the mean grey level of the whole clip (``contrast_mean="clip"``, default), so the clip gets one
affine intensity map; ``"frame"`` uses each frame's own mean, which is what torchvision's
``adjust_contrast`` does on a ``[T, C, H, W]`` video tensor.

The draws depend only on the batch size and the frame size, so they are split from the ops:
``draw(b, h, w, generator)`` takes every random number (in the order the one-call form always took
them) and ``apply(clips, params)`` runs the ops wherever the uint8 clips are (a GPU), then
``normalise``. ``aug(clips, generator)`` is the three in a row. The video loader
(semcl.data.views.clip_loader) draws in the training process, decodes in workers and applies on the
training device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from semcl.data.views.augment import RECIPES, Recipe
from semcl.data.views.crop import crop_flip, sample_crop_boxes
from semcl.data.views.jitter import BRIGHTNESS, CONTRAST, HUE, JITTER_OPS, SATURATION, grayscale_like, rgb_to_grayscale

VIDEO_RECIPE = RECIPES["supcon"]
TEST_RECIPE = Recipe()
# torchvision's video models (r3d_18) were trained on Kinetics-400 with these statistics.
KINETICS_STATS = ((0.43216, 0.394666, 0.37645), (0.22803, 0.22145, 0.216989))


def _rand(n: int, gen: torch.Generator) -> torch.Tensor:
    return torch.rand(n, generator=gen, device=gen.device).cpu()


def _between(n: int, lo: float, hi: float, gen: torch.Generator) -> torch.Tensor:
    return _rand(n, gen) * (hi - lo) + lo


def centre_boxes(n: int, height: int, width: int) -> torch.Tensor:
    """``[n, 4]`` (top, left, h, w) of the largest centred square."""
    side = min(height, width)
    box = torch.tensor([(height - side) // 2, (width - side) // 2, side, side], dtype=torch.int64)
    return box.expand(n, 4).clone()


@dataclass(frozen=True)
class ClipParams:
    """One batch's augmentation draws, one entry per clip; ``jitter`` is None where the recipe has no
    colour jitter (then ``factors`` and ``order`` are None too), ``gray`` None without colour drop."""

    frame_size: tuple[int, int]  # (h, w) of the frames the boxes were drawn for
    boxes: torch.Tensor  # int64 [B, 4] (top, left, h, w)
    flip: torch.Tensor  # bool [B]
    jitter: torch.Tensor | None = None  # bool [B]: the clip is colour-jittered
    factors: dict[int, torch.Tensor] | None = None  # jitter op -> [B] factors
    order: torch.Tensor | None = None  # int64 [B, 4]: the clip's op at each of the four steps
    gray: torch.Tensor | None = None  # bool [B]

    def __len__(self) -> int:
        return self.boxes.shape[0]

    def part(self, rows: slice) -> ClipParams:
        """The draws of clips ``rows`` (a rank's slice of the global batch)."""
        def cut(x):
            return None if x is None else x[rows]
        factors = None if self.factors is None else {op: f[rows] for op, f in self.factors.items()}
        return ClipParams(self.frame_size, self.boxes[rows], self.flip[rows], cut(self.jitter), factors,
                          cut(self.order), cut(self.gray))


class ClipAugment:
    """Callable ``(uint8 [B, C, T, H, W], generator) → float32 [B, C, T, size, size]``, normalised.

    Without a crop scale (the test recipe) each frame's centred square is resized to ``size``.
    """

    def __init__(self, recipe: Recipe = VIDEO_RECIPE, *, size: int = 128,
                 mean: Sequence[float] = KINETICS_STATS[0], std: Sequence[float] = KINETICS_STATS[1],
                 contrast_mean: str = "clip") -> None:
        if contrast_mean not in ("clip", "frame"):
            raise ValueError(f"contrast_mean must be 'clip' or 'frame', got {contrast_mean!r}")
        self.recipe, self.size, self.contrast_mean = recipe, size, contrast_mean
        self.mean, self.std = tuple(map(float, mean)), tuple(map(float, std))

    def __repr__(self) -> str:
        return f"ClipAugment({self.recipe}, size={self.size}, contrast_mean={self.contrast_mean!r})"

    def __call__(self, clips: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        self._check(clips)
        b, _, _, height, width = clips.shape
        return self.normalise(self.apply(clips, self.draw(b, height, width, generator)))

    def _check(self, clips: torch.Tensor) -> None:
        if clips.dtype != torch.uint8 or clips.dim() != 5:
            raise ValueError(f"expected uint8 [B, C, T, H, W], got {clips.dtype} {tuple(clips.shape)}")
        if clips.shape[1] != len(self.mean):
            raise ValueError(f"{clips.shape[1]}-channel clips with {len(self.mean)}-channel mean/std")

    def draw(self, b: int, height: int, width: int, generator: torch.Generator) -> ClipParams:
        """Every random draw for ``b`` clips of ``height`` × ``width`` frames: crop boxes, flips, then
        jitter (chosen, brightness / contrast / saturation / hue factors, op orders), then grey."""
        r = self.recipe
        if r.crop_scale is not None:
            boxes = sample_crop_boxes(b, height, width, r.crop_scale, r.crop_ratio, generator).cpu()
        else:
            boxes = centre_boxes(b, height, width)
        flip = _rand(b, generator) < r.flip_p if r.flip_p > 0 else torch.zeros(b, dtype=torch.bool)
        jitter = factors = order = gray = None
        if r.jitter_p > 0:
            jitter = _rand(b, generator) < r.jitter_p
            factors = {
                BRIGHTNESS: _between(b, 1 - r.brightness, 1 + r.brightness, generator),
                CONTRAST: _between(b, 1 - r.contrast, 1 + r.contrast, generator),
                SATURATION: _between(b, 1 - r.saturation, 1 + r.saturation, generator),
                HUE: _between(b, -r.hue, r.hue, generator),
            }
            order = torch.rand((b, 4), generator=generator, device=generator.device).argsort(dim=1).cpu()
        if r.gray_p > 0:
            gray = _rand(b, generator) < r.gray_p
        return ClipParams((height, width), boxes, flip, jitter, factors, order, gray)

    def apply(self, clips: torch.Tensor, params: ClipParams) -> torch.Tensor:
        """float32 ``[B, C, T, size, size]`` in [0, 1]: ``params`` applied to uint8 ``clips`` on their device."""
        self._check(clips)
        b, c, t, height, width = clips.shape
        if len(params) != b or params.frame_size != (height, width):
            raise ValueError(f"augmentation drawn for {len(params)} clips of {params.frame_size}, "
                             f"applied to {b} of {(height, width)}")
        # frames as one image batch, clip-major: rows k·T .. k·T + T − 1 are clip k
        x = clips.permute(0, 2, 1, 3, 4).reshape(b * t, c, height, width).float().div_(255.0)
        flip = params.flip.repeat_interleave(t, 0).to(x.device)
        x = crop_flip(x, params.boxes.repeat_interleave(t, 0), flip, self.size)
        if params.jitter is not None:
            x = self._jitter(x, t, params)
        if params.gray is not None and c == 3:
            rows = self._rows(torch.nonzero(params.gray).squeeze(1), t).to(x.device)
            x.index_copy_(0, rows, grayscale_like(x.index_select(0, rows)))
        return x.view(b, t, c, self.size, self.size).transpose(1, 2).contiguous()

    def normalise(self, x: torch.Tensor) -> torch.Tensor:
        """In place: ``(x − mean) / std`` per channel of float ``[B, C, T, S, S]``."""
        mean = torch.tensor(self.mean, device=x.device).view(1, -1, 1, 1, 1)
        std = torch.tensor(self.std, device=x.device).view(1, -1, 1, 1, 1)
        return x.sub_(mean).div_(std)

    @staticmethod
    def _rows(clips: torch.Tensor, t: int) -> torch.Tensor:
        """Frame rows of the clips ``clips`` in the flattened ``[B·T]`` batch."""
        return (clips[:, None] * t + torch.arange(t)).flatten()

    def _contrast_clip(self, x: torch.Tensor, factor: torch.Tensor, t: int) -> torch.Tensor:
        """Blend with the clip's mean grey level: ``clamp(f·x + (1 − f)·mean_clip)``."""
        n = x.shape[0] // t
        mean = rgb_to_grayscale(x).view(n, -1).mean(dim=1).repeat_interleave(t).view(-1, 1, 1, 1)
        f = factor.to(x.dtype).view(-1, 1, 1, 1)
        return (f * x + (1.0 - f) * mean).clamp_(0.0, 1.0)

    def _jitter(self, x: torch.Tensor, t: int, params: ClipParams) -> torch.Tensor:
        """ColorJitter on the chosen clips, ops in each clip's drawn order.

        Same scheme as semcl.data.views.augment.Augment._jitter, with clips in place of images: at each
        of the four steps every jittered clip applies the op its permutation puts there.
        """
        r = self.recipe
        strengths = {BRIGHTNESS: r.brightness, CONTRAST: r.contrast, SATURATION: r.saturation, HUE: r.hue}
        active = [op for op, s in strengths.items() if s > 0 and (x.shape[1] == 3 or op in (BRIGHTNESS, CONTRAST))]
        for step in range(4):
            for op in active:
                clips = torch.nonzero(params.jitter & (params.order[:, step] == op)).squeeze(1)
                if not clips.numel():
                    continue
                rows = self._rows(clips, t).to(x.device)
                f = params.factors[op].index_select(0, clips).repeat_interleave(t).to(x.device)
                sub = x.index_select(0, rows)
                if op == CONTRAST and self.contrast_mean == "clip":
                    sub = self._contrast_clip(sub, f, t)
                else:
                    sub = JITTER_OPS[op](sub, f)
                x.index_copy_(0, rows, sub)
        return x
