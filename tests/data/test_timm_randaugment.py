"""RandAugment of the randcls recipes: timm's (official copy) as `_timm` (the registry default), torchvision's without it."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from semcl.data import stats
from semcl.data.views.build import build_augment
from semcl.data.views.tvaugment import PerImageAugment, TimmRandAugment

pytest.importorskip("timm")


def _images(n: int = 6, c: int = 3, size: int = 16) -> torch.Tensor:
    return torch.randint(0, 256, (n, c, size, size), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)


def test_timm_ops_probability_half_magnitude_std_and_op_list():
    ra = TimmRandAugment(2, 10, size=224, mean=(0.485, 0.456, 0.406))
    ops = ra._by_mode["RGB"].ops
    names = {op.name for op in ops}
    assert {"Invert", "SolarizeAdd"} <= names and len(names) == 15
    assert all(op.prob == 0.5 and op.magnitude == 10 and op.magnitude_std == 0.5 for op in ops)
    assert ra._by_mode["RGB"].num_layers == 2
    assert ops[0].hparams["translate_const"] == 100  # int(0.45 * 224), as the official scripts
    assert ops[0].kwargs["fillcolor"] == (124, 116, 104)  # ImageNet mean in 0-255


def test_each_chosen_op_applies_with_probability_half():
    # one op (Invert always changes a non-constant image), n = 1: changed iff the op fired
    ra = TimmRandAugment(1, 10, size=16, mean=(0.5, 0.5, 0.5), ops=["Invert"])
    aug = PerImageAugment(ra, mean=(0.0,) * 3, std=(1 / 255,) * 3)  # output = pixel values
    imgs = _images(400)
    out = aug(imgs, torch.Generator().manual_seed(3)).round()
    inverted = (out == 255 - imgs.float()).flatten(1).all(1)
    kept = (out == imgs.float()).flatten(1).all(1)
    assert bool((inverted | kept).all())
    assert 0.42 < float(inverted.float().mean()) < 0.58  # Binomial(400, 0.5): sd 0.025


@pytest.mark.parametrize("channels", [1, 3])
def test_timm_recipe_deterministic_from_the_generator_and_leaves_global_streams(channels):
    mean, std = stats("cifar10" if channels == 3 else "mnist")
    aug = build_augment("randclsstack_timm-n3-m10", size=16, mean=mean, std=std)
    assert isinstance(aug.transform.transforms[-1], TimmRandAugment)
    py, npy, th = random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state()
    out = aug(_images(c=channels), torch.Generator().manual_seed(5))
    assert random.getstate() == py and np.array_equal(np.random.get_state()[1], npy)
    assert torch.equal(torch.get_rng_state(), th)
    random.seed(123)
    np.random.seed(123)  # other global seeds must not change the views
    assert torch.equal(out, aug(_images(c=channels), torch.Generator().manual_seed(5)))
    assert not torch.equal(out, aug(_images(c=channels), torch.Generator().manual_seed(6)))
    assert out.shape == (6, channels, 16, 16)


def test_torchvision_variant_is_named_tv():
    from torchvision.transforms import v2

    mean, std = stats("cifar10")
    aug = build_augment("randcls-n2-m10", size=16, mean=mean, std=std)
    assert isinstance(aug.transform.transforms[-1], v2.RandAugment)
    assert aug.transform.transforms[-1].num_ops == 2
