"""Cheap checks of a data root before any run is submitted: every file a dataset's reader will
open is present and its size agrees with its header, so that a missing or truncated file fails
once, with one line, instead of failing every run that reads it.

What is checked (nothing is decoded in full):
- IDX (MNIST, Fashion-MNIST): magic and dimensions, and the data size the header implies against
  the file size (or the gzip trailer), images and labels of one split of equal count;
- CIFAR pickles: present, non-empty, ending in the pickle STOP opcode ('.'), which a truncated
  file lacks;
- TinyImageNet: wnids.txt, words.txt, val/val_annotations.txt, and a train folder per class;
- split-file datasets (ImageNet-LT, Places-LT, iNaturalist): the train and test split files
  parse (the readers' own line checks); image folders for full ImageNet.
"""

from __future__ import annotations

from pathlib import Path

from semcl.data.idx import idx_shape
from semcl.data.layout import DATASET_DIRS, check_root, missing, require
from semcl.errors import DataError

CIFAR_FILES = {"cifar100": ["meta", "train", "test"],
               "cifar10": ["batches.meta", *(f"data_batch_{i}" for i in range(1, 6)), "test_batch"]}


def _check_pickle_end(path: Path) -> None:
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            f.seek(max(size - 1, 0))
            last = f.read(1)
    except OSError as err:
        raise DataError(f"{path}: unreadable ({type(err).__name__}: {err})") from None
    if last != b".":
        raise DataError(f"{path}: truncated pickle ({size} bytes, no end marker); download it again")


def _check_idx(root: Path, dataset: str) -> None:
    base = f"{DATASET_DIRS[dataset]}/raw"
    for prefix in ("train", "t10k"):
        shapes = []
        for kind in ("images-idx3", "labels-idx1"):
            rel = f"{base}/{prefix}-{kind}-ubyte"
            path = next((root / r for r in (rel, rel + ".gz") if (root / r).is_file()), None)
            if path is None:
                raise missing(root, rel + "[.gz]", dataset)
            shapes.append((path, idx_shape(path)))
        (img, img_shape), (lab, lab_shape) = shapes
        if not img_shape or not lab_shape or img_shape[0] != lab_shape[0]:
            raise DataError(f"{lab}: malformed labels ({lab_shape[0] if lab_shape else 0} labels for "
                            f"{img_shape[0] if img_shape else 0} images in {img.name})")


def _check_tinyimagenet(root: Path) -> None:
    base = DATASET_DIRS["tinyimagenet"]
    wnids = require(root, f"{base}/wnids.txt", "tinyimagenet")
    require(root, f"{base}/words.txt", "tinyimagenet")
    require(root, f"{base}/val/val_annotations.txt", "tinyimagenet")
    require(root, f"{base}/val/images", "tinyimagenet")
    try:
        ids = [w.strip() for w in wnids.read_text(encoding="utf-8").splitlines() if w.strip()]
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{wnids}: unreadable ({type(err).__name__}: {err})") from None
    for wnid in ids:
        require(root, f"{base}/train/{wnid}/images", "tinyimagenet")


def check_dataset(name: str, root: Path) -> None:
    """DataError (one line naming the file) unless `name`'s files under `root` look complete."""
    from semcl.data.splitfiles import FOLDER_DATASETS, FOLDER_SPLITS, SPLIT_DATASETS, read_split_file

    check_root(root, name)
    if name in CIFAR_FILES:
        for file in CIFAR_FILES[name]:
            _check_pickle_end(require(root, f"{DATASET_DIRS[name]}/{file}", name))
    elif name in ("fashion_mnist", "mnist"):
        _check_idx(root, name)
    elif name == "tinyimagenet":
        _check_tinyimagenet(root)
    elif name in SPLIT_DATASETS:
        spec = SPLIT_DATASETS[name]
        for split in ("train", "test"):
            read_split_file(require(root, f"{spec.folder}/{spec.files[split]}", name))
    elif name in FOLDER_DATASETS:
        for split in ("train", "test"):
            require(root, f"{FOLDER_DATASETS[name]}/{FOLDER_SPLITS[split]}", name)
