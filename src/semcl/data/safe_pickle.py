"""Read data pickles without running code from them.

CIFAR's python files (real ones in a data root, and the synthetic ones cached in the results store)
and the official name-similarity ``.npy`` are pickles. A plain ``pickle.load`` would call whatever
the file names (``os.system`` among them), so a crafted file in a shared data root or store could
run code on ``semcl run``. Here an unpickler admits only what those formats hold: dicts, lists,
tuples, str/bytes, numbers, None, and numpy arrays / dtypes / scalars through the exact
reconstruct functions numpy's own pickles call (``numpy.core.multiarray._reconstruct`` for
Python-2-era files, ``numpy._core.multiarray._reconstruct`` for numpy 2). Anything else is a
one-line DataError naming the file, raised before anything is called.

The pickle's BUILD step (``obj.__setstate__(state)``) is where data becomes memory, so it is checked here
rather than handed to numpy: an array's state must be a plain numeric or string dtype, a shape of
non-negative sizes and exactly the bytes that shape holds (so no array outgrows the file and no file
bytes become object pointers); a dtype's state may only say its byte order (a dtype is never rebuilt
from a state, which could turn an object dtype into a plain one). Dtypes with objects, fields or
subarrays are refused.
"""

from __future__ import annotations

import codecs
import io
import pickle
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from semcl.errors import DataError

PLAIN_KINDS = frozenset("biufcSU")  # booleans, integers, floats, complex, bytes and text: no objects, no fields


def _plain(dtype: Any) -> np.dtype:
    if not isinstance(dtype, np.dtype) or dtype.kind not in PLAIN_KINDS or dtype.hasobject or dtype.fields \
            or dtype.subdtype is not None:
        raise pickle.UnpicklingError(f"dtype {dtype!r} refused (only plain numbers and strings)")
    return dtype


def _reconstruct(cls: Any, shape: Any, dtype: Any) -> np.ndarray:
    """numpy's array reconstructor, for ndarray itself only (no subclass hooks); an empty placeholder that the
    checked BUILD fills."""
    if cls is not np.ndarray:
        raise pickle.UnpicklingError(f"array reconstruct of {cls!r} refused (only numpy.ndarray)")
    return np.ndarray.__new__(np.ndarray, (0,), np.uint8)


def _dtype(spec: Any, align: Any = False, copy: Any = False) -> np.dtype:
    if not isinstance(spec, str):  # numpy pickles a dtype by its type string ('u1', 'f4', 'O8', ...)
        raise pickle.UnpicklingError(f"dtype from {type(spec).__name__} refused")
    try:
        dtype = np.dtype(spec)
    except TypeError as err:
        raise pickle.UnpicklingError(f"dtype {spec!r} refused ({err})") from None
    return dtype if dtype == np.dtype(object) else _plain(dtype)  # objects: only as a list (_array_state)


def _array_state(state: Any) -> np.ndarray:
    """The array an ndarray's pickled state describes: (version, shape, dtype, fortran, bytes)."""
    if not (isinstance(state, tuple) and len(state) == 5):
        raise pickle.UnpicklingError("array state other than (version, shape, dtype, fortran, bytes) refused")
    _, shape, dtype, fortran, raw = state
    if not (isinstance(shape, tuple) and all(isinstance(n, int) and n >= 0 for n in shape)):
        raise pickle.UnpicklingError(f"array shape {shape!r} refused")
    count = int(np.prod(shape, dtype=object))
    if isinstance(dtype, np.dtype) and dtype == np.dtype(object):
        # an object array (np.save of a dict) pickles its items as a list of objects, each already restricted;
        # raw bytes under an object dtype would become pointers
        if not isinstance(raw, list) or len(raw) != count:
            raise pickle.UnpicklingError("object array other than a list of its items refused")
        flat = np.empty(count, dtype=object)
        for i, item in enumerate(raw):
            flat[i] = item
        return flat.reshape(shape, order="F" if fortran else "C")
    dtype = _plain(dtype)
    if isinstance(raw, str):  # Python 2's cPickle wrote the raw bytes as a str (read back as latin1)
        raw = raw.encode("latin1")
    if not isinstance(raw, bytes | bytearray):
        raise pickle.UnpicklingError("array data other than bytes refused")
    size = count * dtype.itemsize
    if size != len(raw):
        raise pickle.UnpicklingError(f"array of shape {shape} {dtype} needs {size} bytes, the file holds {len(raw)}")
    return np.frombuffer(bytes(raw), dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()


def _dtype_state(dtype: np.dtype, state: Any) -> np.dtype:
    """A dtype's pickled state may only set the byte order; the rest must restate what the type string made
    (no fields, no subarray, its own size / alignment or -1, its own flags). It is never applied as such."""
    if not (isinstance(state, tuple) and len(state) == 8 and state[1] in ("<", ">", "|", "=")
            and state[2:5] == (None, None, None) and state[5:7] in ((-1, -1), (dtype.itemsize, dtype.alignment))
            and state[7] == dtype.flags):
        raise pickle.UnpicklingError(f"dtype state {state!r} refused (only a byte order)")
    return dtype.newbyteorder(state[1]) if state[1] in ("<", ">") and dtype.kind != "O" else dtype


def _scalar(dtype: Any, data: Any = None) -> Any:
    """A numpy scalar (np.int64(3) in a label list): its dtype and raw bytes."""
    dtype = _plain(dtype)
    if not isinstance(data, bytes) or len(data) != dtype.itemsize:
        raise pickle.UnpicklingError("numpy scalar other than a plain number refused")
    return np.frombuffer(data, dtype=dtype, count=1)[0]


def _frombuffer(buf: Any, dtype: Any, shape: Any, order: Any) -> np.ndarray:
    """Protocol 5's array form: raw bytes, a plain dtype, a shape."""
    if (not isinstance(buf, bytes | bytearray | pickle.PickleBuffer) or not isinstance(shape, tuple)
            or order not in ("C", "F")):
        raise pickle.UnpicklingError("numpy buffer other than plain bytes refused")
    return _array_state((1, shape, dtype, order == "F", bytes(buf)))


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
_CALLABLE = frozenset(f for f in ALLOWED.values() if f is not np.ndarray)


def _checked_build(self: pickle._Unpickler) -> None:
    """BUILD: the state of an array or a dtype, checked (module docstring); any other object takes none."""
    state = self.stack.pop()
    obj = self.stack[-1]
    if type(obj) is np.ndarray:
        self.stack[-1] = _array_state(state)
    elif isinstance(obj, np.dtype):
        self.stack[-1] = _dtype_state(obj, state)
    else:
        raise pickle.UnpicklingError(f"state for {type(obj).__name__} refused")


def _checked_reduce(self: pickle._Unpickler) -> None:
    """REDUCE: only the allowed functions are called; numpy.ndarray itself is only an argument of _reconstruct
    (called directly it would allocate whatever shape the file names)."""
    args = self.stack.pop()
    func = self.stack[-1]
    if func is np.ndarray or func not in _CALLABLE or not isinstance(args, tuple):
        raise pickle.UnpicklingError(f"call of {getattr(func, '__name__', func)!r} refused")
    self.stack[-1] = func(*args)


def _refused(self: pickle._Unpickler) -> None:
    raise pickle.UnpicklingError("object construction (NEWOBJ / INST / OBJ) refused: not part of the format")


class _Restricted(pickle._Unpickler):
    """The pure-Python unpickler (its opcode table can be changed) with BUILD and REDUCE checked, no object
    construction opcodes, and only the allowed globals."""

    dispatch = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.BUILD[0]] = _checked_build
    dispatch[pickle.REDUCE[0]] = _checked_reduce
    for _op in (pickle.NEWOBJ, pickle.NEWOBJ_EX, pickle.INST, pickle.OBJ):
        dispatch[_op[0]] = _refused

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
    """A ``.npy`` array, its header bounded by the file: a plain array must hold exactly the bytes its header
    names (np.load with allow_pickle=False); an object array (np.save of a dict) is unpickled with the
    restricted unpickler instead of ``np.load(allow_pickle=True)``."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)  # v3: v2 with utf-8 names
            if not dtype.hasobject:
                need = int(np.prod(shape, dtype=object)) * dtype.itemsize
                left = path.stat().st_size - f.tell()
                if need != left:
                    raise DataError(f"{path}: malformed .npy (its header names {shape} {dtype}, {need:,} bytes; "
                                    f"the file holds {left:,})")
                f.seek(0)
                return np.load(f, allow_pickle=False)
            arr = load_stream(f, path)
    except OSError as err:
        raise DataError(f"{path}: unreadable ({_first_line(err)})") from None
    except (ValueError, MemoryError) as err:
        raise DataError(f"{path}: malformed .npy ({_first_line(err)})") from None
    if not isinstance(arr, np.ndarray) or arr.shape != tuple(shape):
        raise DataError(f"{path}: malformed .npy (the pickled array does not match its header)")
    return arr


def loads(data: bytes, name: str = "<bytes>") -> Any:
    """Unpickle `data` with the restricted unpickler (tests, in-memory payloads)."""
    return load_stream(io.BytesIO(data), Path(name))
