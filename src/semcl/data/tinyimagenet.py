"""Reader for the TinyImageNet-200 folder layout (64×64 JPEGs).

``tiny-imagenet-200/wnids.txt`` lists the 200 class ids; ``words.txt`` maps WordNet ids to
names (it covers all of WordNet, not just these 200); ``train/<wnid>/images/*.JPEG`` are
the training images; ``val/images/*.JPEG`` with ``val/val_annotations.txt`` form the
labelled split we call "test" (the official test folder has no labels).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from semcl.data.imageset import ImageSet
from semcl.data.layout import DATASET_DIRS, require
from semcl.errors import DataError

_NAME = "tinyimagenet"
SIZE = 64


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: unreadable ({type(err).__name__}: {err})") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def _class_names(words_path: Path, wnids: list[str]) -> list[str]:
    """Full ``words.txt`` gloss of each wnid (e.g. "goldfish, Carassius auratus").

    The whole gloss is kept rather than its first synonym because first synonyms repeat
    across WordNet (two different "crane"s), and names should identify classes. A wnid
    absent from ``words.txt`` falls back to the wnid itself rather than failing: the
    name is only cosmetic, and the labels do not depend on it.
    """
    wanted = set(wnids)
    glosses: dict[str, str] = {}
    for line in _read_lines(words_path):
        wnid, _, gloss = line.partition("\t")
        if wnid in wanted:
            glosses[wnid] = gloss.strip() or wnid
    return [glosses.get(w, w) for w in wnids]


def _decode_all(paths: list[Path]) -> torch.Tensor:
    """Decode JPEGs into one uint8 ``[N, 3, 64, 64]`` tensor.

    Threads help because PIL releases the GIL while decoding. Greyscale JPEGs (a few
    hundred in the real set) become RGB via ``convert("RGB")``.
    """
    out = np.empty((len(paths), SIZE, SIZE, 3), dtype=np.uint8)

    def decode(i: int) -> None:
        path = paths[i]
        try:
            with Image.open(path) as im:
                rgb = im.convert("RGB")
        except (OSError, UnidentifiedImageError) as err:
            raise DataError(f"{path}: unreadable image ({type(err).__name__})") from None
        if rgb.size != (SIZE, SIZE):
            raise DataError(f"{path}: malformed image (size {rgb.size[0]}×{rgb.size[1]}, "
                            f"expected {SIZE}×{SIZE})")
        out[i] = np.asarray(rgb)

    workers = min(8, os.cpu_count() or 1)
    if workers > 1 and len(paths) > 256:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(decode, range(len(paths))))  # list() re-raises worker errors
    else:
        for i in range(len(paths)):
            decode(i)
    return torch.from_numpy(out).permute(0, 3, 1, 2).contiguous()


def tinyimagenet_wnids(root: Path) -> list[str]:
    """The class wnids in label order (sorted ``wnids.txt``), as read_tinyimagenet indexes them."""
    wnids_path = require(root, f"{DATASET_DIRS[_NAME]}/wnids.txt", _NAME)
    wnids = sorted(set(_read_lines(wnids_path)))
    if not wnids:
        raise DataError(f"{wnids_path}: malformed (no class ids)")
    return wnids


def read_tinyimagenet(root: Path, split: str) -> ImageSet:
    """Read the train split or (for ``split == "test"``) the labelled val split.

    Classes are ordered by sorted wnid, as torchvision's ImageFolder would order the
    train folders; files inside a class folder are read in sorted order and val images
    in annotation-file order, so the result is the same on every filesystem.
    """
    base = DATASET_DIRS[_NAME]
    wnids = tinyimagenet_wnids(root)
    words_path = require(root, f"{base}/words.txt", _NAME)
    index = {w: i for i, w in enumerate(wnids)}
    paths: list[Path] = []
    labels: list[int] = []
    if split == "train":
        for wnid in wnids:
            folder = require(root, f"{base}/train/{wnid}/images", _NAME)
            files = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".jpeg", ".jpg"))
            paths.extend(files)
            labels.extend([index[wnid]] * len(files))
    else:
        ann_path = require(root, f"{base}/val/val_annotations.txt", _NAME)
        img_dir = require(root, f"{base}/val/images", _NAME)
        for lineno, line in enumerate(_read_lines(ann_path), start=1):
            fields = line.split("\t")
            if len(fields) < 2 or fields[1] not in index:
                raise DataError(f"{ann_path}: malformed line {lineno} (expected "
                                f"'<file>\\t<wnid from wnids.txt>...', got {line[:60]!r})")
            image = img_dir / fields[0]
            if not image.is_file():
                raise DataError(f"{ann_path}: line {lineno} names missing image {image}")
            paths.append(image)
            labels.append(index[fields[1]])
    return ImageSet(_NAME, _decode_all(paths), torch.tensor(labels, dtype=torch.int64),
                    _class_names(words_path, wnids))
