"""The training loader's workers persist across epochs and still give a fresh loader's views."""

import numpy as np
import pytest
import torch
from PIL import Image

from semcl.data.fileset import FileImageSet
from semcl.data.views.augment import RECIPES, Augment
from semcl.data.views.file_views import ViewLoader, step_views
from semcl.data.views.tvaugment import PerImageAugment, image_transform

MEAN, STD = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
SIZE = 12


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(3)
    paths = []
    for i, (w, h) in enumerate([(30, 20), (17, 25), (24, 24), (35, 18), (20, 32), (26, 22)]):
        paths.append(tmp_path / f"{i}.jpg")
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(paths[-1], quality=90)
    return FileImageSet("toy", paths, torch.tensor([0, 1, 0, 1, 0, 1]), ["x", "y"], image_size=SIZE)


def _augs():
    return [PerImageAugment(image_transform("sim", SIZE), mean=MEAN, std=STD),
            Augment(RECIPES["crop_flip"], size=SIZE, mean=MEAN, std=STD)]


def _epoch(files, augs, epoch, **kw):
    order = torch.randperm(6, generator=torch.Generator().manual_seed(epoch))
    return list(step_views(files.train_images, augs, seed=9, epoch=epoch, order=order, batch_size=2,
                           steps=range(3), part=slice(0, 2), **kw))


def _pids(loader):
    return [w.pid for w in loader._loader._iterator._workers]


def test_two_persistent_workers_over_epochs_give_the_in_process_views_and_start_once(files):
    augs = _augs()

    # HSA-like partners whose pick changes at each epoch (its table is mined at the epoch's start)
    def pick_for(epoch):
        return lambda row, g: [(row + 1 + epoch + int(torch.randint(2, (1,), generator=g))) % 6]

    loader = ViewLoader(files.train_images, workers=2)
    pids = []
    for epoch in range(3):
        kw = dict(partners=pick_for(epoch), partner_recipes=augs)
        got = _epoch(files, augs, epoch, loader=loader, **kw)
        pids.append(_pids(loader))
        want = _epoch(files, augs, epoch, **kw)  # a fresh in-process loader
        assert len(got) == 3
        for (v, p), (wv, wp) in zip(got, want, strict=True):
            assert all(torch.equal(a, b) for a, b in zip(v, wv, strict=True))
            assert len(p) == 1 and all(torch.equal(a, b) for a, b in zip(p[0], wp[0], strict=True))
    assert loader.starts == 1 and pids[0] == pids[1] == pids[2] and len(set(pids[0])) == 2
    # other recipes: the workers are rebuilt (their dataset holds the recipes)
    _epoch(files, augs[:1], 3, loader=loader)
    assert loader.starts == 2
    loader.close()
    assert loader._loader is None
