"""Synthetic datasets written in the exact on-disk formats the readers expect.

Tests and smoke runs use these instead of the real downloads, and because the files are
real CIFAR pickles, TinyImageNet JPEG folders and IDX archives, they exercise the same
reader code paths as the real data. Class names and (for CIFAR-100 and Fashion-MNIST)
the superclass assignment are the real ones; see :mod:`semcl.data.procedural` for how
images get their two-level visual hierarchy. What each dataset looks like (classes, groups,
channels, size, folder) is its registry entry; the format writer is in its family module
under :mod:`semcl.data.sets`. This module renders the images and manages the data root.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from semcl.data.procedural import Splits, balanced_labels, make_prototypes, render
from semcl.data.registry import DATASETS, DatasetSpec, resolve
from semcl.errors import DataError
from semcl.files import fill_folder_atomic, write_text_atomic

MANIFEST = ".semcl_synthetic.json"
# Bump when the generator changes, so ensure_synthetic regenerates stale data.
GENERATOR_VERSION = 1


def _generate(group_of: list[int], channels: int, size: int, per_split: dict[str, int],
              seed: int) -> Splits:
    """Render every split from one set of prototypes (so train and test share classes)."""
    protos = make_prototypes(group_of, channels, np.random.default_rng([seed, 0]))
    out: Splits = {}
    for k, (split, per_class) in enumerate(per_split.items(), start=1):
        # Independent streams per split: changing test_per_class leaves train unchanged.
        rng = np.random.default_rng([seed, k])
        labels = balanced_labels(len(group_of), per_class, rng)
        out[split] = (render(protos, labels, size, rng), labels)
    return out


def _spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise DataError(f"unknown synthetic dataset '{name}' (known: {', '.join(DATASETS)})")
    return DATASETS[name]


SYNTHETIC_NAMES = tuple(n for n, s in DATASETS.items() if not s.file_backed)  # in-memory image sets


def write_synthetic(name: str, root: str | Path, *, train_per_class: int, test_per_class: int,
                    seed: int = 0, merge: bool = False) -> Path:
    """Write synthetic dataset ``name`` under ``root`` and return its top-level folder.

    Replaces whatever is at ``root/<dataset folder>`` (``merge``: adds its files to that folder, for
    sets that share one, e.g. ImageNet-100 and the outlier splits in imagenet/); the files are written to a
    temporary sibling first and moved into place, so an interrupted write never leaves
    a half-written dataset that a reader would accept. Deterministic for a seed.
    """
    spec = _spec(name)
    if train_per_class < 1 or test_per_class < 1:
        raise ValueError("train_per_class and test_per_class must be >= 1")
    writer = resolve(spec.writer)
    if spec.video:  # a video set's writer renders its own clips and writes atomically
        return writer(Path(root), train_per_class=train_per_class, test_per_class=test_per_class, seed=seed)
    splits = _generate(list(spec.synthetic_groups), spec.channels, spec.synthetic_side,
                       {"train": train_per_class, "test": test_per_class}, seed)
    return fill_folder_atomic(Path(root) / spec.folder, lambda tmp: writer(tmp, splits), merge=merge)


def _read_manifest(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DataError(f"{path}: malformed JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("datasets", {}), dict):
        raise DataError(f"{path}: malformed manifest (expected {{'datasets': {{...}}}})")
    return dict(data.get("datasets", {}))


def _write_manifest(path: Path, recorded: dict[str, dict]) -> None:
    # atomic: readers never see a half-written manifest
    write_text_atomic(path, json.dumps({"datasets": recorded}, indent=2, sort_keys=True) + "\n")


def ensure_synthetic(root: str | Path, names: Iterable[str], *, train_per_class: int,
                     test_per_class: int, seed: int = 0) -> Path:
    """Make sure synthetic ``names`` exist under ``root`` with these parameters; return ``root``.

    A dataset is (re)written when its folder is missing, or when ``root/.semcl_synthetic.json``
    records it with different parameters. A folder present but *not* recorded there is
    taken to be real data and left alone: this function never overwrites what it did
    not write. An exclusive lock on ``root/.semcl_synthetic.lock`` serialises concurrent
    callers (e.g. several jobs of one sweep sharing a results store), so a dataset is
    written once and never replaced while another process reads it.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    manifest_path = root / MANIFEST
    params = {"train_per_class": train_per_class, "test_per_class": test_per_class,
              "seed": seed, "version": GENERATOR_VERSION}
    with open(root / ".semcl_synthetic.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        recorded = _read_manifest(manifest_path)
        for name in dict.fromkeys(names):  # dedupe, keep order
            present = (root / _spec(name).folder).exists()
            # a folder this function wrote for another set that shares it (ImageNet-100 and the outlier
            # splits all live in imagenet/) is not real data: this set's class folders are added to it
            ours = any(n != name and _spec(n).folder == _spec(name).folder for n in recorded)
            if present and (recorded.get(name) == params or (name not in recorded and not ours)):
                continue
            write_synthetic(name, root, train_per_class=train_per_class,
                            test_per_class=test_per_class, seed=seed, merge=present and ours)
            recorded[name] = params
            # Record after each dataset so an interruption loses at most the one in flight.
            _write_manifest(manifest_path, recorded)
    return root
