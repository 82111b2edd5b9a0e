"""The training loop: resumable at every epoch boundary, deterministic on CPU for a seed.

Data order and augmentation of epoch e come from a generator seeded by (seed, e), so a resumed run replays
exactly the batches the uninterrupted run would have seen; where the views come from (memory, loader workers
over files, clip plans) is chosen once per run (semcl.engine.view_source). Checkpoints are written at every
epoch end, every $SEMCL_CHECKPOINT_EVERY_MIN minutes (set from the cluster profile on SLURM) and, on a requeue
signal, at the next step boundary (with several ranks: within a few batches), with the generator's position inside
the epoch. With several ranks the step goes through DistributedDataParallel (semcl.runtime.distributed), all ranks
agree on when to checkpoint, and the checkpoint holds every rank's RNG states. Long work at an epoch's start (HSA's
kNN mining) checks for a requeue signal too and gives way to it (interrupt.Abandoned): the epoch's start is
checkpointed, and the resumed run redoes that work.

No host read of a value per step (semcl.runtime.host_sync): the epoch's loss sum stays on the device until the
progress line, a checkpoint or the history line reads it, and with several ranks the checkpoint decision is a
vote every few batches read one vote late (semcl.runtime.distributed.StopVote).

Gradient accumulation (optim.accum_steps = k > 1, MAE's --accum_iter): each batch's loss / k is back-propagated,
the optimiser steps after every k-th batch, and the lr is set at the first batch of each cycle (as MAE). An epoch
runs whole cycles: steps = floor(n / bs / k) * k batches (MAE instead carries a partial last cycle's gradients
into the next epoch). Checkpoints on a requeue signal are taken at cycle boundaries only. k = 1 is the plain loop.

The dry run (semcl check, the doctor, the GPU check; Loop.budget): a budget of n steps ends training after the
first epoch's first n batches, rounded up to whole accumulation cycles, saved as that epoch's end (the lr schedule
still sees the configured epochs and steps); the step hooks (Loop.hooks) wrap each forward (what the preflight
measures). Callers drive this loop through the run harness (semcl.engine.harness).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch

from semcl.config import RunConfig
from semcl.data import ImageSet, stats
from semcl.data.views.build import build_augment
from semcl.engine.checkpointer import Checkpointer, Position
from semcl.engine.schedule import lr_at
from semcl.engine.view_source import view_source
from semcl.methods.base import Batch, Method, TrainContext
from semcl.runtime import distributed, interrupt
from semcl.runtime.checkpoint import set_rng_state
from semcl.runtime.history import EpochLog
from semcl.runtime.runlock import heartbeat
from semcl.store.run_folder import is_checkpoint_folder

log = logging.getLogger("semcl.train")


AMP_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
CHECKPOINT_EVERY_ENV = "SEMCL_CHECKPOINT_EVERY_MIN"


def checkpoint_every_s() -> float | None:
    """Seconds between step-boundary checkpoints inside an epoch (None: at epoch ends only)."""
    value = os.environ.get(CHECKPOINT_EVERY_ENV)
    return float(value) * 60 if value else None


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch)


def steps_per_epoch(cfg: RunConfig, n: int) -> tuple[int, int, int]:
    """(batch size, accumulation, steps) of an epoch over `n` samples. The last partial batch is dropped (equal
    batch shapes for the memory banks and DDP); a deviation where an official loader keeps it (e.g. RINCE's
    DataLoader has no drop_last: n mod bs images per epoch, a different subset each epoch, are not trained on
    here); whole accumulation cycles only."""
    bs, accum = min(cfg.optim.batch_size, n), cfg.optim.accum_steps or 1
    steps = n // bs // accum * accum
    if steps == 0:
        raise ValueError(f"optim.accum_steps = {accum} exceeds the {n // bs} batches of one epoch")
    return bs, accum, steps


class Stepper:
    """One optimisation step: the cycle's lr, the forward under autocast (through DDP with several ranks), the
    scaled backward, the optimiser step at the cycle's end."""

    def __init__(self, method: Method, opt, scaler, cfg: RunConfig, device: torch.device,
                 step_context: Callable[[Batch], AbstractContextManager] | None) -> None:
        self.method, self.opt, self.scaler, self.cfg, self.device = method, opt, scaler, cfg, device
        self.lr_scales = [group.get("lr_scale", 1.0) for group in opt.param_groups]
        self.accum, self.amp, self.step_context = cfg.optim.accum_steps or 1, cfg.optim.amp, step_context
        self.ddp = distributed.wrap(method)  # None for one process

    def set_lr(self, lr: float) -> None:
        for group, scale in zip(self.opt.param_groups, self.lr_scales, strict=True):
            group["lr"] = lr * scale

    def __call__(self, batch: Batch, first_of_cycle: bool, last_of_cycle: bool) -> torch.Tensor:
        # several ranks: DDP all-reduces the gradients in buckets during the cycle's last backward
        with distributed.sync_context(self.ddp, last_of_cycle):
            # the hooks inside the autocast (the preflight's meter swaps a CPU fp16 autocast for bf16); the host work
            # (semcl.methods.base) outside it, as on a GPU, where a CUDA autocast never reaches CPU tensors
            with torch.autocast(self.device.type, dtype=AMP_DTYPES.get(self.amp), enabled=self.amp is not None), \
                    self.step_context(batch) if self.step_context else nullcontext():
                with torch.autocast(self.device.type, enabled=False):
                    inputs = self.method.prepare(batch)
                loss = self.ddp(inputs) if self.ddp is not None else self.method.loss(inputs)["loss"]
            if first_of_cycle:
                self.opt.zero_grad(set_to_none=True)
            self.scaler.scale(loss / self.accum if self.accum > 1 else loss).backward()
        self.method.after_backward()
        if last_of_cycle:
            self.scaler.step(self.opt)
            self.scaler.update()
        return loss


def _start_epoch(method: Method, epoch: int) -> bool:
    """The method's epoch start (epoch-dependent losses and statistics, HSA's kNN mining); False when it
    gave way to a pending stop signal (interrupt.Abandoned)."""
    try:
        method.on_epoch_start(epoch)
    except interrupt.Abandoned as stopped:
        log.info("%s", stopped)
        return False
    return True


def _require_final(at, ckpt: Path, epochs: int) -> None:
    """An evaluation of a finished training: a checkpoint short of the last epoch (or none) is a ResultsError."""
    if at.epoch < epochs or at.step:
        from semcl.errors import ResultsError

        state = "missing" if not ckpt.exists() else f"at epoch {at.epoch} step {at.step} of {epochs} epochs"
        raise ResultsError(f"{ckpt}: the final checkpoint is {state}; an evaluation does not train: rerun the "
                           "training stage (semcl run <table> --retry-failed)")


def _augmentations(cfg: RunConfig, train_set: ImageSet) -> list:
    mean, std = stats(cfg.data.name)
    aug = build_augment(cfg.data.augment, size=train_set.images.shape[-1], mean=mean, std=std)
    return aug.views if hasattr(aug, "views") else [aug]  # "a+b" recipes: one per view


def _start_or_checkpoint(method: Method, epoch: int, saver: Checkpointer, resumed_inside: bool) -> None:
    """The epoch's start; a stop signal during it (HSA's mining gives way) saves the epoch's start and acts on
    the signal (a resume inside the epoch keeps its later checkpoint)."""
    while not _start_epoch(method, epoch):
        if not resumed_inside:
            saver.save(epoch, 0, None, 0.0)
        log.info("requeue signal: checkpoint at the start of epoch %d", epoch)
        interrupt.fire_if_pending()  # normally requeues and exits; else the start is run again


def _reseat_rng(rng: dict) -> None:
    """Put back the checkpoint's global RNG states (drop-path and dropout masks, shuffle-BN permutations) just
    before the first step of a resume inside an epoch. Everything the resumed run redid since the restore
    drew from the global stream before the uninterrupted run's checkpoint: the epoch's start and order, and
    torch's DataLoader, which draws its base seed from the global generator when the epoch's first batch is
    asked for (the views themselves come from seeded generators, so that seed changes nothing else)."""
    set_rng_state(rng)


@dataclass(frozen=True)
class Loop:
    """How a caller drives the loop (the run harness's Env says it: semcl.engine.harness): the device, the data root,
    the step budget (None: the configured schedule; n: the dry run of the module docstring), the step hooks (each
    `hook.step(batch)` a context manager around the forward: the preflight's meters and its first-batch probe, the
    GPU check's clock), `log_history` (False where the checkpoint is another run's final one: a shared training,
    whose history and trackers stay its own), `restore_only` (an evaluation of a finished training: a checkpoint
    short of the last epoch, or none, is a ResultsError, never a reason to train) and `shapes_only` (the preflight's
    memory check: TrainContext.shapes_only)."""

    device: torch.device | None = None
    data_root: Path | None = None
    budget: int | None = None
    hooks: tuple = ()
    log_history: bool = True
    restore_only: bool = False
    shapes_only: bool = False

    def step_context(self) -> Callable[[Batch], AbstractContextManager] | None:
        """The hooks' step contexts as one (None without hooks: the forward runs bare)."""
        if not self.hooks:
            return None
        if len(self.hooks) == 1:
            return self.hooks[0].step

        @contextmanager
        def around(batch: Batch):
            with ExitStack() as stack:
                for hook in self.hooks:
                    stack.enter_context(hook.step(batch))
                yield

        return around


@dataclass
class _Epochs:
    """What every epoch of one train() call shares."""

    method: Method
    train_set: ImageSet
    cfg: RunConfig
    seed: int
    saver: Checkpointer
    source: object
    step_once: Stepper
    live: EpochLog
    vote: object
    device: torch.device
    at: Position
    bs: int
    accum: int
    steps: int
    stop: int
    last_save: float = 0.0


def _run_epoch(e: _Epochs, epoch: int, every_s: float | None) -> None:
    """One epoch: its start, its steps (with the timed and requeue checkpoints inside it), its history line and the
    checkpoint at its end."""
    method, cfg, saver, at, bs, accum, steps, stop = e.method, e.cfg, e.saver, e.at, e.bs, e.accum, e.steps, e.stop
    epochs = cfg.schedule.epochs
    method.train()
    _start_or_checkpoint(method, epoch, saver, resumed_inside=epoch == at.epoch and at.step > 0)
    g = epoch_generator(e.seed, epoch)
    losses = [h["loss"] for h in saver.history]  # the plateau schedule's input (the finished epochs)
    perm = method.epoch_order(e.train_set.labels, e.train_set.num_classes, g, bs)
    first, loss_sum, reseat = 0, 0.0, None
    if epoch == at.epoch and at.step:
        reseat = at.rng
        g.set_state(at.generator)  # continue the epoch's random stream where it stopped
        first, loss_sum = at.step, at.loss_sum
    # the epoch's loss sum stays on the device, in float64 (the same sums a Python float made): it is read
    # back for the progress line, a checkpoint and the epoch's history line, not at every step
    total = torch.full((), loss_sum, dtype=torch.float64, device=e.device)
    t0 = time.time()
    e.source.epoch(epoch, g, perm, bs, range(first, stop))
    for step in range(first, stop):
        first_of_cycle, last_of_cycle = step % accum == 0, (step + 1) % accum == 0
        if first_of_cycle:
            e.step_once.set_lr(lr_at(cfg.optim, epochs, epoch, step, steps, losses))
        idx = perm[step * bs:(step + 1) * bs]
        part = distributed.local_slice(len(idx))
        views, partner_views, step_g = e.source.step(step, idx)
        if reseat is not None:  # the first step of a resume inside the epoch: see _reseat_rng
            _reseat_rng(reseat)
            reseat = None
        # from pageable memory: a blocking copy would wait for the device's queue
        labels = e.train_set.labels[idx][part].to(e.device, non_blocking=True)
        batch = Batch(views, labels, idx[part], epoch, step, step_g, partner_views,
                      rank_generator=distributed.rank_generator(e.seed, epoch, step))
        total += e.step_once(batch, first_of_cycle, last_of_cycle).detach().to(torch.float64)
        e.live.step(epoch, step + 1, stop, lambda t=total, done=step + 1: float(t) / done)  # read when shown
        heartbeat()  # the run's lock: its owner is alive and progressing
        requeue = interrupt.pending()
        if step + 1 < stop and last_of_cycle:
            def wish(requeue=requeue, since=e.last_save) -> bool:  # a requeue signal, or rank 0's timer
                return requeue or (every_s is not None and distributed.rank() == 0
                                   and time.monotonic() - since >= every_s)

            if e.vote.agree(step + 1, wish):  # the same step on every rank
                saver.save(epoch, step + 1, step_g, float(total))
                e.last_save = time.monotonic()
                log.info("%s: checkpoint at epoch %d step %d", "requeue signal" if requeue else "timed",
                         epoch, step + 1)
                interrupt.fire_if_pending()
    e.vote.reset()  # a vote still in flight: the epoch-end checkpoint below covers it
    saver.history.append({"epoch": epoch + 1, "loss": float(total) / max(stop, 1),
                          "lr": lr_at(cfg.optim, epochs, epoch, steps - 1, steps, losses),
                          "seconds": time.time() - t0})
    log.info("epoch %d/%d loss %.4f (%.1fs)", epoch + 1, epochs, saver.history[-1]["loss"],
             saver.history[-1]["seconds"])
    e.live.epoch_end(saver.history[-1])  # before the checkpoint: a crash between the two is dropped on resume
    saver.save(epoch + 1, 0, None, 0.0)
    e.last_save = time.monotonic()
    interrupt.fire_if_pending()


def train(method: Method, train_set: ImageSet, cfg: RunConfig, seed: int, ckpt: Path,
          loop: Loop | None = None) -> list[dict]:
    """Train `method` to cfg.schedule.epochs, resuming from `ckpt` if present; returns the history (module
    docstring: accumulation, checkpoints, the dry run). `loop`: how the caller drives it (Loop; default: the
    whole schedule on the CPU, no hooks)."""
    loop = loop or Loop()
    device = loop.device or torch.device("cpu")
    opt = method.configure_optimizer(cfg.optim)
    if opt is None or cfg.schedule.epochs == 0:  # e.g. tau-norm: no parameter trains
        log.info("nothing to train (%s, %d epochs)", "no parameters" if opt is None else "parameters",
                 cfg.schedule.epochs)
        return []
    # fp16 needs loss scaling (skipped steps on overflow); disabled, the scaler is a pass-through
    scaler = torch.amp.GradScaler(device.type, enabled=cfg.optim.amp == "fp16")
    saver = Checkpointer(method, opt, scaler, ckpt)
    at = saver.resume(cfg.schedule.epochs)
    if loop.restore_only:
        _require_final(at, ckpt, cfg.schedule.epochs)
    augs = _augmentations(cfg, train_set)
    method.on_train_start(TrainContext(train_set, augs, device, ckpt.parent.parent, seed, loop.data_root,
                                       shapes_only=loop.shapes_only))
    bs, accum, steps = steps_per_epoch(cfg, method.epoch_size(len(train_set.labels)))
    epochs = cfg.schedule.epochs
    stop, last_epoch = steps, epochs  # a dry run stops early; lr_at keeps the configured schedule
    if loop.budget is not None:
        stop, last_epoch = min(steps, -(-loop.budget // accum) * accum), min(epochs, at.epoch + 1)
    source = view_source(method, train_set, augs, device, seed)
    step_once = Stepper(method, opt, scaler, cfg, device, loop.step_context())
    every_s = checkpoint_every_s()
    # history.jsonl, trackers and the progress line: rank 0 of a run in its folder (<id>/checkpoints/), not a dry run
    live = EpochLog(ckpt.parent.parent, saver.history, epochs,
                    enabled=distributed.rank() == 0 and loop.budget is None and is_checkpoint_folder(ckpt.parent)
                    and loop.log_history)
    e = _Epochs(method, train_set, cfg, seed, saver, source, step_once, live, distributed.StopVote(device, accum),
                device, at, bs, accum, steps, stop, time.monotonic())
    with interrupt.training(), live:
        for epoch in range(at.epoch, last_epoch):
            _run_epoch(e, epoch, every_s)
    source.close()
    return saver.history
