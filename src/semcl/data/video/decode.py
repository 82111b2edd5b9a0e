"""Frame access for the two layouts users have: extracted frame folders and video files (PyAV).

Frame folders: one folder per video holding ``<prefix><number>.<jpg|jpeg|png>``. The common
extraction tools differ only in the prefix and padding -- ``00001.jpg`` (ffmpeg ``%05d``),
``img_00001.jpg`` (TSN/mmaction), ``image_00001.jpg`` (3D-ResNets-PyTorch), ``frame000001.jpg``
-- so a folder is read as "the files of one prefix, ordered by their number". Folders from
TSN-style tools also hold optical flow (``flow_x_00001.jpg``); the RGB prefixes win then.

Video files: decoded with TorchCodec's VideoDecoder where it is installed and its FFmpeg loads
(``pip install 'semcl[torchcodec]'``; on the CPU, or NVDEC with SEMCL_VIDEO_DEVICE=cuda), else with PyAV
(``av``, ``pip install 'semcl[video]'``), both imported lazily. Frames are counted from the stream header,
or by demuxing when the header has no count. Resized reads stay on PyAV where it is installed (see
read_frames_from_video).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from semcl.data import codecs
from semcl.data.image_guard import read_image
from semcl.errors import DataError

FRAME_FILE = re.compile(r"^(?P<prefix>.*?)(?P<num>\d+)\.(?P<ext>jpe?g|png)$", re.IGNORECASE)
RGB_PREFIXES = ("", "img_", "image_", "img", "image", "frame_", "frame", "rgb_")  # preferred, in order
VIDEO_SUFFIXES = (".avi", ".mp4", ".mkv", ".webm", ".mov")
PYAV_HINT = "pip install 'semcl[video]'"
# Container headers sometimes count one or two frames the stream does not deliver: an index that far past the
# last decoded frame reads the last frame; further is a DataError (a header that lies about its length).
OVERCOUNT_SLACK = 2
VIDEO_HINT = f"{PYAV_HINT}, or {codecs.TORCHCODEC_HINT}"


@dataclass(frozen=True)
class FrameFolder:
    """Frames of one video: ``folder / names[k]`` is frame ``k`` (0-based, in number order)."""

    folder: Path
    names: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.names)


def scan_frame_folder(folder: Path) -> FrameFolder:
    """The frames of ``folder`` ordered by number; DataError when it has none or mixed prefixes."""
    try:
        entries = os.listdir(folder)
    except OSError as err:
        raise DataError(f"{folder}: cannot list frame folder ({type(err).__name__})") from None
    groups: dict[str, list[tuple[int, str]]] = {}
    for name in entries:
        m = FRAME_FILE.match(name)
        if m:
            groups.setdefault(m["prefix"], []).append((int(m["num"]), name))
    if not groups:
        raise DataError(f"{folder}: no frames (expected <prefix><number>.jpg files, e.g. 00001.jpg)")
    if len(groups) == 1:
        prefix = next(iter(groups))
    else:
        prefix = next((p for p in RGB_PREFIXES if p in groups), None)
        if prefix is None:
            raise DataError(f"{folder}: frames with several prefixes ({', '.join(sorted(groups))}) and none of "
                            f"the RGB ones ({', '.join(repr(p) for p in RGB_PREFIXES)})")
    frames = sorted(groups[prefix])
    dupes = [n for n, c in Counter(num for num, _ in frames).items() if c > 1]
    if dupes:
        raise DataError(f"{folder}: frame number {dupes[0]} appears twice (e.g. as .jpg and .png)")
    return FrameFolder(folder, tuple(name for _, name in frames))


def _resize(img: Image.Image, size: tuple[int, int] | None) -> Image.Image:
    if size is None or img.size == (size[1], size[0]):
        return img
    return img.resize((size[1], size[0]), Image.BILINEAR)


def read_frames_from_folder(video: FrameFolder, indices: Sequence[int],
                            size: tuple[int, int] | None = None) -> np.ndarray:
    """uint8 ``[len(indices), H, W, 3]``: frames ``indices`` (each decoded once), resized to ``size`` (h, w).

    PIL decodes: TorchCodec's decode_jpeg gives the same pixels but, with the copy back into a PIL image for
    the resize, no speed (0.94x at the stored size, 1.03x resized; 320x240 frames, measured 2026-12-04)."""
    cache: dict[int, np.ndarray] = {}
    for k in dict.fromkeys(indices):
        cache[k] = read_image(video.folder / video.names[k],
                              lambda img: np.asarray(_resize(img.convert("RGB"), size), dtype=np.uint8),
                              what="frame")
    return _stack(video.folder, [cache[k] for k in indices])


def _stack(where: Path, frames: list[np.ndarray]) -> np.ndarray:
    shapes = {f.shape for f in frames}
    if len(shapes) > 1:
        raise DataError(f"{where}: frames of different sizes {sorted(shapes)} (set a frame size to resize them)")
    return np.stack(frames)


def import_av():
    """The PyAV module, or a one-line DataError naming the extra that installs it."""
    try:
        import av  # noqa: PLC0415 -- optional heavy dependency
    except ImportError:
        raise DataError(f"reading video files needs PyAV (package 'av'): {PYAV_HINT}") from None
    return av


def _av_errors(av) -> tuple[type[BaseException], ...]:
    return (OSError, ValueError, getattr(av, "FFmpegError", OSError))


def _pyav_or_none():
    try:
        return import_av()
    except DataError:
        return None


def _use_torchcodec() -> bool:
    """TorchCodec when it loads here; else PyAV; neither is one DataError naming both extras."""
    if codecs.video_decoder_loads():
        return True
    if _pyav_or_none() is None:
        raise DataError(f"reading video files needs PyAV or TorchCodec: {VIDEO_HINT}")
    return False


def _tc_decoder(path: Path, device: str | None = None, **kw):
    """TorchCodec's VideoDecoder on ``path`` (NHWC uint8 frames) on ``device``, by default the configured one."""
    return codecs.require_torchcodec().VideoDecoder(str(path), dimension_order="NHWC",
                                                    device=device or codecs.video_device(), **kw)


def _header_fits(path: Path, count: int) -> bool:
    """Whether a header's frame count is one the file could hold: every frame takes at least one byte (AVI's
    duration and rate are derived from the same field, so they cannot check it)."""
    try:
        return 0 < count <= path.stat().st_size
    except OSError:
        return True  # the decoder reports the unreadable file


def count_video_frames(path: Path) -> int:
    """Frames of the first video stream: the header's count where the file could hold that many, else the
    number of demuxed packets (a header claiming 2^31 frames in a few kB is not trusted)."""
    if _use_torchcodec():
        try:
            # the count is metadata only: no GPU decoder for it
            count = _tc_decoder(path, "cpu", seek_mode="approximate").metadata.num_frames_from_header
            if count and _header_fits(path, int(count)):
                return int(count)
            return int(_tc_decoder(path, "cpu").metadata.num_frames_from_content)  # exact mode scans the packets
        except (RuntimeError, ValueError, OSError) as err:
            raise DataError(f"{path}: cannot read video ({type(err).__name__}: {_first_line(err)})") from None
    av = import_av()
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise DataError(f"{path}: no video stream")
            stream = container.streams.video[0]
            if _header_fits(path, int(stream.frames)):
                return int(stream.frames)
            return sum(1 for packet in container.demux(stream) if packet.size)
    except _av_errors(av) as err:
        raise DataError(f"{path}: cannot read video ({type(err).__name__}: {err})") from None


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else ""


def read_frames_from_video(path: Path, indices: Sequence[int],
                           size: tuple[int, int] | None = None) -> np.ndarray:
    """uint8 ``[len(indices), H, W, 3]``: frames ``indices`` of ``path``, resized to ``size`` (h, w).

    An index up to OVERCOUNT_SLACK past the frames the decoder actually delivers (headers sometimes
    over-count by one or two) reads the last frame; further past is one DataError. TorchCodec decodes at
    the stored size with the same pixels as PyAV (MPEG-4 part 2, H.264 and VP9 files,
    tests/data/test_torchcodec_decode.py), 4.5x PyAV's frames/s on a whole 320x240 MPEG-4 clip and 1.2x on
    a 16-frame stride-2 clip (its frame-accurate seek; measured 2026-12-04). Resizing stays on PyAV where
    it is installed: TorchCodec's Resize (antialiased bilinear on RGB) and PyAV's swscale bilinear on YUV
    differ on 79-93% of pixels, by up to 54 levels (64x80 frames to 32x40, 48x64 and 112x112, measured
    2026-12-04); without PyAV the resize is TorchCodec's.
    """
    if not _use_torchcodec():
        return _read_pyav(path, indices, size)
    try:
        dec = _tc_decoder(path)  # exact mode: a packet scan, then frame-accurate seeks
        stored = (dec.metadata.height, dec.metadata.width)
        if size is not None and tuple(size) != stored:
            if _pyav_or_none() is not None:
                return _read_pyav(path, indices, size)
            from torchcodec.transforms import Resize  # noqa: PLC0415

            dec = _tc_decoder(path, transforms=[Resize(tuple(size))])
        n = dec.metadata.num_frames_from_content or len(dec)
        if not n:
            raise ValueError("no frames")
        _check_end(path, indices, n)
        frames = dec.get_frames_at([min(int(i), n - 1) for i in indices]).data
    except (RuntimeError, ValueError, OSError, IndexError) as err:
        raise DataError(f"{path}: cannot decode video ({type(err).__name__}: {_first_line(err)})") from None
    return frames.cpu().numpy()


def _check_end(path: Path, indices: Sequence[int], delivered: int) -> None:
    """DataError when an index lies more than OVERCOUNT_SLACK past the `delivered` frames."""
    last = max(int(i) for i in indices)
    if last >= delivered + OVERCOUNT_SLACK:
        raise DataError(f"{path}: frame {last} asked, but the video ends after {delivered} frames "
                        f"(its header's frame count is wrong)")


def _read_pyav(path: Path, indices: Sequence[int], size: tuple[int, int] | None) -> np.ndarray:
    """The PyAV decode: one pass from the start up to the last index.

    No seeking: PyAV's keyframe seek on short AVI/XviD clips is not frame-accurate, and UCF/HMDB videos
    are a few hundred frames.
    """
    av = import_av()
    want = set(indices)
    last = max(want)
    got: dict[int, np.ndarray] = {}

    def convert(frame) -> np.ndarray:
        if size is not None:
            frame = frame.reformat(width=size[1], height=size[0])
        return frame.to_ndarray(format="rgb24")

    k, frame = -1, None
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            for k, frame in enumerate(container.decode(stream)):
                if k in want:
                    got[k] = convert(frame)
                if k >= last:
                    break
            if frame is not None and k not in got:  # the stream ended before `last`
                got[k] = convert(frame)
    except _av_errors(av) as err:
        raise DataError(f"{path}: cannot decode video ({type(err).__name__}: {err})") from None
    if not got:
        raise DataError(f"{path}: no frames decoded")
    _check_end(path, indices, k + 1)
    return _stack(path, [got[min(i, k)] for i in indices])
