"""Low-level writers shared by the synthetic video sets: frame folders, video files, UCF split files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

from semcl.data.video.decode import import_av
from semcl.files import fill_folder_atomic


def write_frame_folder(folder: Path, frames: np.ndarray, quality: int = 95) -> None:
    """``frames`` uint8 ``[T, H, W]`` (grey) or ``[T, H, W, 3]`` as ``folder/00001.jpg`` ... (ffmpeg ``%05d``)."""
    folder.mkdir(parents=True, exist_ok=True)
    mode = "L" if frames.ndim == 3 else "RGB"
    for k, frame in enumerate(frames, start=1):
        Image.fromarray(np.ascontiguousarray(frame), mode).save(folder / f"{k:05d}.jpg", "JPEG", quality=quality)


def write_video_file(path: Path, frames: np.ndarray, fps: int = 25, codec: str = "mpeg4") -> None:
    """``frames`` uint8 ``[T, H, W, 3]`` (H, W even) as a video file; the container follows the suffix.

    MPEG-4 part 2 is the codec of the UCF101/HMDB51 AVIs (XviD/DivX); high quality (qscale 2) so
    decoded pixels stay close to the written ones.
    """
    av = import_av()
    path.parent.mkdir(parents=True, exist_ok=True)
    t, h, w, _ = frames.shape
    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=fps, options={"qscale": "2"} if codec == "mpeg4" else {})
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


def write_ucf_lists(folder: Path, class_names: list[str], train: list[tuple[str, int]],
                    test: list[tuple[str, int]]) -> None:
    """``classInd.txt``, ``trainlist01.txt`` (with 1-based labels) and ``testlist01.txt`` (without),
    with the CRLF line ends of the official files. ``train``/``test``: (``Class/file.avi``, label)."""
    folder.mkdir(parents=True, exist_ok=True)
    crlf = "\r\n"
    (folder / "classInd.txt").write_bytes("".join(f"{i + 1} {c}{crlf}" for i, c in enumerate(class_names)).encode())
    (folder / "trainlist01.txt").write_bytes("".join(f"{f} {y + 1}{crlf}" for f, y in train).encode())
    (folder / "testlist01.txt").write_bytes("".join(f"{f}{crlf}" for f, _ in test).encode())


def write_atomically(target: Path, fill: Callable[[Path], None]) -> Path:
    """Run ``fill(tmp)`` on a temporary sibling of ``target`` and move it into place (replacing it),
    so an interrupted write never leaves a half-written dataset a reader would accept."""
    return fill_folder_atomic(target, fill)
