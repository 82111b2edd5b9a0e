"""TorchCodec decodes give today's pixels (PIL for JPEGs, PyAV for video files), and without TorchCodec
the same calls fall back to those decoders."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from semcl.data import codecs
from semcl.data.fileset import decode_file, decode_whole
from semcl.data.video import decode
from semcl.errors import DataError

pytest.importorskip("av")  # writes the test videos, and is the reference decoder
needs_tc = pytest.mark.skipif(not codecs.video_decoder_loads(), reason="TorchCodec or its FFmpeg not installed")


@pytest.fixture
def fresh_codecs():
    """Forget which decoders loaded, before and after (the test may hide TorchCodec)."""
    codecs.jpeg_decoder.cache_clear()
    codecs.video_decoder_loads.cache_clear()
    yield
    codecs.jpeg_decoder.cache_clear()
    codecs.video_decoder_loads.cache_clear()


def _hide_torchcodec(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torchcodec", None)  # import torchcodec -> ImportError


def _clip(t=30, h=48, w=64, seed=0) -> np.ndarray:
    """Moving colour stripes plus noise: motion and chroma for the encoder, a different picture per frame."""
    yy, xx = np.mgrid[0:h, 0:w]
    rng = np.random.default_rng(seed)
    frames = np.stack([np.stack([127 + 80 * np.sin(xx / 7 + c + k / 3) * np.cos(yy / 5 - c) for c in range(3)], -1)
                       for k in range(t)])
    return np.clip(frames + rng.normal(0, 10, frames.shape), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> list[Path]:
    from semcl.data.video.writers import write_video_file

    root = tmp_path_factory.mktemp("videos")
    out = []
    for name, codec in [("a.avi", "mpeg4"), ("b.mp4", "libx264"), ("c.mkv", "libvpx-vp9")]:
        try:
            write_video_file(root / name, _clip(), codec=codec)
        except Exception:  # noqa: BLE001 -- an encoder this PyAV build lacks
            continue
        out.append(root / name)
    assert out and out[0].suffix == ".avi"  # mpeg4 is built into every PyAV
    return out


@needs_tc
@pytest.mark.parametrize(("mode", "kw"), [("RGB", dict(quality=90)), ("RGB", dict(quality=75, subsampling=0)),
                                          ("RGB", dict(quality=85, progressive=True)), ("L", dict(quality=90))])
def test_torchcodec_jpeg_is_pils_pixels(tmp_path, fresh_codecs, mode, kw):
    path = tmp_path / "a.jpg"
    Image.fromarray(_clip(1, 75, 100)[0]).convert(mode).save(path, "JPEG", **kw)
    assert codecs.jpeg_decoder() is not None
    assert torch.equal(decode_whole(path), decode_file(path))


def test_jpeg_without_torchcodec_goes_through_pil(tmp_path, monkeypatch, fresh_codecs):
    _hide_torchcodec(monkeypatch)
    path = tmp_path / "a.jpg"
    Image.fromarray(_clip(1, 45, 60)[0]).save(path, "JPEG", quality=90)
    assert codecs.jpeg_decoder() is None
    assert torch.equal(decode_whole(path), decode_file(path))


@needs_tc
def test_torchcodec_video_is_pyavs_pixels(videos, fresh_codecs):
    indices = [0, 29, 3, 3, 17, 30, 31]  # repeats, out of order, and past the end (reads the last frame)
    for path in videos:
        ref = decode._read_pyav(path, indices, None)
        assert decode._use_torchcodec()
        got = decode.read_frames_from_video(path, indices, None)
        assert got.dtype == np.uint8 and got.shape == (7, 48, 64, 3)
        assert np.array_equal(got, ref), path.name
        assert np.array_equal(got[5], got[1])  # 30 and 31 are the last frame, 29
        assert decode.count_video_frames(path) == 30
        assert np.array_equal(decode.read_frames_from_video(path, [3], (48, 64)), ref[2:3])  # stored size


@needs_tc
def test_resized_video_reads_stay_on_pyav(videos, fresh_codecs):
    path = videos[0]
    ref = decode._read_pyav(path, [1, 7], (24, 32))
    assert np.array_equal(decode.read_frames_from_video(path, [1, 7], (24, 32)), ref)


def test_video_without_torchcodec_falls_back_to_pyav(videos, monkeypatch, fresh_codecs):
    _hide_torchcodec(monkeypatch)
    assert not decode._use_torchcodec()
    frames = decode.read_frames_from_video(videos[0], [5, 0], None)
    assert frames.shape == (2, 48, 64, 3) and decode.count_video_frames(videos[0]) == 30
    assert np.array_equal(frames, decode._read_pyav(videos[0], [5, 0], None))
    assert np.array_equal(decode.read_frames_from_video(videos[0], [4], (24, 32)),
                          decode._read_pyav(videos[0], [4], (24, 32)))


def test_neither_decoder_names_both_extras(videos, monkeypatch, fresh_codecs):
    _hide_torchcodec(monkeypatch)
    monkeypatch.setitem(sys.modules, "av", None)
    with pytest.raises(DataError) as err:
        decode.read_frames_from_video(videos[0], [0])
    msg = str(err.value)
    assert "semcl[video]" in msg and "semcl[torchcodec]" in msg and "\n" not in msg


def test_video_device_setting(monkeypatch):
    monkeypatch.delenv(codecs.VIDEO_DEVICE_ENV, raising=False)
    assert codecs.video_device() == "cpu"  # NVDEC only when asked
    monkeypatch.setenv(codecs.VIDEO_DEVICE_ENV, "cuda:1")
    assert codecs.video_device() == "cuda:1"
    monkeypatch.setenv(codecs.VIDEO_DEVICE_ENV, "gpu")
    with pytest.raises(DataError, match="SEMCL_VIDEO_DEVICE: expected cpu, cuda or cuda:N, got 'gpu'"):
        codecs.video_device()


@needs_tc
def test_damaged_video_is_one_line(tmp_path, videos, fresh_codecs):
    bad = tmp_path / "cut.avi"
    bad.write_bytes(videos[0].read_bytes()[:200])
    with pytest.raises(DataError) as err:
        decode.read_frames_from_video(bad, [0])
    assert str(err.value).startswith(f"{bad}: cannot") and "\n" not in str(err.value)


@needs_tc
def test_torchcodec_without_loadable_ffmpeg_falls_back(tmp_path, videos, monkeypatch, fresh_codecs):
    """Installed but its FFmpeg libraries missing: PyAV for video, PIL for JPEGs, no error."""
    import torchcodec._internally_replaced_utils as utils

    def broken():
        raise RuntimeError("Could not load libtorchcodec")

    monkeypatch.setattr(utils, "load_core_libraries", broken)
    monkeypatch.setattr(codecs.torchcodec_decoders(), "decode_jpeg", lambda *a, **k: broken())
    assert not codecs.video_decoder_loads() and codecs.jpeg_decoder() is None
    assert np.array_equal(decode.read_frames_from_video(videos[0], [2], None), decode._read_pyav(videos[0], [2], None))
    path = tmp_path / "a.jpg"
    Image.fromarray(_clip(1, 45, 60)[0]).save(path, "JPEG", quality=90)
    assert torch.equal(decode_whole(path), decode_file(path))
