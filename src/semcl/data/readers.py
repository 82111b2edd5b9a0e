"""Readers for the real on-disk dataset formats, and ``load_dataset`` to dispatch to them.

Every reader takes ``(root, split)`` with ``split`` in ``{"train", "test"}`` and returns
an :class:`ImageSet` with all images decoded into memory; the datasets supported here
are small enough (at most ~100k 64×64 images) that this beats a per-item loader.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from semcl.data.classnames import (
    FASHION_MNIST_COARSE_NAMES,
    FASHION_MNIST_FINE_TO_COARSE,
    FASHION_MNIST_NAMES,
    MNIST_NAMES,
)
from semcl.data.idx import read_idx
from semcl.data.imageset import ImageSet
from semcl.data.layout import DATASET_DIRS, SPLITS, check_root, missing, require
from semcl.data.tinyimagenet import read_tinyimagenet
from semcl.errors import DataError


def _load_pickle(path: Path, keys: tuple[str, ...]) -> dict[str, Any]:
    """Unpickle a CIFAR batch file and check it has ``keys``.

    ``latin1`` is needed because the official files were pickled by Python 2. Keys are
    normalised to ``str`` so files re-pickled with bytes keys also load. (Unpickling runs
    code from the file: only point the data root at files you trust, as with any
    pickle-based dataset.)
    """
    try:
        with open(path, "rb") as f:
            obj = pickle.load(f, encoding="latin1")
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError,
            IndexError, ValueError, TypeError) as err:
        raise DataError(f"{path}: malformed pickle ({type(err).__name__}: {err})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{path}: malformed pickle (expected a dict, got {type(obj).__name__})")
    obj = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in obj.items()}
    for key in keys:
        if key not in obj:
            raise DataError(f"{path}: missing key '{key}'")
    return obj


def _cifar_images(path: Path, data: Any) -> torch.Tensor:
    """``N×3072`` row-major RGB bytes → uint8 ``[N, 3, 32, 32]``."""
    arr = np.asarray(data)
    if arr.dtype != np.uint8 or arr.ndim != 2 or arr.shape[1] != 3 * 32 * 32:
        raise DataError(f"{path}: malformed 'data' (expected uint8 N×3072, got {arr.dtype} "
                        f"{'×'.join(map(str, arr.shape))})")
    return torch.from_numpy(arr.reshape(-1, 3, 32, 32).copy())


def _int_labels(path: Path, key: str, values: Any, n: int, num_classes: int) -> torch.Tensor:
    """Label list → int64 tensor, checked for length and range."""
    try:
        labels = torch.as_tensor(np.asarray(values, dtype=np.int64))
    except (TypeError, ValueError):
        raise DataError(f"{path}: malformed '{key}' (not a list of integers)") from None
    if labels.shape != (n,):
        raise DataError(f"{path}: malformed '{key}' ({labels.numel()} labels for {n} images)")
    if n and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        raise DataError(f"{path}: malformed '{key}' (label outside [0, {num_classes}))")
    return labels


def _names(path: Path, key: str, values: Any) -> list[str]:
    if not isinstance(values, list | tuple) or not all(isinstance(v, str | bytes) for v in values):
        raise DataError(f"{path}: malformed '{key}' (expected a list of names)")
    return [v.decode("latin1") if isinstance(v, bytes) else v for v in values]


def read_cifar100(root: Path, split: str) -> ImageSet:
    """``root/cifar-100-python/{train,test,meta}``: fine and coarse labels."""
    base = DATASET_DIRS["cifar100"]
    meta_path = require(root, f"{base}/meta", "cifar100")
    data_path = require(root, f"{base}/{split}", "cifar100")
    meta = _load_pickle(meta_path, ("fine_label_names", "coarse_label_names"))
    fine_names = _names(meta_path, "fine_label_names", meta["fine_label_names"])
    coarse_names = _names(meta_path, "coarse_label_names", meta["coarse_label_names"])
    batch = _load_pickle(data_path, ("data", "fine_labels", "coarse_labels"))
    images = _cifar_images(data_path, batch["data"])
    n = images.shape[0]
    fine = _int_labels(data_path, "fine_labels", batch["fine_labels"], n, len(fine_names))
    coarse = _int_labels(data_path, "coarse_labels", batch["coarse_labels"], n, len(coarse_names))
    try:
        return ImageSet("cifar100", images, fine, fine_names, coarse, coarse_names)
    except ValueError as err:  # a fine class with two superclasses
        raise DataError(f"{data_path}: malformed labels ({err})") from None


def read_cifar10(root: Path, split: str) -> ImageSet:
    """``root/cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta}``."""
    base = DATASET_DIRS["cifar10"]
    meta_path = require(root, f"{base}/batches.meta", "cifar10")
    meta = _load_pickle(meta_path, ("label_names",))
    names = _names(meta_path, "label_names", meta["label_names"])
    files = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"]
    images, labels = [], []
    for file in files:
        path = require(root, f"{base}/{file}", "cifar10")
        batch = _load_pickle(path, ("data", "labels"))
        imgs = _cifar_images(path, batch["data"])
        images.append(imgs)
        labels.append(_int_labels(path, "labels", batch["labels"], imgs.shape[0], len(names)))
    return ImageSet("cifar10", torch.cat(images), torch.cat(labels), names)


def _idx_pair(root: Path, dataset: str, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Images ``[N, 1, 28, 28]`` and labels of an MNIST-layout split (plain or ``.gz``)."""
    prefix = "train" if split == "train" else "t10k"
    base = f"{DATASET_DIRS[dataset]}/raw"
    arrays = []
    for kind in ("images-idx3", "labels-idx1"):
        rel = f"{base}/{prefix}-{kind}-ubyte"
        # The uncompressed file wins when both exist (it is what torchvision extracts).
        path = next((root / r for r in (rel, rel + ".gz") if (root / r).is_file()), None)
        if path is None:
            raise missing(root, rel + "[.gz]", dataset)
        arrays.append((path, read_idx(path)))
    (img_path, imgs), (lab_path, labs) = arrays
    if imgs.dtype != np.uint8 or imgs.ndim != 3:
        raise DataError(f"{img_path}: malformed images (expected uint8 N×H×W, got {imgs.dtype} "
                        f"{imgs.ndim}-d)")
    if labs.ndim != 1 or labs.shape[0] != imgs.shape[0]:
        raise DataError(f"{lab_path}: malformed labels ({labs.size} labels for "
                        f"{imgs.shape[0]} images in {img_path.name})")
    labels = torch.from_numpy(labs.astype(np.int64))
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) > 9):
        raise DataError(f"{lab_path}: malformed labels (label outside [0, 10))")
    return torch.from_numpy(imgs.copy()).unsqueeze(1), labels


def read_fashion_mnist(root: Path, split: str) -> ImageSet:
    """``root/FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]``.

    Coarse labels are the garment superclasses used for RINCE's second rank.
    """
    images, labels = _idx_pair(root, "fashion_mnist", split)
    coarse = torch.tensor(FASHION_MNIST_FINE_TO_COARSE)[labels]
    return ImageSet("fashion_mnist", images, labels, list(FASHION_MNIST_NAMES), coarse,
                    list(FASHION_MNIST_COARSE_NAMES), torch.tensor(FASHION_MNIST_FINE_TO_COARSE))


def read_mnist(root: Path, split: str) -> ImageSet:
    """``root/MNIST/raw/...`` in the same IDX layout (the OOD set for Fashion-MNIST)."""
    images, labels = _idx_pair(root, "mnist", split)
    return ImageSet("mnist", images, labels, list(MNIST_NAMES))


READERS: dict[str, Callable[[Path, str], ImageSet]] = {
    "cifar100": read_cifar100,
    "cifar10": read_cifar10,
    "tinyimagenet": read_tinyimagenet,
    "fashion_mnist": read_fashion_mnist,
    "mnist": read_mnist,
}


def load_dataset(name: str, root: str | Path, split: str) -> ImageSet:
    """Read split ``split`` of dataset ``name`` from data root ``root``.

    Raises DataError for an unknown name or split, a missing root or file, or a
    malformed file; the message is one line naming the path.
    """
    if name not in READERS:
        raise DataError(f"unknown dataset '{name}' (known: {', '.join(sorted(READERS))})")
    if split not in SPLITS:
        raise DataError(f"unknown split '{split}' for dataset {name} (known: train, test)")
    root = Path(root).expanduser()
    check_root(root, name)
    return READERS[name](root, split)
