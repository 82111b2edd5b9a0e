"""Synthetic UCF101 / HMDB51 for the smoke profile, in the real split-file formats and both layouts.

The files are what the readers expect from the real sets -- ``ucfTrainTestlist/*.txt`` with CRLF
line ends and UCF video names ``v_<Class>_g<group>_c<clip>``, HMDB51 ``<class>_test_split1.txt``
with tags 1/2/0 -- plus extracted frame folders (``frames/<Class>/<stem>/00001.jpg``) and/or the
videos themselves (MPEG-4 in ``.avi``, or ``.mp4`` copies, written with PyAV). UCF test videos
take groups 1-7 and train videos groups 8-25, as in the real split 1; one UCF class keeps the real
set's spelling quirk (folder ``HandstandPushups``, files ``v_HandStandPushups_...``), and HMDB keeps
a class whose name prefixes another (``climb`` / ``climb_stairs``) plus unused (tag 0) videos.

Content: each class is a coloured square moving at a class-specific velocity (bouncing off the
borders) over a class-tinted noisy background, so the labels are learnable from motion and colour.
Video lengths vary (``frames`` range) so that short videos exercise the sampler's fallback.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from semcl.data.video.videoset import VIDEO_DATASETS
from semcl.data.video.writers import write_atomically, write_frame_folder, write_ucf_lists, write_video_file
from semcl.errors import DataError

UCF_NAMES = ("ApplyEyeMakeup", "HandstandPushups", "Archery", "BabyCrawling", "Basketball", "YoYo")
HMDB_NAMES = ("brush_hair", "climb", "climb_stairs", "cartwheel", "catch", "wave")
LAYOUT_CHOICES = ("frames", "videos")


def bounce(p0: np.ndarray, v: np.ndarray, t: np.ndarray, span: np.ndarray) -> np.ndarray:
    """Integer positions ``[T, D]`` bouncing in ``[0, span]`` per axis: a triangle wave of ``p0 + v·t``."""
    period = 2 * np.maximum(span, 1e-9)
    q = np.mod(p0[None] + v[None] * t[:, None], period[None])
    return np.round(np.where(q <= span[None], q, period[None] - q)).astype(int)


def render_clip(label: int, num_classes: int, frames: int, height: int, width: int,
                rng: np.random.Generator) -> np.ndarray:
    """uint8 ``[frames, height, width, 3]``: one synthetic video of class ``label``."""
    hue = label / max(num_classes, 1)
    tint = np.array([np.cos(2 * np.pi * (hue + k / 3)) for k in range(3)]) * 40 + 90
    angle = 2 * np.pi * label / max(num_classes, 1)
    velocity = 2.0 * np.array([np.sin(angle), np.cos(angle)])
    side = max(4, min(height, width) // 4)
    span = np.array([height - side, width - side])
    pos = bounce(rng.uniform(0, span), velocity, np.arange(frames), span.astype(float))
    video = np.clip(tint[None, None, None] + rng.normal(0, 6, (frames, height, width, 3)), 0, 255)
    for k, (y, x) in enumerate(pos):
        video[k, y:y + side, x:x + side] = 255 - tint
    return video.astype(np.uint8)


def _class_names(name: str, n: int) -> list[str]:
    base = UCF_NAMES if name == "ucf101" else HMDB_NAMES
    extra = [f"Synthetic{k}" if name == "ucf101" else f"synthetic_{k}" for k in range(len(base), n)]
    return list(base[:n]) + extra


def _ucf_file(cls: str, group: int, clip: int) -> str:
    # the real set's quirk: class folder HandstandPushups, file names v_HandStandPushups_...
    spelled = "HandStandPushups" if cls == "HandstandPushups" else cls
    return f"{cls}/v_{spelled}_g{group:02d}_c{clip:02d}.avi"


def write_synthetic_video(name: str, root: str | Path, *, num_classes: int = 4, train_per_class: int = 4,
                          test_per_class: int = 2, frames: tuple[int, int] = (40, 160), size: tuple[int, int] = (48, 64),
                          layouts: tuple[str, ...] = LAYOUT_CHOICES, video_suffix: str = ".avi",
                          seed: int = 0) -> Path:
    """Write synthetic ``ucf101`` or ``hmdb51`` under ``root`` and return its folder (replacing it).

    ``frames`` is the inclusive range of video lengths; ``size`` the (h, w) of every frame (even);
    ``layouts`` any of ``frames`` (JPEG folders) and ``videos`` (``video_suffix`` files, listed as
    ``.avi`` in the split files whatever the suffix, as converted copies of the real set are).
    Deterministic for a seed.
    """
    if name not in ("ucf101", "hmdb51"):
        raise DataError(f"unknown synthetic video dataset '{name}' (known: ucf101, hmdb51)")
    if not layouts or set(layouts) - set(LAYOUT_CHOICES):
        raise ValueError(f"layouts must be a non-empty subset of {LAYOUT_CHOICES}, got {layouts}")
    if num_classes < 1 or train_per_class < 1 or test_per_class < 1:
        raise ValueError("num_classes, train_per_class and test_per_class must be >= 1")
    spec = VIDEO_DATASETS[name]
    names = _class_names(name, num_classes)
    rng = np.random.default_rng([seed, 1 if name == "ucf101" else 2])
    # (listed file, label, split tag): HMDB also lists one unused (tag 0) video per class
    videos: list[tuple[str, int, int]] = []
    for y, cls in enumerate(names):
        if name == "ucf101":
            videos += [(_ucf_file(cls, 1 + k, 1), y, 2) for k in range(test_per_class)]
            videos += [(_ucf_file(cls, 8 + k, 1), y, 1) for k in range(train_per_class)]
        else:
            tags = [2] * test_per_class + [1] * train_per_class + [0]
            videos += [(f"{cls}/synthetic_{cls}_u_cm_np1_fr_med_{k}.avi", y, tag) for k, tag in enumerate(tags)]

    def fill(out: Path) -> None:
        for listed, y, _ in videos:
            clip = render_clip(y, num_classes, int(rng.integers(frames[0], frames[1] + 1)), size[0], size[1], rng)
            rel = Path(listed)
            if "frames" in layouts:
                write_frame_folder(out / "frames" / rel.parent / rel.stem, clip)
            if "videos" in layouts:
                write_video_file(out / spec.video_dir / rel.with_suffix(video_suffix), clip)
        lists = out / spec.split_dir
        if name == "ucf101":
            write_ucf_lists(lists, names, [(f, y) for f, y, tag in videos if tag == 1],
                            [(f, y) for f, y, tag in videos if tag == 2])
        else:
            lists.mkdir(parents=True)
            for cls in names:  # trailing space, as in the official files
                rows = "".join(f"{Path(f).name} {tag} \n" for f, _, tag in videos if f.startswith(cls + "/"))
                (lists / f"{cls}_test_split1.txt").write_text(rows)

    return write_atomically(Path(root) / spec.folder, fill)
