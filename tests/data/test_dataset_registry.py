"""The dataset registry: every reference resolves, and every fact agrees with what the synthetic
writer writes and the reader reads back (class count, channels, image size, hierarchy, folder)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from semcl.data import DATASETS, DatasetSpec, dataset_spec, load, resolve, stats, write_synthetic
from semcl.data.procedural import Splits
from semcl.errors import DataError

FILE_BACKED = [n for n, s in DATASETS.items() if s.file_backed and not s.video]  # video: tests/data/test_video_*


@pytest.mark.parametrize("name", list(DATASETS))
def test_references_resolve_and_static_facts(name: str) -> None:
    spec = DATASETS[name]
    assert spec.name == name and callable(resolve(spec.reader)) and callable(resolve(spec.writer))
    assert len(spec.mean) == len(spec.std) == spec.channels and stats(name) == (spec.mean, spec.std)
    assert {"train", "test"} <= set(spec.splits) and spec.synthetic_classes >= 2
    assert spec.num_classes >= 2 and spec.num_train > 0 and spec.num_test > 0


@pytest.mark.parametrize("name", [n for n, s in DATASETS.items() if not s.file_backed])
def test_in_memory_facts_match_synthetic_round_trip(synth_root: Path, synth_counts: dict[str, tuple[int, int]],
                                                    name: str) -> None:
    spec = DATASETS[name]
    assert spec.synthetic_classes == spec.num_classes  # the stand-in has the real class list
    for split in spec.splits:
        s = load(name, synth_root, split)
        per_class = synth_counts[name][split != "train"]
        assert s.images.shape == (spec.num_classes * per_class, spec.channels, spec.size, spec.size)
        assert s.num_classes == spec.num_classes
        assert (s.coarse_labels is not None) == spec.has_coarse
        if spec.has_coarse:
            assert s.fine_to_coarse.tolist() == list(spec.synthetic_groups)


# test images of the synthetic stand-ins at 2 per class: 20 classes, and iNaturalist's test is its val
# file, which keeps every other test image
TEST_IMAGES = {"imagenet_lt": 40, "places_lt": 40, "inat18": 20, "imagenet": 40, "imagenet_c": 40 * 75,
               "imagenet_r": 40, "imagenet_sketch": 40, "ade20k": 12, "cityscapes": 12}


@pytest.mark.parametrize("name", FILE_BACKED)
def test_file_backed_facts_match_synthetic_round_trip(tmp_path: Path, name: str) -> None:
    spec = DATASETS[name]
    assert write_synthetic(name, tmp_path, train_per_class=2, test_per_class=2) == tmp_path / spec.folder
    for split in spec.splits:
        s = load(name, tmp_path, split)
        assert s.num_classes == spec.synthetic_classes and s.coarse_labels is None
        assert s.images.shape[1:] == (spec.channels, spec.size, spec.size)  # decoded at `size` by default
    s = load(name, tmp_path, "test", image_size=8)
    assert s.images[[0]].shape == (1, spec.channels, 8, 8)  # one real decode
    assert len(s) == TEST_IMAGES.get(name, len(s))


def test_lookup_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"unknown dataset 'svhn' \(known: ade20k, awa2, cifar10, cifar100, "):
        dataset_spec("svhn")
    with pytest.raises(DataError, match="unknown dataset 'svhn'"):
        stats("svhn")
    with pytest.raises(DataError, match=r"unknown split 'val' for dataset cifar10 \(known: train, test\)"):
        load("cifar10", tmp_path, "val")
    with pytest.raises(DataError, match=r"unknown split 'dev' for dataset inat18 \(known: train, val, test\)"):
        load("inat18", tmp_path, "dev")


# --- the "Add a dataset" recipe (CONTRIBUTING.md): one module with reader + writer, one registry line


def write_toy(out: Path, splits: Splits) -> None:
    for split, (images, labels) in splits.items():
        np.savez(out / f"{split}.npz", images=images, labels=labels)


def read_toy(spec: DatasetSpec, root: Path, split: str, image_size: int) -> object:
    from semcl.data.imageset import ImageSet

    arrays = np.load(root / spec.folder / f"{spec.splits[split]}.npz")
    images = torch.from_numpy(arrays["images"]).permute(0, 3, 1, 2).contiguous()
    return ImageSet(spec.name, images, torch.from_numpy(arrays["labels"]), [f"c{i}" for i in range(spec.num_classes)])


def test_a_new_dataset_is_one_module_and_one_registry_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = f"{__name__}:"
    spec = DatasetSpec("toy", "toy-folder", 3, 6, 3, 3, 8, (0.5,) * 3, (0.25,) * 3, here + "read_toy",
                       here + "write_toy", synthetic_groups=(0, 0, 1))
    monkeypatch.setitem(DATASETS, "toy", spec)
    write_synthetic("toy", tmp_path, train_per_class=2, test_per_class=1)
    train, test = load("toy", tmp_path, "train"), load("toy", tmp_path, "test")
    assert train.images.shape == (6, 3, 8, 8) and test.images.shape == (3, 3, 8, 8)
    assert sorted(train.labels.tolist()) == [0, 0, 1, 1, 2, 2] and stats("toy") == ((0.5,) * 3, (0.25,) * 3)
