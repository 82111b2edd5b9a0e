"""The one loader path: `load(name, root, split)` reads any registered dataset's split.

Importing this module does not import torch; the dataset's reader (and torch with it) is imported
on the first call.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from semcl.data.layout import check_root
from semcl.data.registry import dataset_spec, resolve
from semcl.errors import DataError

if TYPE_CHECKING:
    from semcl.data.fileset import FileImageSet
    from semcl.data.imageset import ImageSet


def load(name: str, root: str | Path, split: str, image_size: int | None = None) -> ImageSet | FileImageSet:
    """Split `split` of dataset `name` under data root `root`.

    In-memory sets (CIFAR, TinyImageNet, the MNISTs) take train | test and come back decoded at
    their native size; file-backed sets (the long-tailed split files, ImageNet folders) also take
    val and decode each batch at `image_size` (default: the registry's `size`, 224). An unknown
    name or split, a missing root or file, or a malformed file is a one-line DataError naming it.
    """
    spec = dataset_spec(name)
    if split not in spec.splits:
        raise DataError(f"unknown split '{split}' for dataset {name} (known: {', '.join(spec.splits)})")
    root = Path(root).expanduser()
    check_root(root, name)
    return resolve(spec.reader)(spec, root, split, image_size or spec.size)


def describe_split(s: ImageSet | FileImageSet) -> dict:
    """What a run records about a split it read: size, images per class and defining files."""
    import torch  # lazy: this module stays importable without torch

    counts = torch.bincount(s.labels, minlength=s.num_classes)
    return {"dataset": s.name, "images": len(s.labels), "classes": s.num_classes,
            "per_class": counts.tolist(), "sources": dict(getattr(s, "sources", {}))}
