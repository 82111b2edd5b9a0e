"""The colour views split into a worker part (draws + resized crop) and a batched finish give today's
per-image torchvision pixels bit for bit, on the CPU, for every recipe the split covers."""

import numpy as np
import pytest
import torch
from PIL import Image

from semcl.data.fileset import FileImageSet
from semcl.data.views.build import build_augment
from semcl.data.views.colour_draw import RECORD, program_of
from semcl.data.views.colour_finish import finish
from semcl.data.views.colour_view import ENV, SplitColourView, split_colour
from semcl.data.views.file_views import ViewLoader, step_views, views_of_image
from semcl.data.views.handout import handout_of
from semcl.data.views.tvaugment import PerImageAugment, ViewCycle, image_transform

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
COLOUR = ("sim", "sim_cifar", "aug_cifar")  # every VIEW_RECIPES entry whose pipeline program_of accepts


def _images(n: int, size: int, seed: int, channels: int = 3) -> list[torch.Tensor]:
    """Whole images of varied sizes around `size`: noise, smooth gradients (low contrast, slow hue), greys
    (r = g = b: hue's flat branch) and saturated extremes (clamping at 0 and 255)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        h, w = (int(v) for v in torch.randint(size // 2 + 1, 2 * size, (2,), generator=g))
        img = torch.randint(0, 256, (channels, h, w), dtype=torch.uint8, generator=g)
        kind = i % 4
        if kind == 1:
            small = torch.randint(0, 256, (1, channels, 3, 4), generator=g).float()
            img = torch.nn.functional.interpolate(small, size=(h, w), mode="bilinear").round().to(torch.uint8)[0]
        elif kind == 2:
            img = img[:1].expand(channels, h, w).clone()
        elif kind == 3:
            img = torch.where(img > 127, 255, 0).to(torch.uint8)
        out.append(img)
    return out


def _per_image(tf, img, seed):
    return PerImageAugment(tf, mean=MEAN, std=STD).uint8_views([img], torch.Generator().manual_seed(seed))[0]


def _split(tf, images, seeds):
    """Each image's worker part under its own seed (as the loader does), then one batched finish."""
    view = SplitColourView(tf, mean=MEAN, std=STD)
    parts = [view.handout_views([im], torch.Generator().manual_seed(s)) for im, s in zip(images, seeds, strict=True)]
    crops, records = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    assert crops.dtype == torch.uint8 and records.dtype == torch.float64 and records.shape == (len(images), RECORD)
    return finish(crops, records, view.program, view.kernel)


@pytest.mark.parametrize("recipe", COLOUR)
@pytest.mark.parametrize(("size", "n"), [(12, 48), (32, 96), (33, 96), (96, 24), (224, 10)])
def test_split_equals_the_per_image_view_bit_for_bit(recipe, size, n):
    tf = image_transform(recipe, size)
    images = _images(n, size, seed=size)
    seeds = [1000 * size + 7 * i for i in range(n)]
    want = torch.stack([_per_image(tf, im, s) for im, s in zip(images, seeds, strict=True)])
    got = _split(tf, images, seeds)
    assert got.dtype == torch.uint8 and got.shape == want.shape
    assert int((got.int() - want.int()).abs().max()) == 0


def test_crop_scale_variant_and_one_channel_images_are_exact_too():
    tf = image_transform("sim_cifar", 32, crop_min=0.5)
    images, seeds = _images(40, 32, seed=3, channels=1), list(range(40))
    want = torch.stack([_per_image(tf, im, s) for im, s in zip(images, seeds, strict=True)])
    assert torch.equal(_split(tf, images, seeds), want)


def test_a_batch_drawn_under_one_generator_is_the_per_image_batch():
    # the in-memory path: one generator per batch, images drawn one after another under its seed
    tf = image_transform("sim", 32)
    batch = torch.stack([im[:, :40, :40] for im in _images(16, 48, seed=5) if min(im.shape[1:]) >= 40][:8])
    per_image = PerImageAugment(tf, mean=MEAN, std=STD)
    split = SplitColourView(tf, mean=MEAN, std=STD)
    assert torch.equal(split.uint8_views(batch, torch.Generator().manual_seed(9)),
                       per_image.uint8_views(batch, torch.Generator().manual_seed(9)))
    assert torch.equal(split(batch, torch.Generator().manual_seed(9)), per_image(batch, torch.Generator().manual_seed(9)))


def test_the_programs_follow_each_recipes_order_and_other_recipes_are_not_split():
    assert program_of(image_transform("sim", 32)) == (("jitter", "grey", "blur", "flip"), 13)
    assert program_of(image_transform("sim_cifar", 32)) == (("flip", "jitter", "grey", "blur"), 13)
    assert program_of(image_transform("aug_cifar", 12)) == (("flip", "jitter", "grey", "blur"), 11)
    # RandAugment / AutoAugment after the colour steps have no batched equal
    for name in ("randcls", "randclsstack", "autoaug_cutout"):
        assert program_of(image_transform(name, 32)) is None
    with pytest.raises(ValueError, match="colour split"):
        SplitColourView(image_transform("randclsstack", 32), mean=MEAN, std=STD)
    with pytest.raises(ValueError, match=r"colour finish: expected uint8 \[B, 1 or 3, S, S\] crops, got torch.float32"):
        finish(torch.zeros(2, 3, 8, 8), torch.zeros(2, RECORD, dtype=torch.float64), ("flip",), 0)


def test_the_setting_is_opt_in_and_splits_only_colour_views(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert type(build_augment("sim", size=32, mean=MEAN, std=STD)) is PerImageAugment
    monkeypatch.setenv(ENV, "device")
    pair = build_augment("randcls+sim_cifar", size=32, mean=MEAN, std=STD)
    assert isinstance(pair, ViewCycle) and [type(v) for v in pair.views] == [PerImageAugment, SplitColourView]
    assert type(split_colour(PerImageAugment(image_transform("randcls", 32), mean=MEAN, std=STD))) is PerImageAugment
    monkeypatch.setenv(ENV, "gpu")
    with pytest.raises(ValueError, match=r"SEMCL_COLOUR_FINISH: expected one of worker, device, got 'gpu'"):
        build_augment("sim", size=32, mean=MEAN, std=STD)


def test_the_loader_hands_out_crops_and_records_and_finishes_to_the_same_float_views(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(4):
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray(rng.integers(0, 256, (20 + i, 24, 3), dtype=np.uint8)).save(paths[-1])
    files = FileImageSet("toy", paths, torch.tensor([0, 1, 0, 1]), ["x", "y"], image_size=12)
    tf = image_transform("sim_cifar", 12)
    per_image, split = PerImageAugment(tf, mean=MEAN, std=STD), SplitColourView(tf, mean=MEAN, std=STD)
    handed = views_of_image(torch.from_numpy(np.array(Image.open(paths[0]))).permute(2, 0, 1).contiguous(),
                            [split], [3])[0]
    assert isinstance(handed, tuple) and handed[0].shape == (3, 12, 12) and handed[1].shape == (RECORD,)
    assert handout_of(split).program == split.program
    kw = dict(seed=5, epoch=0, order=torch.arange(4), batch_size=2, steps=range(2), part=slice(0, 2))
    want = [v for v, _ in step_views(files.train_images, [per_image, per_image], **kw)]
    got = [v for v, _ in step_views(files.train_images, [split, split], loader=ViewLoader(files.train_images), **kw)]
    for step in range(2):
        assert all(a.dtype == torch.float32 and torch.equal(a, b) for a, b in zip(got[step], want[step], strict=True))
