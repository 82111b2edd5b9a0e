"""VideoSet: the videos of one split (ids, labels, class names, frame counts), clips decoded on demand.

Layout under the data root (``<Class>/<stem>`` is a video id of the split files)::

    UCF101/ucfTrainTestlist/{classInd,trainlist01,testlist01}.txt
    UCF101/frames/<Class>/<stem>/00001.jpg ...   or UCF101/frames/<stem>/...   (extracted frames)
    UCF101/UCF-101/<Class>/<stem>.avi                                           (the official archive)
    HMDB51/testTrainMulti_7030_splits/<class>_test_split1.txt
    HMDB51/frames/<class>/<stem>/...             or HMDB51/frames/<stem>/...
    HMDB51/hmdb51_org/<class>/<stem>.avi
    mnist_motion/ucfTrainTestlist/... + mnist_motion/frames/...                 (the `mini` set, UCF-style)

``layout="auto"`` reads frame folders when ``frames/`` exists, else the video files. A video
file listed as ``.avi`` may also be present as ``.mp4``/``.mkv``/``.webm``/``.mov`` (converted copies).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch

from semcl.data.layout import check_root, missing
from semcl.data.video.decode import (
    VIDEO_SUFFIXES,
    FrameFolder,
    count_video_frames,
    read_frames_from_folder,
    read_frames_from_video,
    scan_frame_folder,
)
from semcl.data.video.splits import SplitList, read_hmdb_split, read_ucf_split
from semcl.errors import DataError

log = logging.getLogger("semcl.data")

LAYOUTS = ("auto", "frames", "videos")


@dataclass(frozen=True)
class VideoDataset:
    """Where a video dataset lives and how its split files read."""

    folder: str  # under the data root
    split_dir: str  # under folder
    read_split: Callable[[Path, str, int], SplitList]
    video_dir: str  # the original videos, under folder
    expected: dict[str, int] | None  # split-1 sizes of the real set (None: synthetic-only set)


VIDEO_DATASETS: dict[str, VideoDataset] = {
    "ucf101": VideoDataset("UCF101", "ucfTrainTestlist", read_ucf_split, "UCF-101",
                           {"train": 9537, "test": 3783}),
    "hmdb51": VideoDataset("HMDB51", "testTrainMulti_7030_splits", read_hmdb_split, "hmdb51_org",
                           {"train": 3570, "test": 1530}),
    "mnist_motion": VideoDataset("mnist_motion", "ucfTrainTestlist", read_ucf_split, "videos", None),
}


@dataclass
class VideoSet:
    """One split of a video dataset.

    Attributes:
        name: dataset name (``"ucf101"``, ...).
        ids: video ids ``<class>/<stem>``.
        labels: int64 ``[N]``.
        class_names: indexed by label.
        frame_counts: int64 ``[N]`` frames per video.
        videos: per video a :class:`FrameFolder` (frames layout) or the video file's path.
        layout: ``"frames"`` or ``"videos"``.
        frame_size: ``(h, w)`` every decoded frame is resized to, or None for the stored size
            (then all videos of a batch must share it).
        split_files: the files that define the split.
    """

    name: str
    ids: list[str]
    labels: torch.Tensor
    class_names: list[str]
    frame_counts: torch.Tensor
    videos: list[FrameFolder | Path]
    layout: str
    frame_size: tuple[int, int] | None = None
    split_files: list[Path] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    # what the engine reads of any training set (semcl.engine.job / train), with the image sets' meaning
    fine_to_coarse = None  # no superclass labels
    coarse_labels = None

    @property
    def images(self) -> VideoFrames:
        """A stand-in for an image set's ``images`` that only has a shape: the engine reads
        ``shape[1]`` (channels) and ``shape[-1]`` (frame side); clips are read by :meth:`clips`."""
        return VideoFrames(self)

    @property
    def sources(self) -> dict[str, str]:
        """Each split file that defines this split → its SHA-256 (what a run records about its data)."""
        return {str(p): hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in self.split_files}

    def subset(self, idx: Sequence[int] | torch.Tensor) -> VideoSet:
        rows = torch.as_tensor(idx, dtype=torch.int64).flatten().tolist()
        return VideoSet(self.name, [self.ids[i] for i in rows], self.labels[rows], self.class_names,
                        self.frame_counts[rows], [self.videos[i] for i in rows], self.layout,
                        self.frame_size, self.split_files)

    def read_frames(self, i: int, indices: Sequence[int]) -> torch.Tensor:
        """uint8 ``[len(indices), 3, H, W]``: frames ``indices`` of video ``i`` (each decoded once)."""
        n = int(self.frame_counts[i])
        bad = [k for k in indices if not 0 <= k < n]
        if bad:
            raise IndexError(f"{self.ids[i]}: frame {bad[0]} outside [0, {n})")
        src = self.videos[i]
        if isinstance(src, FrameFolder):
            arr = read_frames_from_folder(src, indices, self.frame_size)
        else:
            arr = read_frames_from_video(src, indices, self.frame_size)
        return torch.from_numpy(arr).permute(0, 3, 1, 2)

    def clips(self, videos: Sequence[int] | torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """uint8 ``[B, V, 3, T, H, W]`` for frame indices ``frames`` ``[B, V, T]`` of ``videos`` ``[B]``.

        Each video is opened once and each distinct frame decoded once for all its views.
        """
        vids = torch.as_tensor(videos).flatten().tolist()
        if frames.dim() != 3 or frames.shape[0] != len(vids):
            raise ValueError(f"frames must be [B={len(vids)}, V, T], got {tuple(frames.shape)}")
        _, v, t = frames.shape
        out = []
        for row, i in enumerate(vids):
            flat = frames[row].flatten().tolist()
            x = self.read_frames(i, flat)  # [V*T, 3, H, W]
            out.append(x.view(v, t, *x.shape[1:]).transpose(1, 2))
        try:
            return torch.stack(out)
        except RuntimeError:
            raise DataError(f"{self.name}: videos of different frame sizes in one batch "
                            "(set frame_size to resize them)") from None


class VideoFrames:
    """``VideoSet.images``: shape ``(videos, 3, frame height, frame width)`` and no pixels, so code
    written for image sets that reads ``images.shape`` works, and code that indexes it fails clearly."""

    def __init__(self, videos: VideoSet) -> None:
        self._set = videos

    @property
    def shape(self) -> tuple[int, int, int, int]:
        h, w = self._set.frame_size or (0, 0)
        return (len(self._set), 3, h, w)

    def __len__(self) -> int:
        return len(self._set)

    def __getitem__(self, idx: object) -> torch.Tensor:
        raise TypeError(f"{self._set.name}: a video set has no images; read clips with VideoSet.clips "
                        "(a video method overrides Method.make_views)")


def _frames_root(base: Path, split: SplitList) -> Callable[[str], Path]:
    """``frames/<class>/<stem>`` or ``frames/<stem>``, whichever the first video uses."""
    nested = base / "frames" / split.ids[0]
    flat = base / "frames" / split.ids[0].split("/", 1)[1]
    if nested.is_dir():
        return lambda vid: base / "frames" / vid
    if flat.is_dir():
        return lambda vid: base / "frames" / vid.split("/", 1)[1]
    raise DataError(f"{base / 'frames'}: no frame folder for {split.ids[0]} (expected {nested} or {flat})")


def _video_file(base: Path, video_dir: str, listed: str) -> Path | None:
    path = base / video_dir / listed
    if path.is_file():
        return path
    stem = path.with_suffix("")
    return next((p for p in (stem.with_suffix(s) for s in VIDEO_SUFFIXES) if p.is_file()), None)


def _parallel(fn: Callable, items: list, workers: int = 8) -> list:
    # listing folders and opening containers is I/O: threads overlap the waits
    if len(items) < 64:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))


def load_video_split(name: str, root: str | Path, split: str, *, layout: str = "auto",
                     frame_size: tuple[int, int] | None = None, split_number: int = 1) -> VideoSet:
    """Split ``split`` (train | test) of video dataset ``name`` under data root ``root``.

    Warns (one log line) when the split size differs from the real set's split-1 size --
    expected for synthetic data, a sign of a damaged or different split file otherwise.
    """
    if name not in VIDEO_DATASETS:
        raise DataError(f"unknown video dataset '{name}' (known: {', '.join(VIDEO_DATASETS)})")
    if layout not in LAYOUTS:
        raise DataError(f"unknown video layout '{layout}' (known: {', '.join(LAYOUTS)})")
    spec = VIDEO_DATASETS[name]
    root = Path(root).expanduser()
    check_root(root, name)
    base = root / spec.folder
    if not (base / spec.split_dir).is_dir():
        raise missing(root, f"{spec.folder}/{spec.split_dir}", name)
    lst = spec.read_split(base / spec.split_dir, split, split_number)
    if layout == "auto":
        layout = "frames" if (base / "frames").is_dir() else "videos"
    if layout == "frames":
        if not (base / "frames").is_dir():
            raise missing(root, f"{spec.folder}/frames", name)
        where = _frames_root(base, lst)

        def scan(vid: str) -> FrameFolder:
            folder = where(vid)
            if not folder.is_dir():
                raise DataError(f"{folder}: missing frame folder of video {vid} ({lst.sources[-1].name})")
            return scan_frame_folder(folder)

        sources: list[FrameFolder | Path] = _parallel(scan, lst.ids)
        counts = [len(s) for s in sources]
    else:
        paths = [_video_file(base, spec.video_dir, f) for f in lst.files]
        absent = [f for f, p in zip(lst.files, paths, strict=True) if p is None]
        if absent:
            raise missing(root, f"{spec.folder}/{spec.video_dir}/{absent[0]} (and {len(absent) - 1} more videos)"
                          if len(absent) > 1 else f"{spec.folder}/{spec.video_dir}/{absent[0]}", name)
        sources = list(paths)
        counts = _parallel(count_video_frames, paths)
    if spec.expected is not None and len(lst.ids) != spec.expected[split]:
        log.warning("%s split %d %s: %d videos, the real set has %d (synthetic or different split files?)",
                    name, split_number, split, len(lst.ids), spec.expected[split])
    return VideoSet(name, lst.ids, torch.tensor(lst.labels, dtype=torch.int64), lst.class_names,
                    torch.tensor(counts, dtype=torch.int64), sources, layout, frame_size, lst.sources)

