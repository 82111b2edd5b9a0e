"""Feature extraction with a frozen encoder.

``encode`` maps a float image batch ``[B, C, H, W]`` to features ``[B, D]``;
``transform(uint8_batch, generator)`` turns stored ``uint8`` images into the float
batch the encoder expects. The caller puts the model in eval mode; this module only
guarantees that no autograd graph is built and that rows come back in input order.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Encoder = Callable[[torch.Tensor], torch.Tensor]
Transform = Callable[[torch.Tensor, torch.Generator], torch.Tensor]


def is_lazy_images(images: object) -> bool:
    """A file-backed image source (``semcl.data.fileset.LazyImages``): indexable like a uint8
    ``[N, C, H, W]`` tensor by a slice or an index tensor, decoding only the rows asked for."""
    return (not isinstance(images, torch.Tensor) and getattr(images, "dtype", None) == torch.uint8
            and getattr(images, "ndim", None) == 4 and hasattr(images, "shape")
            and hasattr(images, "__getitem__"))


def check_images(images: object, name: str) -> torch.Tensor:
    """Return ``images`` if it is a non-empty ``uint8`` tensor ``[N, C, H, W]`` or a file-backed
    source indexable like one (decoded per batch, so a split larger than memory works too)."""
    if is_lazy_images(images):
        if images.shape[0] == 0:  # type: ignore[attr-defined]
            raise ValueError(f"{name} is empty")
        return images  # type: ignore[return-value]
    if not isinstance(images, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor or a file-backed image set, got {type(images).__name__}")
    if images.dtype != torch.uint8 or images.ndim != 4:
        raise ValueError(
            f"{name} must be a uint8 tensor [N, C, H, W], got {images.dtype} with shape {tuple(images.shape)}"
        )
    if images.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    return images


def encode_batch(encode: Encoder, batch: torch.Tensor) -> torch.Tensor:
    """Run ``encode`` without autograd and check it returned ``[B, D]`` features."""
    with torch.no_grad():
        feats = encode(batch)
    if not isinstance(feats, torch.Tensor) or feats.ndim != 2 or feats.shape[0] != batch.shape[0]:
        shape = tuple(feats.shape) if isinstance(feats, torch.Tensor) else type(feats).__name__
        raise ValueError(f"encode must return [B, D] features for B={batch.shape[0]}, got {shape}")
    # float32 regardless of autocast/half encoders, so downstream metrics see one dtype.
    return feats.detach().float()


def extract_features(
    encode: Encoder,
    images_uint8: torch.Tensor,
    transform: Transform,
    *,
    batch_size: int = 1024,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Encode every image once, in order, and return float32 features ``[N, D]``.

    Args:
        encode: frozen encoder, ``[B, C, H, W] float -> [B, D]``.
        images_uint8: ``uint8`` tensor ``[N, C, H, W]``, or a file-backed source indexable like
            one (each slice of ``batch_size`` rows is decoded when it is encoded).
        transform: ``(uint8_batch, generator) -> float batch``; for evaluation this is
            the deterministic test transform, but a random one is allowed.
        batch_size: images per ``encode`` call.
        generator: handed to ``transform``; a fresh generator seeded with 0 when
            ``None`` so that even a random transform gives reproducible features.

    Returns:
        Features on the device ``encode`` returns them on, row ``i`` for image ``i``.
    """
    images = check_images(images_uint8, "images_uint8")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    out: torch.Tensor | None = None
    for start in range(0, images.shape[0], batch_size):
        feats = encode_batch(encode, transform(images[start : start + batch_size], gen))
        if out is None:
            # Preallocate once the feature size is known: a list + cat would briefly hold
            # two copies of e.g. 50k x 2048 features.
            out = torch.empty((images.shape[0], feats.shape[1]), dtype=torch.float32, device=feats.device)
        elif feats.shape[1] != out.shape[1]:
            raise ValueError(f"encode changed feature size from {out.shape[1]} to {feats.shape[1]}")
        out[start : start + feats.shape[0]] = feats
    assert out is not None  # images is non-empty, so the loop ran
    return out
