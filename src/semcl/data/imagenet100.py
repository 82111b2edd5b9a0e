"""WordNet-id class lists of RINCE's ImageNet experiments, shipped in ``semcl/data/files``.

- ImageNet-100: the CMC 100-class subset (Tian et al. 2019) as listed by the official RINCE code;
  classes are indexed in sorted-wnid order, as an ImageFolder over the class folders orders them.
- ImageNet outlier splits 1-3: 100 wnids each, disjoint from each other and from ImageNet-100,
  the OOD sets of RINCE Table 3 (docs/papers/rince.md §e.4).
- TinyImageNet outliers / inliers: the 20 / 180 wnids of the official 180/20 split (docs/papers/rince.md §e.5).

Provenance of each file: ``semcl/data/files/README.md``. A list file holds one wnid per line
(a trailing newline is optional); the names file holds "<wnid> <name>" per line.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from semcl.errors import DataError

_WNID = re.compile(r"n\d{8}")
LIST_FILES = {
    "imagenet100": "ImageNet-100.txt",
    "imagenet_outliers_split1": "imagenet_outliers_split1.txt",
    "imagenet_outliers_split2": "imagenet_outliers_split2.txt",
    "imagenet_outliers_split3": "imagenet_outliers_split3.txt",
    "tiny_imagenet_outliers": "tiny_imagenet_outliers.txt",
    "tiny_imagenet_inliers": "tiny_imagenet_inliers.txt",
}
_NAMES_FILE = "ImageNet-100_wnid_names.txt"
# OOD column variants (semcl.evals.protocols.ood, column field `classes`): name -> (the OOD set it
# restricts, the shipped list of the classes kept)
OOD_CLASS_SUBSETS = {"outliers20": ("tinyimagenet", "tiny_imagenet_outliers")}
LISTS = tuple(LIST_FILES)


def packaged_file(filename: str) -> Path:
    """Path of a file in semcl/data/files (the package is installed as plain files)."""
    return Path(str(resources.files("semcl.data").joinpath("files", filename)))


def read_wnid_list(path: str | Path) -> list[str]:
    """The wnids of a list file, in file order; blank lines skipped, duplicates and non-wnids rejected."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: unreadable ({type(err).__name__}: {err})") from None
    wnids: list[str] = []
    seen: set[str] = set()
    for lineno, line in enumerate(lines, start=1):
        wnid = line.strip()
        if not wnid:
            continue
        if not _WNID.fullmatch(wnid):
            raise DataError(f"{path}: line {lineno}: {wnid[:40]!r} is not a WordNet id (n + 8 digits)")
        if wnid in seen:
            raise DataError(f"{path}: line {lineno}: {wnid} listed twice")
        seen.add(wnid)
        wnids.append(wnid)
    if not wnids:
        raise DataError(f"{path}: no wnids")
    return wnids


def read_wnid_names(path: str | Path) -> dict[str, str]:
    """wnid → class name from "<wnid> <name>" lines (the name may contain spaces)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: unreadable ({type(err).__name__}: {err})") from None
    names: dict[str, str] = {}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        wnid, _, name = line.strip().partition(" ")
        if not _WNID.fullmatch(wnid) or not name.strip():
            raise DataError(f"{path}: line {lineno}: expected '<wnid> <name>', got {line[:60]!r}")
        if wnid in names:
            raise DataError(f"{path}: line {lineno}: {wnid} listed twice")
        names[wnid] = name.strip()
    return names


def wnid_list(name: str) -> list[str]:
    """A shipped list by name (one of ``LISTS``), in file order."""
    if name not in LIST_FILES:
        raise KeyError(f"unknown class list {name!r}; expected one of {LISTS}")
    return read_wnid_list(packaged_file(LIST_FILES[name]))


def imagenet100_wnids(path: str | Path | None = None) -> list[str]:
    """The 100 ImageNet-100 wnids in class-index order (sorted), from ``path`` or the shipped list."""
    wnids = read_wnid_list(path) if path is not None else wnid_list("imagenet100")
    if len(wnids) != 100:
        raise DataError(f"{path or LIST_FILES['imagenet100']}: {len(wnids)} wnids, ImageNet-100 has 100")
    return sorted(wnids)


def imagenet100_class_names(wnids: list[str] | None = None, path: str | Path | None = None) -> list[str]:
    """Class names of ``wnids`` (default: imagenet100_wnids()), from ``path`` or the shipped names file."""
    src = Path(path) if path is not None else packaged_file(_NAMES_FILE)
    table = read_wnid_names(src)
    wnids = imagenet100_wnids() if wnids is None else wnids
    absent = [w for w in wnids if w not in table]
    if absent:
        raise DataError(f"{src}: no name for {absent[0]} ({len(absent)} missing)")
    return [table[w] for w in wnids]


def words_of_wnids(names: list[str]) -> list[str]:
    """`names` with each ImageNet wnid replaced by its class name from the shipped names file, when every
    one of them is a wnid there: ImageNet folder sets name their classes by wnid, while class-name
    similarities (a sentence model, the official matrix) are of the words. Other names are returned as given."""
    table = read_wnid_names(packaged_file(_NAMES_FILE))
    if names and all(n in table for n in names):
        return [table[n] for n in names]
    return list(names)


def imagenet_outlier_wnids(split: int) -> list[str]:
    """The 100 wnids of ImageNet outlier split 1, 2 or 3 (OOD for ImageNet-100), in file order."""
    if split not in (1, 2, 3):
        raise ValueError(f"ImageNet outlier split must be 1, 2 or 3, got {split}")
    return wnid_list(f"imagenet_outliers_split{split}")
