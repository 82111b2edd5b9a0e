"""TorchCodec, the decoder torchvision hands its image and video decoding over to, loaded only when asked.

TorchCodec is an optional extra (``pip install 'semcl[torchcodec]'``) that also needs FFmpeg's shared
libraries from the system (``apt-get install ffmpeg`` or its libav* packages); its JPEG decoder links them
too. When it is missing, or installed without a loadable FFmpeg, callers fall back: JPEGs to PIL (the same
pixels), video files to PyAV (the ``video`` extra).
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Callable
from types import ModuleType

import torch

from semcl.errors import DataError

TORCHCODEC_HINT = "pip install 'semcl[torchcodec]' (with FFmpeg's shared libraries: apt-get install ffmpeg)"
VIDEO_DEVICE_ENV = "SEMCL_VIDEO_DEVICE"


def torchcodec_decoders() -> ModuleType | None:
    """``torchcodec.decoders``, or None where TorchCodec is not installed (or fails to import)."""
    try:
        from torchcodec import decoders  # noqa: PLC0415 -- optional dependency, imported on first decode
    except (ImportError, OSError, RuntimeError):
        return None
    return decoders


def require_torchcodec() -> ModuleType:
    """``torchcodec.decoders``, or a one-line DataError naming the extra."""
    decoders = torchcodec_decoders()
    if decoders is None:
        raise DataError(f"this decode needs TorchCodec: {TORCHCODEC_HINT}")
    return decoders


@functools.cache
def jpeg_decoder() -> Callable[[torch.Tensor], torch.Tensor] | None:
    """TorchCodec's decode_jpeg to RGB uint8 [3, h, w], or None where it is absent or cannot load FFmpeg
    and libjpeg (one test decode decides, so a broken install falls back once rather than per file)."""
    decoders = torchcodec_decoders()
    if decoders is None:
        return None
    decode = functools.partial(decoders.decode_jpeg, mode="RGB")
    try:
        decode(torch.frombuffer(bytearray(_tiny_jpeg()), dtype=torch.uint8))
    except (RuntimeError, OSError):
        return None
    return decode


@functools.cache
def video_decoder_loads() -> bool:
    """Whether TorchCodec's video decoder can run here (installed, and its FFmpeg libraries load)."""
    decoders = torchcodec_decoders()
    if decoders is None:
        return False
    try:
        from torchcodec._internally_replaced_utils import load_core_libraries  # noqa: PLC0415
        load_core_libraries()
    except ImportError:
        return True  # a TorchCodec without this helper: the first decoder built will tell
    except (RuntimeError, OSError):
        return False
    return True


def video_device() -> str:
    """Where TorchCodec decodes video: ``cpu`` (the default), or ``cuda`` / ``cuda:N`` from SEMCL_VIDEO_DEVICE
    for its NVDEC decoder (not compared bit for bit with the CPU decode: NVDEC converts colour itself)."""
    device = os.environ.get(VIDEO_DEVICE_ENV, "cpu").strip() or "cpu"
    if device != "cpu" and not (device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())):
        raise DataError(f"{VIDEO_DEVICE_ENV}: expected cpu, cuda or cuda:N, got {device!r}")
    return device


def _tiny_jpeg() -> bytes:
    from PIL import Image  # noqa: PLC0415

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 20, 30)).save(buf, "JPEG")
    return buf.getvalue()

