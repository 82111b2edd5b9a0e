"""The IDX file format of MNIST and Fashion-MNIST, parsed and written without helpers.

Layout: two zero bytes, a type code, the number of dimensions ``d``; then ``d``
big-endian uint32 sizes; then the data in C order, big-endian. Files are often shipped
gzip-compressed, recognised here by their ``.gz`` suffix.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from semcl.errors import DataError

# Type code → big-endian numpy dtype, as defined by the format.
_DTYPES: dict[int, str] = {
    0x08: ">u1",
    0x09: ">i1",
    0x0B: ">i2",
    0x0C: ">i4",
    0x0D: ">f4",
    0x0E: ">f8",
}
_CODES: dict[str, int] = {np.dtype(v).str: k for k, v in _DTYPES.items()}


def _read_bytes(path: Path) -> bytes:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        raise DataError(f"{path}: unreadable ({type(err).__name__}: {err})") from None


def _parse_header(path: Path, raw: bytes) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, header length) from the first bytes of an IDX file."""
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _DTYPES:
        raise DataError(f"{path}: malformed IDX file (bad magic {raw[:4].hex() or 'empty'})")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{path}: malformed IDX file (truncated header)")
    return struct.unpack(f">{ndim}I", raw[4:header]), np.dtype(_DTYPES[raw[2]]), header


def _check_size(path: Path, shape: tuple[int, ...], dtype: np.dtype, header: int, found: int) -> None:
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if found != expected:
        raise DataError(
            f"{path}: malformed IDX file (header says {expected} data bytes for shape "
            f"{list(shape)}, found {found})"
        )


def read_idx(path: Path) -> np.ndarray:
    """Array stored in IDX file ``path`` (plain or ``.gz``), in native byte order."""
    raw = _read_bytes(path)
    shape, dtype, header = _parse_header(path, raw)
    _check_size(path, shape, dtype, header, len(raw) - header)
    data = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


def idx_shape(path: Path) -> tuple[int, ...]:
    """Shape of an IDX file, with its size checked against the header, without reading the data:
    the file size (plain) or the gzip trailer's uncompressed size mod 2**32 (``.gz``; a truncated
    archive ends in data bytes instead of its trailer)."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                raw = f.read(4 + 4 * 255)
            with open(path, "rb") as f:
                f.seek(-4, 2)
                total = struct.unpack("<I", f.read(4))[0]
        else:
            with open(path, "rb") as f:
                raw = f.read(4 + 4 * 255)
            total = path.stat().st_size
    except (OSError, EOFError, gzip.BadGzipFile, struct.error) as err:
        raise DataError(f"{path}: unreadable ({type(err).__name__}: {err})") from None
    shape, dtype, header = _parse_header(path, raw)
    if path.suffix != ".gz":
        _check_size(path, shape, dtype, header, total - header)
        return shape
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if expected % 2**32 != total:
        raise DataError(f"{path}: truncated or malformed gzip (its trailer says {total} bytes, the IDX header "
                        f"implies {expected}); download it again")
    return shape


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write ``array`` as an IDX file, gzip-compressed when ``path`` ends in ``.gz``."""
    big = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder(">"))
    code = _CODES.get(big.dtype.str)  # one-byte types have no byte order ('|u1')
    if code is None:
        raise ValueError(f"IDX cannot store dtype {array.dtype}")
    payload = bytes([0, 0, code, big.ndim]) + struct.pack(f">{big.ndim}I", *big.shape)
    payload += big.tobytes()
    if path.suffix == ".gz":
        # mtime=0 keeps the file bytes deterministic for a given array.
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
            f.write(payload)
    else:
        path.write_bytes(payload)
