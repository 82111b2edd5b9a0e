"""The data root is checked when `run` starts: a truncated file fails once, with one line naming it,
before anything is submitted (today it fails inside every run that reads it)."""

from __future__ import annotations

import io
import pickle
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from semcl.cli.main import main
from semcl.data.check import check_dataset
from semcl.data.idx import write_idx
from semcl.errors import DataError


def _idx_root(root: Path, dataset: str, suffix: str = "") -> None:
    raw = root / ("FashionMNIST" if dataset == "fashion_mnist" else "MNIST") / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 6), ("t10k", 4)):
        write_idx(raw / f"{prefix}-images-idx3-ubyte{suffix}", rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        write_idx(raw / f"{prefix}-labels-idx1-ubyte{suffix}", rng.integers(0, 10, n, dtype=np.uint8))


def _truncate(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def test_complete_idx_files_pass(tmp_path):
    _idx_root(tmp_path, "fashion_mnist")
    _idx_root(tmp_path, "mnist", ".gz")
    check_dataset("fashion_mnist", tmp_path)
    check_dataset("mnist", tmp_path)


def test_truncated_idx_file_is_one_line_naming_it(tmp_path):
    _idx_root(tmp_path, "fashion_mnist")
    path = tmp_path / "FashionMNIST/raw/t10k-images-idx3-ubyte"
    _truncate(path, 16 + 3 * 28 * 28)  # header + 3 of the 4 images
    with pytest.raises(DataError) as err:
        check_dataset("fashion_mnist", tmp_path)
    assert str(err.value) == (f"{path}: malformed IDX file (header says 3136 data bytes for shape [4, 28, 28], "
                              "found 2352)")


def test_truncated_gzip_idx_file_is_found_from_its_trailer(tmp_path):
    _idx_root(tmp_path, "mnist", ".gz")
    path = tmp_path / "MNIST/raw/train-images-idx3-ubyte.gz"
    _truncate(path, path.stat().st_size // 2)  # random pixels: the first KiB still decompresses
    with pytest.raises(DataError, match=rf"^{path}: truncated or malformed gzip .*implies 4720\); download it again$"):
        check_dataset("mnist", tmp_path)


def test_labels_and_images_must_agree_in_count(tmp_path):
    _idx_root(tmp_path, "mnist")
    write_idx(tmp_path / "MNIST/raw/train-labels-idx1-ubyte", np.zeros(5, dtype=np.uint8))
    with pytest.raises(DataError, match=r"train-labels-idx1-ubyte: malformed labels \(5 labels for 6 images"):
        check_dataset("mnist", tmp_path)


def test_truncated_cifar_pickle(tmp_path):
    base = tmp_path / "cifar-100-python"
    base.mkdir()
    for name in ("meta", "train", "test"):
        (base / name).write_bytes(pickle.dumps({"data": np.zeros((2, 3072), np.uint8), "fine_labels": [0, 1]}))
    check_dataset("cifar100", tmp_path)
    _truncate(base / "train", 100)
    with pytest.raises(DataError, match=rf"^{base / 'train'}: truncated pickle \(100 bytes, no end marker\)"):
        check_dataset("cifar100", tmp_path)


def test_run_stops_once_before_submitting(tmp_path):
    _idx_root(tmp_path / "data", "fashion_mnist")
    _idx_root(tmp_path / "data", "mnist")
    path = tmp_path / "data/FashionMNIST/raw/train-images-idx3-ubyte"
    _truncate(path, 100)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--results", str(tmp_path / "results"), "run", "rince/tab2", "--profile", "mini",
                     "--data-root", str(tmp_path / "data"), "--executor", "debug"])
    # the data report of every dataset the runs need (semcl data check's), then one error line naming the file
    report, last = err.getvalue().rstrip("\n").rsplit("\n", 1)
    assert code == 2 and out.getvalue() == ""
    assert last.startswith(f"semcl: error: {path}: malformed IDX file")
    assert report.startswith(f"data root {tmp_path / 'data'}, profile mini: 2 dataset(s): 1 present, 0 missing, "
                             "1 incomplete\n")
    assert f"    problem  {path}: malformed IDX file" in report
    assert not (tmp_path / "results" / "runs").exists()
