"""Readers for the long-tailed split files (OLTR format) and ImageNet-style folders.

Split file: one sample per line, `<relative/path> <integer label>`, labels from 0; paths are
relative to the dataset folder under the data root. Layout (put or symlink the images there):

    <root>/ImageNet_LT/ImageNet_LT_{train,val,test}.txt   + train/, val/ (ILSVRC-2012, val in synset folders)
    <root>/Places_LT/Places_LT_{train,val,test}.txt       + the Places365 folders the files name
    <root>/iNaturalist18/iNaturalist18_{train,val}.txt    + train_val2018/
    <root>/imagenet/{train,val}/<wnid>/*.JPEG             (full ImageNet, no split files)

Every split records the SHA-256 of the file that defines it (`FileImageSet.sources`), because
more than one version of these files circulates (paco.md e.3).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch

from semcl.data.fileset import FileImageSet
from semcl.data.imageset import ImageSet
from semcl.data.layout import check_root, missing
from semcl.data.readers import load_dataset
from semcl.errors import DataError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


@dataclass(frozen=True)
class SplitFiles:
    folder: str
    files: dict[str, str]  # split -> file name inside folder


# iNaturalist 2018 has no public test labels: its official val split is every paper's test set.
SPLIT_DATASETS: dict[str, SplitFiles] = {
    "imagenet_lt": SplitFiles("ImageNet_LT", {s: f"ImageNet_LT_{s}.txt" for s in ("train", "val", "test")}),
    "places_lt": SplitFiles("Places_LT", {s: f"Places_LT_{s}.txt" for s in ("train", "val", "test")}),
    "inat18": SplitFiles("iNaturalist18", {"train": "iNaturalist18_train.txt", "val": "iNaturalist18_val.txt",
                                           "test": "iNaturalist18_val.txt"}),
}
FOLDER_DATASETS: dict[str, str] = {"imagenet": "imagenet"}
FILE_DATASET_DIRS: dict[str, str] = {**{k: v.folder for k, v in SPLIT_DATASETS.items()}, **FOLDER_DATASETS}
FOLDER_SPLITS = {"train": "train", "val": "val", "test": "val"}  # ILSVRC val is the test set


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


def read_split_dataset(name: str, root: Path, split: str, image_size: int = 224) -> FileImageSet:
    spec = SPLIT_DATASETS[name]
    if split not in spec.files:
        raise DataError(f"unknown split '{split}' for dataset {name} (known: {', '.join(spec.files)})")
    base = root / spec.folder
    train_file, split_file = base / spec.files["train"], base / spec.files[split]
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


def read_image_folder(name: str, root: Path, split: str, image_size: int = 224) -> FileImageSet:
    """`<root>/<folder>/<split>/<class>/<image>`; classes in sorted folder order (ImageFolder)."""
    if split not in FOLDER_SPLITS:
        raise DataError(f"unknown split '{split}' for dataset {name} (known: {', '.join(FOLDER_SPLITS)})")
    rel = f"{FOLDER_DATASETS[name]}/{FOLDER_SPLITS[split]}"
    base = root / rel
    train = root / FOLDER_DATASETS[name] / "train"
    if not base.is_dir() or not train.is_dir():
        raise missing(root, rel if not base.is_dir() else f"{FOLDER_DATASETS[name]}/train", name)
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


def load_split(name: str, root: str | Path, split: str, image_size: int | None = None) -> ImageSet | FileImageSet:
    """Any dataset's split: file-backed sets take train | val | test, the rest go to load_dataset."""
    root = Path(root).expanduser()
    if name in SPLIT_DATASETS:
        check_root(root, name)
        return read_split_dataset(name, root, split, image_size or 224)
    if name in FOLDER_DATASETS:
        check_root(root, name)
        return read_image_folder(name, root, split, image_size or 224)
    return load_dataset(name, root, split)


def describe_split(s: ImageSet | FileImageSet) -> dict:
    """What a run records about a split it read: size, images per class and defining files."""
    counts = torch.bincount(s.labels, minlength=s.num_classes)
    return {"dataset": s.name, "images": len(s.labels), "classes": s.num_classes,
            "per_class": counts.tolist(), "sources": dict(getattr(s, "sources", {}))}


def _reader(name: str):
    def read(root: Path, split: str) -> FileImageSet:
        return load_split(name, root, split)

    read.__name__ = f"read_{name}"
    return read


# joins semcl.data.readers.READERS (in semcl.data), so load_dataset reads these sets too
FILE_READERS = {name: _reader(name) for name in (*SPLIT_DATASETS, *FOLDER_DATASETS)}
