"""File-backed image sets: paths + labels, images decoded and resized only when a batch asks.

ImageNet-LT, Places-LT, iNaturalist 2018 and full ImageNet do not fit in memory as one uint8
tensor. `FileImageSet` offers what the engine reads from an in-memory `ImageSet` -- `labels`,
`num_classes`, `fine_to_coarse`, `subset()` and an `images` object with `.shape` that is indexed
by a batch of row indices -- so the training loop batches from either without knowing which.

Two decodes: `images` gives the evaluation view (Resize 256 -> CenterCrop 224 at the set's size,
stackable); `train_images` gives each image whole, at its own size (a list), so a training view's
RandomResizedCrop draws its box from the full picture as torchvision's does on the PIL image,
rather than from the centre crop (which would never show the borders).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from semcl.data.codecs import jpeg_decoder
from semcl.data.image_guard import FOLDER_PIXEL_BUDGET, over_budget, read_image
from semcl.errors import DataError

# Eval transform of the official code: Resize(256) -> CenterCrop(224); the decode keeps that ratio.
CROP_RATIO = 0.875


def decode_file(path: Path, fit: Callable[[Image.Image], Image.Image] | None = None) -> torch.Tensor:
    """uint8 [3, h, w] of the RGB image at `path`, after `fit` (a resize / crop) if given; an unreadable
    file, or one whose header claims more than FOLDER_PIXEL_BUDGET pixels, is one DataError naming it."""

    def pixels(img: Image.Image) -> np.ndarray:
        img = img.convert("RGB")
        return np.asarray(fit(img) if fit else img, dtype=np.uint8)

    arr = read_image(path, pixels, FOLDER_PIXEL_BUDGET)
    return torch.from_numpy(arr.copy()).permute(2, 0, 1)


def _centre_square(img: Image.Image, size: int) -> Image.Image:
    """Shorter side resized to size / 0.875, then the centre size x size crop."""
    w, h = img.size
    short = round(size / CROP_RATIO)
    scale = short / min(w, h)
    img = img.resize((max(short, round(w * scale)), max(short, round(h * scale))), Image.BILINEAR)
    w, h = img.size
    left, top = (w - size) // 2, (h - size) // 2
    return img.crop((left, top, left + size, top + size))


def decode(path: Path, size: int) -> torch.Tensor:
    """uint8 [3, size, size]: shorter side resized to size / 0.875, then the centre crop."""
    return decode_file(path, lambda img: _centre_square(img, size))


# start-of-frame markers torchvision's libjpeg-turbo decode reads (baseline, extended, progressive Huffman)
_SOF = {0xC0, 0xC1, 0xC2}


def jpeg_components(data: bytes) -> int | None:
    """Colour components of an 8-bit JPEG (read from its start-of-frame header), None if `data` is not
    one of the JPEG kinds in _SOF."""
    header = jpeg_header(data)
    return None if header is None else header[0]


def jpeg_header(data: bytes) -> tuple[int, int, int] | None:
    """(components, width, height) from an 8-bit JPEG's start-of-frame header, None if `data` is not one of
    the JPEG kinds in _SOF."""
    if data[:2] != b"\xff\xd8":
        return None
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
        elif marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            i += 2
        elif 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if marker not in _SOF or i + 10 > len(data) or data[i + 4] != 8:
                return None
            return data[i + 9], data[i + 7] << 8 | data[i + 8], data[i + 5] << 8 | data[i + 6]
        else:
            i += 2 + (data[i + 2] << 8 | data[i + 3])
    return None


def decode_whole(path: Path) -> torch.Tensor:
    """uint8 [3, h, w]: the image at its own size (the training decode).

    Grey and colour JPEGs go through TorchCodec's decode_jpeg where it is installed (libjpeg-turbo on the
    tensor: 1.4x PIL's rate with its conversion and copies, 1.1x torchvision's decode_jpeg, 500x375 photos
    on one thread, measured 2026-12-04; the same pixels as PIL's decode + convert("RGB"),
    tests/data/test_loader_decode.py); other files, other JPEG kinds (CMYK, 12-bit,
    lossless) and every file without TorchCodec through PIL. torchvision's decode_jpeg, used before, is
    deprecated in its favour and no longer called."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataError(f"{path}: cannot decode image ({type(err).__name__}: {err})") from None
    header = jpeg_header(data)
    if header is not None and header[0] in (1, 3) and (decoder := jpeg_decoder()) is not None:
        if (refused := over_budget(path, header[1:], FOLDER_PIXEL_BUDGET)) is not None:
            raise refused  # before TorchCodec allocates what the header claims
        try:
            return decoder(torch.frombuffer(bytearray(data), dtype=torch.uint8))
        except RuntimeError:
            pass  # a damaged file: PIL's reading, and its error
    return decode_file(path)


# by (process id, threads): a forked child must not use its parent's threads
_POOLS: dict[tuple[int, int], ThreadPoolExecutor] = {}


def decode_threads() -> int:
    """Threads that decode a batch of files: SEMCL_DECODE_THREADS if set, else the CPUs this process may
    use, at most 8. PIL releases the GIL while it decodes and resizes, so threads decode in parallel."""
    env = os.environ.get("SEMCL_DECODE_THREADS")
    if env is not None:
        if not env.isdigit() or int(env) < 1:
            raise DataError(f"SEMCL_DECODE_THREADS: expected a whole number >= 1, got {env!r}")
        return int(env)
    return max(1, min(8, len(os.sched_getaffinity(0))))


def _decode_all(fn: Callable[[Path], torch.Tensor], paths: list[Path]) -> list[torch.Tensor]:
    """`fn` over `paths`, in order, on a thread pool for more than a few files (the same tensors)."""
    threads = decode_threads()
    if threads == 1 or len(paths) < 4:
        return [fn(p) for p in paths]
    key = (os.getpid(), threads)
    if key not in _POOLS:
        _POOLS[key] = ThreadPoolExecutor(threads, thread_name_prefix="semcl-decode")
    return list(_POOLS[key].map(fn, paths))


def row_numbers(idx: slice | torch.Tensor | Sequence[int], n: int) -> list[int]:
    """Row numbers of an index (slice, int list/tensor or boolean mask)."""
    if isinstance(idx, slice):
        return list(range(n)[idx])
    t = torch.as_tensor(idx)
    if t.dtype == torch.bool:
        t = torch.nonzero(t).flatten()
    return t.long().flatten().tolist()


class LazyImages:
    """Indexable like a uint8 [N, 3, size, size] tensor; rows are decoded on each access."""

    dtype = torch.uint8
    ndim = 4

    def __init__(self, paths: Sequence[Path], size: int) -> None:
        self.paths = list(paths)
        self.size = size

    @property
    def shape(self) -> torch.Size:
        return torch.Size((len(self.paths), 3, self.size, self.size))

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, idx: int | slice | torch.Tensor | Sequence[int]) -> torch.Tensor:
        if isinstance(idx, int):
            return decode(self.paths[idx], self.size)
        rows = row_numbers(idx, len(self.paths))
        if not rows:
            return torch.empty((0, 3, self.size, self.size), dtype=torch.uint8)
        return torch.stack(_decode_all(functools.partial(decode, size=self.size), [self.paths[i] for i in rows]))


class WholeImages(LazyImages):
    """Indexed by a batch of rows, returns a list of uint8 [3, h, w] images at their own sizes.

    `shape` is the nominal one (the set's image size), which the engine reads as the views' size."""

    def __getitem__(self, idx: slice | torch.Tensor | Sequence[int]) -> list[torch.Tensor]:
        return _decode_all(decode_whole, [self.paths[i] for i in row_numbers(idx, len(self.paths))])


@dataclass
class FileImageSet:
    """A split read from a list of image files (see module docstring).

    `sources` maps each file that defines the split (a split file, or a folder listing) to its
    SHA-256, so a run records exactly which version of the split it used.
    """

    name: str
    paths: list[Path]
    labels: torch.Tensor
    class_names: list[str]
    image_size: int = 224
    sources: dict[str, str] = field(default_factory=dict)
    coarse_labels: None = None
    coarse_names: None = None

    def __post_init__(self) -> None:
        self.labels = torch.as_tensor(self.labels, dtype=torch.int64)
        if self.labels.shape != (len(self.paths),):
            raise ValueError(f"{len(self.paths)} paths but labels of shape {tuple(self.labels.shape)}")
        self.images = LazyImages(self.paths, self.image_size)
        self.train_images = WholeImages(self.paths, self.image_size)

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def fine_to_coarse(self) -> None:
        return None

    def subset(self, idx: torch.Tensor | Sequence[int] | slice) -> FileImageSet:
        rows = row_numbers(idx, len(self.paths))
        return FileImageSet(self.name, [self.paths[i] for i in rows], self.labels[rows],
                            self.class_names, self.image_size, dict(self.sources))
