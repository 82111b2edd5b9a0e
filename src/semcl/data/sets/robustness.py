"""ImageNet robustness test sets (GPaCo Sec. IV-C, docs/papers/paco.md §e.5): readers and synthetic writers.

Layouts under the data root (the archives' own folder names):
    imagenet-c/<corruption>/<severity 1..5>/<wnid>/*.JPEG   15 corruptions x 5 severities
    imagenet-r/<wnid>/*                                      the 200-class subset (files/imagenet_r_wnids.txt)
    sketch/<wnid>/*                                          ImageNet-Sketch, 1000 classes

These are test-only sets: every split name reads the same images (the registry protocol asks for
"train" and "test"; no run trains on them). Class indices are the sorted wnid folders *of the set*;
the robustness evaluation maps them to the trained model's classes by wnid. ImageNet-C's registered
split reads all 75 (corruption, severity) folders; `read_corruption` reads one of them.

The synthetic stand-ins write the test images of the synthetic ImageNet classes (same wnids as
semcl.data.sets.imagenet) into these layouts; ImageNet-C's "corruptions" are cheap deterministic
stand-ins (noise and contrast loss growing with severity), not Hendrycks' corruption functions.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

import numpy as np
import torch

from semcl.data.fileset import FileImageSet
from semcl.data.layout import missing
from semcl.data.procedural import Splits
from semcl.data.registry import DatasetSpec
from semcl.data.sets.imagenet import IMAGE_SUFFIXES, save_jpeg, wnid
from semcl.errors import DataError

# Hendrycks & Dietterich's order (the order of the AlexNet error list)
CORRUPTIONS = ("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur",
               "zoom_blur", "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate",
               "jpeg_compression")
SEVERITIES = (1, 2, 3, 4, 5)


def _data_file(name: str) -> Path:
    return Path(str(resources.files("semcl.data").joinpath("files", name)))


def imagenet_r_wnids() -> list[str]:
    """The 200 ImageNet-R wnids, sorted (provenance: semcl/data/files/README.md)."""
    return [w for w in _data_file("imagenet_r_wnids.txt").read_text().split() if w]


def alexnet_errors() -> dict[str, float]:
    """AlexNet's mean top-1 error (fraction) per ImageNet-C corruption (Hendrycks & Dietterich 2019)."""
    out = {}
    for line in _data_file("imagenet_c_alexnet_errors.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, value = line.split()
            out[name] = float(value)
    return out


def _folder_listing(base: Path) -> tuple[list[Path], list[str]]:
    """(image paths, their wnid) under base/<wnid>/*, folders and files sorted."""
    paths, wnids = [], []
    for cls in sorted(d.name for d in base.iterdir() if d.is_dir()):
        files = sorted(p for p in (base / cls).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        paths += files
        wnids += [cls] * len(files)
    return paths, wnids


def _file_set(name: str, root: Path, rels: list[str], image_size: int) -> FileImageSet:
    """One FileImageSet over the class folders of every `rels` folder; classes = sorted wnids seen."""
    paths, wnids = [], []
    for rel in rels:
        base = root / rel
        if not base.is_dir():
            raise missing(root, rel, name)
        p, w = _folder_listing(base)
        if not p:
            raise DataError(f"{base}: no images")
        paths += p
        wnids += w
    classes = sorted(set(wnids))
    index = {c: i for i, c in enumerate(classes)}
    labels = [index[w] for w in wnids]
    listing = "".join(f"{p.relative_to(root)} {w}\n" for p, w in zip(paths, wnids, strict=True))
    return FileImageSet(name, paths, torch.tensor(labels), classes, image_size,
                        {f"{rels[0]} (listing)": hashlib.sha256(listing.encode()).hexdigest()})


def read_imagenet_c(spec: DatasetSpec, root: Path, split: str, image_size: int = 224) -> FileImageSet:
    """Every corruption and severity of ImageNet-C, concatenated (a missing folder is an error)."""
    return _file_set(spec.name, root, [f"{spec.folder}/{c}/{s}" for c in CORRUPTIONS for s in SEVERITIES],
                     image_size)


def read_corruption(spec: DatasetSpec, root: Path, corruption: str, severity: int,
                    image_size: int = 224) -> FileImageSet:
    """ImageNet-C `<corruption>/<severity>` alone."""
    if corruption not in CORRUPTIONS or severity not in SEVERITIES:
        raise DataError(f"{spec.name}: no corruption {corruption!r} at severity {severity}")
    return _file_set(spec.name, root, [f"{spec.folder}/{corruption}/{severity}"], image_size)


def read_imagenet_r(spec: DatasetSpec, root: Path, split: str, image_size: int = 224) -> FileImageSet:
    """`imagenet-r/<wnid>/*`. On real data every folder must be one of the 200 listed wnids."""
    s = _file_set(spec.name, root, [spec.folder], image_size)
    allowed = set(imagenet_r_wnids())
    real = [c for c in s.class_names if not c.startswith("n9")]  # synthetic wnids start with n9
    stray = sorted(set(real) - allowed)
    if stray:
        raise DataError(f"{root / spec.folder / stray[0]}: not one of the 200 ImageNet-R classes")
    return s


def read_sketch(spec: DatasetSpec, root: Path, split: str, image_size: int = 224) -> FileImageSet:
    """`sketch/<wnid>/*` (ImageNet-Sketch), read as a plain 1000-class image folder."""
    return _file_set(spec.name, root, [spec.folder], image_size)


# --- synthetic writers ------------------------------------------------------------

def corrupt(image: np.ndarray, corruption: int, severity: int, seed: int) -> np.ndarray:
    """Stand-in corruption: contrast loss and Gaussian noise, both growing with severity."""
    rng = np.random.default_rng([corruption, severity, seed])
    x = image.astype(np.float32)
    x = 128 + (x - 128) * (1 - 0.12 * severity) + rng.normal(0, 6 * severity, x.shape)
    return np.clip(x, 0, 255).astype(np.uint8)


def write_imagenet_c(out: Path, splits: Splits) -> None:
    """<corruption>/<severity>/<wnid>/*.JPEG of the synthetic test images."""
    images, labels = splits["test"]
    for ci, c in enumerate(CORRUPTIONS):
        for s in SEVERITIES:
            for i, (image, y) in enumerate(zip(images, labels, strict=True)):
                save_jpeg(out / c / str(s) / wnid(int(y)) / f"{c}_{s}_{i}.JPEG", corrupt(image, ci, s, i))


def write_folder_set(out: Path, splits: Splits) -> None:
    """<wnid>/*.JPEG of the synthetic test images, colours inverted (a domain shift of sorts)."""
    images, labels = splits["test"]
    for i, (image, y) in enumerate(zip(images, labels, strict=True)):
        save_jpeg(out / wnid(int(y)) / f"{wnid(int(y))}_{i}.JPEG", 255 - image)
