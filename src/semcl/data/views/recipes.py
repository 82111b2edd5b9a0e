"""The view recipes a run may name (`data.augment`, `probe.recipe`), as one table, and the parser of those names.

Kept beside the code that builds the views (semcl.data.views.augment, semcl.data.views.tvaugment) and free of torch, so
the config check (semcl.run_config) and the cost estimate read the names without loading torchvision.

`data.augment` names one recipe for every view, or one per view joined by "+" (view 1 first, the official
`--aug a_b`). RandAugment recipes take "-n<ops>-m<magnitude>" (default n2, m10); any recipe with a random
crop takes "-c<percent>" for the crop's minimum area (e.g. -c20 = 0.2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# the builders a recipe can name (semcl.data.views.tvaugment.build_named dispatches on these)
BATCHED = "batched"  # semcl.data.views.augment.Augment over the whole uint8 batch
PER_IMAGE = "per_image"  # torchvision v2 per image (semcl.data.views.tvaugment.image_transform)
MAE = "mae"  # timm's create_transform with MAE's fixed arguments (semcl.data.views.tvaugment.MAETransform)


@dataclass(frozen=True)
class ViewRecipe:
    builder: str  # one of BATCHED, PER_IMAGE, MAE
    what: str  # one line for listings and errors; the full pipelines are in the builders' docstrings
    randaugment: bool = False  # takes the -n<N>-m<M> suffix


VIEW_RECIPES: dict[str, ViewRecipe] = {
    "supcon": ViewRecipe(BATCHED, "SupCon/RINCE CIFAR views: crop 0.2-1, flip, colour jitter p 0.8, grayscale p 0.2"),
    "crop_flip": ViewRecipe(BATCHED, "crop 0.2-1 + flip (CE baseline, linear probe)"),
    "pad_crop": ViewRecipe(BATCHED, "RepDistiller: RandomCrop(padding size/8) + flip"),
    "sim": ViewRecipe(PER_IMAGE, "PaCo's sim view: crop 0.08-1, jitter, grayscale, blur p 0.5, flip"),
    "sim_cifar": ViewRecipe(PER_IMAGE, "PaCo's CIFAR view 2: crop 0.2-1, flip, jitter p 0.8, grayscale, blur p 0.5"),
    "aug_cifar": ViewRecipe(PER_IMAGE, "sim_cifar with blur p 0.2 (GPaCo's CIFAR-LT view 2)"),
    "autoaug_cutout": ViewRecipe(PER_IMAGE, "CIFAR view 1: pad crop, flip, AutoAugment, Cutout"),
    "mae": ViewRecipe(MAE, "MAE fine-tuning: timm create_transform (RandAugment, RandomErasing)"),
    # _timm: the official (timm) RandAugment; without it torchvision's (a named variant)
    "randcls": ViewRecipe(PER_IMAGE, "crop, flip, jitter, torchvision RandAugment", randaugment=True),
    "randclsstack": ViewRecipe(PER_IMAGE, "randcls with grayscale and blur before RandAugment", randaugment=True),
    "randcls_timm": ViewRecipe(PER_IMAGE, "crop, flip, jitter, timm RandAugment", randaugment=True),
    "randclsstack_timm": ViewRecipe(PER_IMAGE, "randcls_timm with grayscale and blur before RandAugment",
                                    randaugment=True),
}
AUGMENT_RECIPES = frozenset(VIEW_RECIPES)
RANDAUG_RECIPES = frozenset(name for name, r in VIEW_RECIPES.items() if r.randaugment)
_NAME = re.compile(r"^(?P<base>[a-z_]+?)(?:-n(?P<n>\d+)-m(?P<m>\d+))?(?:-c(?P<c>\d+))?$")


def parse_augment(name: str) -> list[tuple[str, int, int, float | None]]:
    """`data.augment` -> [(recipe, randaug_n, randaug_m, crop_min_scale)] per view; ValueError if malformed."""
    views = []
    for part in name.split("+"):
        match = _NAME.match(part)
        base = match["base"] if match else part
        bad_crop = match is not None and match["c"] and not 0 < int(match["c"]) <= 100
        if match is None or base not in VIEW_RECIPES or (match["n"] and base not in RANDAUG_RECIPES) or bad_crop:
            raise ValueError(f"{part!r} is not a recipe in {sorted(AUGMENT_RECIPES)} "
                             f"(RandAugment suffix -n<N>-m<M> only on {sorted(RANDAUG_RECIPES)})")
        views.append((base, int(match["n"] or 2), int(match["m"] or 10), int(match["c"]) / 100 if match["c"] else None))
    return views
