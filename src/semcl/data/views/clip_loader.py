"""Video training views in three parts: planned in the training process, decoded in loader workers,
finished on the training device.

Decoding a step's clips costs seconds of CPU (bench/bench_video.py), so it cannot sit in the training
step. The randomness cannot move to the workers, though: the clip positions and the augmentation
draws come from the epoch generator, in a fixed order, so that a resumed run replays them. So per
step ``s`` of an epoch (semcl.engine.train):

    plan  = method.clip_plan(train_set, idx_s, g, augs)   # training process: every draw from g
    clips = method.decode_plan(train_set, plan, part)     # a worker: this rank's slice, uint8
    views = method.finish_views(clips, plan_part, device)  # training process, on the device

The loader asks for a step's plan when it hands that step to a worker, i.e. up to
``workers × PREFETCH`` steps ahead of training, so the generator runs ahead too. The feed keeps the
generator's state at each drawn step's start: a checkpoint after step ``s`` saves that of step
``s + 1`` (`ClipFeed.generator_at`), and the resumed run draws the same plans again. With no worker
the plan of a step is drawn just before it trains, as when views were made in the step.

Each rank decodes only its slice of the global batch (``part``), from the plan every rank draws whole
from the same stream; the views are the slice of the single-process views (every op is per clip).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from semcl.data.views.clip_augment import ClipAugment, ClipParams
from semcl.errors import DataError

# steps each worker decodes ahead; one step of RINCE's paper setting (128 videos, 3 clips of 16 frames at
# 171×128) is ~0.4 GB of uint8 in shared (and, on a GPU, pinned) memory
PREFETCH = 2


@dataclass(frozen=True)
class ClipViews:
    """One step's plan: which frames to decode and how to augment them (what `Method.clip_plan` returns
    for the video methods)."""

    videos: torch.Tensor  # int64 [B]: training-set rows of the global batch
    frames: torch.Tensor  # int64 [B, K, T]: frame indices of each video's K clips
    views: tuple[tuple[int, ClipParams], ...] = ()  # per view: the clip (0..K-1) it is cut from, its draws
    gap_ok: torch.Tensor | None = None  # bool [B]: the sampler placed x_v far enough (pre-training plans)

    def part(self, rows: slice) -> ClipViews:
        """The plan of the videos ``rows`` (a rank's slice)."""
        return ClipViews(self.videos[rows], self.frames[rows], tuple((k, p.part(rows)) for k, p in self.views),
                         None if self.gap_ok is None else self.gap_ok[rows])

    def for_decode(self) -> ClipViews:
        """What a worker needs: the frames, not the augmentation draws."""
        return replace(self, views=(), gap_ok=None)


def decode_clips(train_set: Any, plan: ClipViews, part: slice) -> torch.Tensor:
    """uint8 ``[b, K, 3, T, H, W]``: the clips of the videos ``part`` of the plan (runs in a worker)."""
    return train_set.clips(plan.videos[part], plan.frames[part])


def finish_clip_views(aug: ClipAugment, decoded: torch.Tensor, plan: ClipViews, device: torch.device
                      ) -> list[torch.Tensor]:
    """The plan's views of its decoded clips: moved to ``device`` (non-blocking from pinned memory), each
    view's draws applied there, normalised. ``plan`` is the rank's part, matching ``decoded``."""
    clips = decoded.to(device, non_blocking=True)
    return [aug.normalise(aug.apply(clips[:, k], params)) for k, params in plan.views]


Key = tuple[int, ClipViews, slice]  # step, the plan without its draws, this rank's slice


class _DecodePlans(torch.utils.data.Dataset):
    """Item (step, plan, part) -> (step, the decoded clips). Holds the set and the decode function only:
    the method stays in the training process."""

    def __init__(self, train_set: Any, decode: Callable[[Any, ClipViews, slice], torch.Tensor]) -> None:
        self.train_set, self.decode = train_set, decode

    def __len__(self) -> int:
        return len(self.train_set)

    def __getitem__(self, key: Key) -> tuple[int, torch.Tensor]:
        step, plan, part = key
        return step, self.decode(self.train_set, plan, part)


class _StepKeys:
    """The loader's sampler, kept as long as its workers: each epoch points it at that epoch's keys."""

    def __init__(self) -> None:
        self._make: Callable[[], Iterator[Key]] = lambda: iter(())
        self._len = 0

    def set_epoch(self, make: Callable[[], Iterator[Key]], steps: int) -> None:
        self._make, self._len = make, steps

    def __iter__(self) -> Iterator[Key]:
        return self._make()

    def __len__(self) -> int:
        return self._len


def _as_is(item: Any) -> Any:
    return item


class ClipFeed:
    """One epoch's finished views, step by step (``next``), and the generator state at each step's start."""

    def __init__(self, data: torch.utils.data.DataLoader, finish: Callable[[torch.Tensor, Any, torch.device], list],
                 part: slice, device: torch.device, generator: torch.Generator, plans: dict[int, ClipViews],
                 states: dict[int, torch.Tensor], drawn: list[int]) -> None:
        self._finish, self._part, self._device, self._g = finish, part, device, generator
        # filled as the loader's sampler draws: step -> plan, step -> generator state at its start
        self.plans, self.states, self._drawn = plans, states, drawn
        self._it = iter(data)

    def __iter__(self) -> ClipFeed:
        return self

    def __next__(self) -> list[torch.Tensor]:
        try:
            step, decoded = next(self._it)
        except DataError as err:  # a worker's error arrives wrapped with its traceback: keep the one line
            raise DataError(str(err).strip().splitlines()[-1].removeprefix("semcl.errors.DataError: ")) from None
        for s in [s for s in self.states if s < step]:
            del self.states[s]
        return self._finish(decoded, self.plans.pop(step).part(self._part), self._device)

    def generator_at(self, step: int) -> torch.Generator:
        """A generator positioned where the epoch's was at the start of ``step`` (before its plan)."""
        if step in self.states:
            state = self.states[step]
        elif step == self._drawn[0] + 1:  # not drawn yet: the live generator is there
            state = self._g.get_state()
        else:
            raise ValueError(f"generator state of step {step} is gone (plans drawn up to step {self._drawn[0]})")
        g = torch.Generator()
        g.set_state(state)
        return g


class ClipLoader:
    """A video set's training loader for the run: worker processes start once and persist across epochs
    (each epoch only hands the sampler new keys). ``decode`` is the method's `decode_plan` (picklable: a
    module-level function). The loader draws nothing from the global RNG (its own seed generator)."""

    def __init__(self, train_set: Any, decode: Callable[[Any, ClipViews, slice], torch.Tensor], workers: int = 0,
                 pin_memory: bool = False) -> None:
        self.train_set, self.decode, self.workers, self.pin_memory = train_set, decode, workers, pin_memory
        self._keys = _StepKeys()
        self._data: torch.utils.data.DataLoader | None = None

    def _loader(self) -> torch.utils.data.DataLoader:
        if self._data is None:
            self._data = torch.utils.data.DataLoader(
                _DecodePlans(self.train_set, self.decode), sampler=self._keys, batch_size=None, collate_fn=_as_is,
                num_workers=self.workers, pin_memory=self.pin_memory, persistent_workers=self.workers > 0,
                prefetch_factor=PREFETCH if self.workers else None, generator=torch.Generator().manual_seed(0))
        return self._data

    def epoch(self, method: Any, augs: Sequence[Callable], generator: torch.Generator, order: torch.Tensor,
              batch_size: int, steps: range, part: slice, device: torch.device) -> ClipFeed | None:
        """The feed of steps ``steps`` of the epoch's visiting ``order``, or None where the method gives no
        plan (its first `clip_plan` is None: it makes its views in the step, `make_views`; such a
        `clip_plan` draws nothing). ``generator`` is the epoch's, positioned at ``steps``' first step."""
        if not steps:
            return None

        def plan_of(step: int) -> ClipViews | None:
            return method.clip_plan(self.train_set, order[step * batch_size:(step + 1) * batch_size], generator, augs)

        start = generator.get_state()
        first = plan_of(steps[0])
        if first is None:
            return None
        plans: dict[int, ClipViews] = {steps[0]: first}
        states: dict[int, torch.Tensor] = {steps[0]: start}
        drawn = [steps[0]]  # the last step whose plan is drawn

        def keys() -> Iterator[Key]:
            for s in steps:
                if s != steps[0]:  # drawn when the loader hands the step to a worker
                    states[s] = generator.get_state()
                    plan = plan_of(s)
                    if plan is None:
                        raise ValueError(f"{type(method).__name__}.clip_plan gave no plan at step {s} "
                                         f"after planning step {steps[0]}")
                    plans[s], drawn[0] = plan, s
                yield s, plans[s].for_decode(), part

        # the sampler first: iterating the loader starts drawing (ahead, with workers)
        self._keys.set_epoch(keys, len(steps))
        return ClipFeed(self._loader(), method.finish_views, part, device, generator, plans, states, drawn)

    def close(self) -> None:
        """Stop the workers (they go with the loader and its iterator)."""
        self._data = None
