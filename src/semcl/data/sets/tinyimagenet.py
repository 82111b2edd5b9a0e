"""TinyImageNet-200: the reader of its folder layout (64×64 JPEGs) and the synthetic writer.

``tiny-imagenet-200/wnids.txt`` lists the 200 class ids; ``words.txt`` maps WordNet ids to
names (it covers all of WordNet, not just these 200); ``train/<wnid>/images/*.JPEG`` are
the training images; ``val/images/*.JPEG`` with ``val/val_annotations.txt`` form the
labelled split we call "test" (the official test folder has no labels).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from semcl.data import classnames as cn
from semcl.data.image_guard import read_image
from semcl.data.imageset import ImageSet
from semcl.data.layout import require
from semcl.data.procedural import Splits
from semcl.data.registry import DatasetSpec, dataset_spec
from semcl.errors import DataError

_NAME = "tinyimagenet"


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: unreadable ({type(err).__name__}: {err})") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def _class_names(words_path: Path, wnids: list[str]) -> list[str]:
    """Full ``words.txt`` gloss of each wnid (e.g. "goldfish, Carassius auratus").

    The whole gloss is kept rather than its first synonym because first synonyms repeat
    across WordNet (two different "crane"s), and names should identify classes. A wnid
    absent from ``words.txt`` falls back to the wnid itself rather than failing: the
    name is only cosmetic, and the labels do not depend on it.
    """
    wanted = set(wnids)
    glosses: dict[str, str] = {}
    for line in _read_lines(words_path):
        wnid, _, gloss = line.partition("\t")
        if wnid in wanted:
            glosses[wnid] = gloss.strip() or wnid
    return [glosses.get(w, w) for w in wnids]


def _decode_all(paths: list[Path], size: int) -> torch.Tensor:
    """Decode JPEGs of side ``size`` (64) into one uint8 ``[N, 3, size, size]`` tensor.

    Threads help because PIL releases the GIL while decoding. Greyscale JPEGs (a few
    hundred in the real set) become RGB via ``convert("RGB")``.
    """
    out = np.empty((len(paths), size, size, 3), dtype=np.uint8)

    def decode(i: int) -> None:
        path = paths[i]

        def exact(im):  # every TinyImageNet image is size x size: checked from the header, before decoding
            if im.size != (size, size):
                raise DataError(f"{path}: malformed image (size {im.size[0]}×{im.size[1]}, "
                                f"expected {size}×{size})")
            return np.asarray(im.convert("RGB"))

        out[i] = read_image(path, exact, max_pixels=size * size)

    workers = min(8, os.cpu_count() or 1)
    if workers > 1 and len(paths) > 256:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(decode, range(len(paths))))  # list() re-raises worker errors
    else:
        for i in range(len(paths)):
            decode(i)
    return torch.from_numpy(out).permute(0, 3, 1, 2).contiguous()


def tinyimagenet_wnids(root: Path) -> list[str]:
    """The class wnids in label order (sorted ``wnids.txt``), as `read` indexes them."""
    wnids_path = require(root, f"{dataset_spec(_NAME).folder}/wnids.txt", _NAME)
    wnids = sorted(set(_read_lines(wnids_path)))
    if not wnids:
        raise DataError(f"{wnids_path}: malformed (no class ids)")
    return wnids


def read(spec: DatasetSpec, root: Path, split: str, image_size: int | None = None) -> ImageSet:
    """Read the train split or (for ``split == "test"``) the labelled val split.

    Classes are ordered by sorted wnid, as torchvision's ImageFolder would order the
    train folders; files inside a class folder are read in sorted order and val images
    in annotation-file order, so the result is the same on every filesystem.
    """
    base = spec.folder
    wnids = tinyimagenet_wnids(root)
    words_path = require(root, f"{base}/words.txt", _NAME)
    index = {w: i for i, w in enumerate(wnids)}
    paths: list[Path] = []
    labels: list[int] = []
    if split == "train":
        for wnid in wnids:
            folder = require(root, f"{base}/train/{wnid}/images", _NAME)
            files = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".jpeg", ".jpg"))
            paths.extend(files)
            labels.extend([index[wnid]] * len(files))
    else:
        held = spec.splits[split]  # the labelled val folder
        ann_path = require(root, f"{base}/{held}/val_annotations.txt", _NAME)
        img_dir = require(root, f"{base}/{held}/images", _NAME)
        for lineno, line in enumerate(_read_lines(ann_path), start=1):
            fields = line.split("\t")
            if len(fields) < 2 or fields[1] not in index:
                raise DataError(f"{ann_path}: malformed line {lineno} (expected "
                                f"'<file>\\t<wnid from wnids.txt>...', got {line[:60]!r})")
            image = img_dir / fields[0]
            if not image.is_file():
                raise DataError(f"{ann_path}: line {lineno} names missing image {image}")
            paths.append(image)
            labels.append(index[fields[1]])
    return ImageSet(_NAME, _decode_all(paths, spec.size), torch.tensor(labels, dtype=torch.int64),
                    _class_names(words_path, wnids))


# --- synthetic writer -------------------------------------------------------------

def _save_jpeg(path: Path, image: np.ndarray) -> None:
    # High quality so JPEG blocking does not wash out the class-level high-frequency wave.
    Image.fromarray(image, "RGB").save(path, "JPEG", quality=95)


def write(out: Path, splits: Splits) -> None:
    """wnids.txt, words.txt, train/<wnid>/images/*.JPEG + boxes, val/images + val_annotations.txt."""
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
