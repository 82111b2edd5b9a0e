"""The arithmetic of a run as a named setting (`optim.precision`, part of the run id).

`official` (the default, stored as no value so run ids stay as they were) trains as each paper's code
did: float32 unless the row's own `optim.amp` says otherwise, PyTorch's default memory layout unless
`model.memory_format` says otherwise. `fast` is the reading for a researcher who wants the GPU's pace:
bf16 autocast (no loss scaling needed), channels-last weights and activations, and cuDNN's autotuner.
Its numbers may differ from the official reading's by the rounding of bf16, which is why it is a run of
its own and labelled in tables.
"""

from __future__ import annotations

import copy
import os

from semcl.config import RunConfig  # torch-free: `semcl plan` imports this module

PRECISIONS = ("official", "fast")
ENV = "SEMCL_PRECISION"  # what `semcl --precision` (or the cluster profile's precision) sets for planning
FAST_NOTE = "fast: bf16 autocast, channels_last, cudnn.benchmark"


def stored(name: str | None) -> str | None:
    """The config value of a precision name: `official` is stored as no value (ids unchanged)."""
    if name in (None, "official"):
        return None
    if name not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {name!r}")
    return name


def planned() -> str | None:
    """The precision runs are planned with in this process ($SEMCL_PRECISION; unset: official)."""
    return stored(os.environ.get(ENV) or None)


def effective_config(cfg: RunConfig) -> RunConfig:
    """The config the engine trains with: `fast` sets bf16 autocast and channels-last; official is as is."""
    if cfg.optim.precision != "fast":
        return cfg
    out = copy.deepcopy(cfg)
    out.optim.amp = "bf16"
    out.model.memory_format = "channels_last"
    return out


def configure_backend(cfg: RunConfig, device) -> None:
    """cuDNN's autotuner for `fast` on a GPU (it picks kernels by timing, so it is not bit-reproducible)."""
    import torch

    if device.type == "cuda":
        if cfg.optim.precision == "fast" and not bf16_supported(device):
            from semcl.errors import ConfigError

            raise ConfigError(f"optim.precision: fast trains in bf16, which {torch.cuda.get_device_name(device)} does "
                              "not support natively; run with --precision official")
        torch.backends.cudnn.benchmark = cfg.optim.precision == "fast"


def bf16_supported(device) -> bool:
    """Native bf16 on this GPU (compute capability 8.0 on); emulated bf16 (torch allows it on older GPUs) is
    many times slower, which is the opposite of what `fast` is for."""
    import torch

    return torch.cuda.get_device_capability(device)[0] >= 8
