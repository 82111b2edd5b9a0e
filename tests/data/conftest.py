"""Fixtures for the data tests: one synthetic data root shared by the whole session."""

from __future__ import annotations

from pathlib import Path

import pytest

from semcl.data import SYNTHETIC_NAMES, ensure_synthetic

TRAIN_PER_CLASS = 4
TEST_PER_CLASS = 2
# TinyImageNet is one JPEG file per image; fewer keep file creation and cleanup cheap.
TINY_COUNTS = (2, 1)


@pytest.fixture(scope="session")
def synth_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data root holding every synthetic dataset (4 train / 2 test images per class,
    2 / 1 for TinyImageNet)."""
    root = tmp_path_factory.mktemp("synthetic")
    others = [n for n in SYNTHETIC_NAMES if n != "tinyimagenet"]
    ensure_synthetic(root, others, train_per_class=TRAIN_PER_CLASS,
                     test_per_class=TEST_PER_CLASS, seed=0)
    ensure_synthetic(root, ["tinyimagenet"], train_per_class=TINY_COUNTS[0],
                     test_per_class=TINY_COUNTS[1], seed=0)
    return root


@pytest.fixture(scope="session")
def synth_counts() -> dict[str, tuple[int, int]]:
    """Dataset name → (train, test) images per class in ``synth_root``."""
    return {n: TINY_COUNTS if n == "tinyimagenet" else (TRAIN_PER_CLASS, TEST_PER_CLASS)
            for n in SYNTHETIC_NAMES}
