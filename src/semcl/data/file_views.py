"""Training views of file-backed sets, decoded and augmented in loader worker processes.

ImageNet-scale training cannot decode and augment in the training process: two 224-px views of a JPEG
cost ~9 ms on one core (bench/bench_data.py), so one process feeds a GPU about a tenth of what it
consumes. Here each image of a step is a separate job that a `torch.utils.data.DataLoader` worker can
run ahead of the training step, because its randomness depends on where it sits, not on what ran
before it:

    view k of the image at position p of step s of epoch e  <-  torch.Generator seeded by
    image_seed(seed, e, s, p, k)

(p counts over the whole global batch). So the views do not depend on the number of workers (0 =
in the training process), on the order they finish in, or on the number of data-parallel ranks: a
rank makes only its own slice of the global batch, and the slices are exactly the single-process
views. A resumed run restarts the loader at its step and sees the same views.

A method names its views' recipes (`Method.view_recipes`: HSA adds its small crops) and may name other
images whose views go with each image (`Method.loader_partners`: HSA's kNN positives, drawn per image
from the table mined at the epoch's start). In-memory sets keep the batched epoch-stream augmentation
(semcl.engine.train), and methods that override `make_views` (video clips) keep their own path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import torch

from semcl.data.fileset import WholeImages, decode_whole
from semcl.errors import DataError

_MASK = (1 << 64) - 1
Recipe = Callable[[list[torch.Tensor], torch.Generator], torch.Tensor]  # a view recipe of semcl.data


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def image_seed(seed: int, epoch: int, step: int, position: int, view: int) -> int:
    """A 63-bit generator seed for one view of one image of one step, a hash of all five numbers."""
    x = 0
    for part in (seed, epoch, step, position, view):
        x = _splitmix64(x ^ (part & _MASK))
    return x >> 1


def views_of_image(image: torch.Tensor, recipes: Sequence[Recipe], seeds: Sequence[int]) -> list[torch.Tensor]:
    """One view per recipe of one whole uint8 [C, h, w] image, recipe k under a generator seeded by `seeds[k]`
    (each recipe takes a list of whole images)."""
    return [recipe([image], torch.Generator().manual_seed(s))[0] for recipe, s in zip(recipes, seeds, strict=True)]


Partners = Callable[[int, torch.Generator], list[int]]


class _StepImages(torch.utils.data.Dataset):
    """Item (row, epoch, step, position) -> that image's views, then each partner's views.

    Seeds (view numbers of image_seed): the image's views 0..V-1; the partner pick V; partner j's view t
    V + 1 + j * T + t (T recipes per partner)."""

    def __init__(self, paths: Sequence[Path], recipes: Sequence[Recipe], seed: int, partners: Partners | None,
                 partner_recipes: Sequence[Recipe]) -> None:
        self.paths, self.recipes, self.seed = list(paths), list(recipes), seed
        self.partners, self.partner_recipes = partners, list(partner_recipes)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, key: tuple[int, int, int, int]) -> list[torch.Tensor]:
        row, epoch, step, position = key
        n = len(self.recipes)

        def seeds(first: int, count: int) -> list[int]:
            return [image_seed(self.seed, epoch, step, position, first + v) for v in range(count)]

        out = views_of_image(decode_whole(self.paths[row]), self.recipes, seeds(0, n))
        if self.partners is not None:
            picked = self.partners(row, torch.Generator().manual_seed(seeds(n, 1)[0]))
            t = len(self.partner_recipes)
            for j, other in enumerate(picked):
                out += views_of_image(decode_whole(self.paths[other]), self.partner_recipes, seeds(n + 1 + j * t, t))
        return out


def _stack_views(items: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    return [torch.stack(views) for views in zip(*items, strict=True)]


def loader_workers(device: torch.device) -> int:
    """Worker processes for the views: SEMCL_LOADER_WORKERS if set; else, training on a GPU, the CPUs
    this process may use (its affinity, and SLURM_CPUS_PER_TASK in a job, where a task may see the whole
    node) minus one, at most 16; on the CPU 0, as the training step uses the cores."""
    env = os.environ.get("SEMCL_LOADER_WORKERS")
    if env is not None:
        try:
            n = int(env)
        except ValueError:
            n = -1
        if n < 0:
            raise DataError(f"SEMCL_LOADER_WORKERS: expected a whole number >= 0, got {env!r}")
        return n
    if device.type == "cpu":
        return 0
    cpus = len(os.sched_getaffinity(0))
    if os.environ.get("SLURM_CPUS_PER_TASK", "").isdigit():
        cpus = min(cpus, int(os.environ["SLURM_CPUS_PER_TASK"]))
    return max(0, min(16, cpus - 1))


def step_views(images: WholeImages, recipes: Sequence[Recipe], *, seed: int, epoch: int, order: torch.Tensor,
               batch_size: int, steps: range, part: slice, workers: int = 0, pin_memory: bool = False,
               partners: Partners | None = None, partner_recipes: Sequence[Recipe] = ()
               ) -> Iterator[tuple[list[torch.Tensor], list[tuple[torch.Tensor, ...]]]]:
    """This rank's views of each step in `steps`, for the epoch's visiting `order` in global batches of
    `batch_size` (`part`: this rank's slice): per step, (one float tensor [b, C, S, S] per recipe, and one
    tuple of such tensors per partner, one per partner recipe)."""
    positions = range(batch_size)[part]
    batches = [[(int(order[s * batch_size + p]), epoch, s, p) for p in positions] for s in steps]
    loader = torch.utils.data.DataLoader(
        _StepImages(images.paths, recipes, seed, partners, partner_recipes), batch_sampler=batches,
        num_workers=workers, collate_fn=_stack_views, pin_memory=pin_memory,
        # 2 batches ahead per worker: a 128-image batch of two float32 224-px views is ~150 MB of shared memory
        prefetch_factor=2 if workers else None)
    n, t = len(recipes), max(1, len(partner_recipes))
    try:
        for views in loader:
            yield views[:n], [tuple(views[i:i + t]) for i in range(n, len(views), t)]
    except DataError as err:  # a worker's error arrives wrapped with its traceback: keep the one line
        raise DataError(str(err).strip().splitlines()[-1].removeprefix("semcl.errors.DataError: ")) from None
