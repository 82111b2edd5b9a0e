"""Class-restricted OOD sets: an ImageSet cut down to the classes of a wnid list.

RINCE's ``outliers20`` variant (docs/papers/rince.md §g.7) uses as D_out for CIFAR-100 only the 20 TinyImageNet
"outlier" classes of the official 180/20 split instead of all 200 (the suite default). The rows
keep their labels and class names (OOD scoring ignores labels); only the rows change.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from semcl.data.imagenet100 import OOD_CLASS_SUBSETS, wnid_list
from semcl.data.imageset import ImageSet
from semcl.errors import DataError


def restrict_to_wnids(s: ImageSet, class_wnids: Sequence[str], keep: Sequence[str], *,
                      strict: bool = True) -> ImageSet:
    """The rows of ``s`` whose class wnid (``class_wnids[label]``) is in ``keep``.

    ``strict``: every wnid of ``keep`` must be a class of ``s`` (a synthetic stand-in with
    made-up wnids fails here rather than giving an empty OOD set silently).
    """
    if len(class_wnids) != s.num_classes:
        raise ValueError(f"{s.name}: {len(class_wnids)} class wnids for {s.num_classes} classes")
    wanted = set(keep)
    absent = sorted(wanted - set(class_wnids))
    if absent and strict:
        raise DataError(f"{s.name}: {len(absent)} of the {len(wanted)} listed wnids are not classes of "
                        f"this set (e.g. {absent[0]})")
    chosen = torch.tensor([w in wanted for w in class_wnids], dtype=torch.bool)
    rows = torch.nonzero(chosen[s.labels], as_tuple=True)[0]
    if rows.numel() == 0:
        raise DataError(f"{s.name}: no image of the {len(wanted)} listed classes")
    return s.subset(rows)


def tinyimagenet_outliers20(s: ImageSet, class_wnids: Sequence[str],
                            outliers: Sequence[str] | None = None) -> ImageSet:
    """TinyImageNet restricted to the 20 outlier classes (default: the shipped official list).

    ``class_wnids``: the wnid of each label of ``s``, e.g. ``tinyimagenet_wnids(root)``.
    """
    return restrict_to_wnids(s, class_wnids, wnid_list("tiny_imagenet_outliers") if outliers is None
                             else outliers)


def tinyimagenet_real_wnids() -> list[str]:
    """The 200 real TinyImageNet wnids in label order (sorted), from the shipped 180/20 lists."""
    wnids = sorted(wnid_list("tiny_imagenet_inliers") + wnid_list("tiny_imagenet_outliers"))
    if len(set(wnids)) != 200:
        raise DataError(f"tiny_imagenet_inliers/outliers lists: {len(set(wnids))} distinct wnids, expected 200")
    return wnids


def tinyimagenet_class_wnids(root: str | Path) -> tuple[list[str], bool]:
    """(the wnid of each label of TinyImageNet under data root ``root``, whether it is the synthetic
    stand-in). The synthetic writer makes up its wnids (``n9xxxxxxx``); for it, label i stands for
    the i-th real wnid in sorted order, i.e. the classes are selected by position, which is the
    class the label has in the real data: a stand-in, not the real outlier images."""
    from semcl.data import classnames as cn
    from semcl.data.sets.tinyimagenet import tinyimagenet_wnids

    wnids = tinyimagenet_wnids(Path(root))
    synthetic = wnids == sorted(cn.tinyimagenet_synthetic_wnid(i) for i in range(cn.TINYIMAGENET_NUM_CLASSES))
    return (tinyimagenet_real_wnids() if synthetic else wnids), synthetic


def ood_subset_rows(subset: str, labels: torch.Tensor, root: str | Path) -> torch.Tensor:
    """Row indices of an OOD test split (its ``labels``) that belong to class subset ``subset``."""
    dataset, listname = OOD_CLASS_SUBSETS[subset]
    if dataset != "tinyimagenet":  # the one reader whose wnids are known here
        raise ValueError(f"OOD class subset {subset!r}: no wnid reader for {dataset}")
    class_wnids, _ = tinyimagenet_class_wnids(root)
    keep = set(wnid_list(listname))
    chosen = torch.tensor([w in keep for w in class_wnids], dtype=torch.bool)
    return torch.nonzero(chosen[labels], as_tuple=True)[0]
