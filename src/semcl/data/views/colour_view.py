"""The colour views (`sim`, `sim_cifar`, `aug_cifar`) split between the loader worker and the training device.

Opt-in, by the environment: SEMCL_COLOUR_FINISH=device. Today's default (unset or `worker`) runs the whole
view per image in the worker. With `device`, the worker draws every number of the view and runs only the
resized crop (semcl.data.views.colour_draw), handing out (uint8 crop, float64 record); the training process
finishes the batch on its device (semcl.data.views.colour_finish) and normalises it with the handout table.
On the CPU the finished views are the per-image views bit for bit (tests/data/test_colour_finish.py),
so the setting is not part of a run's config and does not move run ids. On a GPU the blur's convolution
sums in cuDNN's order; see semcl.data.views.colour_finish.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from semcl.data.views.colour_draw import draw_and_crop, program_of
from semcl.data.views.colour_finish import finish
from semcl.data.views.handout import UInt8Normalise
from semcl.data.views.tvaugment import PerImageAugment, ViewCycle

ENV = "SEMCL_COLOUR_FINISH"
SETTINGS = ("worker", "device")


def colour_finish_setting() -> str:
    """Where colour views are finished: SEMCL_COLOUR_FINISH, `worker` (default) or `device`."""
    value = os.environ.get(ENV, "worker") or "worker"
    if value not in SETTINGS:
        raise ValueError(f"{ENV}: expected one of {', '.join(SETTINGS)}, got {value!r}")
    return value


class ColourHandout:
    """The training process's half: (uint8 crops on the device, float64 records) -> normalised float views."""

    def __init__(self, program: Sequence[str], kernel: int, normalise: UInt8Normalise) -> None:
        self.program, self.kernel, self.normalise = tuple(program), kernel, normalise

    def __call__(self, handed: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        crops, records = handed
        return self.normalise(finish(crops, records, self.program, self.kernel))


class SplitColourView(PerImageAugment):
    """A PerImageAugment whose colour steps run batched after the crop; every output is the parent's."""

    def __init__(self, transform, *, mean: Sequence[float], std: Sequence[float]) -> None:
        super().__init__(transform, mean=mean, std=std)
        split = program_of(transform)
        if split is None:
            raise ValueError(f"colour split: {transform!r} is not a crop followed by jitter / grey / blur / flip")
        self.program, self.kernel = split
        self._handout: ColourHandout | None = None

    def handout_views(self, images: torch.Tensor | list[torch.Tensor], generator: torch.Generator
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """The worker's half: (uint8 crops [B, C, size, size], float64 records [B, R]), on the CPU, drawn
        under the seed PerImageAugment.uint8_views uses, image after image as it does."""
        seed = self._view_seed(images, generator)
        crops, records = [], []
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(seed)
            for img in images:
                crop, rec = draw_and_crop(self.transform, img.cpu())
                crops.append(crop)
                records.append(rec)
        return torch.stack(crops), torch.stack(records)

    def handout_finish(self) -> ColourHandout:
        """The training process's half, made once: its normalisation table is kept per device, and the
        in-memory path (__call__) finishes every step's batch with it."""
        if self._handout is None:
            self._handout = ColourHandout(self.program, self.kernel, UInt8Normalise(self.mean, self.std))
        return self._handout

    def uint8_views(self, images: torch.Tensor | list[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
        return finish(*self.handout_views(images, generator), self.program, self.kernel)

    def __call__(self, images: torch.Tensor | list[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
        """As PerImageAugment, with the finish and the normalisation on the images' device."""
        crops, records = self.handout_views(images, generator)
        device = images[0].device if isinstance(images, list) else images.device
        return self.handout_finish()(((crops.to(device)), records))


def split_colour(aug: object) -> object:
    """`aug` with each plain colour view (a PerImageAugment the split covers) made a SplitColourView;
    any other recipe, and any view of a "+" pair that is not a colour view, unchanged."""
    if isinstance(aug, ViewCycle):
        return ViewCycle([split_colour(v) for v in aug.views])
    if type(aug) is PerImageAugment and program_of(aug.transform) is not None:
        return SplitColourView(aug.transform, mean=aug.mean.flatten().tolist(), std=aug.std.flatten().tolist())
    return aug
