"""Procedural images with a two-level class hierarchy, for synthetic datasets.

Every class belongs to a group (its superclass). An image is built from three layers:

* group traits — a base colour and a low-frequency oriented wave tinted per channel,
  shared by all sibling classes, so coarse structure is visible at low resolution;
* class traits — a higher-frequency oriented wave and a small colour offset, which tell
  siblings apart;
* per-image nuisance — a random translation of both waves, a global contrast factor
  and Gaussian pixel noise, so no two images are identical and invariance must be learnt.

The signal is deliberately strong (wave amplitudes well above the noise) so a small CNN
picks up both levels within one epoch of a smoke-sized dataset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_CHUNK = 2048  # images rendered at once; bounds the float32 working set

Splits = dict[str, tuple[np.ndarray, np.ndarray]]  # split → (HWC uint8 images, labels)


@dataclass(frozen=True)
class Prototypes:
    """Random parameters of every group and class of one synthetic dataset."""

    group_of: np.ndarray  # int [C]
    base: np.ndarray  # float [G, ch] group base colour in [0, 1]
    low: np.ndarray  # float [G, 4] low-frequency wave: freq, cos θ, sin θ, phase
    low_tint: np.ndarray  # float [G, ch] per-channel amplitude of the low wave
    high: np.ndarray  # float [C, 4] class wave: freq, cos θ, sin θ, phase
    offset: np.ndarray  # float [C, ch] class colour offset


def make_prototypes(group_of: list[int], channels: int, rng: np.random.Generator) -> Prototypes:
    """Draw group and class parameters; ``group_of[c]`` is the group of class ``c``."""
    groups = np.asarray(group_of, dtype=np.int64)
    g, c = int(groups.max()) + 1, len(groups)

    def waves(n: int, freqs: tuple[float, float]) -> np.ndarray:
        theta = rng.uniform(0.0, np.pi, n)
        return np.stack([rng.uniform(*freqs, n), np.cos(theta), np.sin(theta),
                         rng.uniform(0.0, 2 * np.pi, n)], axis=1)

    base = rng.uniform(0.25, 0.75, (g, channels))
    low = waves(g, (0.8, 2.0))
    # Signed tints make the low wave change hue, not just brightness, in RGB sets.
    low_tint = rng.uniform(0.08, 0.2, (g, channels)) * rng.choice([-1.0, 1.0], (g, channels))
    high = waves(c, (3.0, 6.0))
    offset = rng.uniform(-0.08, 0.08, (c, channels))
    return Prototypes(groups, base, low, low_tint, high, offset)


def _wave(params: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """``cos(2π f (x cos θ + y sin θ) + φ)`` for per-image params ``[N, 4]`` → ``[N, S, S]``.

    ``xs``/``ys`` are per-image coordinate vectors ``[N, S]``. The wave is separable,
    cos(a + b) = cos a cos b − sin a sin b, so only 4·N·S cosines are evaluated instead of
    N·S², which makes 64×64 sets several times faster to render.
    """
    f, ct, st, ph = (params[:, i, None] for i in range(4))
    a = 2 * np.pi * f * ct * xs  # [N, S] along width
    b = 2 * np.pi * f * st * ys + ph  # [N, S] along height
    ca, sa, cb, sb = (v.astype(np.float32) for v in (np.cos(a), np.sin(a), np.cos(b), np.sin(b)))
    return cb[:, :, None] * ca[:, None, :] - sb[:, :, None] * sa[:, None, :]


def render(protos: Prototypes, labels: np.ndarray, size: int,
           rng: np.random.Generator) -> np.ndarray:
    """uint8 ``[N, size, size, ch]`` images of classes ``labels`` (HWC, as files store them)."""
    channels = protos.base.shape[1]
    out = np.empty((len(labels), size, size, channels), dtype=np.uint8)
    grid = (np.arange(size, dtype=np.float64) + 0.5) / size  # pixel centres in [0, 1)
    for lo in range(0, len(labels), _CHUNK):
        lab = labels[lo : lo + _CHUNK]
        grp = protos.group_of[lab]
        n = len(lab)
        # Translation by up to 1/8 of the image in each direction.
        shift = rng.uniform(-0.125, 0.125, (n, 2))
        xs = grid[None, :] - shift[:, 0, None]
        ys = grid[None, :] - shift[:, 1, None]
        tint = protos.low_tint[grp].astype(np.float32)[:, None, None, :]
        img = _wave(protos.low[grp], xs, ys)[..., None] * tint
        img += 0.16 * _wave(protos.high[lab], xs, ys)[..., None]
        img *= rng.uniform(0.85, 1.15, (n, 1, 1, 1)).astype(np.float32)  # contrast
        img += (protos.base[grp] + protos.offset[lab]).astype(np.float32)[:, None, None, :]
        img += rng.standard_normal(img.shape, dtype=np.float32) * np.float32(0.04)
        img *= np.float32(255.0)
        out[lo : lo + n] = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return out


def balanced_labels(num_classes: int, per_class: int, rng: np.random.Generator) -> np.ndarray:
    """``per_class`` of each label, shuffled the way real dataset files are."""
    return rng.permutation(np.repeat(np.arange(num_classes), per_class))
