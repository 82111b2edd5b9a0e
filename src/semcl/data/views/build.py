"""Which augmentation a recipe name builds: a batched recipe (semcl.data.views.augment) or a per-image /
per-view one (semcl.data.views.tvaugment, imported only when named, so torchvision loads only then).

Kept apart from both so that neither imports the other's dispatcher: tvaugment builds on augment,
and this module on both (no import cycle).
"""

from __future__ import annotations

from collections.abc import Sequence

from semcl.data.views.augment import RECIPES, Augment


def build_augment(recipe: str, *, size: int, mean: Sequence[float],
                  std: Sequence[float]) -> Augment:
    """The :class:`Augment` for recipe name ``recipe`` (a key of ``RECIPES``); other names
    (the per-image PaCo/GPaCo recipes and "+"-joined per-view pairs) go to semcl.data.views.tvaugment."""
    if recipe not in RECIPES:
        from semcl.data.views.tvaugment import build_named  # lazy: torchvision only when named

        try:
            aug = build_named(recipe, size=size, mean=mean, std=std)
        except ValueError:
            raise ValueError(f"unknown augmentation recipe '{recipe}' (known: {', '.join(RECIPES)}, "
                             "and the names semcl.data.views.recipes.parse_augment accepts)") from None
        from semcl.data.views.colour_view import colour_finish_setting, split_colour

        # SEMCL_COLOUR_FINISH=device: the colour views' pixel work after the crop runs on the training device
        return split_colour(aug) if colour_finish_setting() == "device" else aug
    return Augment(RECIPES[recipe], size=size, mean=mean, std=std)
