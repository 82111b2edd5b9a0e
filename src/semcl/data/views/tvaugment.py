"""The PaCo/GPaCo view recipes, built from torchvision's v2 transforms and applied per image.

AutoAugment, RandAugment and Gaussian blur have no batched implementation in semcl.data.views.augment,
so these recipes run torchvision's per-image transforms over the batch. They keep the batched
recipes' contract: `(uint8 [B, C, H, W], generator) -> normalised float32 [B, C, size, size]`,
with every random draw fixed by the generator (a seed is drawn from it and torchvision runs
under that seed inside `torch.random.fork_rng`, leaving the global stream untouched).

Recipes (docs/papers/paco.md §d.1, §d.2; official `--aug view1_view2`):
* `sim`: RandomResizedCrop(scale 0.08-1) -> ColorJitter(0.4, 0.4, 0.4, 0) -> grayscale p 0.2
  -> Gaussian blur sigma 0.1-2 p 0.5 -> flip.
* `randcls_timm`: RandomResizedCrop -> flip -> ColorJitter(0.4, 0.4, 0.4, 0) -> RandAugment(n, m).
  RandAugment is timm's `rand-n{N}-m{M}-mstd0.5` (the official code ships a copy of it): each of the
  N chosen ops (of 15, Invert and SolarizeAdd included) applies with probability 0.5, magnitudes
  drawn from N(M, 0.5) clipped to [0, 10]; needs `pip install 'semcl[timm]'`.
  `randcls` / `randclsstack` without `_timm`: the same recipes with torchvision's RandAugment (every
  chosen op always applied, fixed magnitude, no Invert / SolarizeAdd) -- a named variant.
* `randclsstack`: `randcls` with grayscale p 0.2 and blur p 0.5 before RandAugment.
* `sim_cifar`: RandomResizedCrop(scale 0.2-1) -> flip -> ColorJitter(0.4, 0.4, 0.4, 0.1) p 0.8
  -> grayscale p 0.2 -> blur p 0.5 (the CIFAR view 2 of PaCo and of GPaCo's full CIFAR-100).
* `aug_cifar`: `sim_cifar` with blur p 0.2 (GPaCo/LT/paco_cifar.py `augmentation_aug_cifar`: view 2 of
  GPaCo's long-tailed CIFAR branch, imb_factor != 1).
* `autoaug_cutout`: RandomCrop(pad 4) -> flip -> AutoAugment(CIFAR-10 policy) -> Cutout (one
  size/2 square zeroed before normalisation, 16 px at 32 px) (the CIFAR view 1).
* `mae`: MAE's fine-tuning transform (its util/datasets.py `build_transform`, also GPaCo's
  MAE-ViTs copy): timm `create_transform(is_training=True, color_jitter=None, auto_augment=
  "rand-m9-mstd0.5-inc1", interpolation="bicubic", re_prob=0.25, re_mode="pixel", re_count=1)` --
  bicubic RandomResizedCrop, flip, RandAugment, normalise, RandomErasing; no colour jitter (`MAETransform`).
Names joined by "+" give one recipe per view (`ViewCycle`); the names and their builders are
semcl.data.views.recipes.VIEW_RECIPES.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import v2

from semcl.data.views.augment import RECIPES, Augment
from semcl.data.views.recipes import BATCHED, MAE, VIEW_RECIPES, parse_augment

ImageTransform = Callable[[torch.Tensor], torch.Tensor]


def _blur(size: int, p: float = 0.5) -> v2.Transform:
    # the official code blurs with PIL's radius-only GaussianBlur; torchvision needs a kernel:
    # 2 * ceil(3 * sigma_max) + 1 = 13 covers sigma 2, capped to an odd size within the image
    k = min(13, size - 1 if size % 2 == 0 else size)
    return v2.RandomApply([v2.GaussianBlur(k, sigma=(0.1, 2.0))], p=p)


def _tv_randaugment(n: int, m: int) -> v2.Transform:
    # the `_tv` variant: magnitude M of 10 levels; 11 bins put torchvision on timm's scale.
    # torchvision applies every chosen op, has no magnitude noise, no Invert / SolarizeAdd.
    return v2.RandAugment(num_ops=n, magnitude=min(m, 10), num_magnitude_bins=11)


class TimmRandAugment:
    """timm's RandAugment `rand-n{n}-m{m}-mstd{mstd}` on a uint8 [C, H, W] tensor (C = 1 or 3).

    hparams as the official scripts: translate_const = int(0.45 * size), fill = the dataset mean in
    0-255. timm draws from Python's `random` (op probability, magnitude noise) and NumPy's global
    stream (op choice); both are seeded per image from a seed drawn from torch's stream -- which
    PerImageAugment has seeded from the batch generator -- and restored afterwards, so a view is a
    function of the generator alone and the global Python / NumPy streams are left untouched.
    `ops` restricts timm's op list (tests).
    """

    def __init__(self, n: int, m: int, *, size: int, mean: Sequence[float], mstd: float = 0.5,
                 ops: Sequence[str] | None = None) -> None:
        try:
            from timm.data.auto_augment import rand_augment_transform
        except ImportError:
            raise ImportError("timm's RandAugment needs timm: pip install 'semcl[timm]'") from None
        fill = tuple(min(255, round(255 * float(v))) for v in mean)
        self.config = f"rand-n{n}-m{m}-mstd{mstd}"
        self._by_mode = {}
        for mode, f in (("RGB", fill if len(fill) == 3 else fill * 3), ("L", fill[0])):
            hparams = {"translate_const": int(size * 0.45), "img_mean": f}
            self._by_mode[mode] = rand_augment_transform(self.config, hparams, transforms=list(ops) if ops else None)

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        seed = int(torch.randint(0, 2**31 - 1, (1,)))
        arr = img.permute(1, 2, 0).numpy()
        pil = Image.fromarray(arr[..., 0] if arr.shape[2] == 1 else arr)
        py_state, np_state = random.getstate(), np.random.get_state()
        try:
            random.seed(seed)
            np.random.seed(seed)
            out = np.asarray(self._by_mode[pil.mode](pil), dtype=np.uint8)
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
        out = torch.from_numpy(out.copy())
        return out.unsqueeze(0) if out.dim() == 2 else out.permute(2, 0, 1)


class Cutout:
    """Zero one square of side `length` centred uniformly in the image (clipped at the border)."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        h, w = img.shape[-2:]
        cy, cx = int(torch.randint(h, (1,))), int(torch.randint(w, (1,)))
        y0, y1 = max(0, cy - self.length // 2), min(h, cy + self.length // 2)
        x0, x1 = max(0, cx - self.length // 2), min(w, cx + self.length // 2)
        img = img.clone()
        img[..., y0:y1, x0:x1] = 0
        return img


def image_transform(base: str, size: int, n: int = 2, m: int = 10, crop_min: float | None = None,
                    mean: Sequence[float] = (0.485, 0.456, 0.406)) -> ImageTransform:
    """The per-image uint8 -> uint8 pipeline of recipe `base` (`mean`: RandAugment's fill colour)."""
    # `_timm`: the official RandAugment (default of the registry's rows); plain names keep torchvision's,
    # so runs stored under the plain names stay what they were (a recipe's name is part of the run id)
    if base.endswith("_timm"):
        base, randaugment = base[:-5], TimmRandAugment(n, m, size=size, mean=mean)
    elif base in ("randcls", "randclsstack"):
        randaugment = _tv_randaugment(n, m)
    rrc = v2.RandomResizedCrop(size, scale=(crop_min or (0.2 if base in ("sim_cifar", "aug_cifar") else 0.08), 1.0), antialias=True)
    jitter = v2.ColorJitter(0.4, 0.4, 0.4, 0.0)
    gray = v2.RandomGrayscale(p=0.2)
    if base == "sim":
        steps = [rrc, jitter, gray, _blur(size), v2.RandomHorizontalFlip()]
    elif base == "randcls":
        steps = [rrc, v2.RandomHorizontalFlip(), jitter, randaugment]
    elif base == "randclsstack":
        steps = [rrc, v2.RandomHorizontalFlip(), jitter, gray, _blur(size), randaugment]
    elif base in ("sim_cifar", "aug_cifar"):
        steps = [rrc, v2.RandomHorizontalFlip(), v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
                 gray, _blur(size, 0.5 if base == "sim_cifar" else 0.2)]
    elif base == "autoaug_cutout":
        steps = [v2.Resize(size, antialias=True), v2.RandomCrop(size, padding=round(size / 8)),
                 v2.RandomHorizontalFlip(), v2.AutoAugment(v2.AutoAugmentPolicy.CIFAR10), Cutout(round(size / 2))]
    else:
        raise ValueError(f"unknown per-image recipe {base!r}")
    return v2.Compose(steps)


# MAE's fine-tuning arguments (main_finetune.py defaults and sh/finetune_*_mae.sh: --reprob 0.25)
MAE_TRANSFORM_ARGS = {"is_training": True, "color_jitter": None, "auto_augment": "rand-m9-mstd0.5-inc1",
                      "interpolation": "bicubic", "re_prob": 0.25, "re_mode": "pixel", "re_count": 1}


def mae_create_transform(size: int, mean: Sequence[float], std: Sequence[float]):
    """timm's create_transform with MAE's arguments: the PIL -> normalised tensor pipeline MAE trains with."""
    try:
        from timm.data import create_transform
    except ImportError:
        raise ImportError("the mae recipe needs timm: pip install 'semcl[timm]'") from None
    return create_transform(input_size=size, mean=tuple(mean), std=tuple(std), **MAE_TRANSFORM_ARGS)


class MAETransform:
    """Batch callable running MAE's timm pipeline per image: PIL in, normalised float out (RandomErasing
    acts after normalisation, so it cannot be a PerImageAugment step). timm draws from Python's `random`,
    NumPy's global stream and torch's; each image seeds the first two from torch's stream, which runs
    under a seed drawn from the batch generator, and every global stream is restored afterwards.
    One-channel images go through as grey RGB (timm's fill colours are RGB) and come back as channel 0."""

    def __init__(self, size: int, *, mean: Sequence[float], std: Sequence[float]) -> None:
        self.channels = len(mean)
        rgb = (lambda v: tuple(v) * 3) if self.channels == 1 else tuple
        self.transform = mae_create_transform(size, rgb(mean), rgb(std))

    def _one(self, img: torch.Tensor) -> torch.Tensor:
        seed = int(torch.randint(0, 2**31 - 1, (1,)))
        arr = img.permute(1, 2, 0).numpy()
        pil = Image.fromarray(np.repeat(arr, 3, axis=2) if arr.shape[2] == 1 else arr)
        py_state, np_state = random.getstate(), np.random.get_state()
        try:
            random.seed(seed)
            np.random.seed(seed)
            out = self.transform(pil)
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
        return out[:1] if self.channels == 1 else out

    def __call__(self, images: torch.Tensor | list[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
        device = images[0].device
        seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            out = torch.stack([self._one(img.cpu()) for img in images])
        return out.float().to(device)


class PerImageAugment:
    """Batch callable applying a per-image transform under a seed drawn from the generator."""

    def __init__(self, transform: ImageTransform, *, mean: Sequence[float], std: Sequence[float]) -> None:
        self.transform = transform
        self.mean = torch.tensor([float(v) for v in mean]).view(1, -1, 1, 1)
        self.std = torch.tensor([float(v) for v in std]).view(1, -1, 1, 1)

    def __call__(self, images: torch.Tensor | list[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
        """`images`: uint8 [B, C, H, W], or a list of uint8 [C, h, w] images of their own sizes (file-backed
        training sets; each recipe's first step crops them to the view size)."""
        out = self.uint8_views(images, generator)  # validates `images`
        device = images[0].device if isinstance(images, list) else images.device
        x = out.float().div_(255.0)
        return x.sub_(self.mean).div_(self.std).to(device)

    def uint8_views(self, images: torch.Tensor | list[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
        """The views before normalisation, uint8 [B, C, size, size] on the CPU: what a loader worker hands
        out (semcl.data.views.handout normalises it on the training device, to the same values)."""
        seed = self._view_seed(images, generator)
        with torch.random.fork_rng(devices=[]):
            # the CPU stream only (torchvision draws there): torch.manual_seed would also reseed every CUDA
            # generator, outside what fork_rng restores, and costs ~15% of a view in lazy-init stack traces
            torch.default_generator.manual_seed(seed)
            return torch.stack([self.transform(img.cpu()) for img in images])

    @staticmethod
    def _view_seed(images: torch.Tensor | list[torch.Tensor], generator: torch.Generator) -> int:
        """The seed the batch's per-image draws run under, after checking `images`."""
        whole = isinstance(images, list)
        if (whole and (not images or any(im.dtype != torch.uint8 or im.dim() != 3 for im in images))) or (
                not whole and (images.dtype != torch.uint8 or images.dim() != 4)):
            got = "a list" if whole else f"{images.dtype} {tuple(images.shape)}"
            raise ValueError(f"expected uint8 [B, C, H, W] or a list of uint8 [C, H, W], got {got}")
        return int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))


class ViewCycle:
    """One recipe per view (`sim+randcls...`): the train loop gives view k the recipe `views[k % len]`.

    Holds no call counter on purpose: which recipe a view gets must not depend on how often the
    object was called before (a resumed run starts mid-epoch)."""

    def __init__(self, views: list[Callable[[torch.Tensor, torch.Generator], torch.Tensor]]) -> None:
        self.views = views

    def __call__(self, images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        raise TypeError("a per-view recipe pair: call .views[k] for view k")


def build_named(name: str, *, size: int, mean: Sequence[float], std: Sequence[float]):
    """The augmentation `semcl.data.views.build.build_augment` names: a batched recipe, a per-image one, or a "+" pair."""
    views = []
    for base, n, m, crop_min in parse_augment(name):
        builder = VIEW_RECIPES[base].builder
        if builder == MAE:
            if crop_min is not None:
                raise ValueError("the mae recipe is MAE's fixed transform: no -c crop scale")
            views.append(MAETransform(size, mean=mean, std=std))
        elif builder == BATCHED:
            recipe = RECIPES[base]
            if crop_min is not None and recipe.crop_scale is not None:
                recipe = type(recipe)(**{**recipe.__dict__, "crop_scale": (crop_min, recipe.crop_scale[1])})
            views.append(Augment(recipe, size=size, mean=mean, std=std))
        else:
            views.append(PerImageAugment(image_transform(base, size, n, m, crop_min, mean), mean=mean, std=std))
    return views[0] if len(views) == 1 else ViewCycle(views)
