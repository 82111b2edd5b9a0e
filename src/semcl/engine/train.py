"""The training loop: resumable at every epoch boundary, deterministic on CPU for a seed.

Data order and augmentation of epoch e come from a generator seeded by (seed, e), so a
resumed run replays exactly the batches the uninterrupted run would have seen.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch

from semcl.config import RunConfig
from semcl.data import ImageSet, build_augment
from semcl.data.augment import STATS
from semcl.engine.checkpoint import load, rng_state, save_atomic, set_rng_state
from semcl.engine.schedule import lr_at
from semcl.methods import Method

log = logging.getLogger("semcl.train")


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch)


def train(method: Method, train_set: ImageSet, cfg: RunConfig, seed: int, ckpt: Path,
          device: torch.device | None = None) -> list[dict]:
    """Train `method` to cfg.schedule.epochs, resuming from `ckpt` if present; returns the history.

    Augmentation runs on the CPU with the epoch's generator (so the random stream does not
    depend on the device); the views then move to `device`."""
    device = device or torch.device("cpu")
    opt = torch.optim.SGD(method.optimized_parameters(), lr=cfg.optim.lr, momentum=cfg.optim.momentum,
                          weight_decay=cfg.optim.weight_decay)
    start, history = 0, []
    state = load(ckpt)
    if state is not None:
        method.load_state_dict(state["method"])  # before the optimiser: its state follows the params
        opt.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"])
        start, history = state["epoch"], state["history"]
        log.info("resumed from %s at epoch %d", ckpt, start)
    size = train_set.images.shape[-1]
    aug = build_augment(cfg.data.augment, size=size, mean=STATS[cfg.data.name][0], std=STATS[cfg.data.name][1])
    n = len(train_set.labels)
    bs = min(cfg.optim.batch_size, n)
    steps = n // bs  # drop_last, as the official loaders
    epochs = cfg.schedule.epochs
    for epoch in range(start, epochs):
        method.train()
        g = epoch_generator(seed, epoch)
        perm = torch.randperm(n, generator=g)
        t0, total = time.time(), 0.0
        for step in range(steps):
            lr = lr_at(cfg.optim, epochs, epoch, step, steps)
            for group in opt.param_groups:
                group["lr"] = lr
            idx = perm[step * bs:(step + 1) * bs]
            images, labels = train_set.images[idx], train_set.labels[idx]
            views = [aug(images, g).to(device, non_blocking=True) for _ in range(method.num_views)]
            loss = method.training_step(views, labels.to(device))["loss"]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            method.after_backward()
            opt.step()
            total += float(loss.detach())
        history.append({"epoch": epoch + 1, "loss": total / max(steps, 1), "lr": lr, "seconds": time.time() - t0})
        log.info("epoch %d/%d loss %.4f lr %.4f (%.1fs)", epoch + 1, epochs, history[-1]["loss"], lr,
                 history[-1]["seconds"])
        save_atomic({"method": method.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch + 1,
                     "rng": rng_state(), "history": history}, ckpt)
    return history
