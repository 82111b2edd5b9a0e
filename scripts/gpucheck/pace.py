"""Sections (b) pace and (c) peak memory: one family's row through the engine's own loop (train(): the loader,
autocast, the optimiser) for warmup + N steps at the row's per-GPU batch, production settings (the row's precision
through configure_backend, SEMCL_LOADER_WORKERS = cpus_per_gpu - 1), then the same step fed from a batch already
on the device (the GPU-bound ceiling). Memory: torch.cuda.max_memory_allocated over the training steps against
semcl check's estimate (semcl.preflight.check.estimate_gpu_gb, with the activation bytes measured as the
preflight measures them, here on this device at this batch)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path

import torch
from gpucheck.rows import Sizes, build, paper_run, per_gpu_batch, row_config, sync

MEMORY_SLACK = 1.10  # the preflight treats "fits" within ~10% as marginal: a peak beyond that is an underestimate


class Clock:
    """A step hook: the time each step starts (the previous step's loss was read, so the device is idle
    then), the last batch (for the ceiling) and the preflight's activation meter on the first step."""

    def __init__(self, device: torch.device) -> None:
        from semcl.preflight.check import StepMeter  # the meter semcl check's memory estimate uses

        self.device, self.meter, self.starts, self.batch = device, StepMeter(), [], None

    @contextmanager
    def step(self, batch):
        sync(self.device)
        self.starts.append(time.perf_counter())
        self.batch = batch
        with self.meter.step(batch):
            yield


def ceiling(method, cfg, batch, device: torch.device, steps: int) -> float:
    """Images/s of the engine's step (semcl.engine.train.Stepper) on one batch already on the device."""
    from semcl.engine.train import Stepper

    opt = method.configure_optimizer(cfg.optim)
    scaler = torch.amp.GradScaler(device.type, enabled=cfg.optim.amp == "fp16")
    step = Stepper(method, opt, scaler, cfg, device, None)
    step.set_lr(0.0)  # the same arithmetic; the weights stay where training left them
    step(batch, True, True)  # the optimiser's state is allocated once, outside the clock
    sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        float(step(batch, True, True).detach())  # the loop reads each loss, as train() does
    sync(device)
    return steps * len(batch.labels) / (time.perf_counter() - t0)


def pace(family: str, sizes: Sizes, work: Path, device: torch.device) -> dict:
    from semcl.preflight.check import estimate_gpu_gb

    run, res = paper_run(family)
    batch = sizes.batch or per_gpu_batch(run, res)
    total = sizes.warmup + sizes.steps
    cfg, per_class = row_config(run, sizes, batch, total + 1)
    harness = build(run, cfg, per_class, work, device, work / "run" / family / "checkpoints" / "last.pt", total)
    method, train_set = harness.method, harness.train_set
    clock = Clock(device)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    harness.train(hooks=(clock,))
    ran = len(clock.starts)
    timed = clock.starts[sizes.warmup:]  # start of the first timed step .. start of the last step run
    ips = (len(timed) - 1) * cfg.optim.batch_size / (timed[-1] - timed[0]) if len(timed) > 1 else 0.0
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    reserved = torch.cuda.max_memory_reserved(device) / 2**30 if device.type == "cuda" else None
    act = clock.meter.bytes / max(1, clock.meter.batch)
    est = estimate_gpu_gb(method, cfg, method.configure_optimizer(cfg.optim), act, cfg.optim.batch_size)
    top = ceiling(method, cfg, clock.batch, device, sizes.ceiling_steps)
    from semcl.estimate.gpu_hours import training_pace

    out = {"family": family, "table": run.table_id, "row": run.row_label, "batch_per_gpu": cfg.optim.batch_size,
           "paper_gpus": res.gpus, "amp": cfg.optim.amp, "image_size": int(train_set.images.shape[-1]),
           "train_images": len(train_set.labels), "steps_run": ran, "steps_timed": len(timed) - 1,
           "images_per_s": round(ips, 2), "device_resident_images_per_s": round(top, 2),
           "loader_bound": bool(ips < 0.9 * top), "estimate_a100_images_per_s": round(training_pace(run.config), 1),
           "wall_s": round(time.perf_counter() - t0, 2)}
    mem = {"family": family, "batch_per_gpu": cfg.optim.batch_size, "act_bytes_per_sample": round(act),
           "estimate_gb": round(est, 3), "peak_allocated_gb": None if peak is None else round(peak, 3),
           "peak_reserved_gb": None if reserved is None else round(reserved, 3)}
    # the pass: as many steps as asked, a rate from them, and (on a GPU) a peak the estimate covers
    out["ok"] = ran == total and ips > 0 and top > 0
    mem["ok"] = est > 0 and (peak is None or peak <= MEMORY_SLACK * est)
    mem["ratio"] = None if peak is None else round(peak / est, 3)
    return {"pace": out, "memory": mem}
