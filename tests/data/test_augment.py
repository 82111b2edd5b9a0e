"""Batched augmentations against hand-computed values and torchvision's functional ops."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import torchvision.transforms.functional as TF

from semcl.data import stats
from semcl.data.views.augment import RECIPES, Augment, Recipe, two_views
from semcl.data.views.build import build_augment
from semcl.data.views.crop import crop_flip, pad_crop_flip, sample_crop_boxes
from semcl.data.views.jitter import (
    adjust_brightness,
    adjust_contrast,
    adjust_hue,
    adjust_saturation,
    hsv_to_rgb,
    rgb_to_grayscale,
    rgb_to_hsv,
)

MEAN, STD = stats("cifar100")


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _images(n: int = 8, c: int = 3, size: int = 32, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (n, c, size, size), dtype=torch.uint8, generator=_gen(seed))


def _normalised(images: torch.Tensor, mean=MEAN, std=STD) -> torch.Tensor:
    return TF.normalize(images.float() / 255.0, list(mean), list(std))


def _floats(n: int = 6, seed: int = 0) -> torch.Tensor:
    """Random float RGB images with some gray pixels and channel ties (hue edge cases)."""
    x = torch.rand((n, 3, 12, 12), generator=_gen(seed))
    x[0, :, :4] = x[0, :1, :4]  # gray
    x[1, 1] = x[1, 0]  # r == g
    x[2, 2] = x[2, 1]  # g == b
    return x


@pytest.mark.parametrize("recipe", list(RECIPES))
@pytest.mark.parametrize("channels", [1, 3])
def test_shapes_dtype_and_determinism(recipe: str, channels: int) -> None:
    mean, std = stats("cifar10" if channels == 3 else "mnist")
    aug = build_augment(recipe, size=24, mean=mean, std=std)
    images = _images(c=channels)
    out = aug(images, _gen(5))
    assert out.shape == (8, channels, 24, 24) and out.dtype == torch.float32
    assert torch.equal(out, aug(images, _gen(5)))
    if recipe != "test":
        assert not torch.equal(out, aug(images, _gen(6)))


def test_identity_crop_reproduces_normalised_image() -> None:
    aug = Augment(Recipe(crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0)), size=32, mean=MEAN, std=STD)
    images = _images()
    torch.testing.assert_close(aug(images, _gen()), _normalised(images), atol=1e-5, rtol=0)


def test_flip_on_hand_made_image() -> None:
    image = torch.tensor([[[[10, 20], [30, 40]]]], dtype=torch.uint8)
    aug = Augment(Recipe(crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0), flip_p=1.0),
                  size=2, mean=(0.0,), std=(1.0,))
    expected = torch.tensor([[[[20, 10], [40, 30]]]]) / 255.0
    torch.testing.assert_close(aug(image, _gen()), expected, atol=1e-6, rtol=0)


def test_crop_matches_torchvision_resized_crop_inside_the_box() -> None:
    """An 8×8 box upscaled to 32: identical to torchvision away from the box edge.

    Only the outer ring differs: we read the real neighbours where torchvision clamps.
    """
    x = torch.rand((2, 3, 32, 32), generator=_gen())
    boxes = torch.tensor([[4, 6, 8, 8], [10, 3, 16, 12]])
    ours = crop_flip(x, boxes, torch.tensor([False, True]), 32)
    for k, (top, left, h, w) in enumerate(boxes.tolist()):
        ref = TF.resized_crop(x[k], top, left, h, w, [32, 32], antialias=True)
        if k == 1:
            ref = ref.flip(-1)
        torch.testing.assert_close(ours[k, :, 3:-3, 3:-3], ref[:, 3:-3, 3:-3], atol=1e-5, rtol=0)


def test_crop_boxes_follow_scale_ratio_and_fallback() -> None:
    boxes = sample_crop_boxes(2000, 32, 48, (0.2, 1.0), (3 / 4, 4 / 3), _gen())
    top, left, h, w = boxes.unbind(1)
    assert torch.all((top >= 0) & (left >= 0) & (top + h <= 32) & (left + w <= 48))
    area = (h * w).double() / (32 * 48)
    assert area.min() > 0.18 and area.max() <= 1.0
    assert (w.double() / h).min() > 0.7 and (w.double() / h).max() < 1.4
    # No box with aspect ratio in [10, 20] fits a square image: centred fallback.
    fallback = sample_crop_boxes(3, 32, 32, (0.5, 1.0), (10.0, 20.0), _gen())
    assert fallback.tolist() == [[14, 0, 3, 32]] * 3


def test_brightness_contrast_saturation_match_torchvision() -> None:
    x = _floats()
    factors = torch.tensor([0.6, 0.8, 1.0, 1.2, 1.4, 0.95])
    for ours, theirs in ((adjust_brightness, TF.adjust_brightness),
                         (adjust_contrast, TF.adjust_contrast),
                         (adjust_saturation, TF.adjust_saturation)):
        ref = torch.stack([theirs(x[i], float(f)) for i, f in enumerate(factors)])
        torch.testing.assert_close(ours(x, factors), ref, atol=1e-6, rtol=0)
    gray = x[:, :1]
    ref = torch.stack([TF.adjust_contrast(gray[i], float(f)) for i, f in enumerate(factors)])
    torch.testing.assert_close(adjust_contrast(gray, factors), ref, atol=1e-6, rtol=0)
    assert torch.equal(adjust_saturation(gray, factors), gray)
    assert torch.equal(adjust_hue(gray, factors * 0), gray)


@pytest.mark.parametrize("shift", [-0.5, -0.1, -0.03, 0.0, 0.05, 0.1, 0.5])
def test_hue_matches_torchvision(shift: float) -> None:
    x = _floats()
    ref = torch.stack([TF.adjust_hue(img, shift) for img in x])
    torch.testing.assert_close(adjust_hue(x, torch.full((6,), shift)), ref, atol=1e-5, rtol=0)


def test_grayscale_and_hsv_round_trip() -> None:
    x = _floats()
    torch.testing.assert_close(rgb_to_grayscale(x), TF.rgb_to_grayscale(x), atol=1e-6, rtol=0)
    hsv = rgb_to_hsv(x)
    assert hsv.min() >= 0 and hsv.max() <= 1
    assert torch.all(hsv[0, :2, :4] == 0)  # gray pixels: hue and saturation 0
    torch.testing.assert_close(hsv_to_rgb(hsv), x, atol=1e-5, rtol=0)
    # Pure red, yellow, green, cyan, blue, magenta sit at sixths of a turn.
    primaries = torch.tensor([[1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 1, 1], [0, 0, 1], [1, 0, 1.0]])
    hue = rgb_to_hsv(primaries.T.reshape(1, 3, 1, 6))[0, 0, 0]
    torch.testing.assert_close(hue, torch.arange(6) / 6.0)


def test_grayscale_only_recipe_and_jitter_probability() -> None:
    images = _images(n=64)
    gray = Augment(Recipe(gray_p=1.0), size=32, mean=(0, 0, 0), std=(1, 1, 1))
    expected = TF.rgb_to_grayscale(images.float() / 255, num_output_channels=3)
    torch.testing.assert_close(gray(images, _gen()), expected, atol=1e-6, rtol=0)
    # With jitter_p = 0.5, untouched samples stay bit-exact, the rest change.
    half = Augment(Recipe(jitter_p=0.5, brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1),
                   size=32, mean=(0, 0, 0), std=(1, 1, 1))
    out = half(images, _gen())
    same = (out == images.float() / 255).flatten(1).all(dim=1)
    assert 16 <= int(same.sum()) <= 48


def test_jitter_pipeline_equals_torchvision_per_image() -> None:
    """Replays the documented draw order (apply flags, four factors, op order) and applies
    torchvision's functional ops image by image in each image's own random order."""
    images = _images(n=32)
    recipe = Recipe(jitter_p=0.8, brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1)
    out = Augment(recipe, size=32, mean=(0, 0, 0), std=(1, 1, 1))(images, _gen(7))
    g = _gen(7)
    chosen = torch.rand(32, generator=g) < 0.8
    bright, contrast, sat = (torch.rand(32, generator=g) * 0.8 + 0.6 for _ in range(3))
    hue = torch.rand(32, generator=g) * 0.2 - 0.1
    order = torch.rand((32, 4), generator=g).argsort(dim=1)
    ops = [(TF.adjust_brightness, bright), (TF.adjust_contrast, contrast),
           (TF.adjust_saturation, sat), (TF.adjust_hue, hue)]
    for i in range(32):
        ref = images[i].float() / 255
        if chosen[i]:
            for op in order[i].tolist():
                fn, factors = ops[op]
                ref = fn(ref, float(factors[i]))
        torch.testing.assert_close(out[i], ref, atol=1e-5, rtol=0)
    assert 0 < int(chosen.sum()) < 32


def test_test_recipe_resizes_only_when_needed() -> None:
    big = _images(n=2, size=64)
    aug = build_augment("test", size=32, mean=MEAN, std=STD)
    ref = F.interpolate(big.float() / 255, size=(32, 32), mode="bilinear", antialias=True)
    torch.testing.assert_close(aug(big, _gen()), TF.normalize(ref, list(MEAN), list(STD)))
    small = _images(n=2)
    assert torch.equal(aug(small, _gen()), _normalised(small))


def test_two_views_differ_and_errors() -> None:
    aug = build_augment("supcon", size=32, mean=MEAN, std=STD)
    v1, v2 = two_views(aug, _images(), _gen())
    assert v1.shape == v2.shape == (8, 3, 32, 32) and not torch.equal(v1, v2)
    with pytest.raises(ValueError, match="unknown augmentation recipe"):
        build_augment("autoaugment", size=32, mean=MEAN, std=STD)
    with pytest.raises(ValueError, match="1-channel images with 3-channel"):
        aug(_images(c=1), _gen())
    with pytest.raises(ValueError, match="expected uint8"):
        aug(_images().float(), _gen())


def test_pad_crop_flip_on_hand_made_image() -> None:
    """RandomCrop(4, padding=1) of a 4×4 ramp at offsets (0, 0) and (2, 1), then the mirrored crop."""
    img = torch.arange(16, dtype=torch.float32).view(1, 1, 4, 4).repeat(2, 1, 1, 1)
    out = pad_crop_flip(img, torch.tensor([[0, 0], [2, 1]]), torch.tensor([False, True]), pad=1)
    # padded[r][c] = img[r-1][c-1] inside, 0 on the one-pixel border
    top_left = [[0, 0, 0, 0], [0, 0, 1, 2], [0, 4, 5, 6], [0, 8, 9, 10]]
    # rows 2..5, cols 1..4 of the padded image = img rows 1..3 (+ a zero row), cols 0..3; then mirrored
    shifted = [[4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15], [0, 0, 0, 0]]
    assert out[0, 0].tolist() == top_left
    assert out[1, 0].tolist() == [row[::-1] for row in shifted]


def test_pad_crop_recipe_equals_torchvision_random_crop_with_the_same_draws() -> None:
    """The `pad_crop` recipe = RandomCrop(32, padding=4) + flip + normalise per image, given its draws."""
    images = _images(n=6)
    gen = _gen(3)
    out = build_augment("pad_crop", size=32, mean=MEAN, std=STD)(images, gen)
    replay = _gen(3)
    offsets = torch.randint(0, 9, (6, 2), generator=replay)
    flips = torch.rand(6, generator=replay) < 0.5
    for i in range(6):
        padded = TF.pad(images[i], [4])  # fill 0, as RandomCrop(padding=4)
        crop = TF.crop(padded, int(offsets[i, 0]), int(offsets[i, 1]), 32, 32)
        crop = TF.hflip(crop) if flips[i] else crop
        assert torch.equal(out[i], _normalised(crop[None])[0])
    assert flips.any() and not flips.all() and (offsets.max() > 4) and (offsets.min() < 4)


def test_pad_crop_padding_scales_with_size() -> None:
    """64×64 (Tiny-ImageNet) pads 8: a crop can show an 8-pixel black border, never more."""
    images = torch.full((64, 1, 64, 64), 255, dtype=torch.uint8)
    out = build_augment("pad_crop", size=64, mean=(0.0,), std=(1.0,))(images, _gen(0))
    zero_rows = (out == 0).all(dim=3).sum(dim=2).squeeze(1)  # all-black rows per image
    zero_cols = (out == 0).all(dim=2).sum(dim=2).squeeze(1)
    assert int(zero_rows.max()) == 8 and int(zero_cols.max()) == 8 and int(zero_rows.min()) == 0
