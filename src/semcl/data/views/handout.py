"""uint8 views out of the loader workers, normalised on the training device.

A per-image recipe (semcl.data.views.tvaugment.PerImageAugment) ends with uint8 pixels and then one
arithmetic step: ``x / 255 - mean) / std`` in float32. Handing out the uint8 view instead moves a
quarter of the bytes through the workers' shared memory, the pin thread and the host-to-device copy,
and the normalisation runs where the batch is used.

The normalisation is a look-up table, not arithmetic on the device: the 256 x C float32 values are
computed on the CPU with exactly the recipe's own ops (tests/data/test_loader_handout.py compares all
256 inputs per channel), and the device only gathers them. So the normalised view is the same bit
pattern on any device -- CUDA's division by a scalar multiplies by the reciprocal, which would not be.
Recipes without such a split (the batched `Augment`, whose crop is a float resize with no uint8 point,
and MAE's transform, which erases after normalising) keep handing out their float32 views.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch


def normalise_lut(mean: Sequence[float] | torch.Tensor, std: Sequence[float] | torch.Tensor) -> torch.Tensor:
    """float32 [C, 256]: value v of channel c as a per-image recipe normalises it, (v / 255 - mean_c) / std_c,
    with the recipe's op order (float, div_ 255, sub_ mean, div_ std)."""
    mean = torch.as_tensor(mean, dtype=torch.float32).flatten().view(-1, 1)
    std = torch.as_tensor(std, dtype=torch.float32).flatten().view(-1, 1)
    v = torch.arange(256, dtype=torch.uint8).float().div_(255.0).view(1, 256).repeat(mean.shape[0], 1)
    return v.sub_(mean).div_(std)


class UInt8Normalise:
    """`(uint8 [B, C, H, W] on any device) -> float32 normalised`, by gathering from `normalise_lut`.

    One table per device, made on first use."""

    def __init__(self, mean: Sequence[float] | torch.Tensor, std: Sequence[float] | torch.Tensor) -> None:
        self.lut = normalise_lut(mean, std)
        self._on: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.uint8 or x.dim() != 4 or x.shape[1] != self.lut.shape[0]:
            raise ValueError(f"expected uint8 [B, {self.lut.shape[0]}, H, W], got {x.dtype} {tuple(x.shape)}")
        if x.device not in self._on:
            c = self.lut.shape[0]
            offsets = (torch.arange(c, dtype=torch.int32) * 256).view(1, c, 1, 1)
            self._on[x.device] = (self.lut.flatten().to(x.device), offsets.to(x.device))
        flat, offsets = self._on[x.device]
        index = x.to(torch.int32).add_(offsets)  # channel c's values sit at c * 256 + v
        return flat.index_select(0, index.flatten()).view(x.shape)


def handout_of(recipe: object) -> Callable[[Any], torch.Tensor] | None:
    """The device-side finish of a recipe that can hand out uint8 views (it has `uint8_views` and the
    mean / std it normalises with), else None: the recipe hands out its finished float views. The caller
    keeps it (one table per recipe, not per step); it is never attached to the recipe, which workers receive.
    A recipe with its own `handout_finish` (a split colour view, semcl.data.views.colour_view: it hands out crops
    and drawn parameters) gives that."""
    if hasattr(recipe, "handout_finish"):
        return recipe.handout_finish()
    if not hasattr(recipe, "uint8_views"):
        return None
    return UInt8Normalise(recipe.mean, recipe.std)
