"""Video methods: what the engine and the video evaluations ask of a method that trains on clips.

Image methods never meet this class: the engine builds a clip loader only for a ClipMethod whose class plans its
views (`plans_clips`), and the video evaluations read `clip_sampler` and `classify_clips` only here.

    plan  = method.clip_plan(train_set, idx, generator, augs)  # training process: every draw from the epoch's stream
    clips = method.decode_plan(train_set, plan, part)          # a loader worker: this rank's slice, uint8
    views = method.finish_views(clips, plan_part, device)      # training process, on the device
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from semcl.methods.base import Method


class ClipMethod(Method):
    """A method whose samples are video clips (semcl.data.video)."""

    # the semcl.data.video.ClipSampler whose clip positions the video evaluations read (None: the default sampler)
    clip_sampler: Any = None
    # True where `classify_clips` gives a fine-tuned classifier's clip logits (video accuracy; video retrieval
    # then skips the method, whose features are not the pre-trained ones the table retrieves with)
    has_clip_classifier: bool = False

    def clip_plan(self, train_set: Any, idx: torch.Tensor, generator: torch.Generator,
                  augs: list[Callable[[torch.Tensor, torch.Generator], torch.Tensor]]) -> Any | None:
        """The views of step `idx` as a plan: every draw `make_views` would take from `generator`, in its
        order, without decoding (a clip_loader.ClipViews: frame indices and augmentation parameters). The
        engine then has `decode_plan` run in loader workers and `finish_views` on the device, and may draw
        plans a few steps ahead (a `Batch.generator` is then a copy positioned after the step's plan).
        None (default, and it must then draw nothing): the method makes its views in `make_views`."""
        return None

    @staticmethod
    def decode_plan(train_set: Any, plan: Any, part: slice) -> torch.Tensor:
        """The uint8 pixels the views of `plan`'s samples `part` (this rank's slice) are cut from. Runs in a
        loader worker process: a module-level function (picklable), it sees the set and the plan, never
        the method."""
        raise NotImplementedError("a method whose clip_plan gives plans defines decode_plan")

    def finish_views(self, decoded: Any, plan: Any, device: torch.device) -> list[torch.Tensor]:
        """The `num_views` views on `device` from `decode_plan`'s output and `plan` (cut to this rank's part),
        in the training process, just before the step trains."""
        raise NotImplementedError(f"{type(self).__name__} gives clip plans without finish_views")

    def classify_clips(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits of clips x [B, C, T, H, W]; only where `has_clip_classifier`."""
        raise NotImplementedError(f"{type(self).__name__} has no clip classifier")


def plans_clips(method: Method) -> bool:
    """True where the method plans its clips (its class overrides `clip_plan`): the engine then builds the clip
    loader for the run (semcl.engine.view_source)."""
    return isinstance(method, ClipMethod) and type(method).clip_plan is not ClipMethod.clip_plan


def clip_sampler_of(method: Method) -> Any:
    """The clip sampler a video evaluation reads the method's clips at (None: the evaluation's default)."""
    return method.clip_sampler if isinstance(method, ClipMethod) else None


def has_clip_classifier(method: Method) -> bool:
    return isinstance(method, ClipMethod) and method.has_clip_classifier
