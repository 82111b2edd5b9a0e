"""Host reads of tensor values, and how the losses avoid them on an accelerator.

Reading a value on the host (`.item()`, `float(t)`, `bool(t)`, `if t.any():`, `.tolist()`, a boolean-mask
index, whose output size is data) waits until the accelerator has run everything queued before it: the host
cannot queue the next step while the device runs this one. On the CPU there is no queue, so a read costs
nothing there.

`reads_are_free(t)` tells a loss which path to take: data-dependent shortcuts on the CPU, static shapes
elsewhere. `like_an_accelerator()` makes CPU tensors take the accelerator's path (tests: that path's float64
references, and the host-sync count of a training step, tests/engine/test_host_syncs.py). `check` validates
tensor values without a read on an accelerator.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

_as_accelerator = False


def reads_are_free(t: torch.Tensor) -> bool:
    """True when reading `t`'s values on the host stalls no device queue (a CPU tensor)."""
    return t.device.type == "cpu" and not _as_accelerator


@contextmanager
def like_an_accelerator() -> Iterator[None]:
    """Inside the block, CPU tensors take the accelerator's (read-free) paths."""
    global _as_accelerator
    before, _as_accelerator = _as_accelerator, True
    try:
        yield
    finally:
        _as_accelerator = before


def check(ok: torch.Tensor, message: str) -> None:
    """ValueError(message) unless the bool tensor `ok` is true. Where reads are free, at once; on an accelerator
    an asynchronous device-side assertion (the step stays queued; a failure stops the process at its next
    synchronisation, with a CUDA device-side assert rather than this message)."""
    if reads_are_free(ok):
        if not bool(ok):
            raise ValueError(message)
        return
    try:
        torch._assert_async(ok, message)
    except RuntimeError:  # CPU tensors under like_an_accelerator: the assertion is evaluated at once
        raise ValueError(message) from None

