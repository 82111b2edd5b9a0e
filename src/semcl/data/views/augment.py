"""Batched tensor augmentations for contrastive and supervised training.

A whole uint8 batch is augmented at once with per-sample random parameters, instead of
torchvision's per-image PIL pipeline: one ``grid_sample`` does every crop/resize/flip,
and colour jitter runs as per-sample factor tensors. Works on any device; all
randomness comes from the ``torch.Generator`` passed in (drawn on the generator's
device, then moved), so results are reproducible for a seed.

Recipes (``RECIPES``):

* ``supcon`` — the SupCon/RINCE CIFAR recipe: RandomResizedCrop(size, scale (0.2, 1),
  ratio (3/4, 4/3)), horizontal flip p=0.5, ColorJitter(0.4, 0.4, 0.4, 0.1) applied with
  p=0.8, RandomGrayscale p=0.2, normalise.
* ``crop_flip`` — RandomResizedCrop(size, scale (0.2, 1)) + flip + normalise (the CE
  baseline and linear-probe recipe).
* ``pad_crop`` — RepDistiller's CIFAR recipe (CRD/SCNS knowledge distillation): RandomCrop(size,
  padding = size/8) + horizontal flip p=0.5 + normalise, i.e. padding 4 at 32×32 and 8 at 64×64
  (Tiny-ImageNet); the image is first resized to ``size`` if it is not that size already.
* ``test`` — resize to ``size`` if needed, normalise.

Which object a recipe *name* builds (these, or semcl.data.views.tvaugment's per-image recipes) is
decided in semcl.data.views.build.build_augment; the per-channel statistics are the dataset registry's
(semcl.data.stats).

One-channel images (Fashion-MNIST, MNIST) get brightness and contrast jitter only;
saturation, hue and grayscale are identities on them, as in torchvision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from semcl.data.views.crop import crop_flip, pad_crop_flip, resize, sample_crop_boxes
from semcl.data.views.jitter import BRIGHTNESS, CONTRAST, HUE, JITTER_OPS, SATURATION, grayscale_like


@dataclass(frozen=True)
class Recipe:
    """Parameters of an augmentation pipeline (all probabilities per sample).

    ``crop_scale`` None means no random crop: the image is only resized to ``size``.
    Jitter strengths follow ColorJitter: factors uniform in ``[1 − s, 1 + s]`` for
    brightness/contrast/saturation, hue shift uniform in ``[−hue, hue]``.
    """

    crop_scale: tuple[float, float] | None = None
    crop_ratio: tuple[float, float] = (3 / 4, 4 / 3)
    flip_p: float = 0.0
    jitter_p: float = 0.0
    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    hue: float = 0.0
    gray_p: float = 0.0
    # RandomCrop(size, padding=round(pad_crop * size)) on the image resized to size (then flip_p);
    # excludes crop_scale
    pad_crop: float | None = None


RECIPES: dict[str, Recipe] = {
    "supcon": Recipe(crop_scale=(0.2, 1.0), flip_p=0.5, jitter_p=0.8, brightness=0.4,
                     contrast=0.4, saturation=0.4, hue=0.1, gray_p=0.2),
    "crop_flip": Recipe(crop_scale=(0.2, 1.0), flip_p=0.5),
    "pad_crop": Recipe(flip_p=0.5, pad_crop=0.125),  # RepDistiller: RandomCrop(32, padding=4) + flip
    "test": Recipe(),
}


def _rand(n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    return torch.rand(n, generator=gen, device=gen.device).to(device)


def _between(n: int, lo: float, hi: float, gen: torch.Generator,
             device: torch.device) -> torch.Tensor:
    return _rand(n, gen, device) * (hi - lo) + lo


class Augment:
    """Callable ``(uint8 [B, C, H, W], generator) → float32 [B, C, size, size]``, normalised."""

    def __init__(self, recipe: Recipe, *, size: int, mean: Sequence[float],
                 std: Sequence[float]) -> None:
        if len(mean) != len(std) or len(mean) not in (1, 3):
            raise ValueError(f"mean and std need 1 or 3 matching values, got {mean}, {std}")
        self.recipe = recipe
        self.size = size
        self.mean = tuple(float(m) for m in mean)
        self.std = tuple(float(s) for s in std)

    def __repr__(self) -> str:
        return f"Augment({self.recipe}, size={self.size}, mean={self.mean}, std={self.std})"

    def __call__(self, images: torch.Tensor | list[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
        if isinstance(images, list):  # whole images of their own sizes (file-backed training sets)
            _check_whole(images)
            if self.recipe.crop_scale is not None:
                return self._normalise(self._crop_whole(images, generator), generator)
            images = centre_squares(images, self.size)  # a recipe without a random crop: the eval view
        if images.dtype != torch.uint8 or images.dim() != 4:
            raise ValueError(f"expected uint8 [B, C, H, W], got {images.dtype} "
                             f"{tuple(images.shape)}")
        b, c, height, width = images.shape
        if c != len(self.mean):
            raise ValueError(f"{c}-channel images with {len(self.mean)}-channel mean/std")
        r, dev = self.recipe, images.device
        x = images.float().div_(255.0)
        # Draws happen in a fixed order (crop, flip, jitter, grayscale) so a seed pins all.
        if r.pad_crop is not None:
            # draws: offsets (top, left) uniform in {0..2p}, then the flips (torchvision: RandomCrop, then flip)
            pad = round(r.pad_crop * self.size)
            offsets = torch.randint(0, 2 * pad + 1, (b, 2), generator=generator, device=generator.device)
            flip = _rand(b, generator, dev) < r.flip_p
            x = pad_crop_flip(resize(x, self.size), offsets, flip, pad)
        elif r.crop_scale is not None:
            boxes = sample_crop_boxes(b, height, width, r.crop_scale, r.crop_ratio, generator)
            flip = _rand(b, generator, dev) < r.flip_p
            x = crop_flip(x, boxes, flip, self.size)
        else:
            x = resize(x, self.size)
            if r.flip_p > 0:
                flip = _rand(b, generator, dev) < r.flip_p
                x = torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)
        return self._normalise(x, generator)

    def _crop_whole(self, images: list[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
        """RandomResizedCrop + flip on images of different sizes: each box is drawn from its own image
        (boxes in image order, then the flips, as for a batch); float [B, C, size, size] in [0, 1]."""
        r = self.recipe
        boxes = [sample_crop_boxes(1, im.shape[-2], im.shape[-1], r.crop_scale, r.crop_ratio, generator)
                 for im in images]
        flip = _rand(len(images), generator, images[0].device) < r.flip_p
        out = []
        for im, box, f in zip(images, boxes, flip.tolist(), strict=True):
            top, left, h, w = box[0].tolist()
            # crop, then an antialiased resize: torchvision's resized_crop on the full-size image (these
            # boxes mostly shrink, where crop_flip's single grid_sample would alias)
            patch = resize(im[None, :, top:top + h, left:left + w].float().div_(255.0), self.size)
            out.append(patch.flip(-1) if f else patch)
        return torch.cat(out)

    def _normalise(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Colour steps and normalisation of a float [B, C, size, size] batch in [0, 1]."""
        r, b, c, dev = self.recipe, x.shape[0], x.shape[1], x.device
        if c != len(self.mean):
            raise ValueError(f"{c}-channel images with {len(self.mean)}-channel mean/std")
        if r.jitter_p > 0:
            x = self._jitter(x, generator)
        if r.gray_p > 0:
            gray = _rand(b, generator, dev) < r.gray_p
            if c == 3:
                # Only the chosen rows are converted (index ops beat a full-batch where).
                idx = torch.nonzero(gray).squeeze(1)
                x.index_copy_(0, idx, grayscale_like(x.index_select(0, idx)))
        # Subtract-then-divide, as torchvision's Normalize, so results agree bit for bit.
        mean = torch.tensor(self.mean, device=dev).view(1, -1, 1, 1)
        std = torch.tensor(self.std, device=dev).view(1, -1, 1, 1)
        return x.sub_(mean).div_(std)

    def _jitter(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """ColorJitter with probability ``jitter_p``, ops in a random order per sample.

        torchvision's ColorJitter draws a fresh permutation of its four ops for every
        image, and the order matters (each op clamps, contrast depends on the mean that
        brightness changed). We keep that: at each of the four steps, every jittered
        sample applies the op its permutation puts there, processed as one sub-batch
        per op. Unjittered samples are never touched, so they stay bit-exact.
        """
        r, b, dev = self.recipe, x.shape[0], x.device
        chosen = _rand(b, gen, dev) < r.jitter_p
        factors = {
            BRIGHTNESS: _between(b, 1 - r.brightness, 1 + r.brightness, gen, dev),
            CONTRAST: _between(b, 1 - r.contrast, 1 + r.contrast, gen, dev),
            SATURATION: _between(b, 1 - r.saturation, 1 + r.saturation, gen, dev),
            HUE: _between(b, -r.hue, r.hue, gen, dev),
        }
        order = torch.rand((b, 4), generator=gen, device=gen.device).argsort(dim=1).to(dev)
        strengths = {BRIGHTNESS: r.brightness, CONTRAST: r.contrast,
                     SATURATION: r.saturation, HUE: r.hue}
        # Ops with zero strength are identities; saturation and hue are identities on gray.
        active = [op for op, s in strengths.items()
                  if s > 0 and (x.shape[1] == 3 or op in (BRIGHTNESS, CONTRAST))]
        for step in range(4):
            for op in active:
                idx = torch.nonzero(chosen & (order[:, step] == op)).squeeze(1)
                if idx.numel():
                    sub = JITTER_OPS[op](x.index_select(0, idx), factors[op].index_select(0, idx))
                    x.index_copy_(0, idx, sub)
        return x


def _check_whole(images: list[torch.Tensor]) -> None:
    if not images or any(im.dtype != torch.uint8 or im.dim() != 3 for im in images):
        raise ValueError("expected a non-empty list of uint8 [C, H, W] images")


def centre_squares(images: list[torch.Tensor], size: int) -> torch.Tensor:
    """uint8 [B, C, size, size]: each image's centred square (side = its shorter side) resized to size."""
    out = []
    for im in images:
        h, w = im.shape[-2:]
        s = min(h, w)
        top, left = (h - s) // 2, (w - s) // 2
        sq = resize(im[None, :, top:top + s, left:left + s].float(), size)
        out.append(sq.round_().clamp_(0, 255).to(torch.uint8))
    return torch.cat(out)


def two_views(aug: Augment, images: torch.Tensor,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Two independently augmented views of the same batch (drawn one after the other)."""
    return aug(images, generator), aug(images, generator)
