"""The requeue signal mid-run and an exact resume, inside the doctor job.

A small network trains `STEPS` DDP steps on batches drawn from (step, rank) twice: once straight through
(the reference), once with the requeue signal sent to the job itself after step `SIGNAL_AT`. The signal
goes through the engine's machinery (semcl.runtime.interrupt defers submitit's handler to the step
boundary, every rank checkpoints the same step, rank 0 requeues the job); the requeued job resumes from
that checkpoint and finishes. Its losses and final weights must equal the reference's bit for bit.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

from semcl.runtime import distributed, interrupt
from semcl.runtime.checkpoint import safe_load, save_atomic

STEPS, SIGNAL_AT = 12, 5


def _model(device: torch.device) -> tuple[nn.Module, torch.optim.Optimizer, nn.Module]:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)  # momentum: optimiser state to restore
    # gradients averaged by hand in one flat all_reduce: DDP's buckets are rebuilt after the first step, so a
    # resumed run's first step would sum in another layout and differ in the last bits with 3 or more ranks
    return net, opt, net


def _average_gradients(net: nn.Module) -> None:
    if not distributed.is_distributed():
        return
    grads = [p.grad for p in net.parameters()]
    flat = torch.cat([g.reshape(-1) for g in grads])
    torch.distributed.all_reduce(flat)
    flat /= distributed.world_size()
    torch.nn.utils.vector_to_parameters(flat, grads)  # writes back into each grad in order


def _batch(step: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + distributed.rank())
    return torch.randn(16, 32, generator=g).to(device), torch.randint(0, 8, (16,), generator=g).to(device)


def weights_digest(net: nn.Module) -> str:
    h = hashlib.sha256()
    for p in net.parameters():
        h.update(p.detach().cpu().numpy().tobytes())
    return h.hexdigest()


def _train(net, opt, ddp, device: torch.device, first: int, losses: list[float], on_step=None) -> list[float]:
    for step in range(first, STEPS):
        x, y = _batch(step, device)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        _average_gradients(net)
        opt.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step + 1, losses)
    return losses


def reference(device: torch.device) -> dict:
    net, opt, ddp = _model(device)
    losses = _train(net, opt, ddp, device, 0, [])
    return {"losses": losses, "digest": weights_digest(net)}


def _send_requeue_signal(wait_s: float = 30.0) -> bool:
    """Rank 0 sends the job's tasks the requeue signal (what SLURM sends before a time limit) and waits until
    its own handler has noted it; False when it never came."""
    job = os.environ.get("SLURM_JOB_ID")
    if job is None:
        return False
    done = subprocess.run(["scancel", "--signal=USR2", job], capture_output=True, text=True)
    if done.returncode != 0:
        print(f"scancel --signal=USR2 {job}: {done.stderr.strip()}", file=sys.stderr, flush=True)
        return False
    end = time.monotonic() + wait_s
    while not interrupt.pending() and time.monotonic() < end:
        time.sleep(0.05)
    return interrupt.pending()


def interrupted(device: torch.device, ckpt: Path) -> dict:
    """Train with the signal sent after step SIGNAL_AT; on the signal every rank stops at the same step, rank 0
    checkpoints and requeues (this process then ends). Returns only when no signal arrived: then the run
    went straight through, which the page reports as a failed check."""
    net, opt, ddp = _model(device)
    sent = {"ok": False}

    def on_step(step: int, losses: list[float]) -> None:
        if step == SIGNAL_AT and distributed.rank() == 0:
            sent["ok"] = _send_requeue_signal()
        if step < STEPS and distributed.any_rank(interrupt.pending(), device):  # the same step on every rank
            every = [list(losses)]  # each rank's own losses (its own batches)
            if distributed.is_distributed():
                every = [None] * distributed.world_size()
                torch.distributed.all_gather_object(every, list(losses))
            if distributed.rank() == 0:
                save_atomic({"net": net.state_dict(), "opt": opt.state_dict(), "step": step, "losses": every}, ckpt)
            distributed.barrier()
            interrupt.fire_if_pending()  # rank 0: checkpoint the job object, requeue, exit
            time.sleep(120)  # the other ranks: SLURM ends them with the requeue
            os._exit(1)

    with interrupt.training():
        losses = _train(net, opt, ddp, device, 0, [], on_step)
    return {"signalled": sent["ok"], "requeued": False, "losses": losses, "digest": weights_digest(net)}


def resumed(device: torch.device, ckpt: Path) -> dict:
    """The requeued job: continue from the checkpoint to STEPS."""
    net, opt, ddp = _model(device)
    state = safe_load(ckpt) if ckpt.exists() else None
    if state is None:
        return {"resumed": False, "error": f"{ckpt}: no checkpoint to resume from"}
    net.load_state_dict(state["net"])
    opt.load_state_dict(state["opt"])
    losses = _train(net, opt, ddp, device, state["step"], list(state["losses"][distributed.rank()]))
    return {"resumed": True, "resumed_at": state["step"], "losses": losses, "digest": weights_digest(net)}
