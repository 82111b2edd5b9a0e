"""Read data pickles without running code from them.

CIFAR's python files (real ones in a data root, and the synthetic ones cached in the results store)
and the official name-similarity ``.npy`` are pickles. A plain ``pickle.load`` would call whatever
the file names (``os.system`` among them), so a crafted file in a shared data root or store could
run code on ``semcl run``. Here an unpickler admits only what those formats hold: dicts, lists,
tuples, str/bytes, numbers, None, and numpy arrays / dtypes / scalars through the exact
reconstruct functions numpy's own pickles call (``numpy.core.multiarray._reconstruct`` for
Python-2-era files, ``numpy._core.multiarray._reconstruct`` for numpy 2). Anything else is a
one-line DataError naming the file, raised before anything is called.
"""

from __future__ import annotations

import codecs
import io
import pickle
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from semcl.errors import DataError


def _reconstruct(cls: Any, shape: Any, dtype: Any) -> np.ndarray:
    """numpy's array reconstructor, for ndarray itself only (no subclass hooks)."""
    if cls is not np.ndarray:
        raise pickle.UnpicklingError(f"array reconstruct of {cls!r} refused (only numpy.ndarray)")
    return np.ndarray.__new__(np.ndarray, shape, dtype)


def _dtype(spec: Any, align: Any = False, copy: Any = False) -> np.dtype:
    if not isinstance(spec, str):  # numpy pickles a dtype by its type string ('u1', 'f4', 'O8', ...)
        raise pickle.UnpicklingError(f"dtype from {type(spec).__name__} refused")
    return np.dtype(spec, bool(align), bool(copy))


def _scalar(dtype: Any, data: Any = None) -> Any:
    """A numpy scalar (np.int64(3) in a label list): its dtype and raw bytes."""
    if not isinstance(dtype, np.dtype) or dtype.hasobject or not isinstance(data, bytes):
        raise pickle.UnpicklingError("numpy scalar other than a plain number refused")
    return np.frombuffer(data, dtype=dtype, count=1)[0]


def _frombuffer(buf: Any, dtype: Any, shape: Any, order: Any) -> np.ndarray:
    """Protocol 5's array form: raw bytes, a plain dtype, a shape."""
    if (not isinstance(buf, bytes | bytearray | pickle.PickleBuffer) or not isinstance(dtype, np.dtype)
            or dtype.hasobject or not isinstance(shape, tuple) or order not in ("C", "F")):
        raise pickle.UnpicklingError("numpy buffer other than plain bytes refused")
    return np.frombuffer(buf, dtype=dtype).reshape(shape, order=order)


def _encode(text: Any, encoding: str = "latin1") -> bytes:
    """Protocol 2 pickles bytes as ``_codecs.encode(str, 'latin1')``; nothing else is admitted."""
    if not isinstance(text, str) or codecs.lookup(encoding).name != "iso8859-1":
        raise pickle.UnpicklingError("_codecs.encode other than latin1 text refused")
    return text.encode("latin1")


# (module, name) as the pickle names them → what is called instead
ALLOWED: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.multiarray", "scalar"): _scalar,
    ("numpy._core.multiarray", "scalar"): _scalar,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): _dtype,
    ("_codecs", "encode"): _encode,
}


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refused global {module}.{name} (not part of the format; "
                                         "loading it could run code)") from None

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused persistent id")


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:200]}" if text else type(err).__name__


ERRORS = (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError, KeyError,
          ValueError, TypeError, OverflowError, MemoryError, UnicodeDecodeError, RecursionError)


def load_stream(f: BinaryIO, path: Path, encoding: str = "latin1") -> Any:
    """Unpickle one object from `f` (the file `path`) with the restricted unpickler."""
    try:
        return _Restricted(f, encoding=encoding).load()
    except ERRORS as err:
        raise DataError(f"{path}: malformed pickle ({_first_line(err)})") from None


def load_pickle(path: Path, encoding: str = "latin1") -> Any:
    """The object pickled in `path` (``latin1``: the official CIFAR files were written by Python 2)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return load_stream(f, path, encoding)
    except OSError as err:
        raise DataError(f"{path}: unreadable ({_first_line(err)})") from None


def load_npy(path: Path) -> np.ndarray:
    """A ``.npy`` array; an object array (np.save of a dict) is unpickled with the restricted
    unpickler instead of ``np.load(allow_pickle=True)``."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:  # version 3 (utf-8 field names) never holds a pickle we need
                f.seek(0)
                return np.load(f, allow_pickle=False)
            if not dtype.hasobject:
                f.seek(0)
                return np.load(f, allow_pickle=False)
            arr = load_stream(f, path)
    except OSError as err:
        raise DataError(f"{path}: unreadable ({_first_line(err)})") from None
    except ValueError as err:
        raise DataError(f"{path}: malformed .npy ({_first_line(err)})") from None
    if not isinstance(arr, np.ndarray) or arr.shape != tuple(shape):
        raise DataError(f"{path}: malformed .npy (the pickled array does not match its header)")
    return arr


def loads(data: bytes, name: str = "<bytes>") -> Any:
    """Unpickle `data` with the restricted unpickler (tests, in-memory payloads)."""
    return load_stream(io.BytesIO(data), Path(name))
