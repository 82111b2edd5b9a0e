"""The training loop: resumable at every epoch boundary, deterministic on CPU for a seed.

Data order and augmentation of epoch e come from a generator seeded by (seed, e), so a
resumed run replays exactly the batches the uninterrupted run would have seen. File-backed sets under
the default views are decoded and augmented in loader workers, each view seeded by its position
(semcl.data.file_views), which a resumed run replays as well. Checkpoints are
written at every epoch end, every $SEMCL_CHECKPOINT_EVERY_MIN minutes (set from the cluster profile
on SLURM) and, on a requeue signal, at the next step boundary (with the generator's position inside
the epoch). With several ranks the step goes through DistributedDataParallel
(semcl.runtime.distributed), all ranks agree on when to checkpoint, and the checkpoint holds every
rank's RNG states.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import torch

from semcl.config import RunConfig
from semcl.data import ImageSet, build_augment, stats
from semcl.data.file_views import ViewLoader, loader_workers, step_views
from semcl.data.fileset import WholeImages
from semcl.data.video.clip_loader import ClipLoader
from semcl.engine.schedule import lr_at
from semcl.methods.base import Batch, Method, TrainContext, training_images
from semcl.run_folder import is_checkpoint_folder
from semcl.runtime import distributed, interrupt
from semcl.runtime.checkpoint import load, restore, rng_state, save_atomic, set_rng_state
from semcl.runtime.history import EpochLog
from semcl.runtime.runlock import heartbeat

log = logging.getLogger("semcl.train")


AMP_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
CHECKPOINT_EVERY_ENV = "SEMCL_CHECKPOINT_EVERY_MIN"


def checkpoint_every_s() -> float | None:
    """Seconds between step-boundary checkpoints inside an epoch (None: at epoch ends only)."""
    value = os.environ.get(CHECKPOINT_EVERY_ENV)
    return float(value) * 60 if value else None


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch)


def train(method: Method, train_set: ImageSet, cfg: RunConfig, seed: int, ckpt: Path,
          device: torch.device | None = None, data_root: Path | None = None, *, max_steps: int | None = None,
          step_context: Callable[[Batch], AbstractContextManager] | None = None) -> list[dict]:
    """Train `method` to cfg.schedule.epochs, resuming from `ckpt` if present; returns the history.

    Augmentation runs on the CPU with the epoch's generator (so the random stream does not
    depend on the device); the views then move to `device`.

    Gradient accumulation (optim.accum_steps = k > 1, MAE's --accum_iter): each batch's loss / k is
    back-propagated, the optimiser steps after every k-th batch, and the lr is set at the first
    batch of each cycle (as MAE). An epoch runs whole cycles: steps = floor(n / bs / k) * k batches
    (MAE instead carries a partial last cycle's gradients into the next epoch). Checkpoints on a
    requeue signal are taken at cycle boundaries only. k = 1 is the plain loop.

    The dry-run seam of `semcl check` (semcl.preflight.check): `max_steps` ends training after the first epoch's
    first max_steps batches, rounded up to whole accumulation cycles, saved as that epoch's end (the lr
    schedule still sees the configured epochs and steps); `step_context(batch)` wraps each forward (what the
    preflight measures)."""
    device = device or torch.device("cpu")
    opt = method.configure_optimizer(cfg.optim)
    if opt is None or cfg.schedule.epochs == 0:  # e.g. tau-norm: no parameter trains
        log.info("nothing to train (%s, %d epochs)", "no parameters" if opt is None else "parameters",
                 cfg.schedule.epochs)
        return []
    lr_scales = [group.get("lr_scale", 1.0) for group in opt.param_groups]
    amp = cfg.optim.amp
    # fp16 needs loss scaling (skipped steps on overflow); disabled, the scaler is a pass-through
    scaler = torch.amp.GradScaler(device.type, enabled=amp == "fp16")
    start, start_step, history, resume_gen, total0 = 0, 0, [], None, 0.0
    state = load(ckpt)
    if state is not None:
        restore(method, state["method"], ckpt)  # before the optimiser: its state follows the params
        restore(opt, state["optimizer"], ckpt)
        if "scaler" in state:
            scaler.load_state_dict(state["scaler"])
        ranks = state.get("rng_ranks")
        if ranks is not None and len(ranks) != distributed.world_size() and state["epoch"] < cfg.schedule.epochs:
            log.warning("checkpoint from %d ranks resumed on %d: RNG states of rank 0 for all", len(ranks),
                        distributed.world_size())
        exact = ranks is not None and len(ranks) == distributed.world_size()
        set_rng_state(ranks[distributed.rank()] if exact else state["rng"])
        start, history = state["epoch"], state["history"]
        # a checkpoint taken on a requeue signal sits inside an epoch
        start_step, resume_gen, total0 = state.get("step", 0), state.get("generator"), state.get("loss_sum", 0.0)
        log.info("resumed from %s at epoch %d step %d", ckpt, start, start_step)
    size = train_set.images.shape[-1]
    aug = build_augment(cfg.data.augment, size=size, mean=stats(cfg.data.name)[0], std=stats(cfg.data.name)[1])
    augs = aug.views if hasattr(aug, "views") else [aug]  # "a+b" recipes: one per view
    method.on_train_start(TrainContext(train_set, augs, device, ckpt.parent.parent, seed, data_root))
    n = method.epoch_size(len(train_set.labels))  # the whole set, or the part the method trains on
    bs = min(cfg.optim.batch_size, n)
    accum = cfg.optim.accum_steps or 1
    # the last partial batch is dropped (equal batch shapes for the memory banks and DDP); a deviation
    # where an official loader keeps it (e.g. RINCE's DataLoader has no drop_last: n mod bs images
    # per epoch, a different subset each epoch, are not trained on here); whole accumulation cycles only
    steps = n // bs // accum * accum
    if steps == 0:
        raise ValueError(f"optim.accum_steps = {accum} exceeds the {n // bs} batches of one epoch")
    epochs = cfg.schedule.epochs
    stop, last_epoch = steps, epochs  # a dry run stops early; lr_at keeps the configured schedule
    if max_steps is not None:
        stop, last_epoch = min(steps, -(-max_steps // accum) * accum), min(epochs, start + 1)
    # file-backed sets under the default views: per-image seeds, in loader workers (semcl.data.file_views)
    files = training_images(train_set)
    by_file = isinstance(files, WholeImages) and not method.makes_own_views
    workers = loader_workers(device) if by_file else 0
    # one loader for the run: its workers persist across epochs; they hand out uint8 views, normalised on `device`
    view_loader = ViewLoader(files, workers, pin_memory=device.type == "cuda") if by_file else None
    # video clips: planned here, decoded in its workers (persistent), augmented on `device` (where the method plans)
    clip_loader = None if by_file else ClipLoader(train_set, method.decode_plan, loader_workers(device),
                                                  pin_memory=device.type == "cuda")

    def save(epoch: int, step: int, g: torch.Generator | None, loss_sum: float) -> None:
        """All ranks call it together (they agree on the step): RNG states gathered, rank 0 writes."""
        rng = rng_state()
        ranks = distributed.gather_rng_states(rng)
        if distributed.rank() == 0:  # one writer (atomic rename: readers never see half a file)
            save_atomic(snapshot(epoch, step, g, loss_sum, rng, ranks), ckpt)
        distributed.barrier()

    def snapshot(epoch: int, step: int, g: torch.Generator | None, loss_sum: float, rng: dict,
                 ranks: list[dict] | None) -> dict:
        state = {"method": method.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch, "step": step,
                 "rng": rng, "history": history}
        if ranks is not None:
            state["rng_ranks"] = ranks
        if scaler.is_enabled():
            state["scaler"] = scaler.state_dict()
        if g is not None:
            state.update(generator=g.get_state(), loss_sum=loss_sum)
        return state

    ddp = distributed.wrap(method)  # None for one process
    every_s = checkpoint_every_s()
    last_save = time.monotonic()
    # history.jsonl, trackers and the progress line: rank 0 of a run in its folder (<id>/checkpoints/), not a dry run
    live = EpochLog(ckpt.parent.parent, history, epochs,
                    enabled=distributed.rank() == 0 and max_steps is None and is_checkpoint_folder(ckpt.parent))
    with interrupt.training(), live:
        for epoch in range(start, last_epoch):
            method.train()
            method.on_epoch_start(epoch)  # epoch-dependent losses and statistics
            g = epoch_generator(seed, epoch)
            losses = [h["loss"] for h in history]  # the plateau schedule's input (the finished epochs)
            perm = method.epoch_order(train_set.labels, train_set.num_classes, g, bs)
            first = 0
            total = 0.0
            if epoch == start and start_step:
                g.set_state(resume_gen)  # continue the epoch's random stream where it stopped
                first, total = start_step, total0
            t0 = time.time()
            if by_file:  # partners (e.g. kNN positives) as of this epoch's start
                pick, partner_recipes = method.loader_partners() or (None, ())
                file_views = step_views(files, method.view_recipes(augs), seed=seed, epoch=epoch, order=perm,
                                        batch_size=bs, steps=range(first, stop),
                                        part=distributed.local_slice(bs), workers=workers,
                                        pin_memory=device.type == "cuda", partners=pick,
                                        partner_recipes=partner_recipes, device=device, loader=view_loader)
            # plans drawn ahead of training: the checkpoint and Batch take the generator as of the step
            clip_feed = None if by_file else clip_loader.epoch(method, augs, g, perm, bs, range(first, stop),
                                                              distributed.local_slice(bs), device)
            for step in range(first, stop):
                first_of_cycle, last_of_cycle = step % accum == 0, (step + 1) % accum == 0
                if first_of_cycle:
                    lr = lr_at(cfg.optim, epochs, epoch, step, steps, losses)
                    for group, scale in zip(opt.param_groups, lr_scales, strict=True):
                        group["lr"] = lr * scale
                idx = perm[step * bs:(step + 1) * bs]
                labels = train_set.labels[idx]
                part = distributed.local_slice(len(idx))
                partner_views, step_g = None, g
                if clip_feed is not None:  # this rank's clips, decoded ahead by the loader
                    views, step_g = next(clip_feed), clip_feed.generator_at(step + 1)
                elif by_file:  # this rank's slice only, made ahead by the loader
                    views, partners = next(file_views)
                    views = [v.to(device, non_blocking=True) for v in views]
                    partner_views = [tuple(v.to(device, non_blocking=True) for v in p) for p in partners] or None
                else:  # every rank draws the whole global batch's views (same stream), then keeps its slice
                    views = [v[part].to(device, non_blocking=True) for v in method.make_views(train_set, idx, g, augs)]
                batch = Batch(views, labels[part].to(device), idx[part], epoch, step, step_g, partner_views)
                # several ranks: DDP all-reduces the gradients in buckets during the cycle's last backward
                with distributed.sync_context(ddp, last_of_cycle):
                    with torch.autocast(device.type, dtype=AMP_DTYPES.get(amp), enabled=amp is not None), \
                            step_context(batch) if step_context else nullcontext():
                        loss = ddp(batch) if ddp is not None else method.training_step(batch)["loss"]
                    if first_of_cycle:
                        opt.zero_grad(set_to_none=True)
                    scaler.scale(loss / accum if accum > 1 else loss).backward()
                method.after_backward()
                if last_of_cycle:
                    scaler.step(opt)
                    scaler.update()
                total += float(loss.detach())
                live.step(epoch, step + 1, stop, total / (step + 1))
                heartbeat()  # the run's lock: its owner is alive and progressing
                requeue = interrupt.pending()
                if step + 1 < stop and last_of_cycle:
                    timed = every_s is not None and distributed.rank() == 0 and time.monotonic() - last_save >= every_s
                    if distributed.any_rank(requeue or timed, device):  # the same step on every rank
                        save(epoch, step + 1, step_g, total)
                        last_save = time.monotonic()
                        log.info("%s: checkpoint at epoch %d step %d", "requeue signal" if requeue else "timed",
                                 epoch, step + 1)
                        interrupt.fire_if_pending()
            history.append({"epoch": epoch + 1, "loss": total / max(stop, 1),
                            "lr": lr_at(cfg.optim, epochs, epoch, steps - 1, steps, losses),
                            "seconds": time.time() - t0})
            log.info("epoch %d/%d loss %.4f (%.1fs)", epoch + 1, epochs, history[-1]["loss"], history[-1]["seconds"])
            live.epoch_end(history[-1])  # before the checkpoint: a crash between the two is dropped on resume
            save(epoch + 1, 0, None, 0.0)
            last_save = time.monotonic()
            interrupt.fire_if_pending()
    if view_loader is not None:
        view_loader.close()
    if clip_loader is not None:
        clip_loader.close()
    return history
