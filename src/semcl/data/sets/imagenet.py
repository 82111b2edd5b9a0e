"""Full ImageNet (ILSVRC-2012) as image folders: the reader and the synthetic writer.

Layout: `<root>/imagenet/{train,val}/<wnid>/*.JPEG` (val sorted into synset folders, as the
usual preparation script leaves it; no split files). Classes are the sorted train folders, as
torchvision's ImageFolder orders them. The split records the SHA-256 of its folder listing
(`FileImageSet.sources`). The synthetic stand-in: 20 classes, JPEGs of the procedural images.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from semcl.data.fileset import FileImageSet
from semcl.data.layout import missing
from semcl.data.procedural import Splits
from semcl.data.registry import DatasetSpec
from semcl.errors import DataError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def read(spec: DatasetSpec, root: Path, split: str, image_size: int = 224) -> FileImageSet:
    """`<root>/<folder>/<split>/<class>/<image>`; classes in sorted folder order (ImageFolder)."""
    name = spec.name
    rel = f"{spec.folder}/{spec.splits[split]}"
    base = root / rel
    train = root / spec.folder / spec.splits["train"]
    if not base.is_dir() or not train.is_dir():
        raise missing(root, rel if not base.is_dir() else f"{spec.folder}/{spec.splits['train']}", name)
    classes = sorted(d.name for d in train.iterdir() if d.is_dir())
    index = {c: i for i, c in enumerate(classes)}
    paths, labels = [], []
    for cls in sorted(d.name for d in base.iterdir() if d.is_dir()):
        if cls not in index:
            raise DataError(f"{base / cls}: class folder absent from {train}")
        files = sorted(p for p in (base / cls).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        paths += files
        labels += [index[cls]] * len(files)
    if not paths:
        raise DataError(f"{base}: no images")
    listing = "".join(f"{p.relative_to(base)} {y}\n" for p, y in zip(paths, labels, strict=True))
    return FileImageSet(name, paths, torch.tensor(labels), classes, image_size,
                        {f"{rel} (listing)": hashlib.sha256(listing.encode()).hexdigest()})


# --- synthetic writer -------------------------------------------------------------

def wnid(c: int) -> str:
    """Made-up but well-formed WordNet id of synthetic class `c`."""
    return f"n{90000000 + c:08d}"


def save_jpeg(path: Path, image: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image, "RGB").save(path, "JPEG", quality=95)


def write(out: Path, splits: Splits) -> None:
    """train/<wnid>/*.JPEG and val/<wnid>/*.JPEG (the test split)."""
    for split, folder in (("train", "train"), ("test", "val")):
        images, labels = splits[split]
        for i, (image, y) in enumerate(zip(images, labels, strict=True)):
            save_jpeg(out / folder / wnid(int(y)) / f"{wnid(int(y))}_{i}.JPEG", image)
    # SimCLR-style label-subset lists (semi/1percent.txt, 10percent.txt: training file names): the
    # first training image of each class, and the first two
    _, labels = splits["train"]
    for name, per_class in (("1percent", 1), ("10percent", 2)):
        seen: dict[int, int] = {}
        lines = []
        for i, y in enumerate(int(v) for v in labels):
            if seen.get(y, 0) < per_class:
                seen[y] = seen.get(y, 0) + 1
                lines.append(f"{wnid(y)}_{i}.JPEG\n")
        (out / "semi").mkdir(parents=True, exist_ok=True)
        (out / "semi" / f"{name}.txt").write_text("".join(lines))
