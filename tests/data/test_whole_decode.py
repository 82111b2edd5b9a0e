"""File-backed training views are cut from the whole image, not from the evaluation centre crop."""

import numpy as np
import pytest
import torch
from PIL import Image

from semcl.data.fileset import FileImageSet, decode_whole
from semcl.data.views.augment import Augment, Recipe, centre_squares
from semcl.data.views.crop import resize, sample_crop_boxes
from semcl.methods.base import Method

MEAN, STD = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)


def _striped(path, w, h):
    """Black image with a white stripe in its 10 leftmost columns: the eval decode cuts the stripe away."""
    arr = np.zeros((h, w, 3), dtype=np.uint8)
    arr[:, :10] = 255
    arr[:, :, 1] = np.arange(w, dtype=np.uint8)[None, :] % 251  # a horizontal ramp in green
    Image.fromarray(arr).save(path)
    return arr


@pytest.fixture
def files(tmp_path):
    arrs = [_striped(tmp_path / "a.png", 150, 100), _striped(tmp_path / "b.png", 90, 120)]
    fs = FileImageSet("toy", [tmp_path / "a.png", tmp_path / "b.png"], torch.tensor([0, 1]), ["x", "y"],
                      image_size=32)
    return fs, arrs


def test_train_images_are_the_whole_files_and_images_stay_the_eval_crop(files):
    fs, arrs = files
    whole = fs.train_images[torch.tensor([0, 1])]
    assert [tuple(t.shape) for t in whole] == [(3, 100, 150), (3, 120, 90)]
    for t, arr in zip(whole, arrs, strict=True):
        assert torch.equal(t, torch.from_numpy(arr).permute(2, 0, 1))
    assert torch.equal(decode_whole(fs.paths[0]), whole[0])
    assert fs.train_images.shape == fs.images.shape == (2, 3, 32, 32)
    assert fs.images[[0]][0, 0, :, 0].max() == 0  # the eval decode has lost the stripe ...
    assert fs.subset([1]).train_images[[0]][0].shape == (3, 120, 90)


def test_a_full_image_box_shows_the_borders_the_eval_crop_drops(files):
    fs, _ = files
    # area 1 at the image's own aspect ratio: the only box that fits is the whole image
    aug = Augment(Recipe(crop_scale=(1.0, 1.0), crop_ratio=(1.5, 1.5)), size=32, mean=MEAN, std=STD)
    out = aug(fs.train_images[[0]], torch.Generator().manual_seed(0))
    want = resize(decode_whole(fs.paths[0])[None].float() / 255, 32)
    torch.testing.assert_close(out, (want - 0.5) / 0.25, rtol=0, atol=1e-6)
    assert out[0, 0, :, 0].min() > 1.5  # ... which the training view keeps (white = (1 - 0.5) / 0.25 = 2)


def test_boxes_come_from_each_image_then_flips_then_colour_as_in_a_batch(files):
    fs, _ = files
    recipe = Recipe(crop_scale=(0.2, 1.0), flip_p=0.5, jitter_p=0.0)
    aug = Augment(recipe, size=24, mean=MEAN, std=STD)
    images = fs.train_images[[0, 1, 0]]
    for seed in range(5):
        out = aug(images, torch.Generator().manual_seed(seed))
        g = torch.Generator().manual_seed(seed)
        boxes = [sample_crop_boxes(1, im.shape[1], im.shape[2], recipe.crop_scale, recipe.crop_ratio, g)[0]
                 for im in images]
        flips = torch.rand(3, generator=g) < 0.5
        for i, (im, (top, left, h, w)) in enumerate(zip(images, boxes, strict=True)):
            assert 0 <= top and top + h <= im.shape[1] and 0 <= left and left + w <= im.shape[2]
            ref = resize(im[None, :, top:top + h, left:left + w].float() / 255, 24)
            ref = ref.flip(-1) if flips[i] else ref
            torch.testing.assert_close(out[i:i + 1], (ref - 0.5) / 0.25, rtol=0, atol=1e-6)


def test_a_recipe_without_a_random_crop_sees_the_centre_square(files):
    fs, _ = files
    images = fs.train_images[[0, 1]]
    sq = centre_squares(images, 32)
    assert sq.shape == (2, 3, 32, 32) and sq.dtype == torch.uint8
    ref = resize(images[0][None, :, :, 25:125].float(), 32).round().clamp(0, 255).to(torch.uint8)
    assert torch.equal(sq[:1], ref)
    out = Augment(Recipe(), size=32, mean=MEAN, std=STD)(images, torch.Generator().manual_seed(0))
    torch.testing.assert_close(out, (sq.float() / 255 - 0.5) / 0.25)


def test_per_image_recipes_take_whole_images_under_the_batch_seed(files):
    from torchvision.transforms import v2

    from semcl.data.views.tvaugment import PerImageAugment

    fs, _ = files
    tf = v2.Compose([v2.RandomResizedCrop(20, scale=(0.08, 1.0), antialias=True), v2.RandomHorizontalFlip()])
    aug = PerImageAugment(tf, mean=MEAN, std=STD)
    images = fs.train_images[[0, 1]]
    out = aug(images, torch.Generator().manual_seed(3))
    seed = int(torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(3)))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        ref = torch.stack([tf(im) for im in images]).float() / 255
    torch.testing.assert_close(out, (ref - 0.5) / 0.25)
    with pytest.raises(ValueError, match="list of uint8"):
        aug([images[0].float()], torch.Generator())


def test_make_views_cuts_training_views_from_the_whole_images(files):
    fs, _ = files
    aug = Augment(Recipe(crop_scale=(1.0, 1.0), crop_ratio=(1.5, 1.5)), size=32, mean=MEAN, std=STD)
    method = Method.__new__(Method)
    method.num_views = 2
    views = Method.make_views(method, fs, torch.tensor([0]), torch.Generator().manual_seed(0), [aug])
    assert len(views) == 2 and views[0].shape == (1, 3, 32, 32)
    assert views[0][0, 0, :, 0].min() > 1.5  # the stripe is there: the whole image, not the eval crop


def test_batches_decode_on_threads_to_the_same_tensors_in_order(tmp_path, monkeypatch):
    from semcl.errors import DataError

    rng = np.random.default_rng(1)
    paths = []
    for i in range(9):
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray(rng.integers(0, 256, (20 + i, 30 - i, 3), dtype=np.uint8)).save(paths[-1])
    fs = FileImageSet("toy", paths, torch.zeros(9, dtype=torch.long), ["x"], image_size=16)
    rows = torch.tensor([8, 0, 3, 3, 5, 1, 7])
    monkeypatch.setenv("SEMCL_DECODE_THREADS", "1")
    one_eval, one_whole = fs.images[rows], fs.train_images[rows]
    monkeypatch.setenv("SEMCL_DECODE_THREADS", "3")
    assert torch.equal(fs.images[rows], one_eval)
    threaded = fs.train_images[rows]
    assert [t.shape[1:] for t in threaded] == [(20 + i, 30 - i) for i in rows.tolist()]
    assert all(torch.equal(a, b) for a, b in zip(threaded, one_whole, strict=True))
    paths[3].write_bytes(b"broken")  # an error on a pool thread is the same one line
    with pytest.raises(DataError, match=r"3\.png: cannot decode image"):
        fs.train_images[rows]
    monkeypatch.setenv("SEMCL_DECODE_THREADS", "0")
    with pytest.raises(DataError, match="SEMCL_DECODE_THREADS: expected a whole number >= 1, got '0'"):
        fs.images[rows]
