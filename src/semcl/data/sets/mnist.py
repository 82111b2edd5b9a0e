"""MNIST and Fashion-MNIST: the reader of the IDX archives and the synthetic writer.

Layout: ``<folder>/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]`` (torchvision's folder
names, ``FashionMNIST`` and ``MNIST``); the IDX format itself is in :mod:`semcl.data.idx`. The
files store no class names, so the names (and Fashion-MNIST's garment superclasses) come from
:mod:`semcl.data.classnames`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from semcl.data.classnames import (
    FASHION_MNIST_COARSE_NAMES,
    FASHION_MNIST_FINE_TO_COARSE,
    FASHION_MNIST_NAMES,
    MNIST_NAMES,
)
from semcl.data.idx import read_idx, write_idx
from semcl.data.imageset import ImageSet
from semcl.data.layout import missing
from semcl.data.procedural import Splits
from semcl.data.registry import DatasetSpec
from semcl.errors import DataError


def _idx_pair(spec: DatasetSpec, root: Path, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Images ``[N, 1, 28, 28]`` and labels of an MNIST-layout split (plain or ``.gz``)."""
    dataset = spec.name
    prefix = spec.splits[split]  # train | t10k
    base = f"{spec.folder}/raw"
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


def read_fashion_mnist(spec: DatasetSpec, root: Path, split: str, image_size: int | None = None) -> ImageSet:
    """``root/FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]``.

    Coarse labels are the garment superclasses used for RINCE's second rank.
    """
    images, labels = _idx_pair(spec, root, split)
    coarse = torch.tensor(FASHION_MNIST_FINE_TO_COARSE)[labels]
    return ImageSet("fashion_mnist", images, labels, list(FASHION_MNIST_NAMES), coarse,
                    list(FASHION_MNIST_COARSE_NAMES), torch.tensor(FASHION_MNIST_FINE_TO_COARSE))


def read_mnist(spec: DatasetSpec, root: Path, split: str, image_size: int | None = None) -> ImageSet:
    """``root/MNIST/raw/...`` in the same IDX layout (the OOD set for Fashion-MNIST)."""
    images, labels = _idx_pair(spec, root, split)
    return ImageSet("mnist", images, labels, list(MNIST_NAMES))


def write(out: Path, splits: Splits) -> None:
    """``raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``, the layout torchvision downloads."""
    raw = out / "raw"
    raw.mkdir()
    for split, (images, labels) in splits.items():
        prefix = "train" if split == "train" else "t10k"
        write_idx(raw / f"{prefix}-images-idx3-ubyte.gz", images[..., 0])
        write_idx(raw / f"{prefix}-labels-idx1-ubyte.gz", labels.astype(np.uint8))
