"""`semcl data check`: every dataset the tables need, in one report (present / missing / incomplete)."""

from __future__ import annotations

import hashlib
import io
import pickle
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np

from semcl.cli.main import main
from semcl.data import check
from semcl.data.check import inspect_dataset
from semcl.data.idx import write_idx


def _idx(root: Path, folder: str, suffix: str = "", train: int = 6, test: int = 4) -> None:
    raw = root / folder / "raw"
    raw.mkdir(parents=True)
    for prefix, n in (("train", train), ("t10k", test)):
        write_idx(raw / f"{prefix}-images-idx3-ubyte{suffix}", np.zeros((n, 28, 28), dtype=np.uint8))
        write_idx(raw / f"{prefix}-labels-idx1-ubyte{suffix}", np.zeros(n, dtype=np.uint8))


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_every_needed_dataset_in_one_report_and_exit_2(tmp_path):
    _idx(tmp_path, "FashionMNIST")  # present; MNIST (the OOD set) absent
    code, out, err = _cli("data", "check", "rince/tab2", "--profile", "mini", "--data-root", str(tmp_path))
    assert code == 2
    assert out.splitlines()[0] == f"data root {tmp_path}, profile mini: 2 dataset(s): 1 present, 1 missing, 0 incomplete"
    assert "fashion_mnist  present    (needed by rince/tab2)" in out
    assert "    found    train: 6 images and labels (the full split has 60,000)" in out
    assert "    found    t10k: 4 images and labels (the full split has 10,000)" in out
    assert "mnist          missing    (needed by rince/tab2)" in out
    assert ("    expects  MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]: IDX files "
            "(images N x 28 x 28 uint8, labels N uint8)") in out
    assert "    absent   MNIST/" in out
    assert f"    get it   semcl prepare-mini --data-root {tmp_path}" in out  # the suite lays MNIST out itself
    assert err == f"semcl: error: data root {tmp_path}: missing MNIST (dataset mnist; set --data-root or SEMCL_DATA)\n"
    _idx(tmp_path, "MNIST", ".gz")
    code, out, _ = _cli("data", "check", "rince/tab2", "--profile", "mini", "--data-root", str(tmp_path))
    assert code == 0 and "2 present, 0 missing, 0 incomplete" in out


def test_all_problems_of_one_dataset_are_listed(tmp_path):
    base = tmp_path / "cifar-100-python"
    base.mkdir()
    (base / "meta").write_bytes(pickle.dumps({"fine_label_names": []}))
    (base / "train").write_bytes(pickle.dumps({"data": 1})[:-1])  # no STOP opcode: truncated
    c = inspect_dataset("cifar100", tmp_path)  # test is absent too
    assert c.status == "incomplete"
    assert c.absent == ["cifar-100-python/test"]
    assert c.problems == [f"{base / 'train'}: truncated pickle ({(base / 'train').stat().st_size} bytes, no end "
                          "marker); download it again"]
    assert c.found == ["2/3 pickle files"]
    assert c.layout == ["cifar-100-python/{meta,train,test}: CIFAR python pickles (the official archive unpacked)"]


def test_missing_root_and_tinyimagenet_class_folders(tmp_path):
    c = inspect_dataset("cifar10", tmp_path / "nowhere")
    assert c.status == "missing"
    assert c.problems == [f"data root {tmp_path / 'nowhere'}: does not exist (dataset cifar10; set --data-root or SEMCL_DATA)"]
    assert c.layout[0].startswith("cifar-10-batches-py/{batches.meta,data_batch_1,")
    base = tmp_path / "tiny-imagenet-200"
    (base / "val" / "images").mkdir(parents=True)
    (base / "wnids.txt").write_text("n1\nn2\nn3\n")
    (base / "words.txt").write_text("")
    (base / "val" / "val_annotations.txt").write_text("")
    (base / "val" / "images" / "a.JPEG").write_bytes(b"")
    (base / "train" / "n2" / "images").mkdir(parents=True)
    c = inspect_dataset("tinyimagenet", tmp_path)
    assert c.status == "incomplete"
    assert c.absent == ["tiny-imagenet-200/train/n1/images", "tiny-imagenet-200/train/n3/images"]
    assert c.found == ["3 classes in wnids.txt (expected 200), 1/3 train folders", "1 val images (expected 10,000)"]


def test_checksums_against_the_official_md5(tmp_path, monkeypatch):
    _idx(tmp_path, "MNIST", ".gz")
    raw = tmp_path / "MNIST" / "raw"
    digest = {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in raw.iterdir()}
    assert not inspect_dataset("mnist", tmp_path).sums  # off unless asked
    monkeypatch.setitem(check.MD5, "MNIST/raw/t10k-labels-idx1-ubyte.gz", digest["t10k-labels-idx1-ubyte.gz"])
    c = inspect_dataset("mnist", tmp_path, checksums=True)
    assert c.status == "present"  # a different md5 is reported, not failed (a re-compressed copy)
    assert c.sums[0] == (f"MNIST/raw/train-images-idx3-ubyte.gz: md5 {digest['train-images-idx3-ubyte.gz']} differs "
                         "from the official f68b3c2dcbeaaa9fbdd348bbdeb94873 (a re-encoded or altered copy; the size "
                         "checks passed)")
    assert c.sums[3] == "MNIST/raw/t10k-labels-idx1-ubyte.gz: md5 matches the official file"


def test_synthetic_profile_needs_no_data(tmp_path):
    code, out, _ = _cli("data", "check", "rince/tab2", "--profile", "smoke", "--data-root", str(tmp_path / "x"))
    assert code == 0 and out == f"data root {tmp_path / 'x'}, profile smoke: no dataset is read from disk (synthetic data only)\n"
