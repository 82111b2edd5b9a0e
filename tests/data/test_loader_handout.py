"""uint8 views out of the workers, normalised on the device to the float path's exact values."""

import numpy as np
import pytest
import torch
from PIL import Image

from semcl.data.fileset import FileImageSet
from semcl.data.views.augment import RECIPES, Augment
from semcl.data.views.file_views import ViewLoader, step_views, views_of_image
from semcl.data.views.handout import UInt8Normalise, handout_of, normalise_lut
from semcl.data.views.tvaugment import PerImageAugment, image_transform

IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
ODD = ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762))  # CIFAR-100's


def _float_path(x: torch.Tensor, mean, std) -> torch.Tensor:
    """PerImageAugment's normalisation, as it runs after its per-image transform."""
    m = torch.tensor([float(v) for v in mean]).view(1, -1, 1, 1)
    s = torch.tensor([float(v) for v in std]).view(1, -1, 1, 1)
    return x.float().div_(255.0).sub_(m).div_(s)


@pytest.mark.parametrize(("mean", "std"), [IMAGENET, ODD, ((0.5,), (0.25,))])
def test_the_table_is_the_float_path_for_every_input_value(mean, std):
    # all 256 values of every channel: the gather cannot differ from the arithmetic on any image
    c = len(mean)
    every = torch.arange(256, dtype=torch.uint8).view(1, 1, 16, 16).repeat(1, c, 1, 1)
    want = _float_path(every, mean, std)
    assert torch.equal(normalise_lut(mean, std), want[0].flatten(1))
    assert torch.equal(UInt8Normalise(mean, std)(every), want)


def test_a_uint8_batch_normalises_bit_identically_and_bad_input_is_refused():
    x = torch.randint(0, 256, (3, 3, 7, 5), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    norm = UInt8Normalise(*IMAGENET)
    got = norm(x)
    assert got.dtype == torch.float32 and torch.equal(got, _float_path(x, *IMAGENET))
    with pytest.raises(ValueError, match=r"expected uint8 \[B, 3, H, W\], got torch.float32"):
        norm(x.float())
    with pytest.raises(ValueError, match=r"expected uint8 \[B, 3, H, W\]"):
        norm(x[:, :1])


def test_per_image_recipes_hand_out_uint8_batched_ones_their_floats(tmp_path):
    image = torch.randint(0, 256, (3, 30, 40), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    tv = PerImageAugment(image_transform("sim", 16), mean=IMAGENET[0], std=IMAGENET[1])
    batched = Augment(RECIPES["supcon"], size=16, mean=IMAGENET[0], std=IMAGENET[1])
    out = views_of_image(image, [tv, batched], [11, 12])
    assert out[0].dtype == torch.uint8 and out[1].dtype == torch.float32
    assert handout_of(batched) is None
    # the handed-out view, finished, is the recipe's own float view
    assert torch.equal(handout_of(tv)(out[0][None])[0], tv([image], torch.Generator().manual_seed(11))[0])


def test_step_views_give_float_views_on_the_device_and_the_loader_keeps_one_table_per_recipe(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(4):
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray(rng.integers(0, 256, (20 + i, 24, 3), dtype=np.uint8)).save(paths[-1])
    files = FileImageSet("toy", paths, torch.tensor([0, 1, 0, 1]), ["x", "y"], image_size=12)
    tv = PerImageAugment(image_transform("sim", 12), mean=IMAGENET[0], std=IMAGENET[1])
    loader = ViewLoader(files.train_images)
    kw = dict(seed=5, epoch=0, order=torch.arange(4), batch_size=2, steps=range(2), part=slice(0, 2))
    got = [v for v, _ in step_views(files.train_images, [tv, tv], loader=loader, device=torch.device("cpu"), **kw)]
    assert [v.dtype for v in got[0]] == [torch.float32] * 2
    assert loader.finishers[0] is loader.finishers[1] and loader.starts == 1
    fresh = [v for v, _ in step_views(files.train_images, [tv, tv], **kw)]
    assert all(torch.equal(a, b) for step in range(2) for a, b in zip(got[step], fresh[step], strict=True))
