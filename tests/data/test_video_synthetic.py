"""Synthetic UCF101 / HMDB51 and the mnist_motion set, written in the real formats and read back."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from semcl.data.idx import write_idx
from semcl.data.video import MNIST_MOTION_CLASSES, load_video_split, write_mnist_motion, write_synthetic_video

pytest.importorskip("av")

SMALL = {"num_classes": 2, "train_per_class": 2, "test_per_class": 1, "frames": (8, 12), "size": (16, 24)}


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode() + p.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize(("name", "suffix"), [("ucf101", ".avi"), ("hmdb51", ".mp4")])
def test_both_layouts_read_back_the_same_videos(tmp_path: Path, name: str, suffix: str) -> None:
    write_synthetic_video(name, tmp_path, video_suffix=suffix, **SMALL)
    frames = load_video_split(name, tmp_path, "train", layout="frames")
    videos = load_video_split(name, tmp_path, "train", layout="videos")
    assert len(frames) == 4 and frames.ids == videos.ids and frames.labels.tolist() == [0, 0, 1, 1]
    assert torch.equal(frames.frame_counts, videos.frame_counts)
    assert all(8 <= n <= 12 for n in frames.frame_counts.tolist())
    assert all(Path(p).suffix == suffix for p in videos.videos)
    test = load_video_split(name, tmp_path, "test")
    assert test.layout == "frames" and len(test) == 2 and test.labels.tolist() == [0, 1]
    assert not set(test.ids) & set(frames.ids)
    for i in range(len(frames)):
        idx = list(range(int(frames.frame_counts[i])))
        a, b = frames.read_frames(i, idx).float(), videos.read_frames(i, idx).float()
        assert a.shape == b.shape == (len(idx), 3, 16, 24)
        # JPEG and MPEG-4 of the same noisy frames agree (within codec noise), and best at the same frame index (ties
        # where the square did not move: the encoder then repeats the previous frame)
        same = (a - b).abs().mean(dim=(1, 2, 3))
        shifted = (a[1:] - b[:-1]).abs().mean(dim=(1, 2, 3))
        assert same.max() < 12 and (same[1:] <= shifted + 1e-4).all() and same.mean() < shifted.mean() - 1


def test_synthetic_video_is_deterministic_and_keeps_the_real_quirks(tmp_path: Path) -> None:
    a = write_synthetic_video("ucf101", tmp_path / "a", layouts=("frames",), **SMALL)
    b = write_synthetic_video("ucf101", tmp_path / "b", layouts=("frames",), **SMALL)
    assert _digest(a) == _digest(b)
    lines = (a / "ucfTrainTestlist" / "trainlist01.txt").read_bytes().split(b"\r\n")
    assert lines[2] == b"HandstandPushups/v_HandStandPushups_g08_c01.avi 2"
    assert (a / "ucfTrainTestlist" / "testlist01.txt").read_bytes().startswith(
        b"ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi\r\n")


def _mnist(root: Path) -> None:
    """Synthetic IDX MNIST: one 28x28 image per digit, a 4x4 block (255 in train, 120 in test)."""
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, value in (("train", 255), ("t10k", 120)):
        images = np.zeros((10, 28, 28), dtype=np.uint8)
        images[:, 12:16, 12:16] = value
        write_idx(raw / f"{prefix}-images-idx3-ubyte", images)
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", np.arange(10, dtype=np.uint8))


def _centroids(x: torch.Tensor) -> torch.Tensor:
    """(y, x) intensity centroid of each frame of uint8 [T, 3, H, W]."""
    w = x[:, 0].double().clamp(min=40) - 40
    ys, xs = torch.meshgrid(torch.arange(x.shape[2]).double(), torch.arange(x.shape[3]).double(), indexing="ij")
    total = w.sum(dim=(1, 2))
    return torch.stack([(w * ys).sum(dim=(1, 2)) / total, (w * xs).sum(dim=(1, 2)) / total], dim=1)


def test_mnist_motion_labels_are_motion_axes_of_real_split_digits(tmp_path: Path, caplog) -> None:
    _mnist(tmp_path / "mnist")
    out = write_mnist_motion(tmp_path / "data", tmp_path / "mnist", train_per_class=1, test_per_class=1,
                             frames=6, size=40, seed=3)
    train = load_video_split("mnist_motion", tmp_path / "data", "train")
    test = load_video_split("mnist_motion", tmp_path / "data", "test")
    assert not caplog.records  # no real split size to compare with
    assert train.class_names == MNIST_MOTION_CLASSES and len(MNIST_MOTION_CLASSES) == 20
    assert MNIST_MOTION_CLASSES[:3] == ["digit0_horizontal", "digit0_vertical", "digit1_horizontal"]
    assert train.labels.tolist() == list(range(20)) and test.labels.tolist() == list(range(20))
    assert train.frame_counts.tolist() == [6] * 20
    for s, peak in ((train, 255), (test, 120)):  # train videos from MNIST train, test from t10k
        for i in range(20):
            x = s.read_frames(i, range(6))
            assert abs(int(x.max()) - peak) <= 20
            c = _centroids(x)
            moving, fixed = (1, 0) if s.labels[i] % 2 == 0 else (0, 1)  # horizontal: x moves, y fixed
            assert c[:, fixed].std() < 0.3 and (c[:, moving].max() - c[:, moving].min()) > 1.0
    again = write_mnist_motion(tmp_path / "again", tmp_path / "mnist", train_per_class=1, test_per_class=1,
                               frames=6, size=40, seed=3)
    assert _digest(out) == _digest(again)
