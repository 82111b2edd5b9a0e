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
from semcl.data.layout import check_root, missing, require
from semcl.data.registry import DatasetSpec, dataset_spec, resolve
from semcl.errors import DataError


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


def check_cifar(spec: DatasetSpec, root: Path) -> None:
    """The split pickles and the class-name meta file end in the pickle STOP opcode."""
    meta = "batches.meta" if (root / spec.folder / "batches.meta").exists() else "meta"
    files = [meta, *(f for split in ("train", "test") for f in spec.splits[split].split())]
    for file in files:
        _check_pickle_end(require(root, f"{spec.folder}/{file}", spec.name))


def check_idx(spec: DatasetSpec, root: Path) -> None:
    """Images and labels of each split: headers agree with the file sizes and with each other."""
    base = f"{spec.folder}/raw"
    for prefix in (spec.splits["train"], spec.splits["test"]):
        shapes = []
        for kind in ("images-idx3", "labels-idx1"):
            rel = f"{base}/{prefix}-{kind}-ubyte"
            path = next((root / r for r in (rel, rel + ".gz") if (root / r).is_file()), None)
            if path is None:
                raise missing(root, rel + "[.gz]", spec.name)
            shapes.append((path, idx_shape(path)))
        (img, img_shape), (lab, lab_shape) = shapes
        if not img_shape or not lab_shape or img_shape[0] != lab_shape[0]:
            raise DataError(f"{lab}: malformed labels ({lab_shape[0] if lab_shape else 0} labels for "
                            f"{img_shape[0] if img_shape else 0} images in {img.name})")


def check_tinyimagenet(spec: DatasetSpec, root: Path) -> None:
    base = spec.folder
    wnids = require(root, f"{base}/wnids.txt", spec.name)
    require(root, f"{base}/words.txt", spec.name)
    require(root, f"{base}/val/val_annotations.txt", spec.name)
    require(root, f"{base}/val/images", spec.name)
    try:
        ids = [w.strip() for w in wnids.read_text(encoding="utf-8").splitlines() if w.strip()]
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{wnids}: unreadable ({type(err).__name__}: {err})") from None
    for wnid in ids:
        require(root, f"{base}/train/{wnid}/images", spec.name)


def check_split_files(spec: DatasetSpec, root: Path) -> None:
    """The train and test split files parse (the reader's own line checks)."""
    from semcl.data.sets.splitfile import read_split_file

    for split in ("train", "test"):
        read_split_file(require(root, f"{spec.folder}/{spec.splits[split]}", spec.name))


def check_image_folders(spec: DatasetSpec, root: Path) -> None:
    for split in ("train", "test"):
        require(root, f"{spec.folder}/{spec.splits[split]}", spec.name)


def check_video_splits(spec: DatasetSpec, root: Path) -> None:
    """The split-file folder of a video set exists (the reader checks every video it lists)."""
    from semcl.data.video.videoset import VIDEO_DATASETS

    require(root, f"{spec.folder}/{VIDEO_DATASETS[spec.name].split_dir}", spec.name)


def check_dataset(name: str, root: Path) -> None:
    """DataError (one line naming the file) unless `name`'s files under `root` look complete;
    the check is the dataset's own (`DatasetSpec.check`)."""
    spec = dataset_spec(name)
    check_root(root, name)
    resolve(spec.check)(spec, root)


def check_segmentation(spec: DatasetSpec, root: Path) -> None:
    """Segmentation sets: the reader lists every image with its label map (decodes nothing)."""
    from semcl.data.registry import resolve

    for split in ("train", "test"):
        resolve(spec.reader)(spec, root, split, 8)
