"""The long-tailed split-file sets (OLTR format): the reader and the synthetic writers.

Split file: one sample per line, `<relative/path> <integer label>`, labels from 0; paths are
relative to the dataset folder under the data root. Layout (put or symlink the images there):

    <root>/ImageNet_LT/ImageNet_LT_{train,val,test}.txt   + train/, val/ (ILSVRC-2012, val in synset folders)
    <root>/Places_LT/Places_LT_{train,val,test}.txt       + the Places365 folders the files name
    <root>/iNaturalist18/iNaturalist18_{train,val}.txt    + train_val2018/

Every split records the SHA-256 of the file that defines it (`FileImageSet.sources`), because
more than one version of these files circulates (docs/papers/paco.md §e.3).

Synthetic stand-ins: 20 classes in groups of 5 (so the procedural images keep a two-level
structure); the training split file is long-tailed by the CIFAR-LT rule at IF 20
(train_per_class -> train_per_class / 20 images), the test split balanced, and the val split every
other test image, so the three files differ the way the real ones do.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch

from semcl.data.fileset import FileImageSet
from semcl.data.layout import missing
from semcl.data.longtail import longtail_counts, longtail_indices
from semcl.data.procedural import Splits
from semcl.data.registry import DatasetSpec
from semcl.data.sets.imagenet import save_jpeg, wnid
from semcl.errors import DataError

SYNTHETIC_IMBALANCE = 20


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_split_file(path: Path) -> tuple[list[str], list[int]]:
    """(relative paths, labels) of a `path label` file; DataError naming the file and line."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot read split file ({type(err).__name__})") from None
    rels, labels = [], []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.rsplit(maxsplit=1)  # paths may hold spaces; the label is the last field
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit() or int(parts[1]) < 0:
            raise DataError(f"{path}: line {n}: expected '<relative/path> <label >= 0>', got {line!r}")
        rels.append(parts[0])
        labels.append(int(parts[1]))
    if not rels:
        raise DataError(f"{path}: empty split file")
    return rels, labels


def _class_names(rels: list[str], labels: list[int], num_classes: int) -> list[str]:
    """Each class named after the folder of its first image (the synset / category name)."""
    names = [str(c) for c in range(num_classes)]
    seen: set[int] = set()
    for rel, y in zip(rels, labels, strict=True):
        if y not in seen:
            seen.add(y)
            names[y] = Path(rel).parent.name or str(y)
    return names


def read(spec: DatasetSpec, root: Path, split: str, image_size: int = 224) -> FileImageSet:
    """Split `split` of a split-file set; the class count comes from the training file."""
    name = spec.name
    base = root / spec.folder
    train_file, split_file = base / spec.splits["train"], base / spec.splits[split]
    for f in (train_file, split_file):
        if not f.is_file():
            raise missing(root, f"{spec.folder}/{f.name}", name)
    # the class count comes from the training file, so every split of one dataset agrees on it
    train_rels, train_labels = read_split_file(train_file)
    num_classes = max(train_labels) + 1
    rels, labels = (train_rels, train_labels) if split == "train" else read_split_file(split_file)
    if max(labels) >= num_classes:
        raise DataError(f"{split_file}: label {max(labels)} >= {num_classes} classes of {train_file.name}")
    names = _class_names(train_rels, train_labels, num_classes)
    return FileImageSet(name, [base / r for r in rels], torch.tensor(labels), names, image_size,
                        {f"{spec.folder}/{split_file.name}": sha256(split_file)})


# --- synthetic writers ------------------------------------------------------------

def _lt_rows(labels: np.ndarray) -> np.ndarray:
    per_class_counts = np.bincount(labels)  # balanced_labels draws every class
    per_class = int(per_class_counts.min())
    counts = [max(1, n) for n in longtail_counts(per_class, len(per_class_counts), SYNTHETIC_IMBALANCE)]
    return longtail_indices(torch.from_numpy(labels), counts, seed=0).numpy()


def _write_split_file(path: Path, lines: list[str]) -> None:
    path.write_text("".join(lines))


def _write_lt(out: Path, splits: Splits, prefix: str, layout: dict[str, str]) -> None:
    """Images at out/<layout[split] formatted>, one split file per split."""
    tr_img, tr_lab = splits["train"]
    te_img, te_lab = splits["test"]
    rows = {"train": (tr_img, tr_lab, _lt_rows(tr_lab)), "test": (te_img, te_lab, np.arange(len(te_lab))),
            "val": (te_img, te_lab, np.arange(0, len(te_lab), 2))}
    for split, (images, labels, keep) in rows.items():
        if split not in layout:
            continue
        lines = []
        for i in keep:
            y = int(labels[i])
            rel = layout[split].format(c=y, w=wnid(y), i=i, split=split)
            if not (out / rel).exists():
                save_jpeg(out / rel, images[i])
            lines.append(f"{rel} {y}\n")
        _write_split_file(out / f"{prefix}_{split}.txt", lines)


def write_imagenet_lt(out: Path, splits: Splits) -> None:
    # val is drawn from ILSVRC train images, test is ILSVRC val sorted into synset folders
    _write_lt(out, splits, "ImageNet_LT", {"train": "train/{w}/{w}_{i}.JPEG", "val": "train/{w}/{w}_v{i}.JPEG",
                                           "test": "val/{w}/ILSVRC2012_val_{i:08d}.JPEG"})


def write_places_lt(out: Path, splits: Splits) -> None:
    # PaCo's train file uses data_256/<letter>/<class>/, val and test the BALMS-style folders
    _write_lt(out, splits, "Places_LT", {"train": "data_256/c/class{c:03d}/{i:08d}.jpg",
                                         "val": "train/class{c:03d}/{i:08d}.jpg",
                                         "test": "val/class{c:03d}/Places365_val_{i:08d}.jpg"})


def write_inat18(out: Path, splits: Splits) -> None:
    _write_lt(out, splits, "iNaturalist18", {"train": "train_val2018/Plantae/{c}/t{i:06d}.jpg",
                                             "val": "train_val2018/Plantae/{c}/v{i:06d}.jpg"})
