"""20 DDP steps of one registry row per method family through the run harness (semcl.engine.harness, over the
engine's own loop: DistributedDataParallel, the loader, the optimiser), on the smoke profile's config with synthetic
data and a small global batch, timed: images per second over all ranks."""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import torch

from semcl.registry.plan import Run, plan_runs
from semcl.runtime import distributed
from semcl.store import Store
from semcl.store.run_folder import RunFolder

# (table, row) per family: few enough that the local cluster's CI stays short
FAMILIES = {"cross-entropy": ("rince/tab2", "Cross-entropy"), "contrastive": ("rince/tab2", "RINCE-in")}


def smoke_run(table_id: str, row: str) -> Run:
    from semcl.registry.tables import get_table

    runs = [r for r in plan_runs(get_table(table_id), "smoke") if r.row_label == row]
    if not runs:
        raise ValueError(f"{table_id}: no row {row!r} in its smoke profile")
    return runs[0]


def step_config(run: Run, per_rank_batch: int, steps: int):
    """The row's config with a global batch of `per_rank_batch` per rank and synthetic data large enough for
    `steps` steps in one epoch (the engine's dry run stops inside the first epoch)."""
    from semcl.data.registry import DATASETS

    cfg = run.config
    batch = per_rank_batch * distributed.world_size()
    classes = DATASETS[cfg.data.name].num_classes
    per_class = max(1, math.ceil(steps * batch / classes))
    data = dataclasses.replace(cfg.data, synthetic=True, synthetic_train_per_class=per_class,
                               synthetic_test_per_class=1, train_per_class=None, imbalance_factor=None)
    return dataclasses.replace(cfg, data=data, optim=dataclasses.replace(cfg.optim, batch_size=batch))


def ddp_steps(family: str, table_id: str, row: str, work: Path, device: torch.device, steps: int,
              per_rank_batch: int) -> dict:
    """Build the row as the engine's job does, train `steps` steps, and time them (every rank together)."""
    from semcl.data.synthetic import ensure_synthetic
    from semcl.engine.harness import Env, RunHarness

    run = smoke_run(table_id, row)
    cfg = step_config(run, per_rank_batch, steps)
    root = work / "data"
    if distributed.rank() == 0:  # written once, before any rank reads it
        ensure_synthetic(root, [cfg.data.name], train_per_class=cfg.data.synthetic_train_per_class,
                         test_per_class=1)
    distributed.barrier()
    harness = RunHarness(run, Env(root, RunFolder(work / family).checkpoint, device, budget=steps,
                                  log_history=False), cfg)
    cls, deps = harness.method_class(Store(work / family))
    train_set, _ = harness.data()
    harness.build(cls, deps, train_set)
    distributed.barrier()
    start = time.perf_counter()
    history = harness.train()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    distributed.barrier()
    seconds = time.perf_counter() - start
    loss = history[-1]["loss"] if history else float("nan")
    return {"family": family, "table": table_id, "row": row, "method": cfg.method.name, "steps": steps,
            "global_batch": cfg.optim.batch_size, "seconds": round(seconds, 3),
            "images_s": round(steps * cfg.optim.batch_size / seconds, 1), "loss": loss,
            "finite": math.isfinite(loss)}
