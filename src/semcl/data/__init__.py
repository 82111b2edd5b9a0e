"""Datasets (real on-disk formats and synthetic stand-ins), batched augmentations and
class hierarchies for ranked contrastive learning."""

from semcl.data.augment import RECIPES, STATS, Augment, Recipe, build_augment, two_views
from semcl.data.hierarchy import (
    candidate_ranks,
    rank_matrix,
    superclass_similarity,
    threshold_similarity,
)
from semcl.data.imageset import ImageSet, conform, select_per_class
from semcl.data.layout import DATASET_DIRS
from semcl.data.readers import READERS, load_dataset
from semcl.data.splitfiles import FILE_READERS
from semcl.data.synthetic import SYNTHETIC_NAMES, ensure_synthetic, write_synthetic

# the file-backed long-tailed sets (split files, ImageNet folders) are readable by name like the rest
READERS.update(FILE_READERS)

__all__ = [
    "DATASET_DIRS",
    "READERS",
    "RECIPES",
    "STATS",
    "SYNTHETIC_NAMES",
    "Augment",
    "ImageSet",
    "Recipe",
    "build_augment",
    "candidate_ranks",
    "conform",
    "ensure_synthetic",
    "load_dataset",
    "rank_matrix",
    "select_per_class",
    "superclass_similarity",
    "threshold_similarity",
    "two_views",
    "write_synthetic",
]
