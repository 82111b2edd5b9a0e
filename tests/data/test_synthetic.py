"""Synthetic datasets: written in the real formats, read back by the real readers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from semcl.data import SYNTHETIC_NAMES, ensure_synthetic, load, write_synthetic
from semcl.errors import DataError

# The standard CIFAR-100 fine→coarse assignment, typed in independently of the package.
CIFAR100_COARSE = [
    4, 1, 14, 8, 0, 6, 7, 7, 18, 3, 3, 14, 9, 18, 7, 11, 3, 9, 7, 11,
    6, 11, 5, 10, 7, 6, 13, 15, 3, 15, 0, 11, 1, 10, 12, 14, 16, 9, 11, 5,
    5, 19, 8, 8, 15, 13, 14, 17, 18, 10, 16, 4, 17, 4, 2, 0, 17, 4, 18, 17,
    10, 3, 2, 12, 12, 16, 12, 1, 9, 19, 2, 10, 0, 1, 16, 12, 9, 13, 15, 13,
    16, 19, 2, 4, 6, 19, 5, 5, 8, 19, 18, 1, 2, 15, 6, 0, 17, 8, 14, 13,
]  # fmt: skip

SHAPES = {"cifar100": (3, 32, 100), "cifar10": (3, 32, 10), "tinyimagenet": (3, 64, 200),
          "fashion_mnist": (1, 28, 10), "mnist": (1, 28, 10)}


@pytest.mark.parametrize("name", SYNTHETIC_NAMES)
@pytest.mark.parametrize("split", ["train", "test"])
def test_round_trip_counts_and_shapes(synth_root: Path, synth_counts: dict[str, tuple[int, int]],
                                     name: str, split: str) -> None:
    s = load(name, synth_root, split)
    channels, size, classes = SHAPES[name]
    per_class = synth_counts[name][0 if split == "train" else 1]
    assert s.images.shape == (classes * per_class, channels, size, size)
    assert s.num_classes == classes
    assert torch.bincount(s.labels, minlength=classes).tolist() == [per_class] * classes


def test_cifar100_real_names_and_hierarchy(synth_root: Path) -> None:
    s = load("cifar100", synth_root, "train")
    assert s.fine_to_coarse.tolist() == CIFAR100_COARSE
    assert s.class_names[0] == "apple" and s.class_names[99] == "worm"
    assert s.coarse_names[4] == "fruit_and_vegetables"
    assert s.fine_to_coarse[0] == 4
    assert torch.equal(s.coarse_labels, s.fine_to_coarse[s.labels])
    c10 = load("cifar10", synth_root, "test")
    assert c10.class_names[:3] == ["airplane", "automobile", "bird"]


def test_images_carry_two_level_structure(synth_root: Path) -> None:
    """Nearest class-mean on the test split: coarse from pixels, fine from |FFT|.

    Pixel means capture the shared superclass colour and low-frequency wave; the
    Fourier magnitude is shift-invariant, so it exposes the class-specific wave
    despite the per-image translation. Chance is 5% (coarse) and 1% (fine).
    """
    train = load("cifar100", synth_root, "train")
    test = load("cifar100", synth_root, "test")

    def nearest_mean_acc(feat, n, train_lab, test_lab) -> float:
        a, b = feat(train), feat(test)
        means = torch.stack([a[train_lab == c].mean(0) for c in range(n)])
        return (torch.cdist(b, means).argmin(1) == test_lab).float().mean().item()

    def pixels(s):
        return s.images.float().flatten(1)

    def spectrum(s):
        x = s.images.float()
        return torch.fft.fft2(x - x.mean(dim=(2, 3), keepdim=True)).abs().flatten(1)

    coarse = nearest_mean_acc(pixels, 20, train.coarse_labels, test.coarse_labels)
    fine = nearest_mean_acc(spectrum, 100, train.labels, test.labels)
    print(f"nearest-mean accuracy: coarse {coarse:.3f}, fine {fine:.3f}")
    assert coarse > 0.8 and fine > 0.8


def test_deterministic_for_seed(tmp_path: Path) -> None:
    paths = [write_synthetic("cifar100", tmp_path / d, train_per_class=2, test_per_class=1, seed=s)
             for d, s in (("a", 0), ("b", 0), ("c", 1))]
    a, b, c = ((p / "train").read_bytes() for p in paths)
    assert a == b and a != c
    fa, fb = (write_synthetic("fashion_mnist", tmp_path / d, train_per_class=2, test_per_class=1)
              for d in ("a", "b"))
    assert (fa / "raw/train-images-idx3-ubyte.gz").read_bytes() == \
        (fb / "raw/train-images-idx3-ubyte.gz").read_bytes()


def test_smoke_size_is_fast(tmp_path: Path) -> None:
    start = time.perf_counter()
    write_synthetic("cifar100", tmp_path, train_per_class=10, test_per_class=5)
    assert time.perf_counter() - start < 2.0


def _mark(folder: Path) -> Path:
    """Drop a marker file; it survives only if the folder is not rewritten."""
    marker = folder / "marker"
    marker.write_text("x")
    return marker


def _recorded(root: Path) -> dict:
    return json.loads((root / ".semcl_synthetic.json").read_text())["datasets"]


def test_ensure_writes_only_what_is_missing(tmp_path: Path) -> None:
    kw = {"train_per_class": 2, "test_per_class": 1}
    assert ensure_synthetic(tmp_path, ["mnist", "cifar10"], **kw) == tmp_path
    assert _recorded(tmp_path)["mnist"] == {**kw, "seed": 0, "version": 1}
    mnist, cifar = _mark(tmp_path / "MNIST"), _mark(tmp_path / "cifar-10-batches-py")
    ensure_synthetic(tmp_path, ["mnist", "cifar10"], **kw)
    assert mnist.exists() and cifar.exists()
    # Different parameters regenerate; the folder is replaced, not merged.
    ensure_synthetic(tmp_path, ["mnist"], train_per_class=3, test_per_class=1)
    assert not mnist.exists() and cifar.exists()
    assert len(load("mnist", tmp_path, "train")) == 30
    assert _recorded(tmp_path)["mnist"]["train_per_class"] == 3
    # A deleted dataset is written again.
    (tmp_path / "cifar-10-batches-py").rename(tmp_path / "gone")
    ensure_synthetic(tmp_path, ["cifar10"], **kw)
    assert len(load("cifar10", tmp_path, "test")) == 10


def test_ensure_leaves_unrecorded_data_alone(tmp_path: Path) -> None:
    real = tmp_path / "FashionMNIST"
    real.mkdir()
    marker = _mark(real)
    ensure_synthetic(tmp_path, ["fashion_mnist"], train_per_class=2, test_per_class=1)
    assert marker.exists() and not (tmp_path / ".semcl_synthetic.json").exists()


def test_unknown_synthetic_name(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="unknown synthetic dataset 'svhn'"):
        write_synthetic("svhn", tmp_path, train_per_class=1, test_per_class=1)
    (tmp_path / ".semcl_synthetic.json").write_text("{not json")
    with pytest.raises(DataError, match=r"\.semcl_synthetic\.json: malformed JSON"):
        ensure_synthetic(tmp_path, ["mnist"], train_per_class=1, test_per_class=1)


def test_sets_sharing_a_folder_are_merged_not_replaced(tmp_path):
    """ImageNet-100 and the outlier splits all live in imagenet/: writing the second keeps the first."""
    from semcl.data import load
    from semcl.data.sets.imagenet_subsets import subset_wnids
    from semcl.data.synthetic import ensure_synthetic

    names = ["imagenet100", "imagenet_outliers_split1"]
    ensure_synthetic(tmp_path, names, train_per_class=1, test_per_class=1)
    for name in names:
        s = load(name, tmp_path, "test", 16)
        assert s.class_names == subset_wnids(name) and len(s.labels) == 100  # 100 classes, one image each
    # a folder nobody recorded is real data: left alone, the other set not written into it
    other = tmp_path / "real"
    (other / "imagenet" / "val").mkdir(parents=True)
    ensure_synthetic(other, ["imagenet_outliers_split2"], train_per_class=1, test_per_class=1)
    assert list((other / "imagenet" / "val").iterdir()) == []
