"""`semcl prepare-mini`: lays the installed Fashion-MNIST / MNIST files out for the readers, never overwrites."""

from __future__ import annotations

import pytest

import semcl.data.prepare_mini as prepare
from semcl.errors import DataError


def _sources(tmp_path, monkeypatch):
    fashion, mnist = tmp_path / "fashion", tmp_path / "mnist"
    for folder, tag in ((fashion, b"F"), (mnist, b"M")):
        folder.mkdir()
        for name in prepare.IDX_FILES:
            (folder / name).write_bytes(tag + name.encode())
    monkeypatch.setattr(prepare, "FASHION_SOURCE", fashion)
    monkeypatch.setattr(prepare, "mnist_source", lambda: mnist)


def test_copies_into_the_reader_layout_and_keeps_existing_files(tmp_path, monkeypatch):
    _sources(tmp_path, monkeypatch)
    root = tmp_path / "data"
    (root / "MNIST" / "raw").mkdir(parents=True)
    kept = root / "MNIST" / "raw" / "train-images-idx3-ubyte.gz"
    kept.write_bytes(b"mine")
    lines = prepare.prepare_mini(root)
    assert lines == [f"Fashion-MNIST: {root / 'FashionMNIST' / 'raw'} (4 files copied, 0 already there)",
                     f"MNIST: {root / 'MNIST' / 'raw'} (3 files copied, 1 already there)"]
    assert (root / "FashionMNIST" / "raw" / "t10k-labels-idx1-ubyte.gz").read_bytes() == b"Ft10k-labels-idx1-ubyte.gz"
    assert kept.read_bytes() == b"mine"
    assert not list(root.rglob("*.part"))


def test_missing_source_names_the_file_and_the_fix(tmp_path, monkeypatch):
    _sources(tmp_path, monkeypatch)
    (tmp_path / "fashion" / "t10k-images-idx3-ubyte.gz").unlink()
    with pytest.raises(DataError, match=r"Fashion-MNIST: missing .*fashion/t10k-images-idx3-ubyte.gz "
                                        r"\(apt-get install dataset-fashion-mnist\)"):
        prepare.prepare_mini(tmp_path / "data")


def test_video_renders_moving_mnist_once_from_the_copied_mnist(tmp_path, monkeypatch):
    from semcl.data.video import mnist_motion

    _sources(tmp_path, monkeypatch)
    calls = []

    def fake_write(root, mnist_root, **kw):
        calls.append((root, mnist_root))
        (root / "mnist_motion").mkdir()
        return root / "mnist_motion"

    monkeypatch.setattr(mnist_motion, "write_mnist_motion", fake_write)
    root = tmp_path / "data"
    first = prepare.prepare_mini(root, video=True)
    assert calls == [(root, root)] and first[-1] == f"moving MNIST: {root / 'mnist_motion'} (synthetic motion of real MNIST digits)"
    again = prepare.prepare_mini(root, video=True)
    assert calls == [(root, root)] and again[-1] == f"moving MNIST: {root / 'mnist_motion'} (already there)"
    assert len(prepare.prepare_mini(root)) == 2  # without --video nothing about video
