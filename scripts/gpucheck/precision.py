"""Section (f): one training step per family in fp32, fp16 and bf16 autocast on this device, from the same weights
and the same batch (the engine's first batch of the row, captured from train()): the loss's relative difference
and the gradient's cosine and norm ratio against fp32. CUDA's autocast op lists differ from the CPU's, which is all
the preflight sees; an fp16 overflow or a loss left in half precision shows here."""

from __future__ import annotations

import math
from contextlib import contextmanager
from pathlib import Path

import torch
from gpucheck.rows import Sizes, build, paper_run, row_config

from semcl.methods.base import run_step

DTYPES = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}
LOSS_TOL, COS_MIN = 0.05, 0.95  # half precision of one step: a few 1e-3 expected; beyond these a real problem


def _step(method, batch, g_state: torch.Tensor, device: torch.device, dtype) -> tuple[float, torch.Tensor]:
    from dataclasses import replace

    method.zero_grad(set_to_none=True)
    b = replace(batch, generator=torch.Generator().set_state(g_state))
    with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        loss = run_step(method, b)["loss"]
    loss.float().backward()
    grads = [p.grad.detach().float().flatten() for p in method.parameters() if p.grad is not None]
    return float(loss.detach()), torch.cat(grads) if grads else torch.zeros(1)


def one_family(family: str, sizes: Sizes, device: torch.device, work: Path) -> dict:
    run, _ = paper_run(family)
    cfg, per_class = row_config(run, sizes, sizes.precision_batch, 2, {"optim.amp": None})
    harness = build(run, cfg, per_class, work, device, work / "precision" / family / "last.pt", 1)
    method = harness.method
    seen = {}

    class Capture:  # the state right before the first forward (after the epoch's start: HSA's mined table)
        @contextmanager
        def step(self, batch):
            seen.setdefault("state", {k: v.detach().clone() for k, v in method.state_dict().items()})
            seen.setdefault("batch", batch)
            seen.setdefault("g", batch.generator.get_state())
            yield

    harness.train(hooks=(Capture(),))
    out = {"family": family, "batch": cfg.optim.batch_size}
    base = None
    for name, dtype in DTYPES.items():
        if dtype is torch.bfloat16 and device.type == "cuda" and not torch.cuda.is_bf16_supported():
            out[name] = {"skipped": "no bf16 on this GPU"}
            continue
        method.load_state_dict(seen["state"])  # the same weights and buffers (queues, banks) for every precision
        method.train()
        loss, grad = _step(method, seen["batch"], seen["g"], device, dtype)
        if base is None:
            base = (loss, grad)
            out[name] = {"loss": loss, "grad_norm": float(grad.norm())}
            continue
        rel = abs(loss - base[0]) / max(abs(base[0]), 1e-12)
        cos = float(torch.nn.functional.cosine_similarity(grad, base[1], dim=0))
        out[name] = {"loss": loss, "grad_norm": float(grad.norm()), "loss_rel_diff": rel, "grad_cosine": cos,
                     "grad_norm_ratio": float(grad.norm() / base[1].norm().clamp_min(1e-30)),
                     "ok": math.isfinite(loss) and rel < LOSS_TOL and cos > COS_MIN}
    out["ok"] = math.isfinite(base[0]) and all(v.get("ok", True) for v in out.values() if isinstance(v, dict))
    return out


def section(sizes: Sizes, device: torch.device, work: Path, families: list[str]) -> dict:
    rows = []
    for family in families:
        try:
            rows.append(one_family(family, sizes, device, work))
        except Exception as err:  # one family's failure is a row, the others still run
            rows.append({"family": family, "ok": False, "error": f"{type(err).__name__}: {err}"})
    return {"rows": rows, "loss_tol": LOSS_TOL, "cos_min": COS_MIN, "ok": all(r["ok"] for r in rows)}
