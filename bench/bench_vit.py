"""ViT fine-tuning step (GPaCo ViT rows) against its floor: forward + backward of the ViT alone.

ViT-B/16 (the real architecture, 86 M parameters) on 32x32 inputs (4 patches + the class token, so
the CPU finishes a step in seconds), batch 16. Timed exactly as the engine runs a step:
`prepare` and `loss` (mixup / both views, head, projector, loss), `zero_grad`, `backward`,
`after_backward` (enqueue), AdamW `step` over the layer-decay groups. The floor is
`backbone(x).sum().backward()` on the same batch; interleaved rounds, median of per-round ratios.

Floors: mae_finetune 1x (one view; target <= 1.3x: head, mixup and the AdamW step over 86 M
parameters on top); gpaco_vit 2x (two views; target <= 2.5x: projector, queue loss, AdamW).
"""

from __future__ import annotations

import os

import torch
from common import Row, interleaved, median, paired_ratio

from semcl.methods.base import Batch, DataInfo, run_step
from semcl.methods.registry import method_class
from semcl.run_config import build_config

BATCH = int(os.environ.get("SEMCL_BENCH_VIT_BATCH", "16"))
SIZE = 32
CLASSES = 1000
CASES = {"mae_finetune": (1.0, 1.3), "gpaco_vit": (2.0, 2.5)}


def _build(name: str):
    cfg = build_config({"method": {"name": name, "arch": "vit_base_patch16", "checkpoint": None},
                        "data": {"name": "imagenet", "image_size": SIZE},
                        "optim": {"lr": 1e-3, "weight_decay": 0.05, "batch_size": BATCH}}, where="bench")
    torch.manual_seed(0)
    method = method_class(name)(cfg, DataInfo(CLASSES, 3, None))
    method.train()
    return method, method.configure_optimizer(cfg.optim)


def run(rounds: int = 3) -> list[Row]:
    try:
        import timm  # noqa: F401
    except ImportError:
        return [Row("ViT step", "not measured", "—", None, "—", None, "timm missing: pip install 'semcl[timm]'")]
    torch.set_num_threads(2)
    gen = torch.Generator().manual_seed(0)
    views = [torch.randn(BATCH, 3, SIZE, SIZE, generator=gen) for _ in range(2)]
    labels = torch.randint(0, CLASSES, (BATCH,), generator=gen)
    steps = {}
    floor_method, _ = _build("mae_finetune")

    def floor() -> None:
        floor_method.zero_grad(set_to_none=True)
        floor_method.backbone(views[0]).sum().backward()

    steps["floor"] = floor
    for name in CASES:
        method, opt = _build(name)

        def step(method=method, opt=opt) -> None:
            loss = run_step(method, Batch.of(views[: method.num_views], labels))["loss"]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            method.after_backward()
            opt.step()

        steps[name] = step
    times = interleaved(steps, rounds, warmup=1)
    rows = []
    t_floor = median(times["floor"])
    for name, (nominal, limit) in CASES.items():
        ratio = paired_ratio(times, name, "floor")
        rows.append(Row(f"ViT step: {name} / ViT-B fwd+bwd (B={BATCH}, {SIZE}px)", f"{median(times[name]):.2f} s/step",
                        f"{t_floor:.2f} s/step fwd+bwd; floor {nominal:g}×", ratio, f"≤ {limit:g}×", ratio <= limit,
                        f"{ratio / nominal:.2f}× its nominal floor"))
    return rows


if __name__ == "__main__":
    for r in run():
        print(r)
