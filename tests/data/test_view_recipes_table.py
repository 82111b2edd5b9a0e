"""semcl.data.views.recipes: the names a run may give (part of its run id, so the set is pinned here by
hand) and the builder each names, which semcl.data.views.tvaugment.build_named dispatches on."""

from __future__ import annotations

import pytest

from semcl.data import stats
from semcl.data.views.augment import RECIPES, Augment
from semcl.data.views.recipes import AUGMENT_RECIPES, BATCHED, MAE, PER_IMAGE, RANDAUG_RECIPES, VIEW_RECIPES
from semcl.data.views.tvaugment import MAETransform, PerImageAugment, build_named

# the names semcl.config held before the table (AUGMENT_RECIPES / RANDAUG_RECIPES there)
NAMES = {"supcon", "crop_flip", "pad_crop", "sim", "sim_cifar", "aug_cifar", "autoaug_cutout", "mae",
         "randcls", "randclsstack", "randcls_timm", "randclsstack_timm"}


def test_the_table_keeps_the_recipe_names_and_their_suffixes():
    assert AUGMENT_RECIPES == NAMES == set(VIEW_RECIPES)
    assert RANDAUG_RECIPES == {"randcls", "randclsstack", "randcls_timm", "randclsstack_timm"}
    assert {r.builder for r in VIEW_RECIPES.values()} == {BATCHED, PER_IMAGE, MAE}
    # a batched name is one of augment.RECIPES ("test" there is the evaluation transform, not a view)
    assert {n for n, r in VIEW_RECIPES.items() if r.builder == BATCHED} == set(RECIPES) - {"test"}


@pytest.mark.parametrize("name", sorted(n for n in NAMES if "timm" not in n and n != "mae"))
def test_each_name_builds_what_its_entry_says(name):
    mean, std = stats("cifar10")
    aug = build_named(name, size=16, mean=mean, std=std)
    assert type(aug) is {BATCHED: Augment, PER_IMAGE: PerImageAugment}[VIEW_RECIPES[name].builder]


def test_crop_suffix_reaches_the_batched_recipe_and_mae_has_its_own_builder():
    mean, std = stats("cifar10")
    aug = build_named("crop_flip-c50", size=16, mean=mean, std=std)
    assert aug.recipe.crop_scale == (0.5, 1.0) and RECIPES["crop_flip"].crop_scale == (0.2, 1.0)
    pytest.importorskip("timm")
    assert isinstance(build_named("mae", size=16, mean=mean, std=std), MAETransform)
    with pytest.raises(ValueError, match="no -c crop scale"):
        build_named("mae-c50", size=16, mean=mean, std=std)
