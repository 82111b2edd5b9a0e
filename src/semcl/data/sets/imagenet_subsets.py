"""Class subsets of the ImageNet folders (RINCE Table 3): ImageNet-100 and the three outlier splits.

Layout as `semcl.data.sets.imagenet`: `<root>/imagenet/{train,val}/<wnid>/*.JPEG`. A subset reads
only the class folders of its wnid list (`semcl.data.imagenet100`, shipped in semcl/data/files),
classes in sorted-wnid order (what an ImageFolder over a folder of just those classes gives, as
the official code builds it). Images are decoded by `FileImageSet`: shorter side to size / 0.875,
centre crop `size`, i.e. Resize 256 -> CenterCrop 224 at the default 224 (the official eval transform).

- `imagenet100`: the CMC 100-class list; train = ImageNet train, test = ImageNet val (50 per class).
- `imagenet_outliers_split{1,2,3}`: 100 wnids each, disjoint from ImageNet-100: OOD sets (val only
  is read by the OOD evaluation; train is offered for completeness).

The synthetic stand-in writes the subset's real wnids into `imagenet/` (so the reader's list
check runs); it shares the folder with the full-ImageNet stand-in, so one synthetic data root
holds only one of them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from semcl.data.fileset import FileImageSet
from semcl.data.imagenet100 import imagenet100_wnids, imagenet_outlier_wnids
from semcl.data.layout import missing
from semcl.data.procedural import Splits
from semcl.data.registry import DatasetSpec
from semcl.data.sets.imagenet import IMAGE_SUFFIXES, save_jpeg
from semcl.errors import DataError


def subset_wnids(name: str) -> list[str]:
    """The sorted wnids (class-index order) of subset `name`."""
    if name == "imagenet100":
        return imagenet100_wnids()
    if name.startswith("imagenet_outliers_split"):
        return sorted(imagenet_outlier_wnids(int(name.rsplit("split", 1)[1])))
    raise ValueError(f"no ImageNet class subset named {name!r}")


def read_wnid_folders(spec: DatasetSpec, root: Path, split: str, wnids: list[str], image_size: int) -> FileImageSet:
    """`<root>/<folder>/<split dir>/<wnid>/*` for each wnid (label = position in `wnids`); every
    class folder must exist and hold an image. The listing's SHA-256 is the split's source."""
    rel = f"{spec.folder}/{spec.splits[split]}"
    base = root / rel
    if not base.is_dir():
        raise missing(root, rel, spec.name)
    paths: list[Path] = []
    labels: list[int] = []
    for y, wnid in enumerate(wnids):
        folder = base / wnid
        if not folder.is_dir():
            raise missing(root, f"{rel}/{wnid}", spec.name)
        files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise DataError(f"{folder}: no images (dataset {spec.name})")
        paths += files
        labels += [y] * len(files)
    listing = "".join(f"{p.relative_to(base)} {y}\n" for p, y in zip(paths, labels, strict=True))
    return FileImageSet(spec.name, paths, torch.tensor(labels), list(wnids), image_size,
                        {f"{rel} (listing)": hashlib.sha256(listing.encode()).hexdigest()})


def read(spec: DatasetSpec, root: Path, split: str, image_size: int = 224) -> FileImageSet:
    """Split `split` of the subset `spec.name` (see the module docstring)."""
    return read_wnid_folders(spec, root, split, subset_wnids(spec.name), image_size)


def _writer(name: str):
    def write(out: Path, splits: Splits) -> None:
        """train/<wnid>/*.JPEG and val/<wnid>/*.JPEG with the subset's real wnids (synthetic class i -> wnid i)."""
        wnids = subset_wnids(name)
        for split, folder in (("train", "train"), ("test", "val")):
            images, labels = splits[split]
            for i, (image, y) in enumerate(zip(images, labels, strict=True)):
                save_jpeg(out / folder / wnids[int(y)] / f"{wnids[int(y)]}_{i}.JPEG", image)
    return write


write_imagenet100 = _writer("imagenet100")
write_outliers_split1 = _writer("imagenet_outliers_split1")
write_outliers_split2 = _writer("imagenet_outliers_split2")
write_outliers_split3 = _writer("imagenet_outliers_split3")
