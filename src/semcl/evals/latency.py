"""Inference latency: wall-clock milliseconds per batch (GPaCo Fig. 1(a), accuracy vs latency).

The paper gives latencies (RIDE-ResNet 3 experts 15.3 ms, ResNeXt-50 13.1 ms, docs/papers/paco.md §b.2) but
not the batch size or the GPU, so our numbers compare models with each other on one machine,
not with the paper's milliseconds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (NumPy's default method)."""
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (pos - lo) * (xs[hi] - xs[lo])


def measure_latency(
    fn: Callable[[Any], Any],
    example: Any,
    *,
    warmup: int = 10,
    repeats: int = 50,
    clock: Callable[[], float] = time.perf_counter,
    sync: Callable[[], None] | None = None,
) -> dict[str, float]:
    """Time `fn(example)`: `warmup` untimed calls (allocator, cuDNN autotuning), then `repeats`
    timed ones. `sync` (e.g. torch.cuda.synchronize) runs before every clock read, so queued
    asynchronous GPU work is inside the interval it belongs to. Returns the median and the 90th
    percentile in ms per call, and the number of timed calls."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    for _ in range(warmup):
        fn(example)
    times = []
    for _ in range(repeats):
        if sync is not None:
            sync()
        start = clock()
        fn(example)
        if sync is not None:
            sync()
        times.append(1000.0 * (clock() - start))
    return {"median_ms": statistics.median(times), "p90_ms": percentile(times, 90.0), "repeats": float(repeats)}
