"""Long-tailed subsets by the CIFAR-LT rule, split-file reading and the file-backed image set."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from PIL import Image

from semcl.data import load
from semcl.data.fileset import FileImageSet
from semcl.data.longtail import longtail_counts, longtail_indices, longtail_subset_indices
from semcl.data.sets.splitfile import read_split_file
from semcl.data.synthetic import ensure_synthetic
from semcl.errors import DataError


@pytest.mark.parametrize(("imbalance", "total", "last", "groups"), [
    (100, 10_847, 5, (35, 35, 30)), (50, 12_608, 10, (41, 41, 18)), (10, 19_573, 50, (69, 31, 0)),
    (200, 9_502, 2, (30, 31, 39)),
])
def test_cifar100_lt_counts_match_the_formula(imbalance, total, last, groups):
    counts = longtail_counts(500, 100, imbalance)
    # n_i = int(500 * (1/IF)**(i/99)), written out independently of the implementation
    assert counts == [int(500 * (1 / imbalance) ** (i / 99)) for i in range(100)]
    assert (sum(counts), counts[0], counts[-1]) == (total, 500, last)
    many = sum(n > 100 for n in counts)
    few = sum(n < 20 for n in counts)
    assert (many, 100 - many - few, few) == groups


def test_selection_replays_the_seeded_per_class_shuffle():
    labels = torch.arange(10).repeat_interleave(50)[torch.randperm(500, generator=torch.Generator().manual_seed(1))]
    counts = longtail_counts(50, 10, 10)
    got = longtail_indices(labels, counts, seed=0)
    rng = np.random.RandomState(0)  # what np.random.seed(0) + np.random.shuffle do, class by class
    want = []
    for c, n in enumerate(counts):
        idx = np.where(labels.numpy() == c)[0]
        rng.shuffle(idx)
        want += idx[:n].tolist()
    assert got.tolist() == sorted(want)
    assert torch.bincount(labels[got]).tolist() == counts
    assert not torch.equal(got, longtail_indices(labels, counts, seed=1))
    assert torch.equal(got, longtail_subset_indices(labels, 10, 10))  # n_max = 50, seed 0 by default


def test_too_few_images_for_the_rule_is_a_data_error():
    with pytest.raises(DataError, match="class 0 has 3 images"):
        longtail_indices(torch.zeros(3, dtype=torch.long), [5], seed=0)


def _jpeg(path, value):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((40, 60, 3), value, dtype=np.uint8)).save(path)


def test_split_files_are_read_with_labels_names_and_checksums(tmp_path):
    base = tmp_path / "Places_LT"
    lines = {"train": ["train/airfield/a.jpg 0", "train/airfield/b.jpg 0", "train/bakery/c.jpg 1"],
             "val": ["train/bakery/d.jpg 1"], "test": ["val/airfield/e.jpg 0", "val/bakery/f.jpg 1"]}
    for split, ls in lines.items():
        for i, ln in enumerate(ls):
            _jpeg(base / ln.split()[0], 40 * i)
        (base / f"Places_LT_{split}.txt").write_text("\n".join(ls) + "\n")
    train = load("places_lt", tmp_path, "train", image_size=16)
    assert train.class_names == ["airfield", "bakery"] and train.labels.tolist() == [0, 0, 1]
    test = load("places_lt", tmp_path, "test", image_size=16)
    val = load("places_lt", tmp_path, "val", image_size=16)
    assert (len(test), len(val)) == (2, 1)
    digest = hashlib.sha256((base / "Places_LT_test.txt").read_bytes()).hexdigest()
    assert test.sources == {"Places_LT/Places_LT_test.txt": digest}
    batch = test.images[torch.tensor([1, 0])]
    assert batch.shape == (2, 3, 16, 16) and batch.dtype == torch.uint8 and int(batch[1].max()) == 0
    assert len(train.subset(train.labels == 0)) == 2


def test_malformed_split_file_names_the_file_and_line(tmp_path):
    f = tmp_path / "ImageNet_LT" / "ImageNet_LT_train.txt"
    f.parent.mkdir()
    f.write_text("train/n1/a.JPEG 0\ntrain/n1/b.JPEG x\n")
    with pytest.raises(DataError, match=r"ImageNet_LT_train.txt: line 2"):
        read_split_file(f)
    with pytest.raises(DataError, match="missing ImageNet_LT/ImageNet_LT_test.txt"):
        load("imagenet_lt", tmp_path, "test")


def test_synthetic_layouts_read_back(tmp_path):
    ensure_synthetic(tmp_path, ["imagenet_lt", "inat18", "imagenet"], train_per_class=20, test_per_class=4)
    lt = load("imagenet_lt", tmp_path, "train", image_size=32)
    counts = torch.bincount(lt.labels).tolist()
    assert counts[0] == 20 and counts[-1] == 1 and counts == sorted(counts, reverse=True)
    assert len(load("inat18", tmp_path, "test", 32)) == len(load("inat18", tmp_path, "val", 32))
    full = load("imagenet", tmp_path, "test", image_size=32)
    assert isinstance(full, FileImageSet) and len(full) == 80 and full.num_classes == 20
