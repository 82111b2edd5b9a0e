"""Video datasets (UCF101, HMDB51 split 1; the `mini` set mnist_motion) in the dataset registry.

The readers return a :class:`semcl.data.video.VideoSet` (clips decoded per batch); the engine reads
of it what it reads of an image set (labels, num_classes, class_names, fine_to_coarse = None,
``images.shape`` for channels and frame side). Frames are resized when decoded, to
``image_size`` high and 4:3 wide for UCF/HMDB (their native 320×240 aspect; HMDB widths vary, so a
common size also lets a batch stack), square for mnist_motion. The layout is picked by
``load_video_split(layout="auto")``: frame folders when ``<set>/frames/`` exists, else video files.

Writers (registry protocol for video sets: ``writer(root, *, train_per_class, test_per_class, seed)``
writes the whole ``<root>/<folder>`` itself): the smoke profile's synthetic UCF101 is written as
frame folders and synthetic HMDB51 as video files, so one smoke table reads both layouts.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from semcl.data.registry import DatasetSpec
from semcl.data.video import VideoSet, load_video_split, write_mnist_motion, write_synthetic_video

SMOKE_FRAMES = (12, 40)  # video lengths: short ones exercise the clip sampler's fallback
SMOKE_SIZE = (24, 32)  # (h, w) of the synthetic frames, 4:3
SMOKE_CLASSES = 4


def read(spec: DatasetSpec, root: Path, split: str, image_size: int) -> VideoSet:
    """UCF101 / HMDB51 split 1, frames decoded at ``image_size`` × round(4/3 · image_size)."""
    return load_video_split(spec.name, root, spec.splits[split], frame_size=(image_size, round(image_size * 4 / 3)))


def read_square(spec: DatasetSpec, root: Path, split: str, image_size: int) -> VideoSet:
    """mnist_motion: square frames decoded at ``image_size``."""
    return load_video_split(spec.name, root, spec.splits[split], frame_size=(image_size, image_size))


def _synthetic(name: str, layout: str):
    def write(root: Path, *, train_per_class: int, test_per_class: int, seed: int = 0) -> Path:
        return write_synthetic_video(name, root, num_classes=SMOKE_CLASSES, train_per_class=train_per_class,
                                     test_per_class=test_per_class, frames=SMOKE_FRAMES, size=SMOKE_SIZE,
                                     layouts=(layout,), seed=seed)
    write.__doc__ = f"Synthetic {name} ({SMOKE_CLASSES} classes) in the {layout} layout, real split files."
    return write


write_ucf101 = _synthetic("ucf101", "frames")
write_hmdb51 = _synthetic("hmdb51", "videos")


def write_mnist_motion_synthetic(root: Path, *, train_per_class: int, test_per_class: int, seed: int = 0) -> Path:
    """mnist_motion built from synthetic MNIST digits (tests); the `mini` profile builds it from real
    MNIST with ``semcl prepare-mini``."""
    from semcl.data.synthetic import write_synthetic

    with tempfile.TemporaryDirectory() as tmp:
        write_synthetic("mnist", tmp, train_per_class=max(train_per_class // 2, 1),
                        test_per_class=max(test_per_class // 2, 1), seed=seed)
        return write_mnist_motion(root, tmp, train_per_class=train_per_class, test_per_class=test_per_class,
                                  frames=32, size=32, seed=seed)
