"""Animals with Attributes 2 (AwA2) as an OOD set: `Animals_with_Attributes2/JPEGImages/<class>/*.jpg`.

RINCE (Table 3) uses all images of `JPEGImages` through an ImageFolder as D_out for ImageNet-100
(docs/papers/rince.md §e.4: 50 classes, 37,322 images): there is no train/test split, so both split names
read the whole folder. Classes in sorted folder order; images decoded by `FileImageSet`
(Resize size / 0.875 -> CenterCrop size: 256 -> 224 at the default 224, the official eval transform).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from semcl.data.fileset import FileImageSet
from semcl.data.layout import missing
from semcl.data.procedural import Splits
from semcl.data.registry import DatasetSpec
from semcl.data.sets.imagenet import IMAGE_SUFFIXES, save_jpeg
from semcl.errors import DataError


def read(spec: DatasetSpec, root: Path, split: str, image_size: int = 224) -> FileImageSet:
    """Every image of `JPEGImages/<class>/`, labelled by sorted class folder."""
    rel = f"{spec.folder}/{spec.splits[split]}"
    base = root / rel
    if not base.is_dir():
        raise missing(root, rel, spec.name)
    classes = sorted(d.name for d in base.iterdir() if d.is_dir())
    paths: list[Path] = []
    labels: list[int] = []
    for y, cls in enumerate(classes):
        files = sorted(p for p in (base / cls).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        paths += files
        labels += [y] * len(files)
    if not paths:
        raise DataError(f"{base}: no images in class folders (dataset {spec.name})")
    listing = "".join(f"{p.relative_to(base)} {y}\n" for p, y in zip(paths, labels, strict=True))
    return FileImageSet(spec.name, paths, torch.tensor(labels), [c.replace("+", " ") for c in classes],
                        image_size, {f"{rel} (listing)": hashlib.sha256(listing.encode()).hexdigest()})


def write(out: Path, splits: Splits) -> None:
    """JPEGImages/<class>/<class>_<k>.jpg from both splits (AwA2 has one folder of images)."""
    k = 0
    for split in ("train", "test"):
        images, labels = splits[split]
        for image, y in zip(images, labels, strict=True):
            name = f"synthetic+animal+{int(y):02d}"
            save_jpeg(out / "JPEGImages" / name / f"{name}_{k:05d}.jpg", image)
            k += 1
