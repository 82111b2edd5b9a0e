"""The one-line errors for a data root or a dataset file that is missing.

Each dataset's folder under the data root is its registry entry's `folder`
(semcl.data.registry); the readers check paths through these helpers.
"""

from __future__ import annotations

from pathlib import Path

from semcl.errors import DataError

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
