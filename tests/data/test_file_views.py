"""File-backed training views made per image in loader workers: each view a function of its position."""

import os

import numpy as np
import pytest
import torch
from PIL import Image

from semcl.data.fileset import FileImageSet, decode_whole
from semcl.data.views.augment import RECIPES, Augment
from semcl.data.views.file_views import image_seed, loader_workers, step_views
from semcl.data.views.tvaugment import PerImageAugment, image_transform
from semcl.errors import DataError

MEAN, STD = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
SIZE = 24


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for i, (w, h) in enumerate([(60, 40), (33, 50), (48, 48), (70, 35), (40, 64)]):
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(paths[-1])
    return FileImageSet("toy", paths, torch.tensor([0, 1, 0, 1, 0]), ["x", "y"], image_size=SIZE)


def _augs():
    # a batched recipe and a per-image torchvision one, view k takes augs[k % 2]
    return [Augment(RECIPES["supcon"], size=SIZE, mean=MEAN, std=STD),
            PerImageAugment(image_transform("sim", SIZE), mean=MEAN, std=STD)]


def _by_hand(fs, augs, order, bs, step, positions, seed, epoch):
    """Each view from its own generator, seeded from (seed, epoch, step, position, view), on the decoded file."""
    out = [[] for _ in augs]
    for p in positions:
        image = decode_whole(fs.paths[int(order[step * bs + p])])
        for k, aug in enumerate(augs):
            g = torch.Generator().manual_seed(image_seed(seed, epoch, step, p, k))
            out[k].append(aug([image], g)[0])
    return [torch.stack(v) for v in out]


def test_image_seed_is_a_fixed_63_bit_hash_of_all_five_numbers():
    base = image_seed(1, 2, 3, 4, 5)
    assert base == image_seed(1, 2, 3, 4, 5) and 0 <= base < 2**63
    variants = {image_seed(*args) for args in [(1, 2, 3, 4, 5), (0, 2, 3, 4, 5), (1, 0, 3, 4, 5), (1, 2, 0, 4, 5),
                                               (1, 2, 3, 0, 5), (1, 2, 3, 4, 0), (2, 1, 3, 4, 5), (1, 2, 3, 5, 4)]}
    assert len(variants) == 8  # any change, or a swap of two numbers, gives another seed


def test_views_equal_a_by_hand_replay_from_each_positions_seed(files):
    order = torch.tensor([3, 1, 4, 0, 2])
    got = [views for views, partners in step_views(files.train_images, _augs(), seed=7, epoch=1, order=order,
                                                   batch_size=2, steps=range(2), part=slice(0, 2))]
    assert len(got) == 2 and [tuple(v.shape) for v in got[0]] == [(2, 3, SIZE, SIZE)] * 2
    for step in range(2):
        want = _by_hand(files, _augs(), order, 2, step, range(2), seed=7, epoch=1)
        for v, w in zip(got[step], want, strict=True):
            assert torch.equal(v, w)
    # the same image at another position, step or epoch is cut anew
    again = [v for v, _ in step_views(files.train_images, _augs(), seed=7, epoch=2, order=order, batch_size=2,
                                      steps=range(2), part=slice(0, 2))]
    assert not torch.equal(again[0][0], got[0][0])


def test_workers_rank_slices_and_a_late_start_give_the_same_views(files):
    order = torch.tensor([4, 2, 0, 3, 1])
    kw = dict(seed=3, epoch=0, order=order, batch_size=4, steps=range(1))
    whole = next(step_views(files.train_images, _augs(), part=slice(0, 4), **kw))[0]
    two_workers = next(step_views(files.train_images, _augs(), part=slice(0, 4), workers=2, **kw))[0]
    rank0 = next(step_views(files.train_images, _augs(), part=slice(0, 2), workers=1, **kw))[0]
    rank1 = next(step_views(files.train_images, _augs(), part=slice(2, 4), **kw))[0]
    for k in range(2):
        assert torch.equal(two_workers[k], whole[k])
        assert torch.equal(torch.cat([rank0[k], rank1[k]]), whole[k])
    # a resumed epoch that starts at step 1 sees what the whole epoch saw at step 1
    order = torch.tensor([0, 1, 2, 3, 4])
    full = list(step_views(files.train_images, _augs(), seed=3, epoch=0, order=order, batch_size=2,
                           steps=range(2), part=slice(0, 2)))
    late = list(step_views(files.train_images, _augs(), seed=3, epoch=0, order=order, batch_size=2,
                           steps=range(1, 2), part=slice(0, 2)))
    assert len(late) == 1 and all(torch.equal(a, b) for a, b in zip(late[0][0], full[1][0], strict=True))


def test_partners_are_picked_and_cut_from_their_own_seeds(files):
    # a pick that draws two distinct other images from its generator (as a kNN pick would)
    def pick(row, g):
        others = [r for r in range(5) if r != row]
        return [others[i] for i in torch.randperm(4, generator=g)[:2].tolist()]

    order = torch.tensor([2, 0, 4, 1, 3])
    aug = Augment(RECIPES["crop_flip"], size=SIZE, mean=MEAN, std=STD)
    views, partners = next(step_views(files.train_images, [aug], seed=1, epoch=3, order=order, batch_size=2,
                                      steps=range(1), part=slice(0, 2), partners=pick, partner_recipes=_augs(),
                                      workers=1))
    assert len(views) == 1 and len(partners) == 2 and all(len(p) == 2 for p in partners)
    for p in range(2):
        # view numbers: the image's own view 0, the pick 1, partner j's views 2 + 2 j and 3 + 2 j
        picked = pick(int(order[p]), torch.Generator().manual_seed(image_seed(1, 3, 0, p, 1)))
        for j, other in enumerate(picked):
            image = decode_whole(files.paths[other])
            for t, recipe in enumerate(_augs()):
                g = torch.Generator().manual_seed(image_seed(1, 3, 0, p, 2 + 2 * j + t))
                assert torch.equal(partners[j][t][p], recipe([image], g)[0])
        own = aug([decode_whole(files.paths[int(order[p])])], torch.Generator().manual_seed(image_seed(1, 3, 0, p, 0)))
        assert torch.equal(views[0][p], own[0])


def test_an_unreadable_file_is_one_line_naming_it_from_a_worker(files):
    files.paths[2].write_bytes(b"not a png")
    with pytest.raises(DataError) as err:
        list(step_views(files.train_images, _augs(), seed=0, epoch=0, order=torch.arange(5), batch_size=4,
                        steps=range(1), part=slice(0, 4), workers=1))
    assert "\n" not in str(err.value) and str(err.value).startswith(f"{files.paths[2]}: cannot decode image")


def test_loader_workers_read_the_environment_and_default_to_none_on_the_cpu(monkeypatch):
    monkeypatch.delenv("SEMCL_LOADER_WORKERS", raising=False)
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    assert loader_workers(torch.device("cpu")) == 0
    cpus = len(os.sched_getaffinity(0))
    assert loader_workers(torch.device("cuda")) == min(16, cpus - 1)  # the process's CPUs less one
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    assert loader_workers(torch.device("cuda")) == 0  # a SLURM task's share, not the node's
    monkeypatch.setenv("SEMCL_LOADER_WORKERS", "3")
    assert loader_workers(torch.device("cpu")) == 3
    monkeypatch.setenv("SEMCL_LOADER_WORKERS", "many")
    with pytest.raises(DataError, match="SEMCL_LOADER_WORKERS: expected a whole number >= 0, got 'many'"):
        loader_workers(torch.device("cpu"))
