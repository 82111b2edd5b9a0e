"""Cheap checks of a data root before any run is submitted: every file a dataset's reader will
open is present and its size agrees with its header, so that a missing or truncated file fails
once, before anything is submitted, instead of failing every run that reads it.

Each family's check walks everything it expects and records, without stopping at the first
problem, what is absent, what is malformed and what was found (counts, split files, checksums):
`inspect_dataset` returns that as a `DatasetCheck`, `check_dataset` raises its first problem as a one-line
DataError, and `semcl.data.check_report` renders the checks of many datasets as one report.

What is checked (nothing is decoded in full):
- IDX (MNIST, Fashion-MNIST): magic and dimensions, and the data size the header implies against
  the file size (or the gzip trailer), images and labels of one split of equal count;
- CIFAR pickles: present, non-empty, ending in the pickle STOP opcode ('.'), which a truncated
  file lacks;
- TinyImageNet: wnids.txt, words.txt, val/val_annotations.txt, and a train folder per class;
- split-file datasets (ImageNet-LT, Places-LT, iNaturalist): the train and test split files
  parse (the readers' own line checks); image folders for full ImageNet.
With `checksums`, the files whose official md5 is known (MD5 below) are hashed too; a different
md5 is reported, not failed: a re-compressed copy (Debian's Fashion-MNIST .gz) holds the same data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from semcl.data.idx import idx_shape
from semcl.data.layout import check_root, missing
from semcl.data.registry import DatasetSpec, dataset_spec, resolve
from semcl.errors import DataError

# md5 of the official files, as torchvision 0.29.1 lists them (torchvision/datasets/cifar.py
# `train_list` / `test_list` / `meta`, torchvision/datasets/mnist.py `resources`); IDX: the .gz files
MD5 = {
    "cifar-100-python/train": "16019d7e3df5f24257cddd939b257f8d",
    "cifar-100-python/test": "f0ef6b0ae62326f3e7ffdfab6717acfc",
    "cifar-100-python/meta": "7973b15100ade9c7d40fb424638fde48",
    "cifar-10-batches-py/data_batch_1": "c99cafc152244af753f735de768cd75f",
    "cifar-10-batches-py/data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "cifar-10-batches-py/data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "cifar-10-batches-py/data_batch_4": "634d18415352ddfa80567beed471001a",
    "cifar-10-batches-py/data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "cifar-10-batches-py/test_batch": "40351d587109b95175f43aff81a1287e",
    "cifar-10-batches-py/batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
    "MNIST/raw/train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "MNIST/raw/train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "MNIST/raw/t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "MNIST/raw/t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
    "FashionMNIST/raw/train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "FashionMNIST/raw/train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "FashionMNIST/raw/t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "FashionMNIST/raw/t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
}


@dataclass
class DatasetCheck:
    """What one dataset's check saw under a data root."""

    name: str
    root: Path
    folder: str
    layout: list[str] = field(default_factory=list)  # what the reader expects: paths and formats
    absent: list[str] = field(default_factory=list)  # expected paths (relative to root) not found
    problems: list[str] = field(default_factory=list)  # one line per malformed file
    found: list[str] = field(default_factory=list)  # counts, split files
    sums: list[str] = field(default_factory=list)  # md5 against the official files (MD5)
    errors: list[DataError] = field(default_factory=list)  # the first of these is check_dataset's error

    @property
    def status(self) -> str:
        """present (all there and well-formed) / missing (no folder) / incomplete (the rest)."""
        if not (self.root / self.folder).is_dir() or not self.root.is_dir():
            return "missing"
        return "incomplete" if self.absent or self.problems else "present"

    def need(self, rel: str) -> Path | None:
        """root / rel if it exists; else it is recorded as absent."""
        path = self.root / rel
        if path.exists():
            return path
        self.absent.append(rel)
        self.errors.append(missing(self.root, rel, self.name))
        return None

    def guard(self, fn: Callable[[], object]) -> object:
        """fn(); a DataError it raises is recorded as a problem (None returned)."""
        try:
            return fn()
        except DataError as err:
            self.problems.append(str(err))
            self.errors.append(err)
            return None

    def checksum(self, path: Path, enabled: bool) -> None:
        rel = path.relative_to(self.root).as_posix()
        if enabled and rel in MD5:
            digest = _md5(path)
            self.sums.append(f"{rel}: md5 " + ("matches the official file" if digest == MD5[rel] else
                                                f"{digest} differs from the official {MD5[rel]} (a re-encoded or "
                                                "altered copy; the size checks passed)"))


def _md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _pickle_end(path: Path) -> None:
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            f.seek(max(size - 1, 0))
            last = f.read(1)
    except OSError as err:
        raise DataError(f"{path}: unreadable ({type(err).__name__}: {err})") from None
    if last != b".":
        raise DataError(f"{path}: truncated pickle ({size} bytes, no end marker); download it again")


def _subfolders(path: Path) -> int:
    return sum(1 for p in path.iterdir() if p.is_dir())


def check_cifar(spec: DatasetSpec, c: DatasetCheck, checksums: bool) -> None:
    """The split pickles and the class-name meta file end in the pickle STOP opcode."""
    meta = "batches.meta" if spec.splits["test"] == "test_batch" else "meta"  # CIFAR-10's names vs CIFAR-100's
    files = [meta, *(f for split in ("train", "test") for f in spec.splits[split].split())]
    c.layout.append(f"{spec.folder}/{{{','.join(files)}}}: CIFAR python pickles (the official archive unpacked)")
    seen = 0
    for file in files:
        path = c.need(f"{spec.folder}/{file}")
        if path is not None:
            seen += 1
            c.guard(lambda p=path: _pickle_end(p))
            c.checksum(path, checksums)
    c.found.insert(0, f"{seen}/{len(files)} pickle files")


def check_idx(spec: DatasetSpec, c: DatasetCheck, checksums: bool) -> None:
    """Images and labels of each split: headers agree with the file sizes and with each other."""
    base = f"{spec.folder}/raw"
    prefixes = (spec.splits["train"], spec.splits["test"])
    c.layout.append(f"{base}/{{{','.join(prefixes)}}}-{{images-idx3,labels-idx1}}-ubyte[.gz]: IDX files "
                    f"(images N x {spec.size} x {spec.size} uint8, labels N uint8)")
    for prefix, expected in zip(prefixes, (spec.num_train, spec.num_test), strict=True):
        shapes = []
        for kind in ("images-idx3", "labels-idx1"):
            rel = f"{base}/{prefix}-{kind}-ubyte"
            path = next((c.root / r for r in (rel, rel + ".gz") if (c.root / r).is_file()), None)
            if path is None:
                c.absent.append(rel + "[.gz]")
                c.errors.append(missing(c.root, rel + "[.gz]", spec.name))
                continue
            shape = c.guard(lambda p=path: idx_shape(p))
            if shape is not None:
                shapes.append((path, shape))
                c.checksum(path, checksums)
        if len(shapes) < 2:
            continue
        (img, img_shape), (lab, lab_shape) = shapes
        if not img_shape or not lab_shape or img_shape[0] != lab_shape[0]:
            err = DataError(f"{lab}: malformed labels ({lab_shape[0] if lab_shape else 0} labels for "
                            f"{img_shape[0] if img_shape else 0} images in {img.name})")
            c.problems.append(str(err))
            c.errors.append(err)
        else:
            c.found.append(f"{prefix}: {img_shape[0]:,} images and labels (the full split has {expected:,})")


def check_tinyimagenet(spec: DatasetSpec, c: DatasetCheck, checksums: bool) -> None:
    base = spec.folder
    c.layout.append(f"{base}/{{wnids.txt,words.txt}}, {base}/train/<wnid>/images/*.JPEG, "
                    f"{base}/val/images/*.JPEG + {base}/val/val_annotations.txt (the official zip unpacked)")
    wnids = c.need(f"{base}/wnids.txt")
    for rel in ("words.txt", "val/val_annotations.txt", "val/images"):
        c.need(f"{base}/{rel}")
    if wnids is None:
        return

    def read() -> list[str]:
        try:
            return [w.strip() for w in wnids.read_text(encoding="utf-8").splitlines() if w.strip()]
        except (OSError, UnicodeDecodeError) as err:
            raise DataError(f"{wnids}: unreadable ({type(err).__name__}: {err})") from None

    ids = c.guard(read) or []
    present = [w for w in ids if (c.root / base / "train" / w / "images").exists()]
    for wnid in ids:
        if wnid not in present:
            c.need(f"{base}/train/{wnid}/images")
    c.found.append(f"{len(ids)} classes in wnids.txt (expected {spec.num_classes}), "
                   f"{len(present)}/{len(ids)} train folders")
    if (c.root / base / "val" / "images").is_dir():
        c.found.append(f"{sum(1 for _ in (c.root / base / 'val' / 'images').iterdir()):,} val images "
                       f"(expected {spec.num_test:,})")


def check_split_files(spec: DatasetSpec, c: DatasetCheck, checksums: bool) -> None:
    """The train and test split files parse (the reader's own line checks)."""
    from semcl.data.sets.splitfile import read_split_file

    c.layout.append(f"{spec.folder}/{{{spec.splits['train']},{spec.splits['test']}}}: split files, one "
                    f"'<relative/image/path> <label>' per line; the images under {spec.folder}/")
    for split, expected in (("train", spec.num_train), ("test", spec.num_test)):
        path = c.need(f"{spec.folder}/{spec.splits[split]}")
        if path is None:
            continue
        parsed = c.guard(lambda p=path: read_split_file(p))
        if parsed is not None:
            rels, labels = parsed
            c.found.append(f"{spec.splits[split]}: {len(rels):,} images of {len(set(labels))} classes "
                           f"(expected {expected:,})")


def check_image_folders(spec: DatasetSpec, c: DatasetCheck, checksums: bool) -> None:
    splits = list(dict.fromkeys(spec.splits[s] for s in ("train", "test")))
    c.layout.append(f"{spec.folder}/{{{','.join(splits)}}}/<class>/<image>: image folders, one per class")
    for split in splits:
        path = c.need(f"{spec.folder}/{split}")
        if path is not None and path.is_dir():
            c.found.append(f"{spec.folder}/{split}: {_subfolders(path):,} class folders")


def check_video_splits(spec: DatasetSpec, c: DatasetCheck, checksums: bool) -> None:
    """The split-file folder of a video set exists (the reader checks every video it lists)."""
    from semcl.data.video.videoset import VIDEO_DATASETS

    split_dir = VIDEO_DATASETS[spec.name].split_dir
    c.layout.append(f"{spec.folder}/{split_dir}/: the official split lists; the videos' frame folders under "
                    f"{spec.folder}/")
    path = c.need(f"{spec.folder}/{split_dir}")
    if path is not None and path.is_dir():
        c.found.append(f"{spec.folder}/{split_dir}: {sum(1 for p in path.iterdir() if p.is_file())} split files")


# where each segmentation reader looks (semcl.data.sets.segmentation), for the report's layout line
_SEG_LAYOUT = {
    "cityscapes": "{{leftImg8bit,gtFine}}/{split}/<city>/*_{{leftImg8bit,gtFine_labelTrainIds}}.png",
    "pascal_context59": "VOC2010/{{JPEGImages/*.jpg,SegmentationClassContext/*.png,"
                        "ImageSets/SegmentationContext/{split}.txt}}",
    "coco_stuff10k": "{{images/{split}/*.jpg,annotations/{split}/*_labelTrainIds.png}}",
    "ade20k": "{{images/{split}/*.jpg,annotations/{split}/*.png}}",
}


def check_segmentation(spec: DatasetSpec, c: DatasetCheck, checksums: bool) -> None:
    """Segmentation sets: the reader lists every image with its label map (decodes nothing)."""
    tr, te = spec.splits["train"], spec.splits["test"]
    c.layout.append(f"{spec.folder}/" + _SEG_LAYOUT.get(spec.name, "{images,annotations}/{split}/").format(
        split=f"{{{tr},{te}}}") + f": the mmsegmentation layout of {spec.name}, images with their label maps")
    for split in ("train", "test"):
        images = c.guard(lambda s=split: resolve(spec.reader)(spec, c.root, s, 8))
        if images is not None:
            c.found.append(f"{spec.splits[split]}: {len(images):,} images with label maps")


def inspect_dataset(name: str, root: Path, checksums: bool = False) -> DatasetCheck:
    """Everything `name`'s check sees under `root` (the dataset's own `DatasetSpec.check`)."""
    spec = dataset_spec(name)
    c = DatasetCheck(name, root, spec.folder)
    if not root.is_dir():
        c.guard(lambda: check_root(root, name))
        _layout_only(spec, c)
        return c
    if not (root / spec.folder).is_dir():
        _layout_only(spec, c)
        c.need(spec.folder)
        return c
    resolve(spec.check)(spec, c, checksums)
    return c


def _layout_only(spec: DatasetSpec, c: DatasetCheck) -> None:
    """The layout lines of `spec` without looking at files (its folder is absent)."""
    probe = DatasetCheck(spec.name, c.root / ".semcl-layout-only", spec.folder)
    try:
        resolve(spec.check)(spec, probe, False)
    except (DataError, OSError):
        pass
    c.layout += probe.layout


def check_dataset(name: str, root: Path) -> None:
    """DataError (one line naming the file) unless `name`'s files under `root` look complete;
    the check is the dataset's own (`DatasetSpec.check`)."""
    spec = dataset_spec(name)
    check_root(root, name)
    c = DatasetCheck(name, root, spec.folder)
    resolve(spec.check)(spec, c, False)
    if c.errors:
        raise c.errors[0]
