"""Where a run's training views come from, chosen once per run (`view_source`):

- `FileViews`: a file-backed set under the default views: each image decoded and augmented in loader workers,
  seeded by its position (semcl.data.views.file_views), handed out as uint8 and normalised on the device;
- `ClipViews`: a method that plans its views (video clips, `ClipMethod.clip_plan`): plans drawn from the epoch's
  generator in the training process, decoded in persistent loader workers, finished on the device;
- `MemoryViews`: everything else: the method's `make_views` on the whole global batch from the epoch's
  generator (every rank draws the same stream), each rank keeping its slice. (A per-rank draw inside the
  step, such as a CutMix box, comes from `Batch.rank_generator` instead.)

Every source hands out per step (views, partner views, the generator as of the step's end), in the order the
uninterrupted run would draw them, so a resumed run replays the same views.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

from semcl.data.fileset import WholeImages
from semcl.data.views.clip_loader import ClipLoader
from semcl.data.views.file_views import ViewLoader, loader_workers, step_views
from semcl.methods.base import Method, makes_own_views, training_images
from semcl.methods.clips import plans_clips
from semcl.runtime import distributed

Step = tuple[list[torch.Tensor], list[tuple[torch.Tensor, ...]] | None, torch.Generator]


class MemoryViews:
    """The method's `make_views` on the global batch, this rank's slice moved to the device."""

    def __init__(self, method: Method, train_set, augs: list[Callable], device: torch.device) -> None:
        self.method, self.train_set, self.augs, self.device = method, train_set, augs, device
        self.g: torch.Generator | None = None

    def epoch(self, epoch: int, g: torch.Generator, perm: torch.Tensor, bs: int, steps: range) -> None:
        self.g = g

    def step(self, step: int, idx: torch.Tensor) -> Step:
        part = distributed.local_slice(len(idx))
        views = [v[part].to(self.device, non_blocking=True)
                 for v in self.method.make_views(self.train_set, idx, self.g, self.augs)]
        return views, None, self.g

    def close(self) -> None:
        pass


class FileViews(MemoryViews):
    """Per-image views made ahead in loader workers; the workers persist across epochs."""

    def __init__(self, method: Method, files: WholeImages, augs: list[Callable], device: torch.device,
                 seed: int) -> None:
        super().__init__(method, None, augs, device)
        self.files, self.seed, self.workers = files, seed, loader_workers(device)
        self.loader = ViewLoader(files, self.workers, pin_memory=device.type == "cuda")
        self.feed: Iterator | None = None

    def epoch(self, epoch: int, g: torch.Generator, perm: torch.Tensor, bs: int, steps: range) -> None:
        self.g = g
        pick, partner_recipes = self.method.loader_partners() or (None, ())  # partners as of this epoch's start
        self.feed = step_views(self.files, self.method.view_recipes(self.augs), seed=self.seed, epoch=epoch,
                               order=perm, batch_size=bs, steps=steps, part=distributed.local_slice(bs),
                               workers=self.workers, pin_memory=self.device.type == "cuda", partners=pick,
                               partner_recipes=partner_recipes, device=self.device, loader=self.loader)

    def step(self, step: int, idx: torch.Tensor) -> Step:
        views, partners = next(self.feed)  # this rank's slice only
        views = [v.to(self.device, non_blocking=True) for v in views]
        partner_views = [tuple(v.to(self.device, non_blocking=True) for v in p) for p in partners] or None
        return views, partner_views, self.g

    def close(self) -> None:
        self.loader.close()


class ClipViews(MemoryViews):
    """Plans drawn ahead of training (the checkpoint and Batch take the generator as of the step), decoded in
    loader workers; an epoch the method gives no plan for falls back to `make_views`."""

    def __init__(self, method: Method, train_set, augs: list[Callable], device: torch.device) -> None:
        super().__init__(method, train_set, augs, device)
        self.loader = ClipLoader(train_set, method.decode_plan, loader_workers(device),
                                 pin_memory=device.type == "cuda")
        self.feed = None

    def epoch(self, epoch: int, g: torch.Generator, perm: torch.Tensor, bs: int, steps: range) -> None:
        self.g = g
        self.feed = self.loader.epoch(self.method, self.augs, g, perm, bs, steps, distributed.local_slice(bs),
                                      self.device)

    def step(self, step: int, idx: torch.Tensor) -> Step:
        if self.feed is None:
            return super().step(step, idx)
        return next(self.feed), None, self.feed.generator_at(step + 1)

    def close(self) -> None:
        self.loader.close()


def view_source(method: Method, train_set, augs: list[Callable], device: torch.device, seed: int) -> MemoryViews:
    """The run's source of views, decided once from the set and the method's declarations."""
    files = training_images(train_set)
    if isinstance(files, WholeImages) and not makes_own_views(method):
        return FileViews(method, files, augs, device, seed)
    if plans_clips(method):
        return ClipViews(method, train_set, augs, device)
    return MemoryViews(method, train_set, augs, device)

