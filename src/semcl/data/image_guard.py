"""The one way semcl opens an image file: a pixel budget checked from the header, then one DataError for any failure.

PIL reads the size from the header on ``Image.open`` without decoding, so an image larger than the dataset
could hold is refused before a byte of pixels is allocated (a 678-byte JPEG whose start-of-frame claims
12000x12000 would otherwise decode to 432 MB). PIL's own guards raise types the readers did not catch:
``DecompressionBombError`` (over 2x ``Image.MAX_IMAGE_PIXELS``) and ``ValueError`` for PNG text / iCCP chunks
that decompress past ``PngImagePlugin.MAX_TEXT_CHUNK``; here they are one DataError naming the file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from PIL import Image, UnidentifiedImageError

from semcl.errors import DataError

# Sets read from folders of photos (ImageNet-style, Places, iNaturalist, segmentation, video frames) declare no
# largest size; 64 Mpx is 8x a 12 Mpx phone photo and far above any benchmark's (Cityscapes: 2 Mpx).
FOLDER_PIXEL_BUDGET = 64_000_000

_FAILURES = (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombError)

T = TypeVar("T")


def over_budget(path: Path, size: tuple[int, int], max_pixels: int, what: str = "image") -> DataError | None:
    """The DataError for a (width, height) over `max_pixels`, else None."""
    w, h = size
    if w * h <= max_pixels:
        return None
    return DataError(f"{path}: {what} of {w}x{h} pixels is over this dataset's budget of {max_pixels:,} "
                     f"({w * h:,}; header not trusted, nothing decoded)")


def read_image(path: Path, use: Callable[[Image.Image], T], max_pixels: int = FOLDER_PIXEL_BUDGET,
               what: str = "image") -> T:
    """``use(img)`` on the opened image at `path` (PIL decodes inside `use`, on first access to pixels), once
    its header's size fits `max_pixels`; an unreadable, malformed or oversized file is one DataError naming it."""
    try:
        with Image.open(path) as img:
            if (refused := over_budget(path, img.size, max_pixels, what)) is not None:
                raise refused
            return use(img)
    except _FAILURES as err:
        raise DataError(f"{path}: cannot decode {what} ({type(err).__name__}: {_one_line(err)})") from None


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())
