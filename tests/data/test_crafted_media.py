"""Crafted image and video files: every decode site refuses them in one DataError naming the file, an image
header over the dataset's pixel budget is refused before decoding, and a video header's frame count is not
trusted past what the file holds."""

import importlib.util
import io
import struct
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from semcl.data import codecs
from semcl.data.fileset import decode, decode_file, decode_whole
from semcl.data.sets import segmentation, tinyimagenet
from semcl.data.video import decode as video
from semcl.errors import DataError


def _jpeg_claiming(w: int, h: int) -> bytes:
    """An 8x8 JPEG whose start-of-frame header says w x h (a few hundred bytes)."""
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 20, 30)).save(buf, "JPEG")
    data = bytearray(buf.getvalue())
    sof = data.index(b"\xff\xc0")
    struct.pack_into(">HH", data, sof + 5, h, w)  # SOF: length, precision, then height, width
    return bytes(data)


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png(w: int, h: int, extra: bytes = b"") -> bytes:
    """A greyscale PNG of w x h whose pixel data is a few zero rows (decoding stops early), plus `extra` chunks."""
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\0" * min((w + 1) * h, 1000))
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + extra + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


_BOMB = zlib.compress(b"\0" * (4 << 20), 9)  # 4 KB that inflate to 4 MB, past PIL's MAX_TEXT_CHUNK (1 MB)
CRAFTED = {
    "huge.png": _png(100_000, 100_000),  # 74 bytes; past PIL's DecompressionBombError limit
    "ztxt.png": _png(4, 4, _chunk(b"zTXt", b"Comment\0\0" + _BOMB)),  # PIL: ValueError
    "iccp.png": _png(4, 4, _chunk(b"iCCP", b"icc\0\0" + _BOMB)),  # PIL: ValueError
    "big.jpg": _jpeg_claiming(12_000, 12_000),  # 144 Mpx: under PIL's error limit, over the budget
}

# every image decode site under semcl.data, as a reader calls it
SITES = {
    "fileset.decode": lambda p: decode(p, 32),
    "fileset.decode_whole": decode_whole,
    "video frame folder": lambda p: video.read_frames_from_folder(video.FrameFolder(p.parent, (p.name,)), [0]),
    "tinyimagenet": lambda p: tinyimagenet._decode_all([p], 64),
    "segmentation image": lambda p: segmentation.decode_image(p, 32),
    "segmentation mask": lambda p: segmentation.decode_mask(p, 32, reduce_zero=False),
}


def _one_line(err: pytest.ExceptionInfo, path: Path) -> str:
    msg = str(err.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg, msg
    return msg


@pytest.mark.parametrize("name", sorted(CRAFTED))
@pytest.mark.parametrize("site", sorted(SITES))
def test_a_crafted_image_is_one_data_error_naming_it_at_every_decode_site(tmp_path, name, site):
    path = tmp_path / name
    path.write_bytes(CRAFTED[name])
    with pytest.raises(DataError) as err:
        SITES[site](path)
    msg = _one_line(err, path)
    if name == "big.jpg" and site != "tinyimagenet":
        assert "12000x12000 pixels is over this dataset's budget of 64,000,000" in msg
    if name in ("ztxt.png", "iccp.png"):
        assert "ValueError: Decompressed data too large" in msg


def test_an_image_over_the_budget_is_refused_from_its_header_without_allocating(tmp_path):
    path = tmp_path / "big.jpg"
    path.write_bytes(CRAFTED["big.jpg"])
    assert len(CRAFTED["big.jpg"]) < 1000
    tracemalloc.start()
    try:
        with pytest.raises(DataError, match="over this dataset's budget"):
            decode_file(path)  # today's decode would hold a 432 MB array here
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak


def test_tinyimagenet_budget_is_its_declared_size(tmp_path):
    path = tmp_path / "a.JPEG"
    Image.new("RGB", (65, 64)).save(path)
    with pytest.raises(DataError) as err:
        tinyimagenet._decode_all([path], 64)
    assert "65x64 pixels is over this dataset's budget of 4,096" in _one_line(err, path)
    Image.new("RGB", (64, 64), (1, 2, 3)).save(path, "PNG")  # lossless: the exact pixels
    assert tinyimagenet._decode_all([path], 64)[0, :, 0, 0].tolist() == [1, 2, 3]


def test_images_within_the_budget_decode_as_before(tmp_path):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
    png = tmp_path / "a.png"
    Image.fromarray(pixels).save(png)
    assert np.array_equal(decode_whole(png).permute(1, 2, 0).numpy(), pixels)
    assert np.array_equal(segmentation.decode_image(png, 40).permute(1, 2, 0).numpy(),
                          np.asarray(Image.fromarray(pixels).resize((40, 40), Image.BILINEAR)))


# --- video: the header's frame count -----------------------------------------------------------------------

needs_av = pytest.mark.skipif(importlib.util.find_spec("av") is None, reason="PyAV writes the videos")


def _video_claiming(tmp_path: Path, frames: int, claimed: int) -> Path:
    """An AVI of `frames` real 16x16 frames whose headers (avih total frames, strh length) say `claimed`."""
    from semcl.data.video.writers import write_video_file

    path = tmp_path / "liar.avi"
    write_video_file(path, np.random.default_rng(0).integers(0, 256, (frames, 16, 16, 3), dtype=np.uint8))
    data = bytearray(path.read_bytes())
    avih, strh = data.index(b"avih"), data.index(b"strh")
    assert struct.unpack_from("<I", data, avih + 8 + 16)[0] == frames  # dwTotalFrames
    assert struct.unpack_from("<I", data, strh + 8 + 32)[0] == frames  # dwLength
    struct.pack_into("<I", data, avih + 8 + 16, claimed)
    struct.pack_into("<I", data, strh + 8 + 32, claimed)
    path.write_bytes(bytes(data))
    return path


@pytest.fixture(params=["torchcodec", "pyav"])
def decoder(request, monkeypatch):
    if request.param == "torchcodec":
        if not codecs.video_decoder_loads():
            pytest.skip("TorchCodec or its FFmpeg not installed")
    else:
        monkeypatch.setattr(codecs, "video_decoder_loads", lambda: False)
    return request.param


@needs_av
def test_a_frame_count_the_file_cannot_hold_is_counted_from_the_stream(tmp_path, decoder):
    path = _video_claiming(tmp_path, 3, 2**31 - 1)
    assert path.stat().st_size < 20_000
    assert video.count_video_frames(path) == 3


@needs_av
def test_a_clip_past_the_real_end_is_one_data_error_not_the_last_frame_repeated(tmp_path, decoder):
    path = _video_claiming(tmp_path, 3, 1000)  # plausible for its bytes: trusted, then caught on reading
    assert video.count_video_frames(path) == 1000
    with pytest.raises(DataError) as err:
        video.read_frames_from_video(path, [0, 5, 999])
    assert "frame 999 asked, but the video ends after 3 frames" in _one_line(err, path)
    # the documented slack: a header one or two frames over reads the last frame
    last = video.read_frames_from_video(path, [2])
    assert np.array_equal(video.read_frames_from_video(path, [0, 4])[1], last[0])
