"""Semantic-segmentation sets (GPaCo Sec. IV-D, docs/papers/paco.md §e.5): readers and synthetic writers.

Layouts under the data root (as MMSegmentation's preparation leaves them):
    ADEChallengeData2016/images/{training,validation}/*.jpg + annotations/<same>/*.png   150 classes,
        0 = "other" -> ignore, c -> c - 1 (reduce_zero_label)
    coco_stuff10k/images/{train2014,test2014}/*.jpg + annotations/<same>/*_labelTrainIds.png   171, 255 ignore
    VOCdevkit/VOC2010/JPEGImages/*.jpg + SegmentationClassContext/*.png, split lists
        ImageSets/SegmentationContext/{train,val}.txt                        59 classes, reduce_zero_label
    cityscapes/leftImg8bit/{train,val}/<city>/*_leftImg8bit.png
        + gtFine/<same>/*_gtFine_labelTrainIds.png                           19 classes, 255 ignore

A split is a `SegmentationSet`: a FileImageSet whose `masks` decode like its images (resized to
image_size x image_size: bilinear for images, nearest for masks; no aspect-preserving crop, a named
deviation from mmseg's random-scale crops). Labels are int64 with IGNORE (255) for void. Per-image
`labels` are 0 (the engine's bookkeeping only; segmentation has no per-image class).

The synthetic stand-ins write procedural images with a disc of the image's class on a background of
the next class and a void border, in each real layout; their class count is SYNTHETIC_FILE's number.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from semcl.data.fileset import FileImageSet, row_numbers
from semcl.data.image_guard import read_image
from semcl.data.layout import missing, require
from semcl.data.procedural import Splits
from semcl.data.registry import DatasetSpec
from semcl.errors import DataError

IGNORE = 255
SYNTHETIC_FILE = "SEMCL_SYNTHETIC_CLASSES.txt"  # written by the synthetic writers only
REDUCE_ZERO = {"ade20k", "pascal_context59"}  # on-disk 0 is void, class c is stored as c + 1


def decode_mask(path: Path, size: int, reduce_zero: bool) -> torch.Tensor:
    """int64 [size, size] label map (nearest resize), void = IGNORE."""
    arr = read_image(path, lambda img: np.asarray(img.resize((size, size), Image.NEAREST), dtype=np.int64),
                     what="mask")
    if arr.ndim != 2:
        raise DataError(f"{path}: a label map must have one channel, got shape {arr.shape}")
    if reduce_zero:
        arr = np.where(arr == 0, IGNORE, arr - 1)
    return torch.from_numpy(arr)


def decode_image(path: Path, size: int) -> torch.Tensor:
    arr = read_image(path, lambda img: np.asarray(img.convert("RGB").resize((size, size), Image.BILINEAR),
                                                  dtype=np.uint8))
    return torch.from_numpy(arr.copy()).permute(2, 0, 1)


class _Lazy:
    """Indexable like a tensor [N, ...]; rows decoded on access."""

    def __init__(self, paths: Sequence[Path], fn, shape: tuple[int, ...]) -> None:
        self.paths, self.fn, self._shape = list(paths), fn, shape

    @property
    def shape(self) -> torch.Size:
        return torch.Size((len(self.paths), *self._shape))

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, idx):
        if isinstance(idx, int):
            return self.fn(self.paths[idx])
        rows = row_numbers(idx, len(self.paths))
        return torch.stack([self.fn(self.paths[i]) for i in rows]) if rows else torch.empty((0, *self._shape))


@dataclass
class SegmentationSet(FileImageSet):
    """Image files with their label-map files (see module docstring)."""

    mask_paths: list[Path] | None = None
    reduce_zero: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mask_paths is None or len(self.mask_paths) != len(self.paths):
            raise ValueError("one mask per image")
        s = self.image_size
        self.images = _Lazy(self.paths, lambda p: decode_image(p, s), (3, s, s))
        self.masks = _Lazy(self.mask_paths, lambda p: decode_mask(p, s, self.reduce_zero), (s, s))

    def subset(self, idx) -> SegmentationSet:
        rows = row_numbers(idx, len(self.paths))
        return SegmentationSet(self.name, [self.paths[i] for i in rows], self.labels[rows], self.class_names,
                               self.image_size, dict(self.sources), mask_paths=[self.mask_paths[i] for i in rows],
                               reduce_zero=self.reduce_zero)


def _classes(spec: DatasetSpec, base: Path) -> list[str]:
    marker = base / SYNTHETIC_FILE
    n = int(marker.read_text()) if marker.exists() else spec.num_classes
    return [f"class{i}" for i in range(n)]


def _build(spec: DatasetSpec, root: Path, images: list[Path], masks: list[Path], rel: str,
           image_size: int) -> SegmentationSet:
    if not images:
        raise DataError(f"{root / rel}: no images")
    for m in masks:
        if not m.exists():
            raise DataError(f"{m}: missing label map")
    listing = "".join(f"{p.relative_to(root)} {m.relative_to(root)}\n" for p, m in zip(images, masks, strict=True))
    return SegmentationSet(spec.name, images, torch.zeros(len(images), dtype=torch.int64),
                           _classes(spec, root / spec.folder), image_size,
                           {f"{rel} (listing)": hashlib.sha256(listing.encode()).hexdigest()},
                           mask_paths=masks, reduce_zero=spec.name in REDUCE_ZERO)


def read_ade20k(spec: DatasetSpec, root: Path, split: str, image_size: int = 512) -> SegmentationSet:
    rel = f"{spec.folder}/images/{spec.splits[split]}"
    base = require(root, rel, spec.name)
    images = sorted(base.glob("*.jpg"))
    ann = root / spec.folder / "annotations" / spec.splits[split]
    return _build(spec, root, images, [ann / f"{p.stem}.png" for p in images], rel, image_size)


def read_coco_stuff10k(spec: DatasetSpec, root: Path, split: str, image_size: int = 512) -> SegmentationSet:
    rel = f"{spec.folder}/images/{spec.splits[split]}"
    base = require(root, rel, spec.name)
    images = sorted(base.glob("*.jpg"))
    ann = root / spec.folder / "annotations" / spec.splits[split]
    return _build(spec, root, images, [ann / f"{p.stem}_labelTrainIds.png" for p in images], rel, image_size)


def read_pascal_context59(spec: DatasetSpec, root: Path, split: str, image_size: int = 480) -> SegmentationSet:
    rel = f"{spec.folder}/VOC2010/ImageSets/SegmentationContext/{spec.splits[split]}.txt"
    ids = [line.strip() for line in require(root, rel, spec.name).read_text().splitlines() if line.strip()]
    base = root / spec.folder / "VOC2010"
    images = [base / "JPEGImages" / f"{i}.jpg" for i in ids]
    for p in images:
        if not p.exists():
            raise missing(root, str(p.relative_to(root)), spec.name)
    return _build(spec, root, images, [base / "SegmentationClassContext" / f"{i}.png" for i in ids], rel,
                  image_size)


def read_cityscapes(spec: DatasetSpec, root: Path, split: str, image_size: int = 512) -> SegmentationSet:
    rel = f"{spec.folder}/leftImg8bit/{spec.splits[split]}"
    base = require(root, rel, spec.name)
    images = sorted(base.glob("*/*_leftImg8bit.png"))
    gt = root / spec.folder / "gtFine" / spec.splits[split]
    masks = [gt / p.parent.name / p.name.replace("_leftImg8bit.png", "_gtFine_labelTrainIds.png") for p in images]
    return _build(spec, root, images, masks, rel, image_size)


# --- synthetic writers ------------------------------------------------------------

def synthetic_mask(label: int, side: int, classes: int) -> np.ndarray:
    """A disc of class `label` on class (label + 1) % classes, a one-pixel void border."""
    yy, xx = np.mgrid[:side, :side]
    disc = (yy - side / 2 + 0.5) ** 2 + (xx - side / 2 + 0.5) ** 2 < (side / 3) ** 2
    mask = np.where(disc, label, (label + 1) % classes).astype(np.int64)
    mask[0, :] = mask[-1, :] = mask[:, 0] = mask[:, -1] = IGNORE
    return mask


def _on_disk(mask: np.ndarray, reduce_zero: bool) -> np.ndarray:
    return (np.where(mask == IGNORE, 0, mask + 1) if reduce_zero else mask).astype(np.uint8)


def _write_pairs(out: Path, splits: Splits, name: str, place) -> None:
    """place(split, i) -> (image path, mask path); masks in the dataset's on-disk encoding."""
    classes = int(max(max(labels) for _, labels in splits.values())) + 1
    for split, (images, labels) in splits.items():
        for i, (image, y) in enumerate(zip(images, labels, strict=True)):
            img_path, mask_path = place(split, i)
            img_path.parent.mkdir(parents=True, exist_ok=True)
            mask_path.parent.mkdir(parents=True, exist_ok=True)
            fmt = "PNG" if img_path.suffix == ".png" else "JPEG"
            Image.fromarray(image, "RGB").save(img_path, fmt, **({"quality": 95} if fmt == "JPEG" else {}))
            mask = synthetic_mask(int(y), image.shape[0], classes)
            Image.fromarray(_on_disk(mask, name in REDUCE_ZERO), "L").save(mask_path, "PNG")
    (out / SYNTHETIC_FILE).write_text(f"{classes}\n")


def write_ade20k(out: Path, splits: Splits) -> None:
    folders = {"train": "training", "test": "validation"}
    _write_pairs(out, splits, "ade20k", lambda s, i: (out / "images" / folders[s] / f"ADE_{folders[s]}_{i:08d}.jpg",
                                                      out / "annotations" / folders[s] / f"ADE_{folders[s]}_{i:08d}.png"))


def write_coco_stuff10k(out: Path, splits: Splits) -> None:
    folders = {"train": "train2014", "test": "test2014"}
    _write_pairs(out, splits, "coco_stuff10k",
                 lambda s, i: (out / "images" / folders[s] / f"COCO_{folders[s]}_{i:012d}.jpg",
                               out / "annotations" / folders[s] / f"COCO_{folders[s]}_{i:012d}_labelTrainIds.png"))


def write_pascal_context59(out: Path, splits: Splits) -> None:
    names, voc = {"train": "train", "test": "val"}, out / "VOC2010"
    _write_pairs(out, splits, "pascal_context59", lambda s, i: (voc / "JPEGImages" / f"2010_{s}{i:05d}.jpg",
                                                                voc / "SegmentationClassContext" / f"2010_{s}{i:05d}.png"))
    lists = voc / "ImageSets" / "SegmentationContext"
    lists.mkdir(parents=True, exist_ok=True)
    for s, (images, _) in splits.items():
        (lists / f"{names[s]}.txt").write_text("".join(f"2010_{s}{i:05d}\n" for i in range(len(images))))


def write_cityscapes(out: Path, splits: Splits) -> None:
    folders = {"train": "train", "test": "val"}
    _write_pairs(out, splits, "cityscapes",
                 lambda s, i: (out / "leftImg8bit" / folders[s] / "synth" / f"synth_{i:06d}_000019_leftImg8bit.png",
                               out / "gtFine" / folders[s] / "synth" / f"synth_{i:06d}_000019_gtFine_labelTrainIds.png"))
