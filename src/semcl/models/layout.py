"""The memory layout a run's convolutions work in (`model.memory_format`)."""

from __future__ import annotations

import torch
from torch import nn

MEMORY_FORMATS = ("channels_last",)


def apply_memory_format(module: nn.Module, name: str | None) -> nn.Module:
    """Put the module's conv weights in channels-last order (in place; None leaves PyTorch's default).

    "channels_last" means NHWC for 4-D weights (2-D convolutions) and NDHWC (`channels_last_3d`) for 5-D
    ones (the video networks). Only the weights move: a convolution with channels-last weights returns
    channels-last activations, so every later layer follows without converting the inputs. Checkpoints
    load either way (`load_state_dict` copies into the converted parameters).
    """
    if name is None:
        return module
    if name not in MEMORY_FORMATS:
        raise ValueError(f"unknown memory format {name!r}; known: {', '.join(MEMORY_FORMATS)}")

    def convert(t: torch.Tensor) -> torch.Tensor:
        if t.dim() == 4:
            return t.contiguous(memory_format=torch.channels_last)
        if t.dim() == 5:
            return t.contiguous(memory_format=torch.channels_last_3d)
        return t

    return module._apply(convert)  # what Module.to(memory_format=...) does, for both ranks at once
