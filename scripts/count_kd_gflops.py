"""One-off: forward+backward GFLOPs of every KD-zoo network (semcl.models.kd) at 32x32, for semcl.estimate.catalog.

Counted, not estimated: torch.utils.flop_counter.FlopCounterMode over one forward and one backward
of a batch of one 3x32x32 image, 100 classes (CIFAR-100), training mode. FlopCounterMode counts
2 FLOPs per multiply-add of the convolutions and matrix products (and nothing for elementwise ops).
Prints the catalog lines: `python scripts/count_kd_gflops.py`.
"""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from semcl.models.kd import KD_MODELS, build_kd_model


def count(name: str, size: int = 32, num_classes: int = 100) -> tuple[float, float]:
    """(forward GFLOPs, forward+backward GFLOPs) per image."""
    net = build_kd_model(name, num_classes).train()
    x = torch.randn(1, 3, size, size)
    with FlopCounterMode(display=False) as fwd:
        out = net(x)
    with FlopCounterMode(display=False) as bwd:
        out.sum().backward()
    f, b = fwd.get_total_flops(), bwd.get_total_flops()
    return f / 1e9, (f + b) / 1e9


if __name__ == "__main__":
    torch.manual_seed(0)
    for name in KD_MODELS:
        f, fb = count(name)
        print(f'    "{name}": {fb:.4g},  # fwd {f:.4g}')
