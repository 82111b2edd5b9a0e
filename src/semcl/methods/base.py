"""The engine–method contract: every hook the engine calls, each with its default.

The engine (semcl.engine.train / job / evaluate) talks to a method only through this class; a method
overrides the hooks it needs and nothing else. Order of calls in one run:

    method = cls(cfg, info)                  # build modules (seeded: construction order is the init)
    method.load_dependencies(deps)           # rows with init_from / teacher: the runs it builds on
    opt = method.configure_optimizer(cfg.optim)
    method.on_train_start(ctx)               # the training set, augmentations, device, run folder
    per epoch:  method.on_epoch_start(epoch)
                order = method.epoch_order(labels, num_classes, generator, batch_size)
                per step: views = method.make_views(train_set, idx, generator, augs)
                          (video: semcl.methods.clips.ClipMethod plans clips decoded in loader workers)
                          inputs = method.prepare(batch)     # host: samplers, draws, lookups
                          out = method.loss(inputs)          # device: forward and loss
                          backward; method.after_backward(); opt.step()
    evaluation: method.features(x), method.classify(x) where has_classifier, method.stage_features(x)

The step is two calls because they run in two worlds. `prepare` is host work whose values steer Python (a
sampler's draws from the training labels, a CutMix box, a neighbour pick, an image read from the training set): on
a GPU its tensors are CPU tensors with values. `loss` is device work on what `prepare` gave: under the preflight's
fake tensors (semcl.preflight.fake) only `loss` is faked, with shapes and no values, and `prepare` runs for real.
`prepare` must not compute on the views (it may pass them on). What the preflight needs beyond that is data on the
method's spec (semcl.methods.spec.StandIn), not hooks here.

`state_dict()` is the method's whole training state (key encoders, queues with labels and pointer
are modules or buffers), so checkpoints and resumes need no further hook.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from semcl.config import OptimConfig, RunConfig


@dataclass(frozen=True)
class DataInfo:
    """What a method needs to know about its training data."""

    num_classes: int
    in_channels: int
    fine_to_coarse: torch.Tensor | None  # int64 [C]: superclass of each class, where known
    class_counts: torch.Tensor | None = None  # int64 [C]: training images per class (class priors)
    class_names: tuple[str, ...] | None = None

    def superclasses(self, what: str) -> torch.Tensor:
        """int64 [C] superclass of each class (-1 = none), for methods that need the hierarchy;
        ValueError naming `what` when the dataset has none."""
        if self.fine_to_coarse is None:
            raise ValueError(f"{what} needs a dataset with superclass labels (DataInfo.fine_to_coarse is None)")
        f2c = self.fine_to_coarse.to(torch.int64)
        if f2c.shape != (self.num_classes,):
            raise ValueError(f"fine_to_coarse has shape {tuple(f2c.shape)}, expected ({self.num_classes},)")
        if not bool((f2c >= 0).any()):
            raise ValueError(f"{what}: no class has a known superclass")
        return f2c


@dataclass
class Batch:
    """One training step's input."""

    views: list[torch.Tensor]  # method.num_views augmented views [B, C, H, W], on the method's device
    labels: torch.Tensor  # int64 [B], on the method's device
    indices: torch.Tensor  # int64 [B] positions of the images in the training set (CPU)
    epoch: int = 0
    step: int = 0
    # the epoch's CPU generator, positioned after this batch's augmentation: randomness a method draws
    # from it (CutMix boxes, neighbour picks) replays exactly on resume
    generator: torch.Generator = field(default_factory=lambda: torch.Generator().manual_seed(0))
    # file-backed sets: the views of each image's partners (`Method.loader_partners`), made by the loader;
    # one tuple of views per partner, [B, C, H, W] each; None where the method draws them itself
    partner_views: list[tuple[torch.Tensor, ...]] | None = None
    # several ranks: this rank's own generator for the step (semcl.runtime.distributed.rank_generator); None
    # with one process. The epoch's generator is the same stream on every rank, so a per-batch draw that the
    # official code makes in each process (a CutMix box, a mixup lambda) comes from here (`mixing_generator`)
    rank_generator: torch.Generator | None = None

    @property
    def mixing_generator(self) -> torch.Generator:
        """Where a draw made once per rank and step comes from: the rank's own generator with several ranks,
        the epoch's generator with one process (as before ranks drew their own)."""
        return self.generator if self.rank_generator is None else self.rank_generator

    @classmethod
    def of(cls, views: list[torch.Tensor], labels: torch.Tensor, **kw: Any) -> Batch:
        """A batch from views and labels alone (tests, benchmarks): indices 0..B-1."""
        return cls(list(views), labels, kw.pop("indices", torch.arange(labels.shape[0])), **kw)


@dataclass(frozen=True)
class TrainContext:
    """What the engine hands a method before the first step."""

    train_set: Any  # semcl.data ImageSet / FileImageSet: images, labels, num_classes, fine_to_coarse
    augment: list[Callable[[torch.Tensor, torch.Generator], torch.Tensor]]  # one per view recipe
    device: torch.device
    run_dir: Path | None
    seed: int
    data_root: Path | None = None  # where the data (and files such as pre-trained checkpoints) live
    # the preflight's memory check (semcl.preflight.check): what the method sets up before its first step is read
    # for its shapes, not its values (a pass over the training images, a teacher's or HSA's mining encoder, may run
    # on SHAPES_ONLY_IMAGES of them, its outputs repeated: `repeat_rows`)
    shapes_only: bool = False


# an output's shape per image does not depend on the batch (eval mode); whole passes were most of a memory check
# (a CIFAR-style ResNet-50 teacher on 256 Tiny-ImageNet stand-ins ~55 s of 58; HSA's mining at 224 px ~3 s a row)
SHAPES_ONLY_IMAGES = 2


def repeat_rows(t: torch.Tensor, n: int) -> torch.Tensor:
    """`t`'s rows repeated in turn to `n` rows (a shapes-only pass's outputs standing for every image's)."""
    return t.repeat(-(-n // len(t)), *[1] * (t.dim() - 1))[:n]


@dataclass(frozen=True)
class Dependency:
    """A finished run this run builds on (its row's `init_from` / `teacher` / `ensemble`)."""

    kind: str  # semcl.methods.spec.DEPENDENCY_KINDS
    run_id: str
    run_dir: Path
    load_state: Callable[[], dict[str, torch.Tensor]]  # that run's final `method` state, safely loaded
    load_logits: Callable[[], dict[str, torch.Tensor]]  # its saved test logits, labels, train counts
    load_metrics: Callable[[], dict[str, float]]  # its metrics.json "metrics"



def training_images(train_set: Any) -> Any:
    """What training views are cut from: a file-backed set's whole images (`train_images`, a list per
    batch), else the set's `images` tensor."""
    return getattr(train_set, "train_images", train_set.images)

class Method(nn.Module):
    """Base class of every method. Subclasses build their modules in __init__ and define `loss` (and `prepare`
    where a step has host work).

    `backbone` is what the evaluations read through `features` (features before any head).
    """

    num_views: int = 1
    backbone: nn.Module
    has_classifier: bool = False  # True where `classify` gives class logits (accuracy columns)
    has_segmenter: bool = False  # True where `segment` gives per-pixel logits (segmentation columns)
    # a free parameter chosen on the val split after training (e.g. Decouple tau-norm's tau)
    validation_grid: list[float] | None = None

    def __init__(self, cfg: RunConfig, info: DataInfo):
        super().__init__()
        self.cfg = cfg
        self.info = info

    # ---- runs this one builds on -------------------------------------------------------------
    def load_dependencies(self, deps: list[Dependency]) -> None:
        """Receive the runs named by the row (a base run's weights, a teacher). Methods whose spec
        declares no dependency never get any; the default refuses, naming the method."""
        if deps:
            raise ValueError(f"method {self.cfg.method.name!r} does not build on other runs "
                             f"(got {', '.join(d.kind for d in deps)})")

    # ---- optimisation ------------------------------------------------------------------------
    def param_groups(self) -> list[dict[str, Any]]:
        """Parameter groups for the optimiser; a group may carry `lr_scale` (x the scheduled lr)."""
        params = [p for p in self.parameters() if p.requires_grad]
        return [{"params": params}] if params else []

    def configure_optimizer(self, optim: OptimConfig) -> torch.optim.Optimizer | None:
        """SGD with momentum and weight decay (every registered recipe); None when nothing trains."""
        groups = self.param_groups()
        if not any(g["params"] for g in groups):
            return None
        return torch.optim.SGD(groups, lr=optim.lr, momentum=optim.momentum, weight_decay=optim.weight_decay)

    # ---- training ----------------------------------------------------------------------------
    def on_train_start(self, ctx: TrainContext) -> None:
        """Called once before the first step of this process (also after a resume)."""

    def on_epoch_start(self, epoch: int) -> None:
        """Called before each epoch's batch order is drawn (epoch-dependent losses, statistics)."""

    def epoch_size(self, n: int) -> int:
        """Images an epoch visits (sets the steps per epoch, n // batch): the whole training set of n,
        unless the method trains on a part of it (a label subset), set in `on_train_start`."""
        return n

    def epoch_order(self, labels: torch.Tensor, num_classes: int, generator: torch.Generator,
                    batch_size: int) -> torch.Tensor:
        """int64 [n] training-set positions in visiting order, drawn from `generator` alone:
        a permutation (each image once per epoch) unless the method needs other batches."""
        return torch.randperm(len(labels), generator=generator)

    def make_views(self, train_set: Any, idx: torch.Tensor, generator: torch.Generator,
                   augs: list[Callable[[torch.Tensor, torch.Generator], torch.Tensor]]) -> list[torch.Tensor]:
        """The `num_views` views of the training samples `idx` (CPU tensors of the whole global batch;
        the engine keeps this rank's slice and moves it to the device). Randomness must come from
        `generator` (the epoch's), so a resumed run replays the same views. Default: view k is
        `augs[k % len(augs)]` applied to `train_set.images[idx]` (image sets; file-backed sets give
        their `train_images`, each image whole at its own size, so the crop sees the full picture).
        File-backed sets under this default bypass it: the engine makes their views per image in loader
        workers (semcl.data.views.file_views); overriding it keeps a method on this in-process path
        (`makes_own_views`)."""
        images = training_images(train_set)[idx]
        return [recipe(images, generator) for recipe in self.view_recipes(augs)]

    def view_recipes(self, augs: list[Callable[[Any, torch.Generator], torch.Tensor]]) -> list[Callable]:
        """The recipe of each view `make_views` (and the file loader) makes, in order: view k is
        `augs[k % len(augs)]` for the `num_views` views."""
        return [augs[k % len(augs)] for k in range(self.num_views)]

    def loader_partners(self) -> tuple[Callable[[int, torch.Generator], list[int]], list[Callable]] | None:
        """For the file loader (semcl.data.views.file_views): (pick, recipes) where `pick(row, generator)` names the
        training images whose views go with image `row` in a step (e.g. kNN positives) and `recipes` makes
        each partner's views; they arrive in `Batch.partner_views`. Asked at each epoch start, after
        `on_epoch_start`; `pick` must be picklable state (worker processes run it). None: no partners."""
        return None

    def prepare(self, batch: Batch) -> Any:
        """The step's host work (module docstring): what `loss` reads, drawn and looked up on the host, in the
        order the draws are taken from `batch.generator`. Default: the batch itself (no host work)."""
        return batch

    def loss(self, inputs: Any) -> dict[str, torch.Tensor]:
        """Losses of one step from `prepare`'s output; the engine back-propagates `loss`. Side effects that the
        official code performs before the optimiser step (momentum update) go here."""
        raise NotImplementedError(f"{type(self).__name__} defines no loss")

    def after_backward(self) -> None:
        """Called after backward, before the optimiser step (e.g. to enqueue keys)."""

    # ---- evaluation --------------------------------------------------------------------------
    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The representation the evaluations read (linear probe, retrieval, OOD, k-NN)."""
        return self.backbone(x)

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits of images x (raw, no prior); only where `has_classifier`."""
        raise NotImplementedError(f"{type(self).__name__} has no classifier")

    def segment(self, x: torch.Tensor) -> torch.Tensor:
        """Per-pixel class logits [B, C, H, W] of images x [B, C, H, W]; only where `has_segmenter`."""
        raise NotImplementedError(f"{type(self).__name__} has no segmenter")

    def stage_features(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Pooled features after each backbone stage, by stage name (per-stage probes); {} if none."""
        return {}

    def select_on_validation(self, feats: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
        """Choose `validation_grid`'s value on val features; returns what was chosen."""
        raise NotImplementedError(f"{type(self).__name__} has no validation grid")


def run_step(method: Method, batch: Batch) -> dict[str, torch.Tensor]:
    """One step's losses in one call, `loss(prepare(batch))` (tests, benchmarks; the engine calls the two apart:
    semcl.engine.train.Stepper)."""
    return method.loss(method.prepare(batch))


def makes_own_views(method: Method) -> bool:
    """True where the method's class overrides `make_views`: it keeps the in-process view path, and file-backed
    sets do not get per-image views in loader workers (semcl.engine.view_source)."""
    return type(method).make_views is not Method.make_views
