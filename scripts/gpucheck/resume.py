"""Section (e): exact mid-epoch resume on this device. A run trains 2 epochs uninterrupted; the same run is stopped
by a requeue signal inside epoch 2 (the loop checkpoints at the next step boundary, with the generator's position),
rebuilt from scratch and resumed; final parameters, buffers and loss history must equal the uninterrupted run's bit
for bit. Rows: a file-backed row with 2 loader workers (pinned memory on a GPU), a ViT row with drop-path under
fp16 with its GradScaler (CUDA RNG and scaler restore), and the 2-rank run of section (d). Deterministic kernels
are on for the comparison (production leaves them off; GPU runs are then close, not equal)."""

from __future__ import annotations

import os
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch
from gpucheck.ranks import Preempted, final_state, stop_at_call, two_ranks
from gpucheck.rows import Sizes, build, paper_run, row_config

ROWS = {"file_backed_workers": ("supcon", {"SEMCL_LOADER_WORKERS": "2"}), "vit_drop_path_fp16": ("vit", {})}


@contextmanager
def deterministic(device: torch.device, env: dict):
    from semcl.runtime import interrupt

    saved_env = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    real_pending = interrupt.pending
    if device.type == "cuda":
        torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        interrupt.pending = real_pending
        interrupt._pending = None
        torch.use_deterministic_algorithms(False)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _equal_states(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        torch.equal(a[k].cpu(), b[k].cpu()) if isinstance(a[k], torch.Tensor) else a[k] == b[k] for k in a)


class StepCounter:
    """A step hook: the step number of every step run (the epoch's length, for where to stop)."""

    def __init__(self, steps: list) -> None:
        self.steps = steps

    def step(self, batch):
        self.steps.append(batch.step)
        return nullcontext()


def one_row(name: str, sizes: Sizes, device: torch.device, work: Path) -> dict:
    family, env = ROWS[name]
    run, _ = paper_run(family)
    batch = 8  # 5 steps an epoch on the smallest stand-in (20 classes x 2 images): a stop inside epoch 2
    cfg, per_class = row_config(run, sizes, batch, 4, {"schedule.epochs": 2})
    steps = []
    with deterministic(device, env):
        harness = build(run, cfg, per_class, work, device, work / name / "a" / "last.pt")
        ref = harness.train(hooks=(StepCounter(steps),))
        want = {k: v.detach().cpu().clone() for k, v in harness.method.state_dict().items()}
        per_epoch = len(steps) // 2
        stop_at_call(per_epoch + 2)  # inside epoch 2, after its 2nd step
        ckpt = work / name / "b" / "last.pt"
        harness = build(run, cfg, per_class, work, device, ckpt)
        stopped = False
        try:
            harness.train()
        except Preempted:
            stopped = True
        state = torch.load(ckpt, map_location="cpu", weights_only=False)
        at = (state["epoch"], state.get("step", 0))
    with deterministic(device, env):
        harness = build(run, cfg, per_class, work, device, ckpt)
        got = harness.train()
        have = {k: v.detach().cpu() for k, v in harness.method.state_dict().items()}
    same_params = _equal_states(want, have)
    same_loss = [h["loss"] for h in got] == [h["loss"] for h in ref]
    return {"row": f"{run.table_id} / {run.row_label}", "amp": cfg.optim.amp, "loader_workers": env.get(
            "SEMCL_LOADER_WORKERS", "default"), "steps_per_epoch": per_epoch, "stopped_at": list(at),
            "params_equal": same_params, "loss_equal": same_loss,
            "ok": stopped and at[1] > 0 and same_params and same_loss}


def two_rank_row(ranks_result: dict, device: torch.device, work: Path) -> dict:
    run, ref_store = ranks_result["run"], ranks_result["store"]
    store = work / "store-b"
    with deterministic(device, {}):
        first = two_ranks(run, store, device, work / "b1", stop=1)  # during the 1st step: a checkpoint after step 8 of 12
    from semcl.store import Store

    state = torch.load(Store(store).folder(run.run_id).checkpoint, map_location="cpu", weights_only=False)
    at = (state["epoch"], state.get("step", 0))
    with deterministic(device, {}):
        second = two_ranks(run, store, device, work / "b2")
    errors = [r["error"] for r in first + second if r["error"]]
    same_params = _equal_states(final_state(ref_store, run), final_state(store, run))
    same_loss = second[0].get("history") == ranks_result["history"]
    stopped = all(r["stopped"] for r in first)
    return {"row": ranks_result["row"] + ", 2 ranks", "stopped_at": list(at), "params_equal": same_params,
            "loss_equal": same_loss, "errors": errors,
            "ok": stopped and not errors and at[1] > 0 and same_params and same_loss}


def section(sizes: Sizes, device: torch.device, work: Path, ranks_result: dict | None) -> dict:
    rows = [one_row(name, sizes, device, work) for name in ROWS]
    if ranks_result is not None and ranks_result.get("ok"):
        rows.append(two_rank_row(ranks_result, device, work / "ranks"))
    else:
        rows.append({"row": "2 ranks", "ok": False, "errors": ["section (d) did not pass"]})
    return {"rows": rows, "ok": all(r["ok"] for r in rows)}
