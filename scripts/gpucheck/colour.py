"""Section (h): the colour views finished on the device (semcl.data.views.colour_view, SEMCL_COLOUR_FINISH=device).

For `sim` and `sim_cifar` (hue): the same images, generator and seed through today's per-image path on the CPU and
through the split (worker part on the CPU, the batched finish on this device); the uint8 pixels compared (on the CPU
they are equal bit for bit, tests/data/test_colour_finish.py; on a GPU cuDNN's convolution may round a blurred pixel
that sits on a half level the other way), and the finish's time per batch, to hold against a training step (the
issue's rule: more than 5 % of a step is worth fusing)."""

from __future__ import annotations

import statistics
import time

import torch
from gpucheck.rows import Sizes, sync

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
MAX_LEVELS = 1  # a pixel may differ by at most one level ...
MAX_FRACTION = 1e-4  # ... on at most this share of the pixels (0 on the CPU: exact)


def _images(n: int, h: int, w: int) -> list[torch.Tensor]:
    """Noise, smooth gradients and flat greys: the blur and the blends see every kind of neighbourhood."""
    g = torch.Generator().manual_seed(0)
    out = []
    for i in range(n):
        if i % 3 == 0:
            img = torch.randint(0, 256, (3, h, w), generator=g, dtype=torch.uint8)
        elif i % 3 == 1:
            ramp = torch.linspace(0, 255, w).expand(h, w)
            img = torch.stack([ramp, ramp.flip(1), ramp * 0.5]).round().to(torch.uint8)
        else:
            img = torch.full((3, h, w), 37 + 40 * (i % 5), dtype=torch.uint8)
        out.append(img)
    return out


def section(sizes: Sizes, device: torch.device) -> dict:
    from semcl.data.views.build import build_augment
    from semcl.data.views.colour_finish import finish
    from semcl.data.views.colour_view import SplitColourView

    size, (n, h, w) = (32, (12, 48, 64)) if sizes.dry else (224, (64, 375, 500))
    images = _images(n, h, w)
    exact = device.type == "cpu"
    rows = []
    for name in ("sim", "sim_cifar"):
        view = build_augment(name, size=size, mean=MEAN, std=STD)
        split = SplitColourView(view.transform, mean=MEAN, std=STD)
        want = view.uint8_views(images, torch.Generator().manual_seed(1))
        crops, records = split.handout_views(images, torch.Generator().manual_seed(1))
        crops = crops.to(device)
        got = finish(crops, records, split.program, split.kernel).cpu()
        diff = (got.int() - want.int()).abs()
        times = []
        for _ in range(5):
            sync(device)
            t0 = time.perf_counter()
            finish(crops, records, split.program, split.kernel)
            sync(device)
            times.append(time.perf_counter() - t0)
        ms = statistics.median(times) * 1000
        max_levels, fraction = int(diff.max()), float((diff > 0).float().mean())
        ok = (max_levels == 0) if exact else (max_levels <= MAX_LEVELS and fraction <= MAX_FRACTION)
        rows.append({"recipe": name, "images": n, "size": size, "max_levels": max_levels, "fraction": fraction,
                     "finish_ms_per_batch": round(ms, 3), "finish_ms_per_image": round(ms / n, 4), "ok": ok})
    return {"device": str(device), "rule": "0 levels on the CPU; on a GPU at most "
            f"{MAX_LEVELS} level on at most {MAX_FRACTION:g} of the pixels", "rows": rows,
            "ok": all(r["ok"] for r in rows)}
