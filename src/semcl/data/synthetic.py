"""Synthetic datasets written in the exact on-disk formats the readers expect.

Tests and smoke runs use these instead of the real downloads, and because the files are
real CIFAR pickles, TinyImageNet JPEG folders and IDX archives, they exercise the same
reader code paths as the real data. Class names and (for CIFAR-100 and Fashion-MNIST)
the superclass assignment are the real ones; see :mod:`semcl.data.procedural` for how
images get their two-level visual hierarchy.
"""

from __future__ import annotations

import fcntl
import json
import os
import pickle
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from PIL import Image

from semcl.data import classnames as cn
from semcl.data.idx import write_idx
from semcl.data.layout import DATASET_DIRS
from semcl.data.procedural import balanced_labels, make_prototypes, render
from semcl.data.splitfiles import FILE_DATASET_DIRS
from semcl.data.synthetic_lt import LT_SPECS
from semcl.errors import DataError

MANIFEST = ".semcl_synthetic.json"
# Bump when the generator changes, so ensure_synthetic regenerates stale data.
GENERATOR_VERSION = 1

Splits = dict[str, tuple[np.ndarray, np.ndarray]]  # split → (HWC uint8 images, labels)


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


def _dump(path: Path, obj: dict) -> None:
    # Protocol 2 is what Python-2-era CIFAR files use; the reader's latin1 load handles it.
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


def _cifar_rows(images: np.ndarray) -> np.ndarray:
    """HWC images → N×3072 rows (all red, then green, then blue), as CIFAR stores them."""
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2).reshape(len(images), -1))


def _filenames(names: list[str], labels: np.ndarray) -> list[str]:
    return [f"{names[y]}_s_{i:06d}.png" for i, y in enumerate(labels)]


def _write_cifar100(out: Path, splits: Splits) -> None:
    fine_to_coarse = np.asarray(cn.CIFAR100_FINE_TO_COARSE)
    for split, (images, labels) in splits.items():
        _dump(out / split, {
            "filenames": _filenames(cn.CIFAR100_FINE_NAMES, labels),
            "batch_label": f"{'training' if split == 'train' else 'testing'} batch 1 of 1",
            "fine_labels": labels.tolist(),
            "coarse_labels": fine_to_coarse[labels].tolist(),
            "data": _cifar_rows(images),
        })
    _dump(out / "meta", {"fine_label_names": list(cn.CIFAR100_FINE_NAMES),
                         "coarse_label_names": list(cn.CIFAR100_COARSE_NAMES)})


def _write_cifar10(out: Path, splits: Splits) -> None:
    train_images, train_labels = splits["train"]
    # The real training set is five equal batches; split ours the same way.
    parts = np.array_split(np.arange(len(train_labels)), 5)
    for b, idx in enumerate(parts, start=1):
        _dump(out / f"data_batch_{b}", {
            "batch_label": f"training batch {b} of 5",
            "labels": train_labels[idx].tolist(),
            "data": _cifar_rows(train_images[idx]),
            "filenames": _filenames(cn.CIFAR10_NAMES, train_labels[idx]),
        })
    test_images, test_labels = splits["test"]
    _dump(out / "test_batch", {
        "batch_label": "testing batch 1 of 1",
        "labels": test_labels.tolist(),
        "data": _cifar_rows(test_images),
        "filenames": _filenames(cn.CIFAR10_NAMES, test_labels),
    })
    _dump(out / "batches.meta", {"num_cases_per_batch": len(parts[0]),
                                 "label_names": list(cn.CIFAR10_NAMES), "num_vis": 3072})


def _save_jpeg(path: Path, image: np.ndarray) -> None:
    # High quality so JPEG blocking does not wash out the class-level high-frequency wave.
    Image.fromarray(image, "RGB").save(path, "JPEG", quality=95)


def _write_tinyimagenet(out: Path, splits: Splits) -> None:
    wnids = [cn.tinyimagenet_synthetic_wnid(i) for i in range(cn.TINYIMAGENET_NUM_CLASSES)]
    (out / "wnids.txt").write_text("".join(w + "\n" for w in wnids))
    # words.txt in the real set covers all of WordNet; a few unrelated ids make ours
    # exercise the reader's filtering too.
    extra = [f"n{80000000 + i:08d}\tunrelated synset {i}" for i in range(3)]
    words = [f"{w}\tsynthetic group {i // cn.TINYIMAGENET_SYNTHETIC_GROUP_SIZE}, class {i}"
             for i, w in enumerate(wnids)]
    (out / "words.txt").write_text("\n".join(extra + words) + "\n")
    images, labels = splits["train"]
    counters = [0] * len(wnids)
    for image, y in zip(images, labels, strict=True):
        folder = out / "train" / wnids[y] / "images"
        if counters[y] == 0:
            folder.mkdir(parents=True)
        _save_jpeg(folder / f"{wnids[y]}_{counters[y]}.JPEG", image)
        counters[y] += 1
    for y, wnid in enumerate(wnids):
        boxes = "".join(f"{wnid}_{j}.JPEG\t0\t0\t63\t63\n" for j in range(counters[y]))
        (out / "train" / wnid / f"{wnid}_boxes.txt").write_text(boxes)
    images, labels = splits["test"]
    (out / "val" / "images").mkdir(parents=True)
    lines = []
    for i, (image, y) in enumerate(zip(images, labels, strict=True)):
        _save_jpeg(out / "val" / "images" / f"val_{i}.JPEG", image)
        lines.append(f"val_{i}.JPEG\t{wnids[y]}\t0\t0\t63\t63\n")
    (out / "val" / "val_annotations.txt").write_text("".join(lines))


def _write_idx_set(out: Path, splits: Splits) -> None:
    raw = out / "raw"
    raw.mkdir()
    for split, (images, labels) in splits.items():
        prefix = "train" if split == "train" else "t10k"
        write_idx(raw / f"{prefix}-images-idx3-ubyte.gz", images[..., 0])
        write_idx(raw / f"{prefix}-labels-idx1-ubyte.gz", labels.astype(np.uint8))


# name → (class groups, channels, image size, writer)
_SPECS: dict[str, tuple[list[int], int, int, Callable[[Path, Splits], None]]] = {
    "cifar100": (cn.CIFAR100_FINE_TO_COARSE, 3, 32, _write_cifar100),
    "cifar10": (cn.CIFAR10_SYNTHETIC_GROUPS, 3, 32, _write_cifar10),
    "tinyimagenet": (
        [i // cn.TINYIMAGENET_SYNTHETIC_GROUP_SIZE for i in range(cn.TINYIMAGENET_NUM_CLASSES)],
        3, 64, _write_tinyimagenet,
    ),
    "fashion_mnist": (cn.FASHION_MNIST_FINE_TO_COARSE, 1, 28, _write_idx_set),
    "mnist": (cn.MNIST_SYNTHETIC_GROUPS, 1, 28, _write_idx_set),
    **LT_SPECS,  # split-file and ImageNet-folder layouts (semcl.data.synthetic_lt)
}
SYNTHETIC_NAMES = tuple(n for n in _SPECS if n not in LT_SPECS)  # in-memory sets
SYNTHETIC_FILE_NAMES = tuple(LT_SPECS)  # file-backed sets (semcl.data.splitfiles)
_DIRS = {**DATASET_DIRS, **FILE_DATASET_DIRS}


def write_synthetic(name: str, root: str | Path, *, train_per_class: int, test_per_class: int,
                    seed: int = 0) -> Path:
    """Write synthetic dataset ``name`` under ``root`` and return its top-level folder.

    Replaces whatever is at ``root/<dataset folder>``; the files are written to a
    temporary sibling first and moved into place, so an interrupted write never leaves
    a half-written dataset that a reader would accept. Deterministic for a seed.
    """
    if name not in _SPECS:
        raise DataError(f"unknown synthetic dataset '{name}' (known: {', '.join(_SPECS)})")
    if train_per_class < 1 or test_per_class < 1:
        raise ValueError("train_per_class and test_per_class must be >= 1")
    group_of, channels, size, writer = _SPECS[name]
    splits = _generate(group_of, channels, size,
                       {"train": train_per_class, "test": test_per_class}, seed)
    root = Path(root)
    target = root / _DIRS[name]
    tmp = root / f".{_DIRS[name]}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        writer(tmp, splits)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


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
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps({"datasets": recorded}, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)  # atomic: readers never see a half-written manifest


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
            if name not in _SPECS:
                raise DataError(f"unknown synthetic dataset '{name}' (known: {', '.join(_SPECS)})")
            present = (root / _DIRS[name]).exists()
            if present and (name not in recorded or recorded[name] == params):
                continue
            write_synthetic(name, root, train_per_class=train_per_class,
                            test_per_class=test_per_class, seed=seed)
            recorded[name] = params
            # Record after each dataset so an interruption loses at most the one in flight.
            _write_manifest(manifest_path, recorded)
    return root
