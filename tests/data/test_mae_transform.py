"""The `mae` recipe is MAE's fine-tuning transform (GPaCo MAE-ViTs util/datasets.py build_transform):
timm create_transform with MAE's arguments, step by step, and the same pixels for the same seeds."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from PIL import Image

pytest.importorskip("timm")
from timm.data import create_transform  # noqa: E402
from timm.data.constants import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD  # noqa: E402

from semcl.data.views.build import build_augment
from semcl.data.views.tvaugment import MAETransform  # noqa: E402


def _describe(transform):
    """Each step's class and the attributes that decide its output (reprs hide some of them)."""
    out = []
    for t in transform.transforms:
        attrs = {k: v for k, v in vars(t).items() if not k.startswith("_") and k != "ops"}
        if hasattr(t, "ops"):  # RandAugment: its ops' names and magnitude settings
            attrs["ops"] = [(op.name, op.prob, op.magnitude, op.magnitude_std, op.kwargs.get("resample"))
                            for op in t.ops]
        out.append((type(t).__name__, repr(attrs)))
    return out


def test_the_steps_are_timm_create_transform_with_maes_arguments():
    ours = MAETransform(224, mean=IMAGENET_DEFAULT_MEAN, std=IMAGENET_DEFAULT_STD).transform
    official = create_transform(input_size=224, is_training=True, color_jitter=None,
                                auto_augment="rand-m9-mstd0.5-inc1", interpolation="bicubic", re_prob=0.25,
                                re_mode="pixel", re_count=1, mean=IMAGENET_DEFAULT_MEAN, std=IMAGENET_DEFAULT_STD)
    assert _describe(ours) == _describe(official)
    names = [name for name, _ in _describe(ours)]
    assert names == ["RandomResizedCropAndInterpolation", "RandomHorizontalFlip", "RandAugment", "MaybeToTensor",
                     "Normalize", "RandomErasing"]  # no ColorJitter
    rrc, ra, erase = ours.transforms[0], ours.transforms[2], ours.transforms[5]
    assert str(rrc.interpolation.value) == "bicubic" and rrc.scale == (0.08, 1.0)
    assert len(ra.ops) == 15 and ra.num_layers == 2 and {op.magnitude for op in ra.ops} == {9}
    assert {op.kwargs["resample"] for op in ra.ops if "resample" in op.kwargs} == {Image.BICUBIC}
    assert erase.probability == 0.25 and erase.mode == "pixel" and erase.max_count == 1


def test_a_batch_equals_the_timm_pipeline_under_the_same_seeds():
    mean, std = IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
    aug = build_augment("mae", size=24, mean=mean, std=std)
    assert isinstance(aug, MAETransform)
    images = torch.randint(0, 256, (4, 3, 40, 40), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    before = (torch.get_rng_state(), random.getstate())
    got = aug(images, torch.Generator().manual_seed(3))
    assert torch.equal(torch.get_rng_state(), before[0]) and random.getstate() == before[1]
    # replay by hand: the batch seed, then per image a Python/NumPy seed drawn from torch's stream
    official = create_transform(input_size=24, is_training=True, color_jitter=None,
                                auto_augment="rand-m9-mstd0.5-inc1", interpolation="bicubic", re_prob=0.25,
                                re_mode="pixel", re_count=1, mean=mean, std=std)
    seed = int(torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(3)))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        want = []
        for img in images:
            s = int(torch.randint(0, 2**31 - 1, (1,)))
            random.seed(s)
            np.random.seed(s)
            want.append(official(Image.fromarray(img.permute(1, 2, 0).numpy())))
    assert got.shape == (4, 3, 24, 24) and torch.equal(got, torch.stack(want))
    assert not torch.equal(got, aug(images, torch.Generator().manual_seed(4)))


def test_one_channel_images_keep_one_channel():
    aug = build_augment("mae", size=16, mean=(0.5,), std=(0.25,))
    images = torch.randint(0, 256, (2, 1, 20, 20), generator=torch.Generator().manual_seed(1), dtype=torch.uint8)
    assert aug(images, torch.Generator().manual_seed(0)).shape == (2, 1, 16, 16)
