"""Where each dataset lives under a data root, and the one-line errors for what is missing.

Shared by the readers (which check) and the synthetic writer (which creates), so both
agree on the on-disk layout by construction.
"""

from __future__ import annotations

from pathlib import Path

from semcl.errors import DataError

# Top-level folder of each dataset under the data root (the names the official archives
# unpack to, and torchvision's folder names for the IDX sets).
DATASET_DIRS: dict[str, str] = {
    "cifar100": "cifar-100-python",
    "cifar10": "cifar-10-batches-py",
    "tinyimagenet": "tiny-imagenet-200",
    "fashion_mnist": "FashionMNIST",
    "mnist": "MNIST",
}

SPLITS = ("train", "test")
_HINT = "set --data-root or SEMCL_DATA"


def missing(root: Path, rel: str, dataset: str) -> DataError:
    """The DataError for ``rel`` (relative to ``root``) being absent."""
    return DataError(f"data root {root}: missing {rel} (dataset {dataset}; {_HINT})")


def require(root: Path, rel: str, dataset: str) -> Path:
    """``root / rel`` if it exists, else a DataError naming the root and ``rel``."""
    path = root / rel
    if not path.exists():
        raise missing(root, rel, dataset)
    return path


def check_root(root: Path, dataset: str) -> None:
    """DataError unless ``root`` is an existing directory."""
    if not root.is_dir():
        what = "not a directory" if root.exists() else "does not exist"
        raise DataError(f"data root {root}: {what} (dataset {dataset}; {_HINT})")
