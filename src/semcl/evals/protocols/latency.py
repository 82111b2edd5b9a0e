"""Inference latency: median ms of method.classify on one test batch (GPaCo Fig. 1(a); semcl.evals.latency)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from semcl.config import BATCH
from semcl.evals.protocols.spec import Column, Evaluation
from semcl.schema import POSITIVE, at_most

log = logging.getLogger("semcl.evaluate")
DEFAULT_BATCH = 64  # the paper's batch size and GPU are unknown: our choice


@dataclass
class Settings:
    latency: bool | None = None  # None = off
    latency_batch: int | None = field(default=None, metadata=BATCH)  # None = DEFAULT_BATCH
    # timed calls after the warm-up (None = REPEATS); the preflight times 1, since it checks the path, not the pace
    latency_repeats: int | None = field(default=None, metadata={**POSITIVE, **at_most(10_000)})


REPEATS, WARMUP = 50, 10  # semcl.evals.latency.measure_latency's defaults


def validate(column: Column, where: str) -> None:
    """Nothing to check: a latency column has no fields of its own."""


def metric_key(column: Column, substitute: dict[str, str | None]) -> str:
    return "latency_ms"


def describe(column: Column) -> str:
    return (f"inference latency, median ms per batch of eval.latency_batch (default {DEFAULT_BATCH}) test images "
            "through the classifier, on the run's device (the paper's batch size and GPU are unknown)")


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    if columns:  # absent otherwise, so older run ids stay put
        ev["latency"] = True


def classify_latency(method, images, transform, batch: int, device, repeats: int = REPEATS) -> dict[str, float]:
    """Median / p90 ms of method.classify on the first `batch` test images (repeated when the test
    set is smaller), already transformed and on the method's device; the caller sets eval mode
    and no_grad. CUDA work is synchronised before every clock read."""
    import torch

    from semcl.evals.latency import measure_latency

    if batch < 1:
        raise ValueError(f"eval.latency_batch must be >= 1, got {batch}")
    n = min(batch, images.shape[0])
    x = transform(images[:n], torch.Generator().manual_seed(0))
    x = x[torch.arange(batch) % n].to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    timing = measure_latency(method.classify, x, sync=sync, repeats=repeats, warmup=min(WARMUP, repeats))
    log.info("latency: median %.2f ms, p90 %.2f ms per batch of %d (%s)", timing["median_ms"], timing["p90_ms"],
             batch, device)
    return {"latency_ms": timing["median_ms"], "latency_p90_ms": timing["p90_ms"], "latency_batch": float(batch)}


def run(ctx) -> dict[str, float]:
    if not ctx.method.has_classifier:
        log.warning("latency: %s has no classifier to time; not measured", type(ctx.method).__name__)
        return {}
    return classify_latency(ctx.method, ctx.test.images, ctx.test_transform,
                            ctx.cfg.eval.latency_batch or DEFAULT_BATCH, ctx.device,
                            ctx.cfg.eval.latency_repeats or REPEATS)


EVALUATION = Evaluation("latency", None, validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(cfg.eval.latency), run=run,
                        # timed once, not measured: a check only needs the code path (60 calls at 224 px: ~100 s for
                        # ResNeXt-101)
                        settings=Settings, quick=lambda section: {"latency_batch": 2, "latency_repeats": 1}
                        if getattr(section, "latency", None) else {})
