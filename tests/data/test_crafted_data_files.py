"""Crafted CIFAR pickles and .npy files: each is one DataError naming the file, before any memory is shaped by
it (semcl.data.safe_pickle). The pickles are assembled opcode by opcode, as an attacker would write them."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from semcl.data.safe_pickle import load_npy, load_pickle

RECONSTRUCT = b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85U\x01b\x87R"  # an empty ndarray


def _int(n: int) -> bytes:
    return b"K" + bytes([n]) if 0 <= n < 256 else b"J" + struct.pack("<i", n)


def _dtype(spec: bytes, order: bytes = b"|", flags: int = 0) -> bytes:
    """numpy.dtype(spec, False, True) with the BUILD state numpy writes: (3, order, None x 3, -1, -1, flags)."""
    return (b"cnumpy\ndtype\nU" + bytes([len(spec)]) + spec + b"\x89\x88\x87R"
            + b"(K\x03U\x01" + order + b"NNN" + _int(-1) + _int(-1) + _int(flags) + b"tb")


def _array(shape: tuple[int, ...], dtype: bytes, raw: bytes) -> bytes:
    dims = b"(" + b"".join(_int(n) for n in shape) + b"t"
    return RECONSTRUCT + b"(K\x01" + dims + dtype + b"\x89" + b"B" + struct.pack("<I", len(raw)) + raw + b"tb"


def _batch(tmp_path, array: bytes):
    path = tmp_path / "data_batch_1"
    path.write_bytes(b"\x80\x02}(U\x04data" + array + b"U\x06labels](K\x01eu.")
    return path


def test_an_honest_batch_built_the_same_way_loads(tmp_path):
    got = load_pickle(_batch(tmp_path, _array((2, 3), _dtype(b"u1"), bytes(range(6)))))
    assert got["data"].tolist() == [[0, 1, 2], [3, 4, 5]] and got["labels"] == [1]
    got = load_pickle(_batch(tmp_path, _array((2,), _dtype(b"f4", b"<"), np.array([1.5, -2], "<f4").tobytes())))
    assert got["data"].dtype == np.dtype("<f4") and got["data"].tolist() == [1.5, -2.0]


def test_an_object_dtype_whose_flags_the_state_clears_is_refused(tmp_path):
    # dtype('O8') with a state whose flags say "no objects": file bytes would become object pointers
    path = _batch(tmp_path, _array((1,), _dtype(b"O8", flags=0), b"\x41" * 8))
    with pytest.raises(Exception, match=rf"{path}: malformed pickle .*dtype state .* refused") as err:
        load_pickle(path)
    assert type(err.value).__name__ == "DataError"


def test_an_object_array_from_raw_bytes_is_refused(tmp_path):
    path = _batch(tmp_path, _array((1,), _dtype(b"O8", flags=63), b"\x41" * 8))
    with pytest.raises(Exception, match=rf"{path}: malformed pickle .*object array other than a list"):
        load_pickle(path)


def test_a_shape_larger_than_the_bytes_present_is_refused_before_allocating(tmp_path):
    # 100,000 x 90,000 uint8 = 9 GB claimed by a file of a few hundred bytes
    path = _batch(tmp_path, _array((100_000, 90_000), _dtype(b"u1"), bytes(6)))
    assert path.stat().st_size < 400
    with pytest.raises(Exception, match=rf"{path}: malformed pickle .*needs 9000000000 bytes, the file holds 6"):
        load_pickle(path)


def test_calling_ndarray_directly_is_refused(tmp_path):
    path = tmp_path / "data_batch_1"
    path.write_bytes(b"\x80\x02cnumpy\nndarray\n(J\x00\xca\x9a\x3bt\x85R.")  # ndarray((1_000_000_000,))
    with pytest.raises(Exception, match=rf"{path}: malformed pickle .*call of 'ndarray' refused"):
        load_pickle(path)


def test_object_construction_opcodes_are_refused(tmp_path):
    path = tmp_path / "data_batch_1"
    path.write_bytes(b"\x80\x02cnumpy\nndarray\n)\x81.")  # NEWOBJ: ndarray.__new__(ndarray)
    with pytest.raises(Exception, match=rf"{path}: malformed pickle .*object construction"):
        load_pickle(path)


def test_an_npy_header_naming_more_than_the_file_holds_is_one_line(tmp_path):
    path = tmp_path / "sims.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (10**12,)})
        f.write(bytes(8))
    with pytest.raises(Exception, match=rf"{path}: malformed .npy \(its header names \(1000000000000,\) float32, "
                                        r"4,000,000,000,000 bytes; the file holds 8\)"):
        load_npy(path)
    np.save(path, np.arange(3, dtype=np.int64))
    assert load_npy(path).tolist() == [0, 1, 2]
