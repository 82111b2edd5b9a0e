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
from semcl.data.views.handout import handout_of
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
    (each recipe takes a list of whole images). A recipe that can (semcl.data.views.handout) gives its uint8 view,
    to be normalised on the training device; a split colour view (semcl.data.views.colour_view) its (uint8 crop,
    drawn parameters), to be finished there; the others their finished float view."""
    out: list = []
    for recipe, s in zip(recipes, seeds, strict=True):
        make = getattr(recipe, "handout_views", None) or getattr(recipe, "uint8_views", recipe)
        got = make([image], torch.Generator().manual_seed(s))
        out.append(tuple(part[0] for part in got) if isinstance(got, tuple) else got[0])
    return out


Partners = Callable[[int, torch.Generator], list[int]]
Finish = Callable[..., torch.Tensor]  # a handed-out view -> its float view on the device (semcl.data.views.handout)
Key = tuple[int, int, int, int, tuple[int, ...]]  # row, epoch, step, position, the partners' rows


def _seeds(seed: int, epoch: int, step: int, position: int, first: int, count: int) -> list[int]:
    return [image_seed(seed, epoch, step, position, first + v) for v in range(count)]


class _StepImages(torch.utils.data.Dataset):
    """Item (row, epoch, step, position, partner rows) -> that image's views, then each partner's views.

    Seeds (view numbers of image_seed): the image's views 0..V-1; the partner pick V (drawn in the training
    process, see _EpochBatches); partner j's view t V + 1 + j * T + t (T recipes per partner)."""

    def __init__(self, paths: Sequence[Path], recipes: Sequence[Recipe], seed: int,
                 partner_recipes: Sequence[Recipe]) -> None:
        self.paths, self.recipes, self.seed = list(paths), list(recipes), seed
        self.partner_recipes = list(partner_recipes)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, key: Key) -> list[torch.Tensor]:
        row, epoch, step, position, picked = key
        n, t = len(self.recipes), len(self.partner_recipes)
        out = views_of_image(decode_whole(self.paths[row]), self.recipes, _seeds(self.seed, epoch, step, position, 0, n))
        for j, other in enumerate(picked):
            out += views_of_image(decode_whole(self.paths[other]), self.partner_recipes,
                                  _seeds(self.seed, epoch, step, position, n + 1 + j * t, t))
        return out


class _EpochBatches:
    """The loader's batch sampler: the current epoch's keys, one step at a time as the loader asks.

    It lives as long as the loader (persistent workers read only keys, never this object), and each
    epoch points it at the new order. Partners are picked here, in the training process, from the
    epoch's pick (HSA mines its neighbour table at each epoch start: workers started epochs ago would
    hold an old table)."""

    def __init__(self) -> None:
        self._epoch: Callable[[], Iterator[list[Key]]] = lambda: iter(())
        self._len = 0

    def set_epoch(self, make: Callable[[], Iterator[list[Key]]], steps: int) -> None:
        self._epoch, self._len = make, steps

    def __iter__(self) -> Iterator[list[Key]]:
        return self._epoch()

    def __len__(self) -> int:
        return self._len


def _stack_views(items: list[list]) -> list:
    # a handed-out view is a tensor, or a tuple of tensors (crop, parameters) stacked part by part
    return [torch.stack(views) if isinstance(views[0], torch.Tensor)
            else tuple(torch.stack(part) for part in zip(*views, strict=True)) for views in zip(*items, strict=True)]


def _to_device(view, device: torch.device):
    # a (crop, parameters) pair: only the pixels move; the finish reads the parameters on the CPU
    if isinstance(view, tuple):
        return (view[0].to(device, non_blocking=True), *view[1:])
    return view.to(device, non_blocking=True)


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


def _same(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class ViewLoader:
    """A file-backed set's training loader, kept across epochs: its worker processes start once
    (`persistent_workers`) and are restarted only when the seed or the recipes change (e.g. HSA's partners
    joining after its warm-up). Each epoch only points the batch sampler at the new keys, so the views are
    those of a fresh loader (tests/data/test_loader_persistent.py). Pinned batches when `pin_memory`."""

    def __init__(self, images: WholeImages, workers: int = 0, pin_memory: bool = False) -> None:
        self.images, self.workers, self.pin_memory = images, workers, pin_memory
        self._batches = _EpochBatches()
        self._loader: torch.utils.data.DataLoader | None = None
        self._built: tuple[int, list[Recipe], list[Recipe]] | None = None
        self.finishers: list[Finish | None] = []  # per handed-out view: its device-side finish
        self._partner_finishers: list[Finish | None] = []
        self.starts = 0  # how many times workers were (re)built: once per run unless the recipes change

    def loader(self, seed: int, recipes: Sequence[Recipe], partner_recipes: Sequence[Recipe]
               ) -> tuple[torch.utils.data.DataLoader, _EpochBatches]:
        b = self._built
        if b is None or b[0] != seed or not _same(b[1], recipes) or not _same(b[2], partner_recipes):
            self.close()
            self._built = (seed, list(recipes), list(partner_recipes))
            finish = {id(r): handout_of(r) for r in [*recipes, *partner_recipes]}
            self.finishers = [finish[id(r)] for r in recipes]
            self._partner_finishers = [finish[id(r)] for r in partner_recipes]
            self._loader = torch.utils.data.DataLoader(
                _StepImages(self.images.paths, recipes, seed, partner_recipes), batch_sampler=self._batches,
                num_workers=self.workers, collate_fn=_stack_views, pin_memory=self.pin_memory,
                persistent_workers=self.workers > 0,
                # 2 batches ahead per worker: a 128-image batch of two uint8 224-px views is ~40 MB of shared
                # memory (float32 recipes: ~150 MB)
                prefetch_factor=2 if self.workers else None)
            self.starts += 1
        return self._loader, self._batches

    def finish_of(self, views: int) -> list[Finish | None]:
        """The finish of each of `views` handed-out tensors: the image's, then each partner's in turn."""
        t = max(1, len(self._partner_finishers))
        extra = views - len(self.finishers)
        return self.finishers + [self._partner_finishers[i % t] for i in range(extra)]

    def close(self) -> None:
        """Stop the workers (the loader's iterator, which holds them, goes with the loader)."""
        self._loader, self._built = None, None


def step_views(images: WholeImages, recipes: Sequence[Recipe], *, seed: int, epoch: int, order: torch.Tensor,
               batch_size: int, steps: range, part: slice, workers: int = 0, pin_memory: bool = False,
               partners: Partners | None = None, partner_recipes: Sequence[Recipe] = (),
               device: torch.device | None = None, loader: ViewLoader | None = None
               ) -> Iterator[tuple[list[torch.Tensor], list[tuple[torch.Tensor, ...]]]]:
    """This rank's views of each step in `steps`, for the epoch's visiting `order` in global batches of
    `batch_size` (`part`: this rank's slice): per step, (one float tensor [b, C, S, S] per recipe, and one
    tuple of such tensors per partner, one per partner recipe), on `device` (default the CPU).

    Workers hand out uint8 views where the recipe can (semcl.data.views.handout); they are copied to `device`
    (non-blocking from pinned memory) and normalised there. `loader`: the run's ViewLoader, whose workers
    persist across epochs (its own `workers` and `pin_memory` apply); None builds one for this call."""
    device = device or torch.device("cpu")
    loader = loader or ViewLoader(images, workers, pin_memory)
    data, batches = loader.loader(seed, recipes, partner_recipes)
    positions = list(range(batch_size)[part])
    rows, n = order.tolist(), len(recipes)

    def keys() -> Iterator[list[Key]]:
        for s in steps:
            batch = []
            for p in positions:
                row = rows[s * batch_size + p]
                picked = () if partners is None else tuple(
                    int(r) for r in partners(row, torch.Generator().manual_seed(image_seed(seed, epoch, s, p, n))))
                batch.append((row, epoch, s, p, picked))
            yield batch

    batches.set_epoch(keys, len(steps))
    t = max(1, len(partner_recipes))
    try:
        for views in data:
            views = [_to_device(v, device) for v in views]
            views = [f(v) if f is not None else v for f, v in zip(loader.finish_of(len(views)), views, strict=True)]
            yield views[:n], [tuple(views[i:i + t]) for i in range(n, len(views), t)]
    except DataError as err:  # a worker's error arrives wrapped with its traceback: keep the one line
        raise DataError(str(err).strip().splitlines()[-1].removeprefix("semcl.errors.DataError: ")) from None
