"""Synthetic stand-ins for the file-backed datasets, written in their real layouts (see
semcl.data.splitfiles): OLTR split files plus JPEG folders for ImageNet-LT, Places-LT and
iNaturalist 2018, and train/ + val/ synset folders for full ImageNet.

20 classes in groups of 5 (so the procedural images keep a two-level structure); the training
split file is long-tailed by the CIFAR-LT rule at IF 20 (train_per_class -> train_per_class / 20
images), the test split balanced, and the val split every other test image, so the three files
differ the way the real ones do.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from semcl.data.longtail import longtail_counts, longtail_indices

NUM_CLASSES = 20
GROUPS = [i // 5 for i in range(NUM_CLASSES)]
SIZE = 32
SYNTHETIC_IMBALANCE = 20

Splits = dict[str, tuple[np.ndarray, np.ndarray]]


def _wnid(c: int) -> str:
    return f"n{90000000 + c:08d}"


def _save(path: Path, image: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image, "RGB").save(path, "JPEG", quality=95)


def _lt_rows(labels: np.ndarray) -> np.ndarray:
    per_class = int(np.bincount(labels).min())
    counts = [max(1, n) for n in longtail_counts(per_class, NUM_CLASSES, SYNTHETIC_IMBALANCE)]
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
            rel = layout[split].format(c=y, w=_wnid(y), i=i, split=split)
            if not (out / rel).exists():
                _save(out / rel, images[i])
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


def write_imagenet_folders(out: Path, splits: Splits) -> None:
    for split, folder in (("train", "train"), ("test", "val")):
        images, labels = splits[split]
        for i, (image, y) in enumerate(zip(images, labels, strict=True)):
            _save(out / folder / _wnid(int(y)) / f"{_wnid(int(y))}_{i}.JPEG", image)


# name -> (class groups, channels, image size, writer), merged into semcl.data.synthetic's specs
LT_SPECS = {
    "imagenet_lt": (GROUPS, 3, SIZE, write_imagenet_lt),
    "places_lt": (GROUPS, 3, SIZE, write_places_lt),
    "inat18": (GROUPS, 3, SIZE, write_inat18),
    "imagenet": (GROUPS, 3, SIZE, write_imagenet_folders),
}
