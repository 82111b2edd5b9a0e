"""``mnist_motion``: the `mini` video set -- synthetic motion of real MNIST digits.

Honest label: the pixels are real MNIST digits (train videos from MNIST train images, test videos
from MNIST test images, read by semcl.data.load("mnist", ...) from ``<mnist root>/MNIST/raw/``); the motion
is synthetic. Each video is one digit moving on a black 64×64 canvas, bouncing off the borders
along one axis:

    class = 2·digit + motion,  motion 0 = "horizontal" (x bounces, y fixed), 1 = "vertical"

20 classes named ``digit<d>_<horizontal|vertical>``. Within a digit the two classes differ only
in motion: the start position is uniform over the canvas on both axes and the speed magnitude is
uniform in [1.5, 3.5] px/frame with a random sign, so no single frame tells the classes apart --
a model must use time to exceed the 50 % that appearance alone gives within a digit (10-way
appearance × 2-way motion). Written in the frame-folder layout with UCF-style split files, so the
UCF reader reads it (``load_video_split("mnist_motion", ...)``). Deterministic for a seed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from semcl.data.loader import load
from semcl.data.video.synthetic import bounce
from semcl.data.video.videoset import VIDEO_DATASETS
from semcl.data.video.writers import write_atomically, write_frame_folder, write_ucf_lists

MOTIONS = ("horizontal", "vertical")
CLASS_NAMES = [f"digit{d}_{m}" for d in range(10) for m in MOTIONS]
SPEED = (1.5, 3.5)


def render_moving_digit(digit: np.ndarray, motion: int, frames: int, size: int,
                        rng: np.random.Generator) -> np.ndarray:
    """uint8 ``[frames, size, size]``: ``digit`` (uint8 ``[h, w]``) bouncing along x (motion 0) or y (1)."""
    h, w = digit.shape
    span = np.array([size - h, size - w], dtype=float)
    start = rng.uniform(0, span)
    speed = rng.uniform(*SPEED) * rng.choice([-1.0, 1.0])
    velocity = np.array([0.0, speed]) if motion == 0 else np.array([speed, 0.0])
    pos = bounce(start, velocity, np.arange(frames), span)
    video = np.zeros((frames, size, size), dtype=np.uint8)
    for k, (y, x) in enumerate(pos):
        video[k, y:y + h, x:x + w] = digit
    return video


def mnist_motion_videos(images: torch.Tensor, labels: torch.Tensor, per_class: int, frames: int, size: int,
                        rng: np.random.Generator) -> list[tuple[int, np.ndarray]]:
    """``per_class`` videos of each of the 20 classes as (label, ``[frames, size, size]``), class-major."""
    imgs = images[:, 0].numpy()
    by_digit = [np.flatnonzero(labels.numpy() == d) for d in range(10)]
    out = []
    for y in range(len(CLASS_NAMES)):
        digit, motion = divmod(y, 2)
        if not len(by_digit[digit]):
            raise ValueError(f"MNIST split has no image of digit {digit}")
        for _ in range(per_class):
            img = imgs[rng.choice(by_digit[digit])]
            out.append((y, render_moving_digit(img, motion, frames, size, rng)))
    return out


def write_mnist_motion(root: str | Path, mnist_root: str | Path, *, train_per_class: int = 30,
                       test_per_class: int = 10, frames: int = 64, size: int = 64, seed: int = 0) -> Path:
    """Write ``<root>/mnist_motion`` (frame folders + UCF-style split files) and return it.

    ``frames`` per video (64 fits three 16-frame clips at stride 1 with the x_v gap scaled to 16);
    ``size`` the square canvas. Replaces an existing folder.
    """
    if train_per_class < 1 or test_per_class < 1 or frames < 1 or size < 28:
        raise ValueError("need train/test_per_class >= 1, frames >= 1 and size >= 28")
    spec = VIDEO_DATASETS["mnist_motion"]

    def fill(out: Path) -> None:
        lists: dict[str, list[tuple[str, int]]] = {}
        for k, (split, per_class) in enumerate((("train", train_per_class), ("test", test_per_class)), start=1):
            mnist = load("mnist", Path(mnist_root).expanduser(), split)
            rng = np.random.default_rng([seed, k])  # one stream per split
            counters = [0] * len(CLASS_NAMES)
            lists[split] = []
            for y, video in mnist_motion_videos(mnist.images, mnist.labels, per_class, frames, size, rng):
                cls = CLASS_NAMES[y]
                counters[y] += 1
                # UCF naming; the group tells the splits apart (train g01-, test g51-)
                stem = f"v_{cls}_g{counters[y] + (0 if split == 'train' else 50):02d}_c01"
                write_frame_folder(out / "frames" / cls / stem, video)
                lists[split].append((f"{cls}/{stem}.avi", y))
        write_ucf_lists(out / spec.split_dir, CLASS_NAMES, lists["train"], lists["test"])

    return write_atomically(Path(root).expanduser() / spec.folder, fill)
