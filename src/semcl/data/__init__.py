"""Datasets: readers of the real on-disk formats, synthetic stand-ins in the same formats, storage and samplers.
How a view is made lives in semcl.data.views, the classes' semantics (hierarchies, similarities, neighbours,
negatives) in semcl.data.semantics; this face names neither.

Every dataset is one `DatasetSpec` in `DATASETS` (semcl.data.registry) plus one family module
under semcl.data.sets with its reader and synthetic writer; `load(name, root, split)` reads any
of them and `stats(name)` gives its normalisation. Importing this package does not import torch
(the CLI's fast paths read the registry): the torch-side names below load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from semcl.data.loader import describe_split, load
from semcl.data.registry import DATASETS, DatasetSpec, dataset_spec, resolve, stats

if TYPE_CHECKING:  # what the lazy names are, for readers and type checkers
    from semcl.data.imageset import ImageSet, conform, select_per_class
    from semcl.data.synthetic import SYNTHETIC_NAMES, ensure_synthetic, write_synthetic

_IMAGESET = ("ImageSet", "conform", "select_per_class")
_SYNTHETIC = ("SYNTHETIC_NAMES", "ensure_synthetic", "write_synthetic")


def __getattr__(name: str) -> Any:
    # explicit imports (not importlib strings) so the import-graph test sees these edges
    if name in _IMAGESET:
        from semcl.data import imageset as module
    elif name in _SYNTHETIC:
        from semcl.data import synthetic as module
    else:
        raise AttributeError(f"module 'semcl.data' has no attribute '{name}'")
    return getattr(module, name)


__all__ = [
    "DATASETS",
    "SYNTHETIC_NAMES",
    "DatasetSpec",
    "ImageSet",
    "conform",
    "dataset_spec",
    "describe_split",
    "ensure_synthetic",
    "load",
    "resolve",
    "select_per_class",
    "stats",
    "write_synthetic",
]
