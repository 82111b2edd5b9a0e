"""Readers on small hand-written files in each real format, plus the ImageSet helpers."""

from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from semcl.data import ImageSet, conform, load, select_per_class
from semcl.data.idx import read_idx, write_idx
from semcl.errors import DataError

HINT = "set --data-root or SEMCL_DATA"


def _pickle(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(obj, protocol=2))


def _cifar100(root: Path, *, bytes_keys: bool = False) -> np.ndarray:
    """A 2-image CIFAR-100 train file; returns the raw N×3072 rows."""
    rows = (np.arange(2 * 3072) % 251).astype(np.uint8).reshape(2, 3072)
    base = root / "cifar-100-python"
    batch = {"data": rows, "fine_labels": [3, 0], "coarse_labels": [1, 0],
             "filenames": ["a.png", "b.png"], "batch_label": "training batch 1 of 1"}
    if bytes_keys:
        batch = {k.encode(): v for k, v in batch.items()}
    _pickle(base / "train", batch)
    _pickle(base / "meta", {"fine_label_names": ["f0", "f1", "f2", "f3"],
                            "coarse_label_names": ["c0", "c1"]})
    return rows


@pytest.mark.parametrize("bytes_keys", [False, True])
def test_cifar100_pixels_and_labels(tmp_path: Path, bytes_keys: bool) -> None:
    rows = _cifar100(tmp_path, bytes_keys=bytes_keys)
    s = load("cifar100", tmp_path, "train")
    assert s.images.dtype == torch.uint8 and s.images.shape == (2, 3, 32, 32)
    # Row-major planes: bytes 0..1023 red, 1024..2047 green, 2048..3071 blue.
    assert s.images[0, 0, 0, :3].tolist() == rows[0, :3].tolist()
    assert s.images[0, 0, 1, 0] == rows[0, 32]
    assert s.images[0, 1, 0, 0] == rows[0, 1024]
    assert s.images[1, 2, 31, 31] == rows[1, 3071]
    assert s.labels.tolist() == [3, 0] and s.labels.dtype == torch.int64
    assert s.coarse_labels.tolist() == [1, 0]
    assert s.class_names == ["f0", "f1", "f2", "f3"] and s.coarse_names == ["c0", "c1"]
    # Classes 1 and 2 have no images: their superclass is unknown (-1).
    assert s.fine_to_coarse.tolist() == [0, -1, -1, 1]
    assert s.num_classes == 4


def test_cifar10_concatenates_five_batches(tmp_path: Path) -> None:
    base = tmp_path / "cifar-10-batches-py"
    for b in range(1, 6):
        _pickle(base / f"data_batch_{b}", {"data": np.full((1, 3072), b, np.uint8),
                                           "labels": [b], "filenames": ["x"]})
    _pickle(base / "test_batch", {"data": np.zeros((2, 3072), np.uint8), "labels": [9, 0]})
    _pickle(base / "batches.meta", {"label_names": [f"n{i}" for i in range(10)]})
    train = load("cifar10", tmp_path, "train")
    assert train.labels.tolist() == [1, 2, 3, 4, 5]
    assert train.images[:, 0, 0, 0].tolist() == [1, 2, 3, 4, 5]
    assert train.coarse_labels is None and train.fine_to_coarse is None
    assert load("cifar10", tmp_path, "test").labels.tolist() == [9, 0]


def _idx_bytes(code: int, dims: list[int], data: bytes) -> bytes:
    return bytes([0, 0, code, len(dims)]) + struct.pack(f">{len(dims)}I", *dims) + data


@pytest.mark.parametrize("gz", [False, True])
def test_fashion_mnist_hand_made_idx(tmp_path: Path, gz: bool) -> None:
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    files = {
        "t10k-images-idx3-ubyte": _idx_bytes(0x08, [2, 2, 3], bytes(range(12))),
        "t10k-labels-idx1-ubyte": _idx_bytes(0x08, [2], bytes([9, 4])),
    }
    for name, data in files.items():
        if gz:
            (raw / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (raw / name).write_bytes(data)
    s = load("fashion_mnist", tmp_path, "test")
    assert s.images.shape == (2, 1, 2, 3)
    assert s.images.flatten().tolist() == list(range(12))
    assert s.labels.tolist() == [9, 4]
    # Ankle boot → footwear (3), Coat → upper_body (0).
    assert s.coarse_labels.tolist() == [3, 0]
    assert s.coarse_names == ["upper_body", "trouser", "dress", "footwear", "bag"]
    assert s.fine_to_coarse.tolist() == [0, 1, 0, 2, 0, 3, 0, 3, 4, 3]


def test_idx_big_endian_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "x.idx"
    path.write_bytes(_idx_bytes(0x0B, [2], b"\x01\x02\xff\xfe"))  # int16, big-endian
    assert read_idx(path).tolist() == [258, -2]
    arr = np.arange(-3, 3, dtype=np.int32).reshape(2, 3)
    write_idx(tmp_path / "y.idx.gz", arr)
    assert np.array_equal(read_idx(tmp_path / "y.idx.gz"), arr)


@pytest.mark.parametrize("content", [b"\x01\x02\x08\x01", _idx_bytes(0x08, [5], b"\x00\x01")])
def test_malformed_idx(tmp_path: Path, content: bytes) -> None:
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    (raw / "train-images-idx3-ubyte").write_bytes(content)
    (raw / "train-labels-idx1-ubyte").write_bytes(_idx_bytes(0x08, [1], b"\x00"))
    with pytest.raises(DataError, match="train-images-idx3-ubyte: malformed IDX"):
        load("mnist", tmp_path, "train")


def test_missing_root_file_and_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(DataError) as err:
        load("cifar100", tmp_path / "nowhere", "train")
    assert str(err.value) == (f"data root {tmp_path / 'nowhere'}: does not exist "
                              f"(dataset cifar100; {HINT})")
    (tmp_path / "cifar-100-python").mkdir()
    _pickle(tmp_path / "cifar-100-python" / "meta", {})
    with pytest.raises(DataError) as err:
        load("cifar100", tmp_path, "train")
    assert str(err.value) == (f"data root {tmp_path}: missing cifar-100-python/train "
                              f"(dataset cifar100; {HINT})")
    with pytest.raises(DataError, match=r"missing MNIST/raw/t10k-images-idx3-ubyte\[\.gz\]"):
        load("mnist", tmp_path, "test")
    with pytest.raises(DataError, match="unknown dataset 'imagenet21k'"):
        load("imagenet21k", tmp_path, "train")
    with pytest.raises(DataError, match="unknown split 'val'"):
        load("cifar10", tmp_path, "val")


def test_malformed_pickles_name_path_and_key(tmp_path: Path) -> None:
    _cifar100(tmp_path)
    train = tmp_path / "cifar-100-python" / "train"
    train.write_bytes(b"not a pickle")
    with pytest.raises(DataError) as err:
        load("cifar100", tmp_path, "train")
    assert str(err.value).startswith(f"{train}: malformed pickle") and "\n" not in str(err.value)
    _pickle(train, {"data": np.zeros((1, 3072), np.uint8), "fine_labels": [0]})
    with pytest.raises(DataError, match=f"{train}: missing key 'coarse_labels'"):
        load("cifar100", tmp_path, "train")
    _pickle(train, {"data": np.zeros((1, 100), np.uint8), "fine_labels": [0], "coarse_labels": [0]})
    with pytest.raises(DataError, match="malformed 'data'"):
        load("cifar100", tmp_path, "train")
    _pickle(train, {"data": np.zeros((1, 3072), np.uint8), "fine_labels": [7], "coarse_labels": [0]})
    with pytest.raises(DataError, match="label outside"):
        load("cifar100", tmp_path, "train")


def _tiny(root: Path) -> Path:
    base = root / "tiny-imagenet-200"
    wnids = ["n02", "n01"]  # deliberately unsorted: class order must be sorted
    (base / "val" / "images").mkdir(parents=True)
    (base / "wnids.txt").write_text("\n".join(wnids) + "\n")
    (base / "words.txt").write_text("n00\tother\nn01\tgoldfish, Carassius auratus\nn02\tcrane\n")
    colours = {"n01": (200, 30, 30), "n02": (20, 40, 220)}
    for wnid, colour in colours.items():
        folder = base / "train" / wnid / "images"
        folder.mkdir(parents=True)
        Image.new("RGB", (64, 64), colour).save(folder / f"{wnid}_0.JPEG", quality=95)
    Image.new("L", (64, 64), 128).save(base / "val" / "images" / "val_0.JPEG", quality=95)
    Image.new("RGB", (64, 64), colours["n01"]).save(base / "val" / "images" / "val_1.JPEG")
    (base / "val" / "val_annotations.txt").write_text(
        "val_0.JPEG\tn02\t0\t0\t63\t63\nval_1.JPEG\tn01\t0\t0\t63\t63\n")
    return base


def test_tinyimagenet_hand_made(tmp_path: Path) -> None:
    _tiny(tmp_path)
    train = load("tinyimagenet", tmp_path, "train")
    assert train.class_names == ["goldfish, Carassius auratus", "crane"]
    assert train.labels.tolist() == [0, 1] and train.images.shape == (2, 3, 64, 64)
    # Solid colours survive JPEG within a couple of levels.
    mean = train.images.float().mean(dim=(2, 3))
    assert torch.allclose(mean, torch.tensor([[200.0, 30, 30], [20, 40, 220]]), atol=3)
    test = load("tinyimagenet", tmp_path, "test")
    assert test.labels.tolist() == [1, 0]
    assert torch.all((test.images[0].float() - 128).abs() <= 1)  # grayscale JPEG → RGB


def test_tinyimagenet_errors(tmp_path: Path) -> None:
    base = _tiny(tmp_path)
    (base / "val" / "val_annotations.txt").write_text("val_0.JPEG\tn99\n")
    with pytest.raises(DataError, match="val_annotations.txt: malformed line 1"):
        load("tinyimagenet", tmp_path, "test")
    Image.new("RGB", (32, 32)).save(base / "train" / "n01" / "images" / "n01_0.JPEG")
    with pytest.raises(DataError, match="n01_0.JPEG: malformed image"):
        load("tinyimagenet", tmp_path, "train")
    (base / "wnids.txt").write_text("n01\nn03\n")
    with pytest.raises(DataError, match="missing tiny-imagenet-200/train/n03/images"):
        load("tinyimagenet", tmp_path, "train")


def _toy_set(n_per_class: list[int], channels: int = 3, size: int = 8) -> ImageSet:
    labels = torch.cat([torch.full((n,), c) for c, n in enumerate(n_per_class)])
    images = torch.randint(0, 256, (len(labels), channels, size, size), dtype=torch.uint8)
    coarse_of = torch.arange(len(n_per_class)) // 2
    return ImageSet("toy", images, labels, [f"c{i}" for i in range(len(n_per_class))],
                    coarse_of[labels], ["g0", "g1"][: int(coarse_of.max()) + 1])


def test_select_per_class_balanced_sorted_deterministic() -> None:
    labels = torch.tensor([0, 1, 2, 0, 1, 0, 0, 1, 2, 0])
    idx = select_per_class(labels, 2, seed=3)
    assert torch.equal(idx, torch.sort(idx).values)
    assert torch.bincount(labels[idx]).tolist() == [2, 2, 2]
    assert torch.equal(idx, select_per_class(labels, 2, seed=3))
    draws = {tuple(select_per_class(labels, 2, seed=s).tolist()) for s in range(10)}
    assert len(draws) > 1
    # A class with too few rows gives all it has.
    assert torch.bincount(labels[select_per_class(labels, 3, seed=0)]).tolist() == [3, 3, 2]


def test_subset_keeps_hierarchy() -> None:
    s = _toy_set([3, 3, 3, 3])
    sub = s.subset(torch.tensor([0, 1]))  # only class 0
    assert len(sub) == 2 and sub.num_classes == 4
    assert sub.fine_to_coarse.tolist() == [0, 0, 1, 1]
    assert torch.equal(sub.images, s.images[:2])
    assert s.subset([0, 11]).labels.tolist() == [0, 3]


def test_conform_channels_and_size() -> None:
    gray = ImageSet("g", torch.full((2, 1, 28, 28), 77, dtype=torch.uint8),
                    torch.tensor([0, 1]), ["a", "b"])
    rgb = conform(gray, channels=3, size=32)
    assert rgb.images.shape == (2, 3, 32, 32) and rgb.images.dtype == torch.uint8
    assert torch.all(rgb.images == 77)  # constant image stays constant
    colour = ImageSet("c", torch.zeros((1, 3, 64, 64), dtype=torch.uint8), torch.tensor([0]), ["a"])
    colour.images[:, 0] = 100
    colour.images[:, 1] = 200
    colour.images[:, 2] = 50
    small = conform(colour, channels=1, size=32)
    assert small.images.shape == (1, 1, 32, 32)
    luma = round(0.2989 * 100 + 0.587 * 200 + 0.114 * 50)
    assert torch.all(small.images == luma)
    s = _toy_set([2, 2])
    assert conform(s, channels=3, size=8) is s
    assert torch.equal(conform(s, channels=3, size=4).fine_to_coarse, s.fine_to_coarse)
