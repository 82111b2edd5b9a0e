"""CIFAR-10 and CIFAR-100: the reader of the official python pickles and the synthetic writer.

Layout: ``cifar-100-python/{train,test,meta}`` (fine and coarse labels) and
``cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}``; each batch is a dict with
``data`` (N×3072 uint8 rows, all red then green then blue) and the labels.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch

from semcl.data import classnames as cn
from semcl.data.imageset import ImageSet
from semcl.data.layout import require
from semcl.data.procedural import Splits
from semcl.data.registry import DatasetSpec
from semcl.data.safe_pickle import load_pickle
from semcl.errors import DataError


def _load_pickle(path: Path, keys: tuple[str, ...]) -> dict[str, Any]:
    """Unpickle a CIFAR batch file and check it has ``keys``.

    ``latin1`` is needed because the official files were pickled by Python 2. Keys are
    normalised to ``str`` so files re-pickled with bytes keys also load. The restricted
    unpickler (semcl.data.safe_pickle) admits only what the format holds, so a crafted file
    is refused and runs nothing.
    """
    obj = load_pickle(path, encoding="latin1")
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


def read_cifar100(spec: DatasetSpec, root: Path, split: str, image_size: int | None = None) -> ImageSet:
    """``root/cifar-100-python/{train,test,meta}``: fine and coarse labels."""
    base = spec.folder
    meta_path = require(root, f"{base}/meta", "cifar100")
    data_path = require(root, f"{base}/{spec.splits[split]}", "cifar100")
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


def read_cifar10(spec: DatasetSpec, root: Path, split: str, image_size: int | None = None) -> ImageSet:
    """``root/cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta}``."""
    base = spec.folder
    meta_path = require(root, f"{base}/batches.meta", "cifar10")
    meta = _load_pickle(meta_path, ("label_names",))
    names = _names(meta_path, "label_names", meta["label_names"])
    files = spec.splits[split].split()  # the five training batches, or test_batch
    images, labels = [], []
    for file in files:
        path = require(root, f"{base}/{file}", "cifar10")
        batch = _load_pickle(path, ("data", "labels"))
        imgs = _cifar_images(path, batch["data"])
        images.append(imgs)
        labels.append(_int_labels(path, "labels", batch["labels"], imgs.shape[0], len(names)))
    return ImageSet("cifar10", torch.cat(images), torch.cat(labels), names)


# --- synthetic writer -------------------------------------------------------------

def _dump(path: Path, obj: dict) -> None:
    # Protocol 2 is what Python-2-era CIFAR files use; the reader's latin1 load handles it.
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


def _cifar_rows(images: np.ndarray) -> np.ndarray:
    """HWC images → N×3072 rows (all red, then green, then blue), as CIFAR stores them."""
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2).reshape(len(images), -1))


def _filenames(names: list[str], labels: np.ndarray) -> list[str]:
    return [f"{names[y]}_s_{i:06d}.png" for i, y in enumerate(labels)]


def write_cifar100(out: Path, splits: Splits) -> None:
    fine_to_coarse = np.asarray(cn.CIFAR100_FINE_TO_COARSE)
    for split, (images, labels) in splits.items():
        _dump(out / split, {
            "filenames": _filenames(cn.CIFAR100_FINE_NAMES, labels),
            "batch_label": f"{'training' if split == 'train' else 'testing'} batch 1 of 1",
            "fine_labels": labels.tolist(),
            "coarse_labels": fine_to_coarse[labels].tolist(),
            "data": _cifar_rows(images),
        })
    _dump(out / "meta", {"fine_label_names": list(cn.CIFAR100_FINE_NAMES),
                         "coarse_label_names": list(cn.CIFAR100_COARSE_NAMES)})


def write_cifar10(out: Path, splits: Splits) -> None:
    train_images, train_labels = splits["train"]
    # The real training set is five equal batches; split ours the same way.
    parts = np.array_split(np.arange(len(train_labels)), 5)
    for b, idx in enumerate(parts, start=1):
        _dump(out / f"data_batch_{b}", {
            "batch_label": f"training batch {b} of 5",
            "labels": train_labels[idx].tolist(),
            "data": _cifar_rows(train_images[idx]),
            "filenames": _filenames(cn.CIFAR10_NAMES, train_labels[idx]),
        })
    test_images, test_labels = splits["test"]
    _dump(out / "test_batch", {
        "batch_label": "testing batch 1 of 1",
        "labels": test_labels.tolist(),
        "data": _cifar_rows(test_images),
        "filenames": _filenames(cn.CIFAR10_NAMES, test_labels),
    })
    _dump(out / "batches.meta", {"num_cases_per_batch": len(parts[0]),
                                 "label_names": list(cn.CIFAR10_NAMES), "num_vis": 3072})
